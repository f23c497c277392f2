// The op schemas, defined once for every backend.
#include <torch/library.h>

TORCH_LIBRARY(tile, m) {
  m.def("vector_add(Tensor a, Tensor b) -> Tensor");
  m.def("matmul(Tensor a, Tensor b, *, ScalarType? out_dtype=None) -> Tensor");
  m.def("matmul_leaky_relu(Tensor a, Tensor b, float negative_slope=0.01, *, "
        "ScalarType? out_dtype=None) -> Tensor");
}
