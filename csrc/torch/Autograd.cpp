// Autograd of the three ops, in C++ so that calls that need no gradient pay nothing
// for it (a Python formula costs microseconds on every call). The matmul backward runs
// on tile::matmul itself; the leaky_relu backward takes the sign of the pre-activation
// from the output when the slope is >= 0 (as torch's own backward does) and recomputes
// it otherwise.
#include "OpHandles.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include <optional>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using tile::binding::OptionalTensor;
using tile::binding::recordsGradient;

at::Tensor callMatmul(const at::Tensor &a, const at::Tensor &b,
                      std::optional<at::ScalarType> outDtype, const OptionalTensor &bias) {
  return tile::binding::matmulOp().call(a, b, outDtype, bias);
}

/// grad_a = grad_z @ b.T and grad_b = a.T @ grad_z, in the inputs' dtype, and grad_bias
/// = grad_z summed over the rows (in float32, then the bias's dtype).
variable_list matmulGrads(AutogradContext *ctx, const at::Tensor &a, const at::Tensor &b,
                          const at::Tensor &bias, const at::Tensor &gradZ) {
  at::Tensor gradA, gradB, gradBias;
  at::Tensor grad = gradZ.to(a.scalar_type());
  if (ctx->needs_input_grad(0))
    gradA = callMatmul(grad, b.t(), std::nullopt, std::nullopt);
  if (ctx->needs_input_grad(1))
    gradB = callMatmul(a.t(), grad, std::nullopt, std::nullopt);
  // needs_input_grad counts the tensor inputs only: a, b, then the bias where given.
  if (bias.defined() && ctx->needs_input_grad(2))
    gradBias = gradZ.sum(0, /*keepdim=*/false, at::kFloat).to(bias.scalar_type());
  return {gradA, gradB, gradBias};
}

struct VectorAddFunction : torch::autograd::Function<VectorAddFunction> {
  static at::Tensor forward(AutogradContext *, const at::Tensor &a, const at::Tensor &b) {
    at::AutoDispatchBelowADInplaceOrView guard;
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("tile::vector_add", "")
                         .typed<at::Tensor(const at::Tensor &, const at::Tensor &)>();
    return op.call(a, b);
  }
  static variable_list backward(AutogradContext *, variable_list grads) {
    return {grads[0], grads[0]};
  }
};

struct MatmulFunction : torch::autograd::Function<MatmulFunction> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &a, const at::Tensor &b,
                            std::optional<at::ScalarType> outDtype, const OptionalTensor &bias) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({a, b, bias.value_or(at::Tensor())});
    return callMatmul(a, b, outDtype, bias);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    variable_list grad = matmulGrads(ctx, saved[0], saved[1], saved[2], grads[0]);
    return {grad[0], grad[1], at::Tensor() /* out_dtype */, grad[2]};
  }
};

struct MatmulLeakyReluFunction : torch::autograd::Function<MatmulLeakyReluFunction> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &a, const at::Tensor &b,
                            double slope, std::optional<at::ScalarType> outDtype,
                            const OptionalTensor &bias) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = tile::binding::leakyReluOp().call(a, b, slope, outDtype, bias);
    ctx->saved_data["slope"] = slope;
    ctx->save_for_backward({a, b, out, bias.value_or(at::Tensor())});
    return out;
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1], &out = saved[2], &bias = saved[3];
    double slope = ctx->saved_data["slope"].toDouble();
    at::Tensor positive =
        slope >= 0 ? out.gt(0)
                   : callMatmul(a, b, at::kFloat, bias.defined() ? OptionalTensor(bias)
                                                                 : std::nullopt).gt(0);
    at::Tensor gradZ = at::where(positive, grads[0], grads[0].mul(slope));
    variable_list grad = matmulGrads(ctx, a, b, bias, gradZ);
    return {grad[0], grad[1], at::Tensor() /* negative_slope */, at::Tensor() /* out_dtype */,
            grad[2]};
  }
};

at::Tensor vectorAdd(const at::Tensor &a, const at::Tensor &b) {
  if (!recordsGradient(a, b))
    return VectorAddFunction::forward(nullptr, a, b);
  return VectorAddFunction::apply(a, b);
}

at::Tensor matmul(const at::Tensor &a, const at::Tensor &b, std::optional<at::ScalarType> outDtype,
                  const OptionalTensor &bias) {
  if (!recordsGradient(a, b, bias)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return callMatmul(a, b, outDtype, bias);
  }
  return MatmulFunction::apply(a, b, outDtype, bias);
}

at::Tensor matmulLeakyRelu(const at::Tensor &a, const at::Tensor &b, double slope,
                           std::optional<at::ScalarType> outDtype, const OptionalTensor &bias) {
  if (!recordsGradient(a, b, bias)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return tile::binding::leakyReluOp().call(a, b, slope, outDtype, bias);
  }
  return MatmulLeakyReluFunction::apply(a, b, slope, outDtype, bias);
}

} // namespace

TORCH_LIBRARY_IMPL(tile, Autograd, m) {
  m.impl("vector_add", vectorAdd);
  m.impl("matmul", matmul);
  m.impl("matmul_leaky_relu", matmulLeakyRelu);
}
