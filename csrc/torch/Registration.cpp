// The op schemas, defined once for every backend.
#include <torch/library.h>

// pt2_compliant: torch.library.opcheck passes for every op (tests/python/test_pt2.py),
// with the fake kernels and autograd formulas of python/torch_tile/ops.py.
TORCH_LIBRARY(tile, m) {
  const std::vector<at::Tag> tags = {at::Tag::pt2_compliant_tag};
  m.def("vector_add(Tensor a, Tensor b) -> Tensor", tags);
  m.def("matmul(Tensor a, Tensor b, *, ScalarType? out_dtype=None, Tensor? bias=None) -> Tensor",
        tags);
  m.def("matmul_leaky_relu(Tensor a, Tensor b, float negative_slope=0.01, *, "
        "ScalarType? out_dtype=None, Tensor? bias=None) -> Tensor",
        tags);
  // leaky_relu's backward in the epilogue: (a @ b) where activation > 0, else (a @ b) *
  // negative_slope; activation is leaky_relu's input or, for a slope >= 0, its output.
  m.def("matmul_leaky_relu_backward(Tensor a, Tensor b, Tensor activation, "
        "float negative_slope=0.01, *, ScalarType? out_dtype=None) -> Tensor",
        tags);
  // The slope as a 0-d tensor (a graph input under dynamic=True), read at run time.
  m.def("matmul_leaky_relu.Tensor(Tensor a, Tensor b, Tensor negative_slope, *, "
        "ScalarType? out_dtype=None, Tensor? bias=None) -> Tensor",
        tags);
}
