// Which config a matmul call runs with: the tuned one of its problem when autotuning is
// on (torch_tile.config.autotune), else the target family's heuristic default.
#ifndef TILE_TORCH_MATMULTUNING_H
#define TILE_TORCH_MATMULTUNING_H

#include "MatmulCall.h"

#include <functional>
#include <string>
#include <utility>

namespace tile::binding {

/// Launches one config of a prepared call on its operands (compiling it on first use).
using MatmulLaunch = std::function<void(const ops::KernelSpec &spec, int64_t programs)>;

/// The spec and program count to launch. With autotuning on, the first call of an (op,
/// dtypes, power-of-two shape bucket, target) runs every candidate on this call's own
/// operands through `launch` (`sync` waits for the device) and keeps the fastest;
/// `mayBenchmark` false (CUDA graph capture) only looks a winner up.
std::pair<ops::KernelSpec, int64_t> chooseMatmulConfig(const MatmulCall &call,
                                                       const Target &target,
                                                       const MatmulLaunch &launch,
                                                       const std::function<void()> &sync,
                                                       bool mayBenchmark);

/// Empty when `out` matches `reference` (the default config's result on the same
/// operands) within what a different tiling may change: integers exactly; floats per
/// element within a dtype-dependent fraction of max|reference| (1e-4 float32, 4e-3
/// float16, 2e-2 bfloat16), NaN where the reference has NaN. Else why not, for the
/// autotuning record: a candidate that computes something else never wins.
std::string resultMismatch(const at::Tensor &out, const at::Tensor &reference);

} // namespace tile::binding

#endif
