// LibTorch, no Python: load the torch-tile plugin and call its three ops through the
// dispatcher, checking each against ATen.
//
//   tile_ops_from_cpp /path/to/libtorch_tile_ops.so
//
// Loading the library runs its TORCH_LIBRARY registrations; the ops are then found by
// name like any other, with their schemas.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <dlfcn.h>

#include <cstdio>
#include <optional>

namespace {

bool close(const at::Tensor &got, const at::Tensor &want, double tolerance, const char *what) {
  double error = ((got.to(at::kDouble) - want.to(at::kDouble)).norm() /
                  want.to(at::kDouble).norm().clamp_min(1e-30))
                     .item<double>();
  bool ok = error <= tolerance && got.sizes() == want.sizes() && got.dtype() == want.dtype();
  std::printf("%-28s %-10s relative error %.2e  %s\n", what, ok ? "ok" : "MISMATCH", error,
              c10::toString(got.scalar_type()));
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s /path/to/libtorch_tile_ops.so\n", argv[0]);
    return 2;
  }
  if (!::dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], ::dlerror());
    return 2;
  }
  auto &dispatcher = c10::Dispatcher::singleton();
  auto vectorAdd = dispatcher.findSchemaOrThrow("tile::vector_add", "")
                       .typed<at::Tensor(const at::Tensor &, const at::Tensor &)>();
  // The schemas' keyword-only arguments (out_dtype, bias) are positional here.
  using Bias = const std::optional<at::Tensor> &;
  auto matmul = dispatcher.findSchemaOrThrow("tile::matmul", "")
                    .typed<at::Tensor(const at::Tensor &, const at::Tensor &,
                                      std::optional<at::ScalarType>, Bias)>();
  auto matmulLeakyRelu =
      dispatcher.findSchemaOrThrow("tile::matmul_leaky_relu", "")
          .typed<at::Tensor(const at::Tensor &, const at::Tensor &, double,
                            std::optional<at::ScalarType>, Bias)>();

  at::manual_seed(0);
  bool ok = true;
  at::Tensor x = at::randn({100003}), y = at::randn({100003});
  ok &= close(vectorAdd.call(x, y), x + y, 0.0, "vector_add float32");
  at::Tensor a = at::randn({257, 129}), b = at::randn({129, 65});
  ok &= close(matmul.call(a, b, std::nullopt, std::nullopt), at::matmul(a, b), 1e-5,
              "matmul float32");
  at::Tensor ah = a.to(at::kHalf), bh = b.to(at::kHalf);
  ok &= close(matmul.call(ah, bh, at::kFloat, std::nullopt),
              at::matmul(ah.to(at::kFloat), bh.to(at::kFloat)), 1e-5, "matmul float16 -> float32");
  ok &= close(matmulLeakyRelu.call(a.t().contiguous().t(), b, 0.2, std::nullopt, std::nullopt),
              at::leaky_relu(at::matmul(a, b), 0.2), 1e-5, "matmul_leaky_relu float32");
  at::Tensor bias = at::randn({65});
  ok &= close(matmulLeakyRelu.call(a, b, 0.2, std::nullopt, bias),
              at::leaky_relu(at::addmm(bias, a, b), 0.2), 1e-5, "matmul_leaky_relu + bias");
  try {
    matmul.call(a, a, std::nullopt, std::nullopt);
    std::printf("bad shapes: no error\n");
    ok = false;
  } catch (const c10::Error &error) {
    std::printf("bad shapes raise: %s\n", error.what_without_backtrace());
  }
  std::printf("%s\n", ok ? "all ops match ATen" : "MISMATCH");
  return ok ? 0 : 1;
}
