#include "tile/Conversion/ElementwiseTypeLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace {

struct ElementwiseTypeLowering : ConversionPattern {
  ElementwiseTypeLowering(const TypeConverter &converter, MLIRContext *ctx)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()))
      return failure();
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      auto type = dyn_cast_or_null<VectorType>(getTypeConverter()->convertType(constant.getType()));
      if (!dense || !type)
        return failure();
      if (dense.isSplat())
        rewriter.replaceOpWithNewOp<arith::ConstantOp>(
            op, type, DenseElementsAttr::get(type, dense.getSplatValue<Attribute>()));
      else if (dense.getNumElements() == type.getNumElements())
        rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, dense.reshape(type));
      else
        return rewriter.notifyMatchFailure(op, "a non-splat constant cannot be distributed");
      return success();
    }
    FailureOr<Operation *> converted = convertOpResultTypes(op, operands, *getTypeConverter(), rewriter);
    if (failed(converted))
      return failure();
    rewriter.replaceOp(op, (*converted)->getResults());
    return success();
  }
};

} // namespace

void mlir::tile::populateElementwiseTypeLowering(const TypeConverter &converter,
                                                 RewritePatternSet &patterns) {
  patterns.add<ElementwiseTypeLowering>(converter, patterns.getContext());
}
