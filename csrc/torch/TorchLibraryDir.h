// Where the loaded torch keeps its libraries: ROCm wheels carry their own libamdhip64
// there, which the HIP launcher and `python -m torch_tile env` look for in the same way.
#ifndef TILE_TORCH_TORCHLIBRARYDIR_H
#define TILE_TORCH_TORCHLIBRARYDIR_H

#include <string>

namespace tile::binding {

/// TILE_TORCH_LIB_DIR when set, else the folder the process loaded torch's c10 from
/// (torch/lib of a wheel); empty when neither is known.
std::string torchLibraryDir();

} // namespace tile::binding

#endif
