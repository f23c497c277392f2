#include "tile/Conversion/BlockAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::tile;

Value mlir::tile::validLanes(ConversionPatternRewriter &rewriter, Location loc,
                                  const LaneBounds &bounds, unsigned dim, int64_t size,
                                  llvm::function_ref<Value(Value)> remap) {
  Type i64 = rewriter.getI64Type();
  Value count = arith::ConstantIntOp::create(rewriter, loc, i64, size);
  auto converted = [&](Value v) { return rewriter.getRemappedValue(v); };
  for (const auto &bound : bounds.upper[dim]) {
    Value limit = remap ? bound.materialize(rewriter, loc, remap)
                        : bound.materialize(rewriter, loc, converted);
    count = arith::MinSIOp::create(rewriter, loc, count, limit);
  }
  return arith::MaxSIOp::create(rewriter, loc, count,
                                arith::ConstantIntOp::create(rewriter, loc, i64, 0));
}

Value mlir::tile::conjunction(OpBuilder &builder, Location loc, ArrayRef<Value> terms) {
  Value all;
  for (Value term : terms)
    if (term)
      all = all ? arith::AndIOp::create(builder, loc, all, term) : term;
  return all;
}

Value mlir::tile::offsetBase(ConversionPatternRewriter &rewriter, Location loc,
                                  const AffineLanes &lanes, Type elementType) {
  Value offset = lanes.offset.materialize(rewriter, loc,
                                          [&](Value v) { return rewriter.getRemappedValue(v); });
  Value base = rewriter.getRemappedValue(lanes.basePtr);
  return LLVM::GEPOp::create(rewriter, loc, base.getType(), elementType, base,
                             ArrayRef<LLVM::GEPArg>{offset});
}


unsigned mlir::tile::elementBytes(Type type) {
  if (isa<LLVM::LLVMPointerType>(type))
    return 8;
  return std::max(1u, type.getIntOrFloatBitWidth() / 8);
}

Value mlir::tile::allOnMask(OpBuilder &builder, Location loc, ArrayRef<int64_t> shape) {
  return arith::ConstantOp::create(
      builder, loc, DenseElementsAttr::get(VectorType::get(shape, builder.getI1Type()), true));
}
