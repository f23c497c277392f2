#include "runtime/CpuJit.h"

#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

#include <atomic>
#include <mutex>
#include <stdexcept>

using namespace tile;

namespace {

llvm::orc::LLJIT &processJit() {
  static std::unique_ptr<llvm::orc::LLJIT> jit = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto created = llvm::orc::LLJITBuilder().create();
    if (!created)
      throw std::runtime_error("cannot start the LLVM ORC JIT: " +
                               llvm::toString(created.takeError()));
    return std::move(*created);
  }();
  return *jit;
}

} // namespace

runtime::CpuEntry runtime::loadCpuObject(const Binary &binary, const std::string &key) {
  static std::atomic<uint64_t> serial{0};
  llvm::orc::LLJIT &jit = processJit();
  auto fail = [&](llvm::Error error) -> CpuEntry {
    throw std::runtime_error("cannot load the CPU kernel " + binary.kernelName + " (" + key +
                             "): " + llvm::toString(std::move(error)));
  };
  auto dylib = jit.createJITDylib("tile." + key + "." + std::to_string(serial++));
  if (!dylib)
    return fail(dylib.takeError());
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(binary.object, binary.kernelName + ".o");
  if (auto error = jit.addObjectFile(*dylib, std::move(buffer)))
    return fail(std::move(error));
  auto symbol = jit.lookup(*dylib, binary.entrySymbol);
  if (!symbol)
    return fail(symbol.takeError());
  return symbol->toPtr<CpuEntry>();
}
