// tile::vector_add on the CPU: checks, then the kernel compiled on first call.
#include "AtenParallelFor.h"
#include "DTypes.h"
#include "VectorAddChecks.h"
#include "ops/VectorAddConfig.h"
#include "runtime/CpuLauncher.h"
#include "runtime/CpuPlans.h"
#include "runtime/DeviceTarget.h"
#include "runtime/KernelCache.h"
#include "runtime/LaunchPlans.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <limits>

namespace {

using tile::runtime::Grid;
using tile::runtime::KernelCache;

at::Tensor vectorAddCpu(const at::Tensor &a, const at::Tensor &b) {
  tile::binding::checkVectorAddInputs(a, b);
  // Lay the inputs out densely in the same order, so the kernel walks flat memory.
  at::Tensor aDense = a.contiguous(), bDense = b.contiguous();
  at::Tensor out = at::empty_like(aDense, at::MemoryFormat::Contiguous);
  int64_t numel = out.numel();
  if (numel == 0)
    return out;
  bool index32 = numel < std::numeric_limits<int32_t>::max();
  // Slot 0 tells the op from a matmul's signature (whose first slot is 0 or 1); slot 3
  // is the device (-1: the CPU).
  tile::runtime::CallSignature signature{-1, static_cast<int64_t>(a.scalar_type()), numel, -1};
  std::optional<tile::runtime::LaunchPlan> plan = tile::runtime::reusePlan(signature);
  if (!plan) {
    const tile::Target &target = tile::runtime::cpuTarget();
    auto spec = tile::ops::vectorAddSpec(target, tile::binding::specDtype(a.scalar_type()), numel);
    int64_t block = spec.config.at("BLOCK_SIZE");
    int64_t programs = (numel + block - 1) / block;
    TORCH_CHECK(programs <= std::numeric_limits<int32_t>::max(),
                "tile::vector_add: ", numel, " elements need more than 2**31 program instances");
    plan = tile::runtime::cpuVectorAddPlan(KernelCache::global().get(spec, target), spec, programs);
    tile::runtime::LaunchPlans::global().insert(signature, *plan);
  }
  void *aPtr = aDense.data_ptr(), *bPtr = bDense.data_ptr(), *outPtr = out.data_ptr();
  int32_t n32 = static_cast<int32_t>(numel);
  int64_t n64 = numel;
  void *args[] = {&aPtr, &bPtr, &outPtr, index32 ? static_cast<void *>(&n32) : &n64};
  tile::runtime::launchCpu(*plan->kernel, args, Grid{static_cast<int32_t>(plan->programs), 1, 1},
                           plan->grain, tile::binding::atenParallelFor);
  return out;
}

} // namespace

void tile::binding::checkVectorAddInputs(const at::Tensor &a, const at::Tensor &b) {
  TORCH_CHECK(a.device() == b.device(), "tile::vector_add: tensor a is on ", a.device(),
              " but b is on ", b.device());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "tile::vector_add: dtypes differ: a is ",
              a.scalar_type(), " and b is ", b.scalar_type());
  auto dtype = a.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
                   "tile::vector_add: unsupported dtype ", dtype,
                   "; supported: float32, float16, bfloat16");
  TORCH_CHECK(a.sizes() == b.sizes(), "tile::vector_add: shapes differ: a is ", a.sizes(),
              " and b is ", b.sizes(), " (vector_add does not broadcast)");
  TORCH_CHECK(a.layout() == at::kStrided && b.layout() == at::kStrided,
              "tile::vector_add: only dense (strided) tensors are supported");
}

TORCH_LIBRARY_IMPL(tile, CPU, m) { m.impl("vector_add", vectorAddCpu); }
