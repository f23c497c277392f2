// tile.dot on the CPU.
//
// When both operands are blocks loaded from affine addresses with per-dimension masks,
// the dot reads them straight from memory, in the order of a register-blocked GEMM
// microkernel: for each k, the accumulator rows take one FMA each with a row of b
// (a vector load) scaled by one element of a (a broadcast). The accumulator stays in
// vector registers across the K loop of the program, and the loaded blocks are never
// built as vectors. Full blocks with a unit-stride b row take plain vector loads;
// blocks at the edges of the matrices mask every element as the loads would have.
//
// bf16 dots on a host with AVX512-BF16 take two k at a time instead, where a's rows are
// unit-stride: vdpbf16ps multiplies the pair (a[i, k], a[i, k + 1]), broadcast from one
// 32-bit load, with b's rows k and k + 1 interleaved column by column, and adds both
// products to each f32 lane. That is half the instructions of the widened FMAs for the
// same products, and none of the conversions.
//
// Any other dot widens its operands to the accumulator type and becomes a
// vector.contract, lowered to the same outer products by the LLVM stage.
#include "CpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::cpu;

namespace {

/// A 2-D block that a dot reads from memory instead of from a loaded vector.
struct StridedBlock {
  AffineLanes lanes;
  LaneBounds bounds;
  TypedAttr other; // the value of masked-off lanes; null means zero
};

std::optional<StridedBlock> stridedBlockOf(Value operand) {
  auto load = operand.getDefiningOp<LoadOp>();
  if (!load)
    return std::nullopt;
  StridedBlock block;
  auto lanes = analyzeAffineLanes(load.getPtr());
  if (!lanes || !lanes->basePtr || lanes->strides.size() != 2)
    return std::nullopt;
  block.lanes = *lanes;
  if (Value mask = load.getMask()) {
    auto bounds = analyzeLaneBounds(mask);
    if (!bounds)
      return std::nullopt;
    block.bounds = *bounds;
  } else {
    block.bounds.upper.resize(2);
  }
  if (Value other = load.getOther()) {
    DenseElementsAttr dense;
    if (!matchPattern(other, m_Constant(&dense)) || !dense.isSplat())
      return std::nullopt;
    block.other = dense.getSplatValue<TypedAttr>();
  }
  return block;
}

bool readsOperandsFromMemory(DotOp dot) {
  return stridedBlockOf(dot.getA()) && stridedBlockOf(dot.getB());
}

/// The microkernel's view of one operand, materialized before the K loop.
struct OperandView {
  Value base;                // element (0, 0)
  Value rowStride, colStride; // in elements, i64
  Value validRows, validCols; // leading lanes the mask keeps, i64
  Value other;               // scalar of the element type
  Type element;
};

OperandView viewOf(ConversionPatternRewriter &rewriter, Location loc, const StridedBlock &block,
                   RankedTensorType type) {
  auto remap = [&](Value v) { return rewriter.getRemappedValue(v); };
  OperandView view;
  view.element = type.getElementType();
  view.base = offsetBase(rewriter, loc, block.lanes, view.element);
  view.rowStride = block.lanes.strides[0].materialize(rewriter, loc, remap);
  view.colStride = block.lanes.strides[1].materialize(rewriter, loc, remap);
  view.validRows = validLanes(rewriter, loc, block.bounds, 0, type.getDimSize(0));
  view.validCols = validLanes(rewriter, loc, block.bounds, 1, type.getDimSize(1));
  TypedAttr other = block.other ? block.other : cast<TypedAttr>(rewriter.getZeroAttr(view.element));
  view.other = arith::ConstantOp::create(rewriter, loc, other);
  return view;
}

Value widen(OpBuilder &b, Location loc, Value value, Type accElement) {
  Type type = value.getType();
  Type target = accElement;
  if (auto vector = dyn_cast<VectorType>(type))
    target = vector.clone(accElement);
  if (type == target)
    return value;
  if (isa<FloatType>(accElement))
    return arith::ExtFOp::create(b, loc, target, value);
  return arith::ExtSIOp::create(b, loc, target, value);
}

Value multiplyAdd(OpBuilder &b, Location loc, Value x, Value y, Value acc) {
  if (isa<FloatType>(getElementTypeOrSelf(acc)))
    return vector::FMAOp::create(b, loc, x, y, acc);
  return arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, x, y), acc);
}

