#ifndef TILE_OPS_VECTORADDCONFIG_H
#define TILE_OPS_VECTORADDCONFIG_H

#include "tile/Compiler/Target.h"

#include <cstdint>
#include <map>
#include <string>

namespace tile::ops {

/// The config of a vector_add kernel over `numel` elements on a target: BLOCK_SIZE,
/// num_warps on GPUs, and index_bits (32 below 2**31 elements, else 64).
std::map<std::string, int64_t> defaultVectorAddConfig(const Target &target, int64_t numel);

} // namespace tile::ops

#endif
