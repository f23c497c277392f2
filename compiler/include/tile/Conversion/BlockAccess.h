#ifndef TILE_CONVERSION_BLOCKACCESS_H
#define TILE_CONVERSION_BLOCKACCESS_H

#include "tile/Analysis/AffineLanes.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tile {

/// Bytes of one element in memory (a pointer is 8); the natural alignment of an access.
unsigned elementBytes(Type type);

/// An i1 vector of `shape` with every lane on: the mask of an unmasked access.
Value allOnMask(OpBuilder &builder, Location loc, ArrayRef<int64_t> shape);

/// How many leading lanes of dimension `dim` (of size `size`) the bounds switch on, as i64.
/// `remap` gives the value that stands for each scalar of the bounds (by default, its
/// converted value).
Value validLanes(ConversionPatternRewriter &rewriter, Location loc, const LaneBounds &bounds,
                 unsigned dim, int64_t size, llvm::function_ref<Value(Value)> remap = {});

/// `basePtr + offset` of analyzed lanes, as a pointer (of the converted base's type) to
/// `elementType`.
Value offsetBase(ConversionPatternRewriter &rewriter, Location loc, const AffineLanes &lanes,
                 Type elementType);

/// The i1 `and` of the non-null terms; null (known true) when all are null.
Value conjunction(OpBuilder &builder, Location loc, ArrayRef<Value> terms);

} // namespace mlir::tile

#endif
