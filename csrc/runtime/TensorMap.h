// Tensor maps: the 128-byte descriptors through which Hopper's bulk tensor copies (TMA)
// read a tile of a matrix in global memory into shared memory, swizzled as the warpgroup
// MMA reads it. The driver encodes them on the host (cuTensorMapEncodeTiled) and a kernel
// takes each one as a parameter. Encoding costs a driver call, so maps are cached per
// (address, sizes, strides, box, swizzle, element type): a repeated call finds its map.
#ifndef TILE_RUNTIME_TENSORMAP_H
#define TILE_RUNTIME_TENSORMAP_H

#include "runtime/GpuDriver.h"
#include "runtime/StridedOperand.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace tile::runtime {

/// Element types a tensor map names (CUtensorMapDataType).
enum class TensorMapElement : int { U8 = 0, F16 = 6, F32 = 7, BF16 = 9 };
/// Bytes per element of a map's element type (0 for a value outside the enum).
int64_t tensorMapElementBytes(TensorMapElement element);

/// One 2-D tiled map: the matrix, in the driver's order (dimension 0 the contiguous one),
/// and the box one copy moves.
struct TensorMapShape {
  uint64_t address = 0;
  TensorMapElement element = TensorMapElement::F16;
  int64_t elementBytes = 2;
  uint64_t sizes[2] = {0, 0}; ///< {contiguous, outer} elements
  uint64_t outerStrideBytes = 0;
  uint32_t box[2] = {0, 0}; ///< {contiguous, outer} elements
  int swizzleBytes = 128;   ///< 0 (none), 32, 64 or 128

  auto tied() const {
    return std::tie(address, element, elementBytes, sizes[0], sizes[1], outerStrideBytes, box[0],
                    box[1], swizzleBytes);
  }
  bool operator<(const TensorMapShape &other) const { return tied() < other.tied(); }
};

/// The map of a 2-D operand whose dimension `contiguousDim` has stride 1, copied in boxes
/// of `box` elements ({contiguous, outer}), or the reason none describes it: a base that
/// is not 16-byte aligned, a contiguous dimension whose stride is not 1 (a transposed
/// view), an outer stride that is not a multiple of 16 bytes, sizes or strides beyond the
/// map's fields, or a box the swizzle cannot take. A kernel then copies with cp.async.
struct TensorMapPlan {
  TensorMapShape shape;
  std::string refusal; ///< empty when `shape` describes the operand
};
TensorMapPlan planTensorMap(const StridedOperand &operand, int contiguousDim, TensorMapElement element,
                            const uint32_t box[2], int swizzleBytes);

/// The encoded descriptor, as a kernel parameter takes it (64-byte aligned).
struct alignas(64) EncodedTensorMap {
  unsigned char bytes[128] = {};
};

/// Encoded maps by shape. The driver's encoder (GpuDriver::tensorMapEncodeTiled) runs once
/// per shape; a full cache starts over, so a long run over ever new buffers stays bounded.
class TensorMapCache {
public:
  explicit TensorMapCache(const GpuDriver &driver, size_t capacity = 4096)
      : driver_(driver), capacity_(capacity) {}

  /// The map for `shape` (a copy: a launch passes its 128 bytes by value); throws
  /// std::runtime_error naming the driver's status where the driver refuses it.
  EncodedTensorMap get(const TensorMapShape &shape);
  /// Maps encoded so far (a hit encodes none).
  int64_t encodes() const { return encodes_; }

private:
  const GpuDriver &driver_;
  size_t capacity_;
  std::mutex mutex_;
  std::map<TensorMapShape, EncodedTensorMap> maps_;
  int64_t encodes_ = 0;
};

} // namespace tile::runtime

#endif
