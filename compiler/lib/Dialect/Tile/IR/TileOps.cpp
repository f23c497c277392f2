#include "tile/Dialect/Tile/IR/TileDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::tile;

LogicalResult MakeRangeOp::verify() {
  int64_t start = getStart(), end = getEnd();
  if (end <= start)
    return emitOpError("needs end > start, got start = ") << start << ", end = " << end;
  auto type = getResult().getType();
  if (type.getRank() != 1 || type.getDimSize(0) != end - start)
    return emitOpError("result must be a 1-D tensor of end - start = ")
           << end - start << " elements, got " << type;
  return success();
}

// The types of mask and `other` follow from the pointer type, so the textual form
// only spells the pointer type: `tile.load %p, %mask, %other : tensor<8x!tile.ptr<f32>>`.
static Type maskTypeFor(Type ptrType) {
  return withElementType(ptrType, IntegerType::get(ptrType.getContext(), 1));
}

static Type valueTypeFor(Type ptrType) {
  return withElementType(ptrType, getPointeeType(ptrType));
}

static LogicalResult verifyMaskAndValue(Operation *op, Type ptrType, Value mask,
                                        Type valueType, StringRef valueName) {
  Type pointee = getPointeeType(ptrType);
  if (valueType != valueTypeFor(ptrType))
    return op->emitOpError() << valueName << " type " << valueType
                             << " does not match pointer type " << ptrType
                             << " (expected " << valueTypeFor(ptrType) << ")";
  if (!pointee)
    return op->emitOpError("pointer operand has no pointee type");
  if (mask && mask.getType() != maskTypeFor(ptrType))
    return op->emitOpError() << "mask type " << mask.getType() << " does not match pointer type "
                             << ptrType << " (expected " << maskTypeFor(ptrType) << ")";
  return success();
}

void LoadOp::build(OpBuilder &builder, OperationState &state, Value ptr, Value mask,
                   Value other) {
  build(builder, state, valueTypeFor(ptr.getType()), ptr, mask, other);
}

LogicalResult LoadOp::verify() {
  if (getOther() && !getMask())
    return emitOpError("`other` is only meaningful with a mask");
  if (getOther() && getOther().getType() != getResult().getType())
    return emitOpError("`other` type ") << getOther().getType()
                                        << " does not match result type " << getResult().getType();
  return verifyMaskAndValue(*this, getPtr().getType(), getMask(), getResult().getType(),
                            "result");
}

ParseResult LoadOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand, 3> operands;
  Type ptrType;
  if (parser.parseOperandList(operands) || parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(ptrType))
    return failure();
  if (operands.empty() || operands.size() > 3)
    return parser.emitError(parser.getNameLoc(), "expected ptr [, mask [, other]]");
  SmallVector<Type, 3> types = {ptrType, maskTypeFor(ptrType), valueTypeFor(ptrType)};
  if (parser.resolveOperands(operands, ArrayRef(types).take_front(operands.size()),
                             parser.getNameLoc(), result.operands))
    return failure();
  int32_t hasMask = operands.size() > 1, hasOther = operands.size() > 2;
  result.getOrAddProperties<Properties>().operandSegmentSizes = {1, hasMask, hasOther};
  result.addTypes(valueTypeFor(ptrType));
  return success();
}

void LoadOp::print(OpAsmPrinter &p) {
  p << ' ' << getOperation()->getOperands();
  p.printOptionalAttrDict((*this)->getAttrs(), {getOperandSegmentSizesAttrName()});
  p << " : " << getPtr().getType();
}

LogicalResult StoreOp::verify() {
  return verifyMaskAndValue(*this, getPtr().getType(), getMask(), getValue().getType(), "value");
}

ParseResult StoreOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand, 3> operands;
  Type ptrType;
  if (parser.parseOperandList(operands) || parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(ptrType))
    return failure();
  if (operands.size() < 2 || operands.size() > 3)
    return parser.emitError(parser.getNameLoc(), "expected ptr, value [, mask]");
  SmallVector<Type, 3> types = {ptrType, valueTypeFor(ptrType), maskTypeFor(ptrType)};
  return parser.resolveOperands(operands, ArrayRef(types).take_front(operands.size()),
                                parser.getNameLoc(), result.operands);
}

void StoreOp::print(OpAsmPrinter &p) {
  p << ' ' << getOperation()->getOperands();
  p.printOptionalAttrDict((*this)->getAttrs());
  p << " : " << getPtr().getType();
}

#define GET_OP_CLASSES
#include "tile/Dialect/Tile/IR/TileOps.cpp.inc"
