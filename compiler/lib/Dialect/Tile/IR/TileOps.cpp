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
  if (!getPointeeType(ptrType))
    return op->emitOpError("pointer operand has no pointee type");
  if (valueType != valueTypeFor(ptrType))
    return op->emitOpError() << valueName << " type " << valueType
                             << " does not match pointer type " << ptrType
                             << " (expected " << valueTypeFor(ptrType) << ")";
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

/// Parses `%ptr, %a [, %b] attr-dict : <ptr type>`: the type of each operand after the
/// pointer follows from the pointer type, by `typesAfterPtr` in order. Returns how many
/// operands were present.
static FailureOr<size_t> parsePointerOperands(OpAsmParser &parser, OperationState &result,
                                              size_t minCount,
                                              ArrayRef<Type (*)(Type)> typesAfterPtr,
                                              StringRef expected) {
  SmallVector<OpAsmParser::UnresolvedOperand, 3> operands;
  Type ptrType;
  if (parser.parseOperandList(operands) || parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(ptrType))
    return failure();
  if (operands.size() < minCount || operands.size() > typesAfterPtr.size() + 1)
    return parser.emitError(parser.getNameLoc(), "expected ") << expected;
  SmallVector<Type, 3> types = {ptrType};
  for (auto typeFor : typesAfterPtr)
    types.push_back(typeFor(ptrType));
  if (parser.resolveOperands(operands, ArrayRef(types).take_front(operands.size()),
                             parser.getNameLoc(), result.operands))
    return failure();
  return operands.size();
}

ParseResult LoadOp::parse(OpAsmParser &parser, OperationState &result) {
  FailureOr<size_t> count = parsePointerOperands(parser, result, 1, {maskTypeFor, valueTypeFor},
                                                 "ptr [, mask [, other]]");
  if (failed(count))
    return failure();
  int32_t hasMask = *count > 1, hasOther = *count > 2;
  result.getOrAddProperties<Properties>().operandSegmentSizes = {1, hasMask, hasOther};
  result.addTypes(valueTypeFor(result.operands[0].getType()));
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

/// Flags are 32-bit integers: the GPU stores and polls them with b32 accesses.
static LogicalResult verifyFlag(Operation *op, PointerType flag) {
  if (!flag.getPointeeType().isInteger(32))
    return op->emitOpError("flags are i32, got a pointer to ") << flag.getPointeeType();
  return success();
}

LogicalResult SignalFlagOp::verify() { return verifyFlag(*this, getFlag().getType()); }

LogicalResult WaitFlagOp::verify() { return verifyFlag(*this, getFlag().getType()); }

ParseResult StoreOp::parse(OpAsmParser &parser, OperationState &result) {
  return failure(failed(
      parsePointerOperands(parser, result, 2, {valueTypeFor, maskTypeFor}, "ptr, value [, mask]")));
}

void StoreOp::print(OpAsmPrinter &p) {
  p << ' ' << getOperation()->getOperands();
  p.printOptionalAttrDict((*this)->getAttrs());
  p << " : " << getPtr().getType();
}

LogicalResult ExpandDimsOp::verify() {
  auto src = getSrc().getType(), result = getResult().getType();
  uint32_t axis = getAxis();
  if (axis > src.getRank())
    return emitOpError("axis ") << axis << " is out of range for a rank-" << src.getRank()
                                << " tensor (expected 0.." << src.getRank() << ")";
  SmallVector<int64_t> shape(src.getShape());
  shape.insert(shape.begin() + axis, 1);
  auto expected = RankedTensorType::get(shape, src.getElementType(), src.getEncoding());
  if (result != expected)
    return emitOpError("result type ") << result << " is not " << src << " with a size-1 axis "
                                       << axis << " (expected " << expected << ")";
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto src = getSrc().getType(), result = getResult().getType();
  if (src.getElementType() != result.getElementType())
    return emitOpError("element type changes from ")
           << src.getElementType() << " to " << result.getElementType();
  if (src.getRank() != result.getRank())
    return emitOpError("source rank ") << src.getRank() << " differs from result rank "
                                       << result.getRank() << "; use tile.expand_dims first";
  for (auto [dim, from, to] : llvm::enumerate(src.getShape(), result.getShape()))
    if (from != to && from != 1)
      return emitOpError("dimension ") << dim << " of size " << from << " cannot broadcast to "
                                       << to << " (only size-1 dimensions stretch)";
  return success();
}

/// The accumulator element type that a dot of `input` elements must use.
static Type accumulatorTypeFor(Type input) {
  if (input.isInteger(8))
    return IntegerType::get(input.getContext(), 32);
  return Float32Type::get(input.getContext());
}

LogicalResult DotOp::verify() {
  auto a = getA().getType(), b = getB().getType(), acc = getAcc().getType();
  if (a.getRank() != 2 || b.getRank() != 2 || acc.getRank() != 2)
    return emitOpError("operands must be 2-D, got ") << a << ", " << b << " and " << acc;
  if (a.getElementType() != b.getElementType())
    return emitOpError("a and b have different element types: ")
           << a.getElementType() << " and " << b.getElementType();
  int64_t group = kGroup();
  if (group < 1)
    return emitOpError("b_k_group must be positive, got ") << group;
  if (a.getDimSize(1) != b.getDimSize(0) * group || b.getDimSize(1) % group != 0)
    return emitOpError("inner dimensions differ: a is ")
           << a.getDimSize(0) << "x" << a.getDimSize(1) << ", b is " << b.getDimSize(0) << "x"
           << b.getDimSize(1) << (group > 1 ? " in groups of " + std::to_string(group) + " k" : "");
  if (acc.getDimSize(0) != a.getDimSize(0) || acc.getDimSize(1) != b.getDimSize(1) / group)
    return emitOpError("accumulator shape ")
           << acc.getDimSize(0) << "x" << acc.getDimSize(1) << " is not " << a.getDimSize(0) << "x"
           << b.getDimSize(1) / group;
  if (getUnsignedA() && !a.getElementType().isInteger(8))
    return emitOpError("unsigned_a takes i8 operands, got ") << a.getElementType();
  Type expected = accumulatorTypeFor(a.getElementType());
  if (acc.getElementType() != expected)
    return emitOpError("a dot of ") << a.getElementType() << " accumulates in " << expected
                                    << ", got " << acc.getElementType();
  return success();
}

#define GET_OP_CLASSES
#include "tile/Dialect/Tile/IR/TileOps.cpp.inc"
