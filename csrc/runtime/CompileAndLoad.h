#ifndef TILE_RUNTIME_COMPILEANDLOAD_H
#define TILE_RUNTIME_COMPILEANDLOAD_H

#include "ops/KernelSpec.h"
#include "runtime/LoadedKernel.h"

#include <memory>

namespace tile::runtime {

/// The cache-miss path: build the op's tile IR, key it, read the binary from the disk
/// cache or compile it (and store it there), and for the CPU load it into the JIT. GPU
/// binaries are loaded by GpuLauncher. Throws CompileError or std::invalid_argument.
std::shared_ptr<const LoadedKernel> compileAndLoad(const ops::KernelSpec &spec,
                                                   const Target &target);

/// Whether the disk cache holds the binary of `spec` for `target`, unchecked: a first call
/// that finds it loads it in a millisecond or two, one that does not compiles it.
bool storedOnDisk(const ops::KernelSpec &spec, const Target &target);

/// Compiles a spec for any target, keeping every stage, with no cache and no loading:
/// what `python -m torch_tile compile` shows.
Binary compileWithStages(const ops::KernelSpec &spec, const Target &target);

} // namespace tile::runtime

#endif
