#ifndef TILE_TORCH_VECTORADDCHECKS_H
#define TILE_TORCH_VECTORADDCHECKS_H

#include <ATen/core/Tensor.h>

namespace tile::binding {

/// Same device, dtype (float32, float16, bfloat16) and shape, dense layout; raises an
/// error naming the problem otherwise.
void checkVectorAddInputs(const at::Tensor &a, const at::Tensor &b);

} // namespace tile::binding

#endif
