// tile::vector_add on the CPU: checks, then the kernel compiled on first call.
#include "DTypes.h"
#include "VectorAddChecks.h"
#include "runtime/CpuLauncher.h"
#include "runtime/DeviceTarget.h"
#include "runtime/KernelCache.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <limits>

namespace {

using tile::runtime::Grid;
using tile::runtime::KernelCache;

tile::ops::KernelSpec vectorAddSpec(at::ScalarType dtype, int64_t numel) {
  tile::ops::KernelSpec spec;
  spec.op = "vector_add";
  spec.dtypes = {tile::binding::specDtype(dtype)};
  // 128 lanes fill 8 AVX-512 (16 AVX2) registers per operand with no spills; 1024
  // spilled to the stack and ran at half of torch.add's speed on 2**20 elements.
  spec.config["BLOCK_SIZE"] = 128;
  // 32-bit offsets are enough below 2**31 elements and cheaper; past that, 64-bit.
  spec.config["index_bits"] = numel < std::numeric_limits<int32_t>::max() ? 32 : 64;
  return spec;
}

at::Tensor vectorAddCpu(const at::Tensor &a, const at::Tensor &b) {
  tile::binding::checkVectorAddInputs(a, b);
  // Lay the inputs out densely in the same order, so the kernel walks flat memory.
  at::Tensor aDense = a.contiguous(), bDense = b.contiguous();
  at::Tensor out = at::empty_like(aDense, at::MemoryFormat::Contiguous);
  int64_t numel = out.numel();
  if (numel == 0)
    return out;

  auto spec = vectorAddSpec(a.scalar_type(), numel);
  auto kernel = KernelCache::global().get(spec, tile::runtime::cpuTarget());

  int64_t block = spec.config.at("BLOCK_SIZE");
  int64_t programs = (numel + block - 1) / block;
  TORCH_CHECK(programs <= std::numeric_limits<int32_t>::max(),
              "tile::vector_add: ", numel, " elements need more than 2**31 program instances");
  void *aPtr = aDense.data_ptr(), *bPtr = bDense.data_ptr(), *outPtr = out.data_ptr();
  int32_t n32 = static_cast<int32_t>(numel);
  int64_t n64 = numel;
  void *nArg = spec.config.at("index_bits") == 32 ? static_cast<void *>(&n32) : &n64;
  void *args[] = {&aPtr, &bPtr, &outPtr, nArg};
  // Each task gets at least 32K elements (ATen's own grain): below that, threads cost
  // more than they give.
  int64_t grain = std::max<int64_t>(1, (1 << 15) / block);
  tile::runtime::launchCpu(*kernel, args, Grid{static_cast<int32_t>(programs), 1, 1}, grain,
                           [](int64_t begin, int64_t end, int64_t grainSize, const auto &body) {
                             at::parallel_for(begin, end, grainSize, body);
                           });
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
