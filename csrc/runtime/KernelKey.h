#ifndef TILE_RUNTIME_KERNELKEY_H
#define TILE_RUNTIME_KERNELKEY_H

#include "ops/KernelSpec.h"
#include "tile/Compiler/Target.h"

#include <string>
#include <string_view>
#include <vector>

namespace tile::runtime {

/// The environment variables whose values change generated code; their values are
/// hashed into every key.
const std::vector<std::string> &codegenEnvironment();

std::string sha256Hex(std::string_view data);

/// sha256 over the compiler version and build id, the shared LLVM/MLIR libraries' build
/// ids, the op, the config and dtypes, the full target (with CPU or GPU features) and the
/// codegen environment: equal keys mean interchangeable binaries. The kernel builders
/// live in the core library, so its build id stands for the tile IR they produce: a
/// warm cache is read without building the IR.
std::string kernelKey(const ops::KernelSpec &spec, const Target &target);

} // namespace tile::runtime

#endif
