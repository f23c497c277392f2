// tile::matmul_leaky_relu.Tensor: the slope as a 0-d tensor, as compiled graphs hold a
// float attribute that is a graph input (torch.compile with dynamic=True). It is read once
// per call and passed to the kernel as its argument, so that no value of it compiles
// anything again; the rest, autograd included, is the float overload's.
#include "OpHandles.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/autograd.h>
#include <torch/library.h>

namespace {

using tile::binding::OptionalTensor;

void checkSlope(const at::Tensor &negativeSlope) {
  TORCH_CHECK_VALUE(negativeSlope.dim() == 0,
                    "tile::matmul_leaky_relu: negative_slope must be a 0-d tensor, got shape ",
                    negativeSlope.sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(negativeSlope.scalar_type()),
                   "tile::matmul_leaky_relu: negative_slope must be a floating-point tensor, got ",
                   negativeSlope.scalar_type());
}

double slopeOf(const at::Tensor &negativeSlope) {
  checkSlope(negativeSlope);
  // A GPU tensor costs a synchronization here; the graphs that call this hold it on the CPU.
  return negativeSlope.item<double>();
}

/// The kernels of every backend.
at::Tensor matmulLeakyReluTensorSlope(const at::Tensor &a, const at::Tensor &b,
                                      const at::Tensor &negativeSlope,
                                      std::optional<at::ScalarType> outDtype,
                                      const OptionalTensor &bias) {
  return tile::binding::leakyReluOp().call(a, b, slopeOf(negativeSlope), outDtype, bias);
}

/// Autograd. A call that records a gradient is composed of tile::matmul (float32 out,
/// bias included) and leaky_relu in aten ops on the slope tensor, the same arithmetic as
/// the fused kernel's: its graph then traces with fake tensors too, where the slope has no
/// value. Any other call goes below autograd untouched, to the fused kernel (or the fake
/// kernel when tracing).
at::Tensor matmulLeakyReluTensorSlopeAutograd(const at::Tensor &a, const at::Tensor &b,
                                              const at::Tensor &negativeSlope,
                                              std::optional<at::ScalarType> outDtype,
                                              const OptionalTensor &bias) {
  bool records = tile::binding::recordsGradient(a, b, bias);
  at::ScalarType out = outDtype.value_or(a.scalar_type());
  // What the fused kernel refuses, it refuses with its own message.
  bool composable = at::isFloatingType(a.scalar_type()) && (out == a.scalar_type() || out == at::kFloat);
  if (records && !composable)
    return tile::binding::leakyReluOp().call(a, b, slopeOf(negativeSlope), outDtype, bias);
  if (records) {
    checkSlope(negativeSlope);
    at::Tensor z = tile::binding::matmulOp().call(a, b, at::kFloat, bias);
    // z times (1 or the slope): its gradient is the slope's multiple only where z <= 0,
    // as torch's leaky_relu backward (a NaN slope spoils no other element's gradient).
    at::Tensor factor = at::where(z.gt(0), at::ones({}, z.options()), negativeSlope.to(z.device(), at::kFloat));
    return z.mul(factor).to(out);
  }
  static auto self = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("tile::matmul_leaky_relu", "Tensor")
                         .typed<at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &,
                                           std::optional<at::ScalarType>, const OptionalTensor &)>();
  at::AutoDispatchBelowADInplaceOrView guard;
  return self.call(a, b, negativeSlope, outDtype, bias);
}

} // namespace

// Autograd goes through the float overload's formula; the backends are named so that
// calls below autograd (inference mode, compiled code) reach the same function.
TORCH_LIBRARY_IMPL(tile, Autograd, m) {
  m.impl("matmul_leaky_relu.Tensor", matmulLeakyReluTensorSlopeAutograd);
}
TORCH_LIBRARY_IMPL(tile, CPU, m) {
  m.impl("matmul_leaky_relu.Tensor", matmulLeakyReluTensorSlope);
}
TORCH_LIBRARY_IMPL(tile, CUDA, m) {
  m.impl("matmul_leaky_relu.Tensor", matmulLeakyReluTensorSlope);
}