Value i64Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value);
}

/// One K loop over the block: rows[i] += a[i, k] * b[k, :] for k in [0, K).
/// `fullBlocks` selects unmasked loads (and a unit-stride b row); otherwise every
/// element is masked as the loads specified.
SmallVector<Value> microkernel(OpBuilder &b, Location loc, const OperandView &a,
                               const OperandView &bView, ValueRange accRows, int64_t k,
                               bool fullBlocks) {
  auto rowType = cast<VectorType>(accRows.front().getType());
  int64_t n = rowType.getDimSize(0);
  Type accElement = rowType.getElementType();
  auto bRowType = VectorType::get({n}, bView.element);
  auto ptrType = a.base.getType();
  unsigned aAlign = elementBytes(a.element), bAlign = elementBytes(bView.element);
  Value lanes, laneOffsets, colsOn, bOther;
  if (!fullBlocks) {
    SmallVector<int64_t> iota = llvm::to_vector(llvm::seq<int64_t>(0, n));
    auto laneType = VectorType::get({n}, b.getI64Type());
    lanes = arith::ConstantOp::create(b, loc, laneType, b.getI64VectorAttr(iota));
    laneOffsets = arith::MulIOp::create(
        b, loc, lanes, vector::BroadcastOp::create(b, loc, laneType, bView.colStride));
    colsOn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lanes,
                                   vector::BroadcastOp::create(b, loc, laneType, bView.validCols));
    bOther = vector::BroadcastOp::create(b, loc, bRowType, bView.other);
  }
  auto loop = scf::ForOp::create(
      b, loc, i64Constant(b, loc, 0), i64Constant(b, loc, k), i64Constant(b, loc, 1), accRows,
      [&](OpBuilder &b, Location loc, Value kk, ValueRange rows) {
        Value bRowPtr = LLVM::GEPOp::create(
            b, loc, ptrType, bView.element, bView.base,
            ArrayRef<LLVM::GEPArg>{Value(arith::MulIOp::create(b, loc, kk, bView.rowStride))});
        Value bRow;
        if (fullBlocks) {
          bRow = LLVM::LoadOp::create(b, loc, bRowType, bRowPtr, bAlign);
        } else {
          Value kOn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, kk, bView.validRows);
          Value mask = arith::AndIOp::create(
              b, loc, colsOn, vector::BroadcastOp::create(b, loc, colsOn.getType(), kOn));
          auto ptrs = LLVM::GEPOp::create(b, loc, VectorType::get({n}, ptrType), bView.element,
                                          bRowPtr, ArrayRef<LLVM::GEPArg>{laneOffsets});
          bRow = LLVM::masked_gather::create(b, loc, bRowType, ptrs, mask, bOther, bAlign);
        }
        bRow = widen(b, loc, bRow, accElement);
        Value aColumn = arith::MulIOp::create(b, loc, kk, a.colStride);
        Value kInA;
        if (!fullBlocks)
          kInA = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, kk, a.validCols);
        SmallVector<Value> next;
        for (auto [i, row] : llvm::enumerate(rows)) {
          Value offset = arith::AddIOp::create(
              b, loc, arith::MulIOp::create(b, loc, i64Constant(b, loc, i), a.rowStride), aColumn);
          Value ptr = LLVM::GEPOp::create(b, loc, ptrType, a.element, a.base,
                                          ArrayRef<LLVM::GEPArg>{offset});
          // bf16 travels as i16 until it is widened: x86 without AVX512-BF16 would
          // round-trip a bfloat scalar through f32 and call __truncsfbf2 to insert it.
          bool bf16 = a.element.isBF16();
          Type scalarType = bf16 ? b.getI16Type() : a.element;
          Value scalar;
          if (fullBlocks) {
            scalar = LLVM::LoadOp::create(b, loc, scalarType, ptr, aAlign);
          } else {
            Value rowOn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                                i64Constant(b, loc, i), a.validRows);
            Value on = arith::AndIOp::create(b, loc, rowOn, kInA);
            auto guarded = scf::IfOp::create(
                b, loc, on,
                [&](OpBuilder &b, Location loc) {
                  scf::YieldOp::create(b, loc, Value(LLVM::LoadOp::create(b, loc, scalarType, ptr, aAlign)));
                },
                [&](OpBuilder &b, Location loc) {
                  Value other = a.other;
                  if (bf16)
                    other = arith::BitcastOp::create(b, loc, scalarType, other);
                  scf::YieldOp::create(b, loc, other);
                });
            scalar = guarded.getResult(0);
          }
          // Broadcast, then widen: a 16-bit scalar converted alone is inserted into
          // a register that LLVM may pick among the accumulators (vpinsrw), chaining
          // every load of a to an FMA; a broadcast load writes the whole register.
          Value splat = vector::BroadcastOp::create(b, loc, bRowType.clone(scalarType), scalar);
          if (bf16)
            splat = arith::BitcastOp::create(b, loc, bRowType.clone(a.element), splat);
          splat = widen(b, loc, splat, accElement);
          next.push_back(multiplyAdd(b, loc, splat, bRow, row));
        }
        scf::YieldOp::create(b, loc, next);
      });
  return SmallVector<Value>(loop.getResults());
}

