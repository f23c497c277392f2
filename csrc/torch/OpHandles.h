// The tile ops as the binding calls them back through the dispatcher (autograd formulas,
// overloads that forward to another), looked up once.
#ifndef TILE_TORCH_OPHANDLES_H
#define TILE_TORCH_OPHANDLES_H

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>

#include <optional>

namespace tile::binding {

using OptionalTensor = std::optional<at::Tensor>;

/// tile::matmul(a, b, out_dtype, bias).
inline const c10::TypedOperatorHandle<at::Tensor(const at::Tensor &, const at::Tensor &,
                                                 std::optional<at::ScalarType>, const OptionalTensor &)> &
matmulOp() {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("tile::matmul", "")
                       .typed<at::Tensor(const at::Tensor &, const at::Tensor &,
                                         std::optional<at::ScalarType>, const OptionalTensor &)>();
  return op;
}

/// tile::matmul_leaky_relu(a, b, negative_slope, out_dtype, bias), the float overload.
inline const c10::TypedOperatorHandle<at::Tensor(const at::Tensor &, const at::Tensor &, double,
                                                 std::optional<at::ScalarType>, const OptionalTensor &)> &
leakyReluOp() {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("tile::matmul_leaky_relu", "")
                       .typed<at::Tensor(const at::Tensor &, const at::Tensor &, double,
                                         std::optional<at::ScalarType>, const OptionalTensor &)>();
  return op;
}

/// Whether a call records a graph; without one, an op runs below autograd directly.
inline bool recordsGradient(const at::Tensor &a, const at::Tensor &b,
                            const OptionalTensor &bias = std::nullopt) {
  return at::GradMode::is_enabled() &&
         (a.requires_grad() || b.requires_grad() || (bias && bias->requires_grad()));
}

} // namespace tile::binding

#endif
