#include "runtime/CpuJit.h"

#include "llvm/ExecutionEngine/Orc/AbsoluteSymbols.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>

using namespace tile;

namespace {

/// The process's JIT. Never destroyed: kernels held by static caches unload their code
/// through it as the process exits, in whatever order the statics go.
llvm::orc::LLJIT &processJit() {
  static llvm::orc::LLJIT *jit = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto created = llvm::orc::LLJITBuilder().create();
    if (!created)
      throw std::runtime_error("cannot start the LLVM ORC JIT: " +
                               llvm::toString(created.takeError()));
    return created->release();
  }();
  return *jit;
}

/// Removes a kernel's JITDylib, returning its code's memory. A failure leaves the code
/// loaded: it is only memory, and nothing can be done about it at that point.
void unload(llvm::orc::JITDylib *dylib) {
  llvm::consumeError(processJit().getExecutionSession().removeJITDylib(*dylib));
}

/// float -> bfloat, rounding to nearest even, NaNs kept quiet: the runtime helper the
/// x86 backend calls for bf16 values it cannot keep as i16 (hosts without AVX512-BF16),
/// which the host's libgcc may lack. The result travels in the low 16 bits of a float
/// register, as the backend expects it.
extern "C" float tileTruncSfBf2(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  uint32_t rounded = (bits & 0x7fffffffu) > 0x7f800000u
                         ? ((bits >> 16) | 0x0040u)
                         : (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  uint32_t result = rounded & 0xffffu;
  float out;
  std::memcpy(&out, &result, sizeof out);
  return out;
}

} // namespace

runtime::CpuCode runtime::loadCpuObject(const Binary &binary, const std::string &key) {
  static std::atomic<uint64_t> serial{0};
  llvm::orc::LLJIT &jit = processJit();
  auto fail = [&](llvm::Error error) -> CpuCode {
    throw std::runtime_error("cannot load the CPU kernel " + binary.kernelName + " (" + key +
                             "): " + llvm::toString(std::move(error)));
  };
  auto dylib = jit.createJITDylib("tile." + key + "." + std::to_string(serial++));
  if (!dylib)
    return fail(dylib.takeError());
  // From here on the dylib goes with its owner, on success and on failure alike.
  std::shared_ptr<const void> owner(&*dylib, [](const void *loaded) {
    unload(const_cast<llvm::orc::JITDylib *>(static_cast<const llvm::orc::JITDylib *>(loaded)));
  });
  llvm::orc::SymbolMap helpers;
  helpers[jit.mangleAndIntern("__truncsfbf2")] = {llvm::orc::ExecutorAddr::fromPtr(&tileTruncSfBf2),
                                                  llvm::JITSymbolFlags::Exported};
  if (auto error = dylib->define(llvm::orc::absoluteSymbols(std::move(helpers))))
    return fail(std::move(error));
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(binary.object, binary.kernelName + ".o");
  if (auto error = jit.addObjectFile(*dylib, std::move(buffer)))
    return fail(std::move(error));
  auto symbol = jit.lookup(*dylib, binary.entrySymbol);
  if (!symbol)
    return fail(symbol.takeError());
  return {symbol->toPtr<CpuEntry>(), std::move(owner)};
}
