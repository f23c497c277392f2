// tile::matmul and tile::matmul_leaky_relu on the CPU: checks, then one kernel compiled
// on first call per (dtypes, config, target) that reads both operands through their
// strides, so transposed and sliced views need no copy.
#include "DTypes.h"
#include "ops/MatmulConfig.h"
#include "runtime/CpuLauncher.h"
#include "runtime/KernelCache.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <limits>
#include <optional>

namespace {

using tile::runtime::Grid;
using tile::runtime::KernelCache;

bool isHalf(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

/// The output dtype, after checking the pair: float32 -> float32, float16/bfloat16 ->
/// themselves or float32, int8 -> int32 (which must be asked for).
at::ScalarType outputDtype(const char *op, at::ScalarType input,
                           std::optional<at::ScalarType> requested, bool epilogue) {
  if (input == at::kChar) {
    TORCH_CHECK_TYPE(!epilogue, op, ": int8 inputs are not supported; leaky_relu needs "
                                    "floating-point inputs (float32, float16, bfloat16)");
    TORCH_CHECK_TYPE(requested == at::kInt, op,
                     ": int8 inputs accumulate in int32; pass out_dtype=torch.int32",
                     requested ? " (got out_dtype=" : "",
                     requested ? c10::toString(*requested) : "", requested ? ")" : "");
    return at::kInt;
  }
  at::ScalarType out = requested.value_or(input);
  TORCH_CHECK_TYPE(out == input || (isHalf(input) && out == at::kFloat), op, ": out_dtype ", out,
                   " is not supported for ", input, " inputs; supported: ", input,
                   isHalf(input) ? " or float32" : "");
  return out;
}

void checkOperands(const char *op, const at::Tensor &a, const at::Tensor &b) {
  TORCH_CHECK(a.device() == b.device(), op, ": tensor a is on ", a.device(), " but b is on ",
              b.device());
  TORCH_CHECK(a.layout() == at::kStrided && b.layout() == at::kStrided, op,
              ": only dense (strided) tensors are supported");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, op, ": a and b must be 2-D matrices, got a of shape ",
              a.sizes(), " and b of shape ", b.sizes());
  TORCH_CHECK(a.size(1) == b.size(0), op, ": inner dimensions differ: a is ", a.sizes(),
              " and b is ", b.sizes(), " (a.shape[1] must equal b.shape[0])");
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), op, ": dtypes differ: a is ",
                   a.scalar_type(), " and b is ", b.scalar_type());
  auto dtype = a.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kFloat || isHalf(dtype) || dtype == at::kChar, op,
                   ": unsupported dtype ", dtype,
                   "; supported: float32, float16, bfloat16, int8 (with out_dtype=torch.int32)");
}

/// The largest element offset the kernel forms for a tensor, as the index width needs it.
int64_t maxOffset(const at::Tensor &t) {
  return (t.size(0) - 1) * t.stride(0) + (t.size(1) - 1) * t.stride(1);
}

at::Tensor matmulCpu(const char *op, const at::Tensor &a, const at::Tensor &b,
                     std::optional<double> negativeSlope, std::optional<at::ScalarType> outDtype) {
  checkOperands(op, a, b);
  at::ScalarType out = outputDtype(op, a.scalar_type(), outDtype, negativeSlope.has_value());
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  // The microkernel reads b a row at a time as one vector load; rows that are not
  // contiguous (b transposed) would be gathered element by element, ~25x slower than
  // copying b once, which costs K*N moves against M*N*K multiply-adds. a is read through
  // its strides, copy-free.
  at::Tensor bRows = b.stride(1) == 1 || n == 1 ? b : b.contiguous();
  at::Tensor c = at::empty({m, n}, a.options().dtype(out));
  if (m == 0 || n == 0)
    return c;

  const auto &target = tile::Target::host();
  tile::ops::KernelSpec spec;
  spec.op = negativeSlope ? "matmul_leaky_relu" : "matmul";
  spec.dtypes = {tile::binding::specDtype(a.scalar_type()), tile::binding::specDtype(out)};
  spec.config = tile::ops::defaultMatmulConfig(target, m, n, k, spec.dtypes[0]);
  constexpr int64_t int32Max = std::numeric_limits<int32_t>::max();
  bool fits32 = std::max({m, n, k, maxOffset(a), maxOffset(bRows), maxOffset(c)}) < int32Max;
  spec.config["index_bits"] = fits32 ? 32 : 64;
  auto kernel = KernelCache::global().get(spec, target);

  int64_t blockM = spec.config.at("BLOCK_M"), blockN = spec.config.at("BLOCK_N");
  int64_t programs = ((m + blockM - 1) / blockM) * ((n + blockN - 1) / blockN);
  TORCH_CHECK(programs <= int32Max, op, ": a ", m, "x", n,
              " result needs more than 2**31 program instances");
  const void *aPtr = a.data_ptr(), *bPtr = bRows.data_ptr();
  void *cPtr = c.data_ptr();
  int64_t wide[9] = {m, n, k, a.stride(0), a.stride(1), bRows.stride(0), bRows.stride(1), c.stride(0),
                     c.stride(1)};
  int32_t narrow[9];
  std::copy(std::begin(wide), std::end(wide), narrow);
  float slope = static_cast<float>(negativeSlope.value_or(0.0));
  void *args[13] = {&aPtr, &bPtr, &cPtr};
  for (int i = 0; i < 9; ++i)
    args[3 + i] = fits32 ? static_cast<void *>(&narrow[i]) : &wide[i];
  args[12] = &slope;
  // A program computes BLOCK_M x BLOCK_N x K multiply-adds; tasks of at least ~1M of
  // them pay for a thread.
  int64_t perProgram = std::max<int64_t>(1, blockM * blockN * std::max<int64_t>(k, 1));
  int64_t grain = std::max<int64_t>(1, (int64_t(1) << 20) / perProgram);
  tile::runtime::launchCpu(*kernel, args, Grid{static_cast<int32_t>(programs), 1, 1}, grain,
                           [](int64_t begin, int64_t end, int64_t grainSize, const auto &body) {
                             at::parallel_for(begin, end, grainSize, body);
                           });
  return c;
}

at::Tensor matmul(const at::Tensor &a, const at::Tensor &b,
                  std::optional<at::ScalarType> outDtype) {
  return matmulCpu("tile::matmul", a, b, std::nullopt, outDtype);
}

at::Tensor matmulLeakyRelu(const at::Tensor &a, const at::Tensor &b, double negativeSlope,
                           std::optional<at::ScalarType> outDtype) {
  return matmulCpu("tile::matmul_leaky_relu", a, b, negativeSlope, outDtype);
}

} // namespace

TORCH_LIBRARY_IMPL(tile, CPU, m) {
  m.impl("matmul", matmul);
  m.impl("matmul_leaky_relu", matmulLeakyRelu);
}
