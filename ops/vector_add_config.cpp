#include "ops/VectorAddConfig.h"

#include <limits>

std::map<std::string, int64_t> tile::ops::defaultVectorAddConfig(const Target &target,
                                                                 int64_t numel) {
  std::map<std::string, int64_t> config;
  if (target.kind == TargetKind::Cpu) {
    // 128 lanes fill 8 AVX-512 (16 AVX2) registers per operand with no spills; 1024
    // spilled to the stack and ran at half of torch.add's speed on 2**20 elements.
    config["BLOCK_SIZE"] = 128;
  } else {
    // 4 waves, each thread 16 bytes of f16 per access (two runs of f32).
    config["BLOCK_SIZE"] = 2048;
    config["num_warps"] = 4;
  }
  // 32-bit offsets are enough below 2**31 elements and cheaper; past that, 64-bit.
  config["index_bits"] = numel < std::numeric_limits<int32_t>::max() ? 32 : 64;
  return config;
}

tile::ops::KernelSpec tile::ops::vectorAddSpec(const Target &target, const std::string &dtype,
                                               int64_t numel) {
  KernelSpec spec;
  spec.op = "vector_add";
  spec.dtypes = {dtype};
  spec.config = defaultVectorAddConfig(target, numel);
  return spec;
}
