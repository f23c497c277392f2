// What every device's matmul binding does before its launch: checks with named
// errors, the output, the kernel spec for the target and the packed kernel arguments.
#ifndef TILE_TORCH_MATMULCALL_H
#define TILE_TORCH_MATMULCALL_H

#include "ops/KernelSpec.h"
#include "tile/Compiler/Target.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>

namespace tile::binding {

/// One prepared call: `args` points into this object, so it stays where it was made.
struct MatmulCall {
  at::Tensor a, b, c;
  at::Tensor bias; ///< undefined without one
  Target target;
  ops::KernelSpec spec;
  int64_t programs = 0; ///< program instances, one per BLOCK_M x BLOCK_N block of c
  const void *aPtr = nullptr, *bPtr = nullptr;
  void *cPtr = nullptr;
  const void *biasPtr = nullptr;
  int64_t wide[10] = {}; ///< M, N, K, the six strides of a, b, c, the bias's stride
  int32_t narrow[10] = {};
  float slope = 0;
  void *args[15] = {};

  /// The spec with `knobs` laid over this call's config (index_bits stays; num_stages,
  /// when left out, lowered to what fits the tile sizes), and the program instances it
  /// needs; throws std::invalid_argument for an unknown knob.
  std::pair<ops::KernelSpec, int64_t> withConfig(const std::map<std::string, int64_t> &knobs) const;
};

/// Checks the operands (raising errors that name the problem), allocates c, and builds
/// the spec (the target family's default config for the shape) and the arguments. The
/// result has programs == 0 when c is empty. `contiguousRowsOfB` copies a b whose rows
/// are not contiguous (the CPU microkernel loads b by rows). A bias (1-D, length N, in
/// the input or the output dtype) is added to the accumulator before the epilogue.
std::unique_ptr<MatmulCall> prepareMatmul(const char *op, const at::Tensor &a, const at::Tensor &b,
                                          std::optional<double> negativeSlope,
                                          std::optional<at::ScalarType> outDtype,
                                          const std::optional<at::Tensor> &bias,
                                          const Target &target, bool contiguousRowsOfB);

} // namespace tile::binding

#endif
