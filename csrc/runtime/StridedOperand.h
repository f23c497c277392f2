#ifndef TILE_RUNTIME_STRIDEDOPERAND_H
#define TILE_RUNTIME_STRIDEDOPERAND_H

#include <cstdint>

namespace tile::runtime {

/// A 1-D or 2-D strided tensor as a kernel reads it.
struct StridedOperand {
  const void *data = nullptr;
  int64_t dims = 2;
  int64_t sizes[2] = {1, 1};
  int64_t strides[2] = {0, 0};
  int64_t elementBytes = 1;

  /// The largest element offset the kernel forms for it (0 when it is empty).
  int64_t maxOffset() const;
};

} // namespace tile::runtime

#endif
