#include "CompileFaults.h"

#include "tile/Compiler/Compile.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <mutex>
#include <string>

namespace {

thread_local const char *currentStage = nullptr;

/// LLVM's fatal errors (report_fatal_error: a backend that cannot select an instruction,
/// a subtarget that cannot hold the code) would end the process. Inside a compile they
/// unwind to its caller as a CompileError; the compile's own objects are destroyed on the
/// way, LLVM's frames (built without exceptions) are passed over.
void fatalErrorInCompile(void *, const char *reason, bool) {
  if (currentStage)
    throw tile::CompileError(std::string("LLVM fatal error at the ") + currentStage + " stage: " + reason);
  // Outside a compile: what LLVM's default handler prints before it exits.
  llvm::errs() << "LLVM ERROR: " << reason << "\n";
}

} // namespace

bool tile::faultInjectedAt(llvm::StringRef stage) {
  const char *injected = std::getenv("TILE_TEST_INJECT_FAULT");
  return injected && stage == injected;
}

tile::CompileStage::CompileStage(const char *stage) : previous(currentStage) {
  static std::once_flag installed;
  std::call_once(installed, [] { llvm::install_fatal_error_handler(fatalErrorInCompile, nullptr); });
  currentStage = stage;
}

tile::CompileStage::~CompileStage() { currentStage = previous; }
