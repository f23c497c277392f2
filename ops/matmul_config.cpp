// Default matmul configs per target family, chosen from the problem shape.
#include "ops/MatmulConfig.h"

#include <algorithm>

namespace tile::ops {

const std::vector<std::string> &matmulKnobNames() {
  static const std::vector<std::string> names = {
      "BLOCK_M",     "BLOCK_N",      "BLOCK_K",
      "GROUP_M",     "num_warps",    "num_stages",
      "waves_per_eu", "matrix_instr_nonkdim", "kpack"};
  return names;
}

namespace {

/// The CPU keeps the BLOCK_M x BLOCK_N accumulator in vector registers for the whole K
/// loop (see DotLowering.cpp): 8 x 32 f32 is 16 of the 32 AVX-512 registers, leaving
/// room for the b row and the broadcasts; AVX2 has 16 registers of half the width.
std::map<std::string, int64_t> cpuConfig(const Target &target, int64_t k) {
  bool avx512 = target.hasFeature("avx512f");
  int64_t blockK = std::clamp<int64_t>(k, 16, 256);
  blockK = int64_t(1) << (63 - __builtin_clzll(uint64_t(blockK))); // a power of two <= k
  return {{"BLOCK_M", 8},
          {"BLOCK_N", avx512 ? 32 : 16},
          {"BLOCK_K", blockK},
          {"GROUP_M", 8}};
}

/// GPU tiles from the Triton tutorials' candidates: large tiles for large problems,
/// smaller ones when large tiles would leave too few workgroups.
std::map<std::string, int64_t> gpuConfig(const Target &target, int64_t m, int64_t n,
                                         const std::string &inputDtype) {
  bool large = m >= 1024 && n >= 1024;
  bool hip = target.kind == TargetKind::Hip;
  // a and b blocks of 128 x BLOCK_K stay within 48 KiB of static shared memory.
  bool wide = inputDtype == "f32";
  // Large 16-bit problems on NVIDIA take BLOCK_K 32 (128x128x32 won the tutorial's list
  // on an H200 before the pipelined lowering).
  bool halfOnNvidia =
      target.kind == TargetKind::Cuda && (inputDtype == "f16" || inputDtype == "bf16");
  // f32 on NVIDIA takes BLOCK_K 16, so that pipelined candidates' shared tiles stay
  // within 48 KiB of static shared memory. Eight warps keep the 128 x 128 accumulator
  // and fragments within 128 registers (four warps need 248).
  bool f32OnNvidia = wide && target.kind == TargetKind::Cuda;
  return {{"BLOCK_M", large ? 128 : 64},
          {"BLOCK_N", large ? 128 : 64},
          {"BLOCK_K", f32OnNvidia ? 16 : hip || wide || (halfOnNvidia && large) ? 32 : 64},
          {"GROUP_M", 8},
          {"num_warps", large ? 8 : 4},
          // NVIDIA: the register-staged pipeline holds ~120 more registers per thread
          // (244 at num_stages 2 against 128 at 1 for 128x128x32 over 8 warps, ptxas -v),
          // which halves occupancy; it pays once loads go through cp.async instead.
          {"num_stages", hip ? 2 : 1},
          {"waves_per_eu", hip ? 2 : 0},
          {"matrix_instr_nonkdim", 16},
          {"kpack", 1}};
}

} // namespace

std::map<std::string, int64_t> defaultMatmulConfig(const Target &target, int64_t m, int64_t n,
                                                   int64_t k, const std::string &inputDtype) {
  if (target.kind == TargetKind::Cpu) {
    auto config = cpuConfig(target, k);
    // GPU-only knobs at their GPU defaults, ignored here but part of the key.
    for (const auto &[name, value] : gpuConfig(target, m, n, inputDtype))
      config.emplace(name, value);
    return config;
  }
  return gpuConfig(target, m, n, inputDtype);
}

} // namespace tile::ops
