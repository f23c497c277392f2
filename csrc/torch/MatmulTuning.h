// Which config a matmul call runs with: the tuned one of its problem when autotuning is
// on (torch_tile.config.autotune), else the target family's heuristic default.
#ifndef TILE_TORCH_MATMULTUNING_H
#define TILE_TORCH_MATMULTUNING_H

#include "MatmulCall.h"

#include <functional>
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

} // namespace tile::binding

#endif
