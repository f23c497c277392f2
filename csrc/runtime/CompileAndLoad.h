#ifndef TILE_RUNTIME_COMPILEANDLOAD_H
#define TILE_RUNTIME_COMPILEANDLOAD_H

#include "ops/KernelSpec.h"
#include "runtime/LoadedKernel.h"

#include <memory>

namespace tile::runtime {

/// The cache-miss path: build the op's tile IR, key it, compile it for the target and
/// load the binary. Throws CompileError or std::invalid_argument with a message.
std::shared_ptr<const LoadedKernel> compileAndLoad(const ops::KernelSpec &spec,
                                                   const Target &target);

} // namespace tile::runtime

#endif