/// f32 lanes of one vdpbf16ps on 512-bit registers.
constexpr int64_t kPairLanes = 16;

/// Whether a full block of this dot can take pairMicrokernel.
bool takesBf16Pairs(const OperandView &a, const OperandView &b, Type accElement, int64_t k, int64_t n) {
  return a.element.isBF16() && b.element.isBF16() && accElement.isF32() && k % 2 == 0 && n % kPairLanes == 0;
}

/// The full-block K loop of a bf16 dot by vdpbf16ps: per pair of k, b's rows k and
/// k + 1 interleaved (b[k, j], b[k + 1, j], ...), and for each accumulator row the
/// 32-bit pair (a[i, k], a[i, k + 1]) broadcast to every lane. a's k is unit-stride.
SmallVector<Value> pairMicrokernel(OpBuilder &b, Location loc, const OperandView &a, const OperandView &bView,
                                   ValueRange accRows, int64_t k) {
  auto rowType = cast<VectorType>(accRows.front().getType());
  int64_t n = rowType.getDimSize(0);
  Type i16 = b.getI16Type(), i32 = b.getI32Type(), bf16 = b.getBF16Type();
  auto bRowType = VectorType::get({n}, i16);
  auto chunkType = VectorType::get({kPairLanes}, b.getF32Type());
  auto pairsType = VectorType::get({2 * kPairLanes}, bf16);
  auto ptrType = a.base.getType();
  SmallVector<int64_t> interleave;
  for (int64_t j = 0; j < n; ++j)
    interleave.append({j, n + j});
  auto loop = scf::ForOp::create(
      b, loc, i64Constant(b, loc, 0), i64Constant(b, loc, k), i64Constant(b, loc, 2), accRows,
      [&](OpBuilder &b, Location loc, Value kk, ValueRange rows) {
        auto bRow = [&](Value kIndex) -> Value {
          Value ptr = LLVM::GEPOp::create(
              b, loc, ptrType, bView.element, bView.base,
              ArrayRef<LLVM::GEPArg>{Value(arith::MulIOp::create(b, loc, kIndex, bView.rowStride))});
          return LLVM::LoadOp::create(b, loc, bRowType, ptr, 2);
        };
        Value next = arith::AddIOp::create(b, loc, kk, i64Constant(b, loc, 1));
        Value both = vector::ShuffleOp::create(b, loc, bRow(kk), bRow(next), interleave);
        SmallVector<Value> bPairs;
        for (int64_t c = 0; c < n / kPairLanes; ++c)
          bPairs.push_back(arith::BitcastOp::create(
              b, loc, pairsType,
              vector::ExtractStridedSliceOp::create(b, loc, both, ArrayRef<int64_t>{2 * kPairLanes * c},
                                                    ArrayRef<int64_t>{2 * kPairLanes}, ArrayRef<int64_t>{1})));
        SmallVector<Value> updated;
        for (auto [i, row] : llvm::enumerate(rows)) {
          Value offset = arith::AddIOp::create(
              b, loc, arith::MulIOp::create(b, loc, i64Constant(b, loc, i), a.rowStride), kk);
          Value ptr = LLVM::GEPOp::create(b, loc, ptrType, a.element, a.base, ArrayRef<LLVM::GEPArg>{offset});
          Value pair = LLVM::LoadOp::create(b, loc, i32, ptr, 2);
          Value aPairs = LLVM::BitcastOp::create(
              b, loc, pairsType, vector::BroadcastOp::create(b, loc, VectorType::get({kPairLanes}, i32), pair));
          Value result = row;
          for (auto [c, bPair] : llvm::enumerate(bPairs)) {
            int64_t first = int64_t(c) * kPairLanes;
            Value chunk = vector::ExtractStridedSliceOp::create(b, loc, result, ArrayRef<int64_t>{first},
                                                                ArrayRef<int64_t>{kPairLanes}, ArrayRef<int64_t>{1});
            Value sum = LLVM::CallIntrinsicOp::create(b, loc, chunkType,
                                                      b.getStringAttr("llvm.x86.avx512bf16.dpbf16ps.512"),
                                                      ValueRange{chunk, aPairs, bPair})
                            .getResult(0);
            result = vector::InsertStridedSliceOp::create(b, loc, sum, result, ArrayRef<int64_t>{first},
                                                          ArrayRef<int64_t>{1});
          }
          updated.push_back(result);
        }
        scf::YieldOp::create(b, loc, updated);
      });
  return SmallVector<Value>(loop.getResults());
}

