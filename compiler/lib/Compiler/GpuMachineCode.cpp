// GPU target machines, and the HSACO link with lld as a library (no ld.lld process).
#include "MachineCode.h"

#include "tile/Compiler/Compile.h"
#include "tile/Target/GpuArch.h"

#include "lld/Common/Driver.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
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
    // Shared-memory pointers in 32 bits, as Triton compiles them: shared memory is at
    // most 228 KiB, and 64-bit addresses would take two registers each in the GEMM's
    // main loop. The option only changes the NVPTX data layout.
    auto &registered = llvm::cl::getRegisteredOptions();
    if (auto it = registered.find("nvptx-short-ptr"); it != registered.end())
      static_cast<llvm::cl::opt<bool> *>(it->second)->setValue(true);
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

namespace {

/// Where the ROCm device libraries (ocml.bc, ockl.bc) are: TILE_ROCM_DEVICE_LIBS, then
/// Debian's rocm-device-libs, then a ROCm install.
std::string deviceLibraryFolder() {
  std::vector<std::string> candidates;
  if (const char *env = std::getenv("TILE_ROCM_DEVICE_LIBS"))
    candidates.push_back(env);
  candidates.push_back("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode");
  candidates.push_back("/opt/rocm/amdgcn/bitcode");
  for (const auto &folder : candidates) {
    llvm::SmallString<256> ocml(folder);
    llvm::sys::path::append(ocml, "ocml.bc");
    if (llvm::sys::fs::exists(ocml))
      return folder;
  }
  return {};
}

/// The oclc_* control constants ocml and ockl read, defined here rather than linked from
/// oclc_isa_version_<arch>.bc, which older device-library packages lack for newer archs.
void defineControlConstants(llvm::Module &module, const GpuArch &arch) {
  llvm::StringRef digits = llvm::StringRef(arch.name).drop_front(3); // "942", "90a", "1100"
  unsigned isaVersion = 0;
  if (digits.size() == 3) { // gfx9xy: 9000 + x * 100 + y, with hex steppings
    isaVersion = 9000 + (digits[1] - '0') * 100 + unsigned(llvm::hexDigitValue(digits[2]));
  } else { // gfx1xyz: 1x * 1000 + y * 100 + z
    isaVersion = unsigned(std::stoi(digits.take_front(2).str())) * 1000 +
                 (digits[2] - '0') * 100 + unsigned(llvm::hexDigitValue(digits[3]));
  }
  auto define = [&](const char *name, llvm::Type *type, uint64_t value) {
    // The libraries declare the constants they read; give those declarations values.
    llvm::GlobalVariable *global = module.getNamedGlobal(name);
    if (global && !global->isDeclaration())
      return;
    if (!global)
      global = new llvm::GlobalVariable(module, type, /*isConstant=*/true,
                                        llvm::GlobalValue::LinkOnceODRLinkage, nullptr, name,
                                        nullptr, llvm::GlobalValue::NotThreadLocal,
                                        /*AddressSpace=*/4);
    global->setInitializer(llvm::ConstantInt::get(global->getValueType(), value));
    global->setConstant(true);
    global->setLinkage(llvm::GlobalValue::LinkOnceODRLinkage);
    global->setVisibility(llvm::GlobalValue::HiddenVisibility);
  };
  llvm::Type *i8 = llvm::Type::getInt8Ty(module.getContext());
  llvm::Type *i32 = llvm::Type::getInt32Ty(module.getContext());
  define("__oclc_finite_only_opt", i8, 0);
  define("__oclc_unsafe_math_opt", i8, 0);
  define("__oclc_daz_opt", i8, 0);
  define("__oclc_correctly_rounded_sqrt32", i8, 1);
  define("__oclc_wavefrontsize64", i8, arch.waveSize == 64);
  define("__oclc_ISA_version", i32, isaVersion);
  define("__oclc_ABI_version", i32, 500);
}

} // namespace

void tile::linkDeviceLibraries(llvm::Module &module, const GpuArch &arch) {
  std::string firstCall;
  for (const llvm::Function &function : module)
    if (function.isDeclaration() && (function.getName().starts_with("__ocml_") ||
                                     function.getName().starts_with("__ockl_"))) {
      firstCall = function.getName().str();
      break;
    }
  if (firstCall.empty())
    return;
  std::string folder = deviceLibraryFolder();
  if (folder.empty())
    throw CompileError("the kernel calls " + firstCall +
                       " but no ROCm device libraries were found (searched "
                       "TILE_ROCM_DEVICE_LIBS, /usr/lib/x86_64-linux-gnu/amdgcn/bitcode, "
                       "/opt/rocm/amdgcn/bitcode; Debian: apt install rocm-device-libs)");
  for (const char *library : {"ocml.bc", "ockl.bc"}) {
    llvm::SmallString<256> path(folder);
    llvm::sys::path::append(path, library);
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer)
      throw CompileError("cannot read " + path.str().str() + ": " + buffer.getError().message());
    auto parsed = llvm::parseBitcodeFile((*buffer)->getMemBufferRef(), module.getContext());
    if (!parsed)
      throw CompileError("cannot parse " + path.str().str() + ": " +
                         llvm::toString(parsed.takeError()));
    std::unique_ptr<llvm::Module> libraryModule = std::move(*parsed);
    libraryModule->setTargetTriple(module.getTargetTriple());
    libraryModule->setDataLayout(module.getDataLayout());
    // Only what the kernel calls comes over, so kernels that call nothing pay nothing.
    if (llvm::Linker::linkModules(module, std::move(libraryModule), llvm::Linker::LinkOnlyNeeded))
      throw CompileError("linking " + path.str().str() + " failed");
  }
  defineControlConstants(module, arch);
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
