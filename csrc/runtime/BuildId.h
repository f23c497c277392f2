#ifndef TILE_RUNTIME_BUILDID_H
#define TILE_RUNTIME_BUILDID_H

#include <string>

namespace tile::runtime {

/// The GNU build id of libtorch_tile_core as hex: it changes with every rebuild, so
/// cached binaries of an older compiler are never taken for this one's.
const std::string &coreBuildId();

/// The shared LLVM and MLIR libraries this process loaded, as "libLLVM.so.22.1=<build id>;
/// libMLIR.so.22.1=<build id>": a distribution update of them changes code generation
/// while the core's own build id stays the same. Empty where they are linked statically
/// (then the core's build id covers them).
const std::string &linkedToolchainIds();

} // namespace tile::runtime

#endif