struct DotLowering : OpConversionPattern<DotOp> {
  DotLowering(const TypeConverter &converter, MLIRContext *ctx, bool bf16Dot)
      : OpConversionPattern(converter, ctx), bf16Dot(bf16Dot) {}
  bool bf16Dot;

  LogicalResult matchAndRewrite(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    if (readsOperandsFromMemory(op))
      return lowerFromMemory(op, adaptor, rewriter);
    return lowerAsContract(op, adaptor, rewriter);
  }

  LogicalResult lowerFromMemory(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const {
    Location loc = op.getLoc();
    auto aType = op.getA().getType(), bType = op.getB().getType();
    int64_t m = aType.getDimSize(0), k = aType.getDimSize(1), n = bType.getDimSize(1);
    OperandView a = viewOf(rewriter, loc, *stridedBlockOf(op.getA()), aType);
    OperandView b = viewOf(rewriter, loc, *stridedBlockOf(op.getB()), bType);
    auto eq = [&](Value x, int64_t y) -> Value {
      return arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, x,
                                   i64Constant(rewriter, loc, y));
    };
    Value full = eq(b.colStride, 1);
    for (Value on : {eq(a.validRows, m), eq(a.validCols, k), eq(b.validRows, k), eq(b.validCols, n)})
      full = arith::AndIOp::create(rewriter, loc, full, on);

    Value acc = adaptor.getAcc();
    auto accType = cast<VectorType>(acc.getType());
    SmallVector<Value> rows;
    for (int64_t i = 0; i < m; ++i)
      rows.push_back(vector::ExtractOp::create(rewriter, loc, acc, ArrayRef<int64_t>{i}));
    SmallVector<Type> rowTypes(m, rows.front().getType());
    Type accElement = accType.getElementType();
    bool pairs = bf16Dot && takesBf16Pairs(a, b, accElement, k, n);
    auto branch = scf::IfOp::create(
        rewriter, loc, full,
        [&](OpBuilder &builder, Location l) {
          if (!pairs) {
            scf::YieldOp::create(builder, l, microkernel(builder, l, a, b, rows, k, true));
            return;
          }
          // Pairs of k are one 32-bit load of a only where its k is unit-stride.
          Value unitK = arith::CmpIOp::create(builder, l, arith::CmpIPredicate::eq, a.colStride,
                                              i64Constant(builder, l, 1));
          auto byPairs = scf::IfOp::create(
              builder, l, unitK,
              [&](OpBuilder &then, Location at) {
                scf::YieldOp::create(then, at, pairMicrokernel(then, at, a, b, rows, k));
              },
              [&](OpBuilder &otherwise, Location at) {
                scf::YieldOp::create(otherwise, at, microkernel(otherwise, at, a, b, rows, k, true));
              });
          scf::YieldOp::create(builder, l, byPairs.getResults());
        },
        [&](OpBuilder &builder, Location l) {
          scf::YieldOp::create(builder, l, microkernel(builder, l, a, b, rows, k, false));
        });
    Value result = arith::ConstantOp::create(rewriter, loc, accType, rewriter.getZeroAttr(accType));
    for (auto [i, row] : llvm::enumerate(branch.getResults()))
      result = vector::InsertOp::create(rewriter, loc, row, result, ArrayRef<int64_t>{int64_t(i)});
    rewriter.replaceOp(op, result);
    return success();
  }

