// What becomes of a fault inside a compile: every one ends as a CompileError that names
// the stage, never as the end of the process, and tests can inject one at each stage.
#ifndef TILE_COMPILER_COMPILEFAULTS_H
#define TILE_COMPILER_COMPILEFAULTS_H

#include "llvm/ADT/StringRef.h"

namespace tile {

/// Test hook, read by tests only: with TILE_TEST_INJECT_FAULT=<stage>, every compile fails
/// at that stage as the real fault would make it fail. The stages, in the order a compile
/// passes them: "verify" (the tile IR verifier), "lowering" (the tile-cpu / tile-gpu
/// conversion), "translation" (MLIR to LLVM IR), "resources" (LDS, registers or the CPU's
/// vector registers exhausted), "backend" (an error reported by LLVM's code generator)
/// and "fatal" (llvm::report_fatal_error inside code generation).
bool faultInjectedAt(llvm::StringRef stage);

/// While alive, this thread's compile is at `stage`: an LLVM fatal error raised on this
/// thread becomes a CompileError naming it, instead of ending the process (LLVM's
/// handler, installed once for the process, leaves other threads' fatal errors as they
/// were). Scopes nest; the innermost names the stage.
class CompileStage {
public:
  explicit CompileStage(const char *stage);
  ~CompileStage();
  CompileStage(const CompileStage &) = delete;
  CompileStage &operator=(const CompileStage &) = delete;

private:
  const char *previous;
};

} // namespace tile

#endif
