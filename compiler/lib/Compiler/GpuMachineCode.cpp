// GPU target machines, and the HSACO link with lld as a library (no ld.lld process).
#include "MachineCode.h"

#include "tile/Compiler/Compile.h"
#include "tile/Target/GpuArch.h"

#include "lld/Common/Driver.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <mutex>

LLD_HAS_DRIVER(elf)

using namespace tile;

namespace {

/// ":sramecc+:xnack-" -> "+sramecc,-xnack", as LLVM spells target features.
std::string llvmFeaturesOf(const std::string &hipFeatures) {
  std::string features;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(hipFeatures).split(parts, ':', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts) {
    if (part.size() < 2)
      continue;
    features += (features.empty() ? "" : ",") + std::string(1, part.back()) +
                part.drop_back().str();
  }
  return features;
}

/// Deletes a scratch folder when the link is over.
struct ScratchDir {
  llvm::SmallString<128> path;
  ~ScratchDir() {
    if (!path.empty())
      llvm::sys::fs::remove_directories(path);
  }
};

} // namespace

std::unique_ptr<llvm::TargetMachine> tile::createGpuTargetMachine(const Target &target) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
    LLVMInitializeAMDGPUAsmParser();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  std::optional<GpuArch> arch = lookupGpuArch(target.arch);
  if (!arch)
    throw CompileError("no GPU arch named '" + target.arch + "'");
  llvm::Triple triple(arch->llvmTriple);
  std::string error;
  const llvm::Target *llvmTarget = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    throw CompileError("this LLVM has no " + triple.str() + " backend: " + error);
  std::string features = arch->amd ? llvmFeaturesOf(target.features) : arch->ptxFeatures;
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, arch->name, features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    throw CompileError("LLVM cannot create a target machine for " + target.str());
  return machine;
}

std::string tile::linkHsaco(const std::string &object) {
  // lld reads and writes files; it keeps global state, so links run one at a time.
  static std::mutex linkMutex;
  std::lock_guard<std::mutex> lock(linkMutex);
  ScratchDir dir;
  if (llvm::sys::fs::createUniqueDirectory("torch-tile-lld", dir.path))
    throw CompileError("cannot create a scratch folder for the HSACO link");
  llvm::SmallString<128> input(dir.path), output(dir.path);
  llvm::sys::path::append(input, "kernel.o");
  llvm::sys::path::append(output, "kernel.hsaco");
  {
    std::error_code ec;
    llvm::raw_fd_ostream stream(input, ec);
    if (ec)
      throw CompileError("cannot write " + input.str().str() + ": " + ec.message());
    stream << object;
  }
  std::string messages;
  llvm::raw_string_ostream errors(messages);
  std::string outs;
  llvm::raw_string_ostream out(outs);
  const char *args[] = {"ld.lld", "-flavor", "gnu", "-shared", "--no-undefined",
                        input.c_str(), "-o", output.c_str()};
  lld::Result result = lld::lldMain(args, out, errors, {{lld::Gnu, &lld::elf::link}});
  if (result.retCode != 0)
    throw CompileError("lld could not link the HSACO:\n" + messages);
  auto buffer = llvm::MemoryBuffer::getFile(output);
  if (!buffer)
    throw CompileError("lld wrote no HSACO: " + buffer.getError().message());
  return (*buffer)->getBuffer().str();
}
