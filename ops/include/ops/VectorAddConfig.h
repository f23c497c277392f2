#ifndef TILE_OPS_VECTORADDCONFIG_H
#define TILE_OPS_VECTORADDCONFIG_H

#include "ops/KernelSpec.h"
#include "tile/Compiler/Target.h"

#include <cstdint>
#include <map>
#include <string>

namespace tile::ops {

/// The config of a vector_add kernel over `numel` elements on a target: BLOCK_SIZE,
/// num_warps on GPUs, and index_bits (32 below 2**31 elements, else 64).
std::map<std::string, int64_t> defaultVectorAddConfig(const Target &target, int64_t numel);

/// The spec of the vector_add kernel the ops run: `dtype` ("f32", "f16", "bf16") at the
/// default config.
KernelSpec vectorAddSpec(const Target &target, const std::string &dtype, int64_t numel);

} // namespace tile::ops

#endif
