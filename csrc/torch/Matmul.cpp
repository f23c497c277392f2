// tile::matmul and tile::matmul_leaky_relu on the CPU: one kernel compiled on first
// call per (dtypes, config, target) that reads both operands through their strides.
#include "MatmulCall.h"
#include "MatmulTuning.h"
#include "runtime/CpuLauncher.h"
#include "runtime/DeviceTarget.h"
#include "runtime/KernelCache.h"
#include "runtime/LaunchPlans.h"
#include "tile/Target/CpuArch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstdlib>
#include <memory>

namespace {

at::Tensor matmulCpu(const char *op, const at::Tensor &a, const at::Tensor &b,
                     std::optional<double> negativeSlope, std::optional<at::ScalarType> outDtype,
                     const std::optional<at::Tensor> &bias) {
  const auto &target = tile::runtime::cpuTarget();
  tile::binding::MatmulCall call;
  tile::binding::prepareMatmul(call, op, a, b, negativeSlope, outDtype, bias, target,
                               /*contiguousRowsOfB=*/true);
  if (call.empty())
    return call.c;
  auto parallelFor = [](int64_t begin, int64_t end, int64_t grainSize, const auto &body) {
    at::parallel_for(begin, end, grainSize, body);
  };
  auto run = [&](const tile::runtime::LaunchPlan &plan) {
    if (plan.bPanelWidth)
      tile::binding::packBIntoPanels(call, plan.bPanelWidth, plan.bPanelGroup, parallelFor);
    tile::runtime::launchCpu(*plan.kernel, call.args(),
                             tile::runtime::Grid{static_cast<int32_t>(plan.programs), 1, 1},
                             plan.grain, parallelFor);
  };
  if (auto plan = tile::runtime::reusePlan(call.signature)) {
    run(*plan);
    return call.c;
  }
  call.specify();
  auto planFor = [&](const tile::ops::KernelSpec &spec, int64_t programs) {
    // A program computes BLOCK_M x BLOCK_N x K multiply-adds; tasks of at least ~1M of
    // them pay for a thread on the vector units. The tile registers (AMX) run 8 times as
    // many per cycle, so their tasks take 8 times as many: a 128^3 int8 matmul (16
    // programs of 32 x 32) took 12 us on 2 threads of a Xeon and 10.5 us on one.
    int64_t perProgram = std::max<int64_t>(1, spec.config.at("BLOCK_M") *
                                                  spec.config.at("BLOCK_N") *
                                                  std::max<int64_t>(a.size(1), 1));
    auto packed = spec.config.find("packed_b");
    int64_t group = packed != spec.config.end() ? packed->second : 0;
    bool onTiles = group > 1 && tile::hasCpuMatrixTiles(target, spec.dtypes.at(0));
    int64_t perTask = (int64_t(1) << 20) * (onTiles ? 8 : 1);
    return tile::runtime::LaunchPlan{tile::runtime::KernelCache::global().get(spec, target),
                                     programs, std::max<int64_t>(1, perTask / perProgram),
                                     group ? spec.config.at("BLOCK_N") : 0,
                                     std::max<int64_t>(group, 1)};
  };
  auto [spec, programs] = tile::binding::chooseMatmulConfig(
      call, target, [&](const tile::ops::KernelSpec &spec, int64_t programs) { run(planFor(spec, programs)); },
      [] {}, /*mayBenchmark=*/true);
  auto plan = planFor(spec, programs);
  tile::runtime::LaunchPlans::global().insert(call.signature, plan);
  run(plan);
  return call.c;
}

/// `sizes` of float32 in a buffer the calling thread keeps for its next call (up to
/// kRetainedBytes; larger ones are fresh): a fresh buffer of a few MB is zero-filled by
/// the OS page by page on first touch, which costs about as much as the copy into it.
/// Plain memory, not a tensor: a tensor kept by a thread would be freed at its exit,
/// through allocator state the process may already have torn down.
at::Tensor retainedFloats(int slot, at::IntArrayRef sizes) {
  constexpr int64_t kRetainedBytes = int64_t(64) << 20;
  struct Free {
    void operator()(float *p) const { std::free(p); }
  };
  thread_local std::unique_ptr<float, Free> kept[2];
  thread_local int64_t keptCount[2] = {0, 0};
  int64_t count = c10::multiply_integers(sizes);
  if (count * int64_t(sizeof(float)) > kRetainedBytes)
    return at::empty(sizes, at::kFloat);
  if (count > keptCount[slot]) {
    kept[slot].reset();
    int64_t bytes = (count * int64_t(sizeof(float)) + 63) / 64 * 64;
    kept[slot].reset(static_cast<float *>(std::aligned_alloc(64, size_t(bytes))));
    TORCH_CHECK(kept[slot], "out of memory for a float32 copy of ", count, " elements");
    keptCount[slot] = count;
  }
  return at::from_blob(kept[slot].get(), sizes, at::TensorOptions().dtype(at::kFloat));
}

/// float16 on the CPU runs as float32: the vector kernel converts each element of b
/// where it multiplies it (two micro-ops on the FMA ports per 16 lanes), which ran at
/// 0.5-0.7x of torch on a 2-core Xeon. a and b are converted once into float32 copies,
/// the float32 kernel accumulates as the float16 one does (in float32, a bias added
/// there), and the result is rounded once. Other calls (a bias of neither dtype, shapes
/// that do not match) take the float16 path, whose checks name the problem.
std::optional<at::Tensor> matmulHalfAsFloat(const char *op, const at::Tensor &a,
                                            const at::Tensor &b,
                                            std::optional<double> negativeSlope,
                                            std::optional<at::ScalarType> outDtype,
                                            const std::optional<at::Tensor> &bias) {
  at::ScalarType out = outDtype.value_or(at::kHalf);
  if (a.scalar_type() != at::kHalf || b.scalar_type() != at::kHalf || a.dim() != 2 ||
      b.dim() != 2 || a.size(1) != b.size(0) || (out != at::kHalf && out != at::kFloat) ||
      a.layout() != at::kStrided || b.layout() != at::kStrided)
    return std::nullopt;
  if (bias && (bias->device() != a.device() || bias->layout() != at::kStrided ||
               bias->dim() != 1 || bias->size(0) != b.size(1) ||
               (bias->scalar_type() != at::kHalf && bias->scalar_type() != out)))
    return std::nullopt;
  at::Tensor a32 = retainedFloats(0, a.sizes()).copy_(a);
  at::Tensor b32 = retainedFloats(1, b.sizes()).copy_(b);
  std::optional<at::Tensor> bias32;
  if (bias)
    bias32 = bias->to(at::kFloat);
  at::Tensor c = matmulCpu(op, a32, b32, negativeSlope, std::nullopt, bias32);
  return out == at::kFloat ? c : c.to(at::kHalf);
}

at::Tensor matmul(const at::Tensor &a, const at::Tensor &b,
                  std::optional<at::ScalarType> outDtype,
                  const std::optional<at::Tensor> &bias) {
  if (auto c = matmulHalfAsFloat("tile::matmul", a, b, std::nullopt, outDtype, bias))
    return *c;
  return matmulCpu("tile::matmul", a, b, std::nullopt, outDtype, bias);
}

at::Tensor matmulLeakyRelu(const at::Tensor &a, const at::Tensor &b, double negativeSlope,
                           std::optional<at::ScalarType> outDtype,
                           const std::optional<at::Tensor> &bias) {
  if (auto c = matmulHalfAsFloat("tile::matmul_leaky_relu", a, b, negativeSlope, outDtype, bias))
    return *c;
  return matmulCpu("tile::matmul_leaky_relu", a, b, negativeSlope, outDtype, bias);
}

} // namespace

TORCH_LIBRARY_IMPL(tile, CPU, m) {
  m.impl("matmul", matmul);
  m.impl("matmul_leaky_relu", matmulLeakyRelu);
}
