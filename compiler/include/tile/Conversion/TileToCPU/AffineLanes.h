#ifndef TILE_CONVERSION_TILETOCPU_AFFINELANES_H
#define TILE_CONVERSION_TILETOCPU_AFFINELANES_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::tile {

/// What a 1-D integer or pointer tensor is, when it is affine in the lane index i:
///   lane(i) = basePtr + sum(coefficient * term) + constant + stride * i
/// `terms` are scalar integer values of the original tile IR; `basePtr` is the scalar
/// `!tile.ptr` of a pointer tensor and null for integer tensors.
/// The CPU lowering turns a stride-1 pointer tensor into one contiguous vector access.
struct AffineLanes {
  Value basePtr;
  llvm::SmallVector<std::pair<Value, int64_t>, 4> terms;
  int64_t constant = 0;
  int64_t stride = 0;
};

/// Follows splat, make_range, addptr, arith.{addi,muli,extsi} and integer constants;
/// gives up (std::nullopt) on anything else.
std::optional<AffineLanes> analyzeAffineLanes(Value value);

} // namespace mlir::tile

#endif
