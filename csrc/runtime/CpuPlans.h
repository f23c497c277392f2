// How the CPU runs an op's program instances: the thread grain (program instances per
// task), the packing of b and the bands of rows, from the kernel's spec and the problem's
// sizes. The policy of the launch, kept out of the torch binding.
#ifndef TILE_RUNTIME_CPUPLANS_H
#define TILE_RUNTIME_CPUPLANS_H

#include "ops/KernelSpec.h"
#include "runtime/LaunchPlans.h"
#include "tile/Compiler/Target.h"

#include <cstdint>
#include <memory>

namespace tile::runtime {

/// The plan of a matmul of `m` rows and `k` steps whose `spec` makes `programs` program
/// instances on `target`, with its loaded `kernel`.
LaunchPlan cpuMatmulPlan(std::shared_ptr<const LoadedKernel> kernel, const ops::KernelSpec &spec,
                         const Target &target, int64_t programs, int64_t m, int64_t k);

/// The plan of a vector_add of `spec`'s blocks over `programs` program instances.
LaunchPlan cpuVectorAddPlan(std::shared_ptr<const LoadedKernel> kernel, const ops::KernelSpec &spec,
                            int64_t programs);

} // namespace tile::runtime

#endif
