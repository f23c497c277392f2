#ifndef TILE_RUNTIME_BUILDID_H
#define TILE_RUNTIME_BUILDID_H

#include <string>

namespace tile::runtime {

/// The GNU build id of libtorch_tile_core as hex: it changes with every rebuild, so
/// cached binaries of an older compiler are never taken for this one's.
const std::string &coreBuildId();

} // namespace tile::runtime

#endif