  LogicalResult lowerAsContract(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const {
    Location loc = op.getLoc();
    Value acc = adaptor.getAcc();
    Type accElement = cast<VectorType>(acc.getType()).getElementType();
    Value a = widen(rewriter, loc, adaptor.getA(), accElement);
    Value b = widen(rewriter, loc, adaptor.getB(), accElement);
    MLIRContext *ctx = rewriter.getContext();
    AffineExpr i, j, kk;
    bindDims(ctx, i, j, kk);
    SmallVector<AffineMap> maps = {AffineMap::get(3, 0, {i, kk}, ctx),
                                   AffineMap::get(3, 0, {kk, j}, ctx),
                                   AffineMap::get(3, 0, {i, j}, ctx)};
    auto iterators = rewriter.getArrayAttr(
        {vector::IteratorTypeAttr::get(ctx, vector::IteratorType::parallel),
         vector::IteratorTypeAttr::get(ctx, vector::IteratorType::parallel),
         vector::IteratorTypeAttr::get(ctx, vector::IteratorType::reduction)});
    rewriter.replaceOpWithNewOp<vector::ContractionOp>(op, a, b, acc,
                                                       rewriter.getAffineMapArrayAttr(maps),
                                                       iterators);
    return success();
  }
};

} // namespace

bool mlir::tile::cpu::isFusedIntoDots(LoadOp load) {
  if (load->use_empty())
    return false;
  for (OpOperand &use : load->getUses()) {
    auto dot = dyn_cast<DotOp>(use.getOwner());
    if (!dot || use.getOperandNumber() == 2 || !readsOperandsFromMemory(dot))
      return false;
  }
  return true;
}

void mlir::tile::cpu::populateDotPatterns(const TypeConverter &converter, RewritePatternSet &patterns,
                                          bool bf16Dot) {
  patterns.add<DotLowering>(converter, patterns.getContext(), bf16Dot);
}
