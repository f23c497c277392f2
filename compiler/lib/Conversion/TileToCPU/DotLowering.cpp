// tile.dot on the CPU.
//
// When both operands are blocks loaded from affine addresses with per-dimension masks,
// the dot reads them straight from memory, in the order of a register-blocked GEMM
// microkernel: for each k, the accumulator rows take one FMA each with a row of b
// (a vector load) scaled by one element of a (a broadcast). The accumulator stays in
// vector registers across the K loop of the program, and the loaded blocks are never
// built as vectors. Full blocks with a unit-stride b row take plain vector loads, up to
// the k both operands keep (the last block of a K that BLOCK_K does not divide too).
// Where masked-off lanes are zeros, blocks at the edges of the matrices take the same
// loop with masked loads of b and a's missing rows read from its first (see
// BlockEdges); otherwise they mask every element as the loads would have.
//
// bf16 and int8 dots on a host with AVX512-BF16 / AVX512-VNNI take several k at a time
// instead, where a's rows are unit-stride: vdpbf16ps multiplies the pair (a[i, k],
// a[i, k + 1]), broadcast from one 32-bit load, with b's rows k and k + 1 interleaved
// column by column, and adds both products to each f32 lane; vpdpbusd does the same with
// four int8 k per i32 lane. That is a half (a quarter) of the instructions of the
// widened multiply-adds for the same products, and none of the conversions.
//
// A dot whose b keeps its k in groups (b_k_group, the CPU binding's panels for these
// instructions) reads b's lanes as the instruction takes them: one load per 16 lanes,
// no interleaving.
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

/// Whether the block's masked-off lanes read as zeros (integer, or float of either sign).
bool masksToZeros(const StridedBlock &block) {
  return !block.other || matchPattern(block.other, m_Zero()) ||
         matchPattern(block.other, m_AnyZeroFloat());
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

/// k steps per iteration of a full block's K loop.
constexpr int64_t kUnrolledSteps = 4;

/// A block at the matrices' edges that the full blocks' loop can still take, where the
/// masked-off lanes of both operands are zeros: its columns past b's kept ones come from
/// masked loads of b's rows (as cheap as plain ones with AVX-512's mask registers), and
/// its rows past a's kept ones read a's first row, their sums then dropped for the
/// accumulator they came in with (what products of zeros leave). Each element of the
/// masked path took a branch instead.
struct BlockEdges {
  Value bColumns;              // vector of i1: b's kept lanes
  SmallVector<Value> aRowKept; // i1 per row of the block
};

/// The edges of a block of m rows and n columns from its operands' kept rows and columns;
/// `aRows` false leaves aRowKept empty (a's rows all read as they are).
BlockEdges blockEdgesOf(OpBuilder &b, Location loc, const OperandView &a, const OperandView &bView,
                        int64_t m, int64_t n, bool aRows = true) {
  BlockEdges edges;
  auto laneType = VectorType::get({n}, b.getI64Type());
  Value lanes = arith::ConstantOp::create(
      b, loc, laneType, b.getI64VectorAttr(llvm::to_vector(llvm::seq<int64_t>(0, n))));
  edges.bColumns =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lanes,
                            vector::BroadcastOp::create(b, loc, laneType, bView.validCols));
  for (int64_t i = 0; aRows && i < m; ++i)
    edges.aRowKept.push_back(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                                   i64Constant(b, loc, i), a.validRows));
  return edges;
}

/// The k that both operands of a block keep, at most k and never below zero.
Value keptK(OpBuilder &b, Location loc, const OperandView &a, const OperandView &bView, int64_t k) {
  return arith::MaxSIOp::create(
      b, loc,
      arith::MinSIOp::create(b, loc, arith::MinSIOp::create(b, loc, a.validCols, bView.validRows),
                             i64Constant(b, loc, k)),
      i64Constant(b, loc, 0));
}

/// The most rows whose block at a's row edge reads a's first row for those not kept (one
/// general register per row).
constexpr int64_t kRedirectedRows = 8;

/// One K loop over the block: rows[i] += a[i, k] * b[k, :] for k in [0, K).
/// `fullBlocks` selects unmasked loads (and a unit-stride b row); otherwise every
/// element is masked as the loads specified. A full block's loop may stop at `kCount`
/// (an i64 at most K, known at run time): a K that BLOCK_K does not divide leaves each
/// program a last block of fewer k, whose rows and columns are all kept.
SmallVector<Value> microkernel(OpBuilder &b, Location loc, const OperandView &a,
                               const OperandView &bView, ValueRange accRows, int64_t k,
                               bool fullBlocks, Value kCount = {},
                               const BlockEdges *edges = nullptr) {
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
  // Each row of a from its own pointer, made before the loop: one register per row that
  // the loop indexes by k, where the row's offset added inside the loop made LLVM chain
  // the rows' addresses one from another at every k.
  SmallVector<Value> aRows;
  for (int64_t i = 0, e = accRows.size(); i < e; ++i) {
    Value row = LLVM::GEPOp::create(b, loc, ptrType, a.element, a.base,
                                    ArrayRef<LLVM::GEPArg>{Value(arith::MulIOp::create(
                                        b, loc, i64Constant(b, loc, i), a.rowStride))});
    if (edges)
      row = LLVM::SelectOp::create(b, loc, edges->aRowKept[i], row, a.base);
    aRows.push_back(row);
  }
  auto step = [&](OpBuilder &b, Location loc, Value kk, ValueRange rows) -> SmallVector<Value> {
    Value bRowPtr = LLVM::GEPOp::create(
        b, loc, ptrType, bView.element, bView.base,
        ArrayRef<LLVM::GEPArg>{Value(arith::MulIOp::create(b, loc, kk, bView.rowStride))});
    Value bRow;
    if (fullBlocks && edges) {
      Value zeros = arith::ConstantOp::create(b, loc, bRowType, b.getZeroAttr(bRowType));
      bRow = LLVM::MaskedLoadOp::create(b, loc, bRowType, bRowPtr, edges->bColumns, zeros, bAlign);
    } else if (fullBlocks) {
      bRow = LLVM::LoadOp::create(b, loc, bRowType, bRowPtr, bAlign);
    } else {
      Value kOn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, kk, bView.validRows);
      Value mask = arith::AndIOp::create(
          b, loc, colsOn, vector::BroadcastOp::create(b, loc, colsOn.getType(), kOn));
      // A row of b at unit stride (checked at run time where the stride is not
      // known) is one masked load; another is gathered.
      auto gathered = [&](OpBuilder &b, Location loc) {
        auto ptrs = LLVM::GEPOp::create(b, loc, VectorType::get({n}, ptrType), bView.element,
                                        bRowPtr, ArrayRef<LLVM::GEPArg>{laneOffsets});
        return gatherLanes(b, loc, ptrs, mask, bOther, bAlign);
      };
      auto masked = [&](OpBuilder &b, Location loc) -> Value {
        return LLVM::MaskedLoadOp::create(b, loc, bRowType, bRowPtr, mask, bOther, bAlign);
      };
      std::optional<int64_t> colStride = getConstantIntValue(bView.colStride);
      if (colStride == 1) {
        bRow = masked(b, loc);
      } else if (colStride) {
        bRow = gathered(b, loc);
      } else {
        Value unit = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bView.colStride,
                                           i64Constant(b, loc, 1));
        bRow =
            scf::IfOp::create(
                b, loc, unit,
                [&](OpBuilder &b, Location loc) { scf::YieldOp::create(b, loc, masked(b, loc)); },
                [&](OpBuilder &b, Location loc) { scf::YieldOp::create(b, loc, gathered(b, loc)); })
                .getResult(0);
      }
    }
    bRow = widen(b, loc, bRow, accElement);
    Value aColumn = arith::MulIOp::create(b, loc, kk, a.colStride);
    Value kInA;
    if (!fullBlocks)
      kInA = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, kk, a.validCols);
    SmallVector<Value> next;
    for (auto [i, row] : llvm::enumerate(rows)) {
      Value ptr = LLVM::GEPOp::create(b, loc, ptrType, a.element, aRows[i],
                                      ArrayRef<LLVM::GEPArg>{aColumn});
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
        auto guarded =
            scf::IfOp::create(
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
    return next;
  };
  // Full blocks take kUnrolledSteps k per iteration: the loads of a and b then address
  // their k by constant offsets from pointers that move once per iteration. Intel's FMA
  // ports also execute integer instructions, so each address computed per k would take
  // a slot from the multiplies (Zen's integer units are apart and do not feel it).
  auto steps = [&](Value from, Value to, int64_t unroll, ValueRange rows) {
    auto loop = scf::ForOp::create(
        b, loc, from, to, i64Constant(b, loc, unroll), rows,
        [&](OpBuilder &b, Location loc, Value kk, ValueRange rows) {
          SmallVector<Value> next(rows);
          for (int64_t u = 0; u < unroll; ++u) {
            Value at =
                u == 0 ? kk : arith::AddIOp::create(b, loc, kk, i64Constant(b, loc, u)).getResult();
            next = step(b, loc, at, next);
          }
          scf::YieldOp::create(b, loc, next);
        });
    return SmallVector<Value>(loop.getResults());
  };
  Value zero = i64Constant(b, loc, 0);
  if (edges) {
    // One k per iteration: unrolled, the masked loads of b (which no FMA takes as its
    // memory operand) were all hoisted ahead of the FMAs and spilled.
    SmallVector<Value> sums = steps(zero, kCount, 1, accRows);
    for (auto [i, sum] : llvm::enumerate(sums))
      sum = arith::SelectOp::create(b, loc, edges->aRowKept[i], sum, accRows[i]);
    return sums;
  }
  // A full block's kCount is a multiple of kUnrolledSteps where k is (the caller's
  // condition for this path).
  int64_t unroll = fullBlocks && k % kUnrolledSteps == 0 ? kUnrolledSteps : 1;
  return steps(zero, kCount ? kCount : i64Constant(b, loc, k), unroll, accRows);
}

/// 32-bit accumulator lanes of one 512-bit dot-product instruction.
constexpr int64_t kDotLanes = 16;

/// A dot-product instruction that adds `group` products of consecutive k to each 32-bit
/// lane: vdpbf16ps (AVX512-BF16, pairs of bf16 into f32) and vpdpbusd (AVX512-VNNI,
/// quads of u8 x s8 into i32).
struct GroupedDot {
  int64_t group;
  StringRef intrinsic;
  /// a's side of vpdpbusd is unsigned: s8 a is taken as a + 128 (its sign bit flipped),
  /// and 128 times the column sums of b come off at the end.
  bool offsetA;
  /// The dot computes (a + 128) @ b (the dot's unsigned_a): a's sign bits flipped and
  /// nothing taken off, the program subtracting b's column sums itself.
  bool unsignedA = false;
};

/// The dot-product instruction this host has for these operand and accumulator types.
std::optional<GroupedDot> dotInstructionFor(Type element, Type accElement,
                                            const CpuDotFeatures &features) {
  if (features.bf16 && element.isBF16() && accElement.isF32())
    return GroupedDot{2, "llvm.x86.avx512bf16.dpbf16ps.512", false};
  if (features.int8 && element.isInteger(8) && accElement.isInteger(32))
    return GroupedDot{4, "llvm.x86.avx512.vpdpbusd.512", true};
  return std::nullopt;
}

/// The grouped dot a full block of this dot can take on this host, if any.
std::optional<GroupedDot> groupedDotFor(const OperandView &a, Type accElement, int64_t k, int64_t n,
                                        const CpuDotFeatures &features) {
  std::optional<GroupedDot> dot = dotInstructionFor(a.element, accElement, features);
  if (!dot || k % dot->group != 0 || n % kDotLanes != 0)
    return std::nullopt;
  return dot;
}

/// The address of element (row, col) of a view whose columns are unit-stride.
Value unitStrideElementAt(OpBuilder &b, Location loc, const OperandView &view, int64_t row,
                          Value col) {
  Value offset = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, i64Constant(b, loc, row), view.rowStride), col);
  return LLVM::GEPOp::create(b, loc, view.base.getType(), view.element, view.base,
                             ArrayRef<LLVM::GEPArg>{offset});
}

/// The address of a's element (row, k) as a microkernel reads it.
using ElementAddress = function_ref<Value(OpBuilder &, Location, int64_t, Value)>;

/// The bytes of a's rows that each step of a flipped K loop sums: two groups of k.
constexpr int64_t kRowSumBytes = 8;
/// The k a flipped K loop takes at most: BLOCK_K's bound. Each of a row's four i16 lanes
/// then sums at most 256 bytes: -128 * 256 = -32768 and 127 * 256 = 32512, inside i16.
constexpr int64_t kMaxFlippedK = 1024;

/// `sums` (i16 lanes) plus the 8 signed bytes of `bytes`, two per lane: the high byte of
/// each 16-bit word by an arithmetic shift right, the low one by a shift left and back.
/// Shifts and adds issue beside vpdpbusd, which a sum by vpdpbusd against ones would wait
/// for.
Value addBytesOfRow(OpBuilder &b, Location loc, Value sums, Value bytes) {
  auto sumsType = cast<VectorType>(sums.getType());
  Value w = LLVM::BitcastOp::create(b, loc, sumsType, bytes);
  Value eight = arith::ConstantOp::create(b, loc, sumsType,
                                          DenseElementsAttr::get(sumsType, b.getI16IntegerAttr(8)));
  Value high = arith::ShRSIOp::create(b, loc, w, eight);
  Value low = arith::ShRSIOp::create(b, loc, arith::ShLIOp::create(b, loc, w, eight), eight);
  return arith::AddIOp::create(b, loc, arith::AddIOp::create(b, loc, sums, high), low);
}

/// `end` rounded down to whole groups of k (`group` a power of two).
Value wholeGroupsOf(OpBuilder &b, Location loc, Value end, int64_t group) {
  return arith::AndIOp::create(b, loc, end, i64Constant(b, loc, ~(group - 1)));
}

/// The rows after the group at `wholeGroups` where `end` lies inside it (a's words masked
/// to the k before `end`), `rows` otherwise.
SmallVector<Value> lastPartialGroup(
    OpBuilder &b, Location loc, Value wholeGroups, Value end, ValueRange rows,
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value, ValueRange, Value)> groupOfK) {
  auto partial = scf::IfOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, wholeGroups, end),
      [&](OpBuilder &b, Location loc) {
        scf::YieldOp::create(b, loc, groupOfK(b, loc, wholeGroups, rows, end));
      },
      [&](OpBuilder &b, Location loc) { scf::YieldOp::create(b, loc, rows); });
  return SmallVector<Value>(partial.getResults());
}

/// The K loop of full blocks whose b takes vpdpbusd's unsigned side as b + 128, to k =
/// `end`: each row comes out 128 times its sum of a over those k too large, which comes
/// off after the loop. Each step runs two groups of k and adds the same 8 bytes of each
/// row of a to the row's sums; the groups past the last whole step follow (a last group
/// that `end` cuts, from a's words masked: b + 128 past K meets zeros), their bytes summed
/// from a masked load. Against the sums by vpdpbusd in a loop of their
/// own after the K loop (2 threads, znver5, interleaved): int8 768^3 0.92-0.95 -> 0.93-0.98x
/// of _int_mm, 1000^3 0.92-0.95 -> 0.92-0.98x, 2048^3 0.94-0.98 -> 0.97-0.99x. Steps of
/// four groups ran as fast and compiled 3-4 ms slower (int8 1024^3: 45 against 49 ms cold);
/// steps of eight or sixteen ran 5-8% slower than steps of one, with or without the sums.
SmallVector<Value> flippedKLoop(
    OpBuilder &b, Location loc, Type aElement, ElementAddress aElementAt, ValueRange accRows,
    Value end, int64_t group,
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value, ValueRange, Value)> groupOfK) {
  int64_t rowCount = int64_t(accRows.size());
  auto bytesType = VectorType::get({kRowSumBytes}, aElement);
  auto sumsType = VectorType::get({kRowSumBytes / 2}, b.getI16Type());
  unsigned align = elementBytes(aElement);
  Value step = i64Constant(b, loc, kRowSumBytes);
  Value wholeSteps = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, end, step), step);
  SmallVector<Value> init(accRows);
  init.append(rowCount, arith::ConstantOp::create(b, loc, sumsType, b.getZeroAttr(sumsType)));
  auto steps = scf::ForOp::create(
      b, loc, i64Constant(b, loc, 0), wholeSteps, step, init,
      [&](OpBuilder &b, Location loc, Value first, ValueRange state) {
        SmallVector<Value> rows(state.take_front(rowCount));
        for (int64_t kk = 0; kk < kRowSumBytes; kk += group)
          rows = groupOfK(b, loc, arith::AddIOp::create(b, loc, first, i64Constant(b, loc, kk)),
                          rows, {});
        for (int64_t i = 0; i < rowCount; ++i) {
          Value bytes =
              LLVM::LoadOp::create(b, loc, bytesType, aElementAt(b, loc, i, first), align);
          rows.push_back(addBytesOfRow(b, loc, state[rowCount + i], bytes));
        }
        scf::YieldOp::create(b, loc, rows);
      });
  Value wholeGroups = wholeGroupsOf(b, loc, end, group);
  auto rest = scf::ForOp::create(b, loc, wholeSteps, wholeGroups, i64Constant(b, loc, group),
                                 steps.getResults().take_front(rowCount),
                                 [&](OpBuilder &b, Location loc, Value kk, ValueRange state) {
                                   scf::YieldOp::create(b, loc, groupOfK(b, loc, kk, state, {}));
                                 });
  SmallVector<Value> products =
      lastPartialGroup(b, loc, wholeGroups, end, rest.getResults(), groupOfK);
  // The rest's bytes (under 8) by a load masked to the low bits of one word.
  Value restBytes = arith::SubIOp::create(b, loc, end, wholeSteps);
  Value bits = arith::SubIOp::create(
      b, loc, arith::ShLIOp::create(b, loc, i64Constant(b, loc, 1), restBytes),
      i64Constant(b, loc, 1));
  bits = arith::TruncIOp::create(b, loc, b.getIntegerType(kRowSumBytes), bits);
  Value mask =
      LLVM::BitcastOp::create(b, loc, VectorType::get({kRowSumBytes}, b.getI1Type()), bits);
  Value zeroBytes = arith::ConstantOp::create(b, loc, bytesType, b.getZeroAttr(bytesType));
  SmallVector<Value> rows;
  for (int64_t i = 0; i < rowCount; ++i) {
    Value row = products[i];
    Value bytes = LLVM::MaskedLoadOp::create(b, loc, bytesType, aElementAt(b, loc, i, wholeSteps),
                                             mask, zeroBytes, align);
    Value sums = addBytesOfRow(b, loc, steps.getResult(rowCount + i), bytes);
    sums =
        arith::ExtSIOp::create(b, loc, VectorType::get({kRowSumBytes / 2}, b.getI32Type()), sums);
    Value sum = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, sums);
    Value offset =
        arith::ShLIOp::create(b, loc, sum, arith::ConstantIntOp::create(b, loc, b.getI32Type(), 7));
    rows.push_back(arith::SubIOp::create(
        b, loc, row, vector::BroadcastOp::create(b, loc, row.getType(), offset)));
  }
  return rows;
}

/// The K loop of a dot by a grouped dot-product instruction. Per group of k, each
/// accumulator row takes the group (a[i, k], a[i, k + 1], ...), one 32-bit word of a's
/// unit-stride k broadcast to every lane, and b's lanes as the instruction takes them:
/// - b as KxN (`bInGroups` false; full blocks, or edges where the masks leave zeros):
///   rows k .. k + group - 1 loaded and interleaved column by column (b[k, j],
///   b[k + 1, j], ...). At the edges (`edges`) b's rows are loaded under the kept
///   columns' mask and a's rows past its kept ones read its first row, their sums then
///   dropped, as the plain microkernel's edges do;
/// - b in groups of k (b_k_group): its row k / group holds them so already, and each 16
///   lanes of it are one load. At the edges (`fullBlocks` false) the loop stops after b's
///   last row that the mask keeps, b's lanes past its valid columns read zero, and a's
///   words are read under the mask: rows past a's and k past its columns read zero, which
///   adds nothing.
/// Full blocks run `kCount` k (the k both operands keep) where given, all k otherwise; a
/// last group that `kCount` cuts reads a's words masked and, from b as KxN, zeros for
/// its rows past `kCount`.
SmallVector<Value> groupedMicrokernel(OpBuilder &b, Location loc, const OperandView &a,
                                      const OperandView &bView, ValueRange accRows, int64_t k,
                                      const GroupedDot &dot, bool bInGroups, bool fullBlocks,
                                      Value kCount = {}, const BlockEdges *edges = nullptr) {
  auto rowType = cast<VectorType>(accRows.front().getType());
  int64_t n = rowType.getDimSize(0), g = dot.group;
  int64_t chunks = n / kDotLanes;
  Type i32 = b.getI32Type();
  // Rows of b travel as integers of the element's width: the permute that interleaves
  // them moves bits, whatever they encode.
  Type bits = b.getIntegerType(a.element.getIntOrFloatBitWidth());
  auto bRowType = VectorType::get({n}, bits);
  auto chunkType = VectorType::get({kDotLanes}, rowType.getElementType());
  auto operandType = VectorType::get({g * kDotLanes}, a.element);
  auto operandBitsType = VectorType::get({g * kDotLanes}, bits);
  auto wordsType = VectorType::get({kDotLanes}, i32);
  auto ptrType = a.base.getType();
  unsigned align = elementBytes(a.element);
  auto words = [&](OpBuilder &b, Location loc, Value v) -> Value {
    return LLVM::BitcastOp::create(b, loc, operandType, v);
  };
  auto slice = [&](OpBuilder &b, Location loc, Value v, int64_t first, int64_t size) -> Value {
    return vector::ExtractStridedSliceOp::create(b, loc, v, ArrayRef<int64_t>{first}, ArrayRef<int64_t>{size},
                                                 ArrayRef<int64_t>{1});
  };
  auto dotProduct = [&](OpBuilder &b, Location loc, Value acc, Value x, Value y) -> Value {
    return LLVM::CallIntrinsicOp::create(b, loc, chunkType, b.getStringAttr(dot.intrinsic), ValueRange{acc, x, y})
        .getResult(0);
  };
  auto lanesBelow = [&](OpBuilder &b, Location loc, int64_t count, Value first,
                        Value bound) -> Value {
    auto laneType = VectorType::get({count}, b.getI64Type());
    Value iota = arith::ConstantOp::create(
        b, loc, laneType, b.getI64VectorAttr(llvm::to_vector(llvm::seq<int64_t>(0, count))));
    Value lanes =
        arith::AddIOp::create(b, loc, iota, vector::BroadcastOp::create(b, loc, laneType, first));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lanes,
                                 vector::BroadcastOp::create(b, loc, laneType, bound));
  };
  Value flipSigns = arith::ConstantIntOp::create(b, loc, i32, 0x80808080);
  // vpdpbusd takes one side unsigned. At the edges that is a + 128 (a's sign bits
  // flipped), and 128 times each column's sum of b comes off at the end: one more
  // instruction per 16 lanes of b at every group of k, a quarter of a 4-row block's
  // products. Full blocks flip b's signs instead, and 128 times each row's sum of a comes
  // off: shifts and adds beside the loop's dots (flippedKLoop).
  bool flipB = dot.offsetA && fullBlocks && k <= kMaxFlippedK && !dot.unsignedA;
  bool offsetA = dot.offsetA && !flipB;
  // Running 128 * sum of b per column, for vpdpbusd's offset a; none where the dot takes
  // a + 128 as it is (unsigned_a).
  bool sumsOfB = offsetA && !dot.unsignedA;
  SmallVector<Value> carried(accRows);
  if (sumsOfB)
    for (int64_t c = 0; c < chunks; ++c)
      carried.push_back(arith::ConstantOp::create(b, loc, chunkType, b.getZeroAttr(chunkType)));
  // The group's rows of b joined two by two until two halves remain, then interleaved:
  // element (j, r) is b[k + r, j].
  auto halves = [&](OpBuilder &b, Location loc, SmallVector<Value> rows) {
    while (rows.size() > 2) {
      int64_t length = cast<VectorType>(rows.front().getType()).getDimSize(0);
      SmallVector<int64_t> both = llvm::to_vector(llvm::seq<int64_t>(0, 2 * length));
      SmallVector<Value> joined;
      for (size_t r = 0; r < rows.size(); r += 2)
        joined.push_back(vector::ShuffleOp::create(b, loc, rows[r], rows[r + 1], both));
      rows = std::move(joined);
    }
    return rows;
  };
  SmallVector<int64_t> interleave;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t r = 0; r < g; ++r)
      interleave.push_back(r * n + j);
  auto rowOf = [&](OpBuilder &b, Location loc, const OperandView &view, Value row) -> Value {
    return LLVM::GEPOp::create(
        b, loc, ptrType, view.element, view.base,
        ArrayRef<LLVM::GEPArg>{Value(arith::MulIOp::create(b, loc, row, view.rowStride))});
  };
  // At the edges each row of a from its own pointer, a's first row where the row is not
  // kept: no load reaches past a.
  bool redirectsRows = edges && !edges->aRowKept.empty();
  SmallVector<Value> aRows;
  if (redirectsRows)
    for (int64_t i = 0, e = accRows.size(); i < e; ++i)
      aRows.push_back(LLVM::SelectOp::create(b, loc, edges->aRowKept[i],
                                             rowOf(b, loc, a, i64Constant(b, loc, i)), a.base));
  auto aElementAt = [&](OpBuilder &b, Location loc, int64_t i, Value kk) -> Value {
    if (!redirectsRows)
      return unitStrideElementAt(b, loc, a, i, kk);
    return LLVM::GEPOp::create(b, loc, ptrType, a.element, aRows[i], ArrayRef<LLVM::GEPArg>{kk});
  };
  // b's groups of k for each chunk of 16 lanes. From b as KxN, a group that `kEnd` cuts
  // takes zeros for its rows past it, loaded from row kk (which is kept) so that no load
  // reaches past b.
  auto bGroupsAt = [&](OpBuilder &b, Location loc, Value kk, Value kEnd) {
    SmallVector<Value> bGroups;
    if (!bInGroups) {
      Value zeros = arith::ConstantOp::create(b, loc, bRowType, b.getZeroAttr(bRowType));
      SmallVector<Value> bRows;
      for (int64_t r = 0; r < g; ++r) {
        Value index = arith::AddIOp::create(b, loc, kk, i64Constant(b, loc, r));
        Value rowOn;
        if (kEnd && r > 0)
          rowOn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, index, kEnd);
        Value ptr =
            rowOf(b, loc, bView,
                  rowOn ? arith::SelectOp::create(b, loc, rowOn, index, kk).getResult() : index);
        Value row =
            edges ? LLVM::MaskedLoadOp::create(b, loc, bRowType, ptr, edges->bColumns, zeros, 1)
                        .getResult()
                  : LLVM::LoadOp::create(b, loc, bRowType, ptr, 1).getResult();
        if (rowOn)
          row = arith::SelectOp::create(b, loc, rowOn, row, zeros);
        bRows.push_back(row);
      }
      SmallVector<Value> two = halves(b, loc, bRows);
      Value all = vector::ShuffleOp::create(b, loc, two[0], two[1], interleave);
      for (int64_t c = 0; c < chunks; ++c)
        bGroups.push_back(words(b, loc, slice(b, loc, all, g * kDotLanes * c, g * kDotLanes)));
      return bGroups;
    }
    Value row = rowOf(b, loc, bView, arith::DivUIOp::create(b, loc, kk, i64Constant(b, loc, g)));
    for (int64_t c = 0; c < chunks; ++c) {
      Value ptr = LLVM::GEPOp::create(b, loc, ptrType, bView.element, row,
                                      ArrayRef<LLVM::GEPArg>{int32_t(c * g * kDotLanes)});
      Value lanes;
      if (fullBlocks) {
        lanes = LLVM::LoadOp::create(b, loc, operandBitsType, ptr, align);
      } else {
        Value on = lanesBelow(b, loc, g * kDotLanes, i64Constant(b, loc, c * g * kDotLanes),
                              bView.validCols);
        Value zero =
            arith::ConstantOp::create(b, loc, operandBitsType, b.getZeroAttr(operandBitsType));
        lanes = LLVM::MaskedLoadOp::create(b, loc, operandBitsType, ptr, on, zero, align);
      }
      bGroups.push_back(words(b, loc, lanes));
    }
    return bGroups;
  };
  // a's group (a[i, kk], ..., a[i, kk + g - 1]) as one word.
  // In full blocks, a group that `kEnd` cuts reads only a's k before it.
  auto aWordAt = [&](OpBuilder &b, Location loc, int64_t i, Value kk, Value kEnd) -> Value {
    Value ptr = aElementAt(b, loc, i, kk);
    if (fullBlocks && kEnd) {
      auto groupType = VectorType::get({g}, bits);
      Value zero = arith::ConstantOp::create(b, loc, groupType, b.getZeroAttr(groupType));
      Value group = LLVM::MaskedLoadOp::create(b, loc, groupType, ptr,
                                               lanesBelow(b, loc, g, kk, kEnd), zero, align);
      return LLVM::BitcastOp::create(b, loc, i32, group);
    }
    if (fullBlocks)
      return LLVM::LoadOp::create(b, loc, i32, ptr, align);
    Value rowOn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i64Constant(b, loc, i),
                                        a.validRows);
    Value wholeGroup = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::sle,
        arith::AddIOp::create(b, loc, kk, i64Constant(b, loc, g)), a.validCols);
    return scf::IfOp::create(
               b, loc, arith::AndIOp::create(b, loc, rowOn, wholeGroup),
               [&](OpBuilder &b, Location loc) {
                 scf::YieldOp::create(b, loc, Value(LLVM::LoadOp::create(b, loc, i32, ptr, align)));
               },
               [&](OpBuilder &b, Location loc) {
                 // A row past a's is not read at all: a masked load whose lanes are all off
                 // still takes an address, past a's memory there, and where that page is
                 // not mapped the CPU's fault suppression takes a microcode assist per load
                 // (int8 17x4096x4096, one row in the edge block, ran 16 times slower in
                 // processes whose a ended at a page's end).
                 auto groupType = VectorType::get({g}, bits);
                 Value zero =
                     arith::ConstantOp::create(b, loc, groupType, b.getZeroAttr(groupType));
                 Value group =
                     scf::IfOp::create(
                         b, loc, rowOn,
                         [&](OpBuilder &b, Location loc) {
                           Value on = lanesBelow(b, loc, g, kk, a.validCols);
                           scf::YieldOp::create(b, loc,
                                                Value(LLVM::MaskedLoadOp::create(
                                                    b, loc, groupType, ptr, on, zero, align)));
                         },
                         [&](OpBuilder &b, Location loc) { scf::YieldOp::create(b, loc, zero); })
                         .getResult(0);
                 scf::YieldOp::create(b, loc, Value(LLVM::BitcastOp::create(b, loc, i32, group)));
               })
        .getResult(0);
  };
  // At the edges the loop ends after b's last group row that the mask keeps. Full blocks
  // whose `kCount` ends inside a group run that group from a's masked words after the
  // loop (b's panels hold zeros past K): a K of 1001 had sent every block the edges' way,
  // int8 1001^3 at 0.78x of _int_mm where 1000^3 ran at 0.95x.
  Value end = kCount ? kCount : i64Constant(b, loc, k);
  if (!fullBlocks)
    end = arith::MinSIOp::create(
        b, loc, end, arith::MulIOp::create(b, loc, bView.validRows, i64Constant(b, loc, g)));
  // One group of k: the accumulator rows after it (and, for a + 128, the columns' running
  // sums of b).
  auto groupOfK =
      [&](OpBuilder &b, Location loc, Value kk, ValueRange state, Value kEnd) {
        SmallVector<Value> bGroups = bGroupsAt(b, loc, kk, kEnd);
        if (flipB) {
          Value signs = words(b, loc, vector::BroadcastOp::create(b, loc, wordsType, flipSigns));
          for (Value &bGroup : bGroups)
            bGroup = arith::XOrIOp::create(b, loc, bGroup, signs);
        }
        SmallVector<Value> next;
        for (int64_t i = 0; i < int64_t(accRows.size()); ++i) {
          Value group = aWordAt(b, loc, i, kk, kEnd);
          if (offsetA)
            group = arith::XOrIOp::create(b, loc, group, flipSigns);
          Value aGroups = words(b, loc, vector::BroadcastOp::create(b, loc, wordsType, group));
          Value result = state[i];
          for (auto [c, bGroup] : llvm::enumerate(bGroups)) {
            int64_t first = int64_t(c) * kDotLanes;
            Value acc = slice(b, loc, result, first, kDotLanes);
            Value sum = flipB ? dotProduct(b, loc, acc, bGroup, aGroups)
                              : dotProduct(b, loc, acc, aGroups, bGroup);
            result = vector::InsertStridedSliceOp::create(b, loc, sum, result, ArrayRef<int64_t>{first},
                                                          ArrayRef<int64_t>{1});
          }
          next.push_back(result);
        }
        if (sumsOfB) {
          Value offsets = words(b, loc, vector::BroadcastOp::create(b, loc, wordsType, flipSigns));
          for (auto [c, bGroup] : llvm::enumerate(bGroups))
            next.push_back(dotProduct(b, loc, state[accRows.size() + c], offsets, bGroup));
        }
        return next;
      };
  // Rows past a's kept ones leave the accumulator they came with.
  auto keptRows = [&](SmallVector<Value> rows) {
    if (redirectsRows)
      for (auto [i, row] : llvm::enumerate(rows))
        row = arith::SelectOp::create(b, loc, edges->aRowKept[i], row, accRows[i]);
    return rows;
  };
  if (flipB)
    return keptRows(flippedKLoop(b, loc, a.element, aElementAt, accRows, end, g, groupOfK));
  Value loopEnd = fullBlocks && kCount ? wholeGroupsOf(b, loc, end, g) : end;
  auto loop =
      scf::ForOp::create(b, loc, i64Constant(b, loc, 0), loopEnd, i64Constant(b, loc, g), carried,
                         [&](OpBuilder &b, Location loc, Value kk, ValueRange state) {
                           scf::YieldOp::create(b, loc, groupOfK(b, loc, kk, state, {}));
                         });
  SmallVector<Value> results(loop.getResults());
  if (loopEnd != end)
    results = lastPartialGroup(b, loc, loopEnd, end, results, groupOfK);
  SmallVector<Value> rows(ArrayRef<Value>(results).take_front(accRows.size()));
  if (sumsOfB)
    for (Value &row : rows)
      for (int64_t c = 0; c < chunks; ++c) {
        Value corrected = arith::SubIOp::create(
            b, loc, slice(b, loc, row, c * kDotLanes, kDotLanes), results[accRows.size() + c]);
        row = vector::InsertStridedSliceOp::create(b, loc, corrected, row, ArrayRef<int64_t>{c * kDotLanes},
                                                   ArrayRef<int64_t>{1});
      }
  return keptRows(rows);
}

/// x == y, for an i64 x.
Value equals(OpBuilder &b, Location loc, Value x, int64_t y) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, i64Constant(b, loc, y));
}

/// x > 0, for an i64 x.
Value positive(OpBuilder &b, Location loc, Value x) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, x, i64Constant(b, loc, 0));
}

/// The accumulator's rows, which the microkernels carry one vector each.
SmallVector<Value> accumulatorRows(OpBuilder &b, Location loc, Value acc) {
  SmallVector<Value> rows;
  for (int64_t i = 0; i < cast<VectorType>(acc.getType()).getDimSize(0); ++i)
    rows.push_back(vector::ExtractOp::create(b, loc, acc, ArrayRef<int64_t>{i}));
  return rows;
}

Value joinRows(OpBuilder &b, Location loc, Value acc, ValueRange rows) {
  auto accType = cast<VectorType>(acc.getType());
  Value result = arith::ConstantOp::create(b, loc, accType, b.getZeroAttr(accType));
  for (auto [i, row] : llvm::enumerate(rows))
    result = vector::InsertOp::create(b, loc, row, result, ArrayRef<int64_t>{int64_t(i)});
  return result;
}

struct DotLowering : OpConversionPattern<DotOp> {
  DotLowering(const TypeConverter &converter, MLIRContext *ctx, CpuDotFeatures features)
      : OpConversionPattern(converter, ctx), features(features) {}
  CpuDotFeatures features;

  LogicalResult matchAndRewrite(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    if (readsOperandsFromMemory(op))
      return lowerFromMemory(op, adaptor, rewriter);
    if (op.getUnsignedA())
      return op.emitOpError("unsigned_a is read from memory by the dot itself, as b_k_group");
    if (op.kGroup() > 1)
      return op.emitOpError(
          "b_k_group is read from memory by the dot itself: a and b must be blocks loaded from "
          "affine addresses with per-dimension masks");
    return lowerAsContract(op, adaptor, rewriter);
  }

  LogicalResult lowerFromMemory(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const {
    Location loc = op.getLoc();
    auto aType = op.getA().getType(), bType = op.getB().getType();
    int64_t group = op.kGroup();
    int64_t m = aType.getDimSize(0), k = aType.getDimSize(1), n = bType.getDimSize(1) / group;
    Type accElement = cast<RankedTensorType>(op.getAcc().getType()).getElementType();
    std::optional<GroupedDot> instruction =
        dotInstructionFor(aType.getElementType(), accElement, features);
    if (op.getUnsignedA()) {
      // Taken only where vpdpbusd reads b's quads as they lie: its u8 side is a + 128.
      if (group != 4 || !instruction || !instruction->offsetA)
        return op.emitOpError("unsigned_a needs b_k_group = 4 on a target with vpdpbusd "
                              "(AVX512-VNNI), got b_k_group = ")
               << group;
      instruction->unsignedA = true;
    }
    if (group > 1) {
      // b in groups of k is read only by the instruction that takes them.
      if (!instruction || instruction->group != group)
        return op.emitOpError("b_k_group = ")
               << group << " needs the target's dot-product instruction for "
               << aType.getElementType() << " in groups of " << group
               << " k: vdpbf16ps (AVX512-BF16) takes bf16 pairs, vpdpbusd (AVX512-VNNI) int8 quads";
      if (n % kDotLanes != 0)
        return op.emitOpError("b_k_group needs N a multiple of ") << kDotLanes << ", got " << n;
      if (!masksToZeros(*stridedBlockOf(op.getA())))
        return op.emitOpError(
            "b_k_group reads a's masked-off lanes as zero; its load gives them another value");
    }
    OperandView a = viewOf(rewriter, loc, *stridedBlockOf(op.getA()), aType);
    OperandView b = viewOf(rewriter, loc, *stridedBlockOf(op.getB()), bType);
    // Rows against columns whose k is unit-stride (b transposed): dots along k.
    if (group == 1 && getConstantIntValue(a.colStride) == 1 &&
        getConstantIntValue(b.rowStride) == 1 &&
        takesRowDots(aType.getElementType(), accElement, m, n, features) &&
        masksToZeros(*stridedBlockOf(op.getA())) && masksToZeros(*stridedBlockOf(op.getB()))) {
      // No k where a's row is not kept: nothing of a or b is read then.
      Value kCount = arith::SelectOp::create(
          rewriter, loc,
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sgt, a.validRows,
                                i64Constant(rewriter, loc, 0)),
          arith::MaxSIOp::create(rewriter, loc,
                                 arith::MinSIOp::create(rewriter, loc, a.validCols, b.validRows),
                                 i64Constant(rewriter, loc, 0)),
          i64Constant(rewriter, loc, 0));
      RowDotOperands operands{a.base,      a.rowStride, a.validRows, b.base,    b.colStride,
                              b.validCols, kCount,      a.element,   int64_t(k)};
      SmallVector<Value> rows = rowDotMicrokernel(
          rewriter, loc, operands, accumulatorRows(rewriter, loc, adaptor.getAcc()), features);
      rewriter.replaceOp(op, joinRows(rewriter, loc, adaptor.getAcc(), rows));
      return success();
    }
    if (group > 1) {
      if (getConstantIntValue(a.colStride) != 1 || getConstantIntValue(b.colStride) != 1)
        return op.emitOpError("b_k_group reads a's k and b's groups at unit stride: both column "
                              "strides must be known to be 1");
      return lowerGroupedLayout(op, adaptor, rewriter, a, b, m, k, n, *instruction);
    }
    std::optional<GroupedDot> grouped = groupedDotFor(a, accElement, k, n, features);
    if (grouped && getConstantIntValue(a.colStride) == 1 &&
        masksToZeros(*stridedBlockOf(op.getA())) && masksToZeros(*stridedBlockOf(op.getB())))
      return lowerGroupedInPlace(op, adaptor, rewriter, a, b, m, k, n, *grouped);
    auto eq = [&](Value x, int64_t y) { return equals(rewriter, loc, x, y); };
    SmallVector<Value> rows = accumulatorRows(rewriter, loc, adaptor.getAcc());
    // Where both operands' masked lanes are zeros, the products past either operand's
    // kept k are zeros: the full blocks' loop stops at the smaller (the last block of a K
    // that BLOCK_K does not divide had taken the masked path, a third of the work at
    // K = 384 with BLOCK_K = 256), and blocks at the row and column edges take it too
    // (BlockEdges).
    bool zeroOthers = !grouped && masksToZeros(*stridedBlockOf(op.getA())) &&
                      masksToZeros(*stridedBlockOf(op.getB()));
    Value unitB = eq(b.colStride, 1);
    Value whole = arith::AndIOp::create(rewriter, loc, eq(a.validRows, m), eq(b.validCols, n));
    Value full = arith::AndIOp::create(rewriter, loc, unitB, whole);
    Value kCount;
    if (zeroOthers) {
      kCount = keptK(rewriter, loc, a, b, k);
      // The full blocks' loop takes kUnrolledSteps k at a time; a K that leaves fewer
      // (K not a multiple of 4) goes the edges' way, one k at a time.
      if (k % kUnrolledSteps == 0)
        full = arith::AndIOp::create(
            rewriter, loc, full,
            eq(arith::AndIOp::create(rewriter, loc, kCount,
                                     i64Constant(rewriter, loc, kUnrolledSteps - 1)),
               0));
    } else
      for (Value on : {eq(a.validCols, k), eq(b.validRows, k)})
        full = arith::AndIOp::create(rewriter, loc, full, on);
    auto edgesOrMasked = [&](OpBuilder &builder, Location l) {
      if (!zeroOthers) {
        scf::YieldOp::create(builder, l, microkernel(builder, l, a, b, rows, k, false));
        return;
      }
      // a's first row is read for every row, and must be there.
      Value someKept =
          arith::AndIOp::create(builder, l, unitB,
                                arith::AndIOp::create(builder, l, positive(builder, l, a.validRows),
                                                      positive(builder, l, b.validCols)));
      auto byEdges = scf::IfOp::create(
          builder, l, someKept,
          [&](OpBuilder &then, Location at) {
            BlockEdges edges = blockEdgesOf(then, at, a, b, m, n);
            scf::YieldOp::create(then, at,
                                 microkernel(then, at, a, b, rows, k, true, kCount, &edges));
          },
          [&](OpBuilder &otherwise, Location at) {
            // With b's rows known to be unit-stride, nothing reaches here but a block with
            // no row or column kept, to which every product is zero.
            if (getConstantIntValue(b.colStride) == 1)
              scf::YieldOp::create(otherwise, at, rows);
            else
              scf::YieldOp::create(otherwise, at, microkernel(otherwise, at, a, b, rows, k, false));
          });
      scf::YieldOp::create(builder, l, byEdges.getResults());
    };

    auto branch = scf::IfOp::create(
        rewriter, loc, full,
        [&](OpBuilder &builder, Location l) {
          if (!grouped) {
            scf::YieldOp::create(builder, l, microkernel(builder, l, a, b, rows, k, true, kCount));
            return;
          }
          // A group of k is one 32-bit load of a only where its k is unit-stride.
          Value unitK = arith::CmpIOp::create(builder, l, arith::CmpIPredicate::eq, a.colStride,
                                              i64Constant(builder, l, 1));
          auto byGroups = scf::IfOp::create(
              builder, l, unitK,
              [&](OpBuilder &then, Location at) {
                scf::YieldOp::create(
                    then, at, groupedMicrokernel(then, at, a, b, rows, k, *grouped, false, true));
              },
              [&](OpBuilder &otherwise, Location at) {
                scf::YieldOp::create(otherwise, at, microkernel(otherwise, at, a, b, rows, k, true));
              });
          scf::YieldOp::create(builder, l, byGroups.getResults());
        },
        edgesOrMasked);
    rewriter.replaceOp(op, joinRows(rewriter, loc, adaptor.getAcc(), branch.getResults()));
    return success();
  }

  /// A dot by a grouped dot-product instruction from b as KxN, a's k unit-stride, where
  /// the masks leave zeros: full blocks, and blocks at the row and column edges or in the
  /// last chunk of a K that BLOCK_K does not divide by the same loop over the k both
  /// operands keep, b's rows under the kept columns' mask (BlockEdges). Either had taken the masked
  /// path, a branch per element: int8 40x512x320 (BLOCK_K 512, 4-row blocks) ran at 0.02x of
  /// _int_mm, 63x512x500 at 0.1x, bf16 40x512x320 at 0.01x of oneDNN.
  LogicalResult lowerGroupedInPlace(DotOp op, OpAdaptor adaptor,
                                    ConversionPatternRewriter &rewriter, const OperandView &a,
                                    const OperandView &b, int64_t m, int64_t k, int64_t n,
                                    const GroupedDot &instruction) const {
    Location loc = op.getLoc();
    SmallVector<Value> rows = accumulatorRows(rewriter, loc, adaptor.getAcc());
    auto eq = [&](Value x, int64_t y) { return equals(rewriter, loc, x, y); };
    // (Never below zero: the row sums divide it unsigned.)
    Value kCount = keptK(rewriter, loc, a, b, k);
    Value unitB = eq(b.colStride, 1);
    // Full blocks over all of the chunk's k: the loop's bound a constant. A run-time bound
    // cost blocks of 16 bf16 rows (32 accumulator registers) 5-15% (16x2048x2048, 2 threads,
    // znver5); the last chunk of a K that BLOCK_K does not divide takes the edges' loop.
    Value whole = arith::AndIOp::create(
        rewriter, loc, arith::AndIOp::create(rewriter, loc, eq(a.validRows, m), eq(b.validCols, n)),
        eq(kCount, k));
    // Blocks of more than 8 rows take the edges' loop with all their rows: a pointer per
    // row (a's first where the row is not kept) spilled the general registers of 16 bf16
    // rows, and so the full blocks' accumulators (16x2048x2048 lost 15%). Such blocks come
    // from rows that divide M (ops::readsFewRowsInPlace); others take the masked path.
    bool redirectsRows = m <= kRedirectedRows;
    auto edgesOrMasked = [&](OpBuilder &builder, Location l) {
      // a's first row is read for every row, and must be there.
      Value rowsKept =
          redirectsRows ? positive(builder, l, a.validRows) : equals(builder, l, a.validRows, m);
      Value someKept = arith::AndIOp::create(
          builder, l, unitB,
          arith::AndIOp::create(builder, l, rowsKept, positive(builder, l, b.validCols)));
      auto byEdges = scf::IfOp::create(
          builder, l, someKept,
          [&](OpBuilder &then, Location at) {
            BlockEdges edges = blockEdgesOf(then, at, a, b, m, n, redirectsRows);
            scf::YieldOp::create(then, at,
                                 groupedMicrokernel(then, at, a, b, rows, k, instruction, false,
                                                    true, kCount, &edges));
          },
          [&](OpBuilder &otherwise, Location at) {
            // With b's rows known to be unit-stride and every row redirected, nothing
            // reaches here but a block with no row or column kept, to which every product
            // is zero.
            if (getConstantIntValue(b.colStride) == 1 && redirectsRows)
              scf::YieldOp::create(otherwise, at, rows);
            else
              scf::YieldOp::create(otherwise, at, microkernel(otherwise, at, a, b, rows, k, false));
          });
      scf::YieldOp::create(builder, l, byEdges.getResults());
    };
    auto branch = scf::IfOp::create(
        rewriter, loc, arith::AndIOp::create(rewriter, loc, unitB, whole),
        [&](OpBuilder &builder, Location l) {
          scf::YieldOp::create(
              builder, l, groupedMicrokernel(builder, l, a, b, rows, k, instruction, false, true));
        },
        edgesOrMasked);
    rewriter.replaceOp(op, joinRows(rewriter, loc, adaptor.getAcc(), branch.getResults()));
    return success();
  }

  /// A dot whose b keeps its k in groups: full blocks and edges both by the
  /// instruction, the edges under masks; or, where the host has tile registers for the
  /// dtype and the block fits them, all of it on the tiles.
  LogicalResult lowerGroupedLayout(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter,
                                   const OperandView &a, const OperandView &b, int64_t m, int64_t k,
                                   int64_t n, const GroupedDot &instruction) const {
    Location loc = op.getLoc();
    SmallVector<Value> rows = accumulatorRows(rewriter, loc, adaptor.getAcc());
    // The tiles multiply s8 by s8: a dot of a + 128 (unsigned_a) stays on vpdpbusd.
    if ((instruction.offsetA ? features.amxInt8 : features.amxBf16) && fitsMatrixTiles(m, n) &&
        !instruction.unsignedA) {
      SmallVector<Value> byTiles = matrixTileMicrokernel(
          rewriter, loc, TileBlock{{a.base, a.rowStride, a.element}, a.validRows, a.validCols},
          TileBlock{{b.base, b.rowStride, b.element}, b.validRows, b.validCols}, rows, k);
      rewriter.replaceOp(op, joinRows(rewriter, loc, adaptor.getAcc(), byTiles));
      return success();
    }
    // A block of whole rows and columns takes the full blocks' loop over the k both
    // operands keep: the last block of a K that BLOCK_K does not divide (1000 with 512)
    // too, and a K that ends inside a group, which the masked path (a branch per row and
    // group of k) had taken.
    auto eq = [&](Value x, int64_t y) { return equals(rewriter, loc, x, y); };
    int64_t g = instruction.group;
    // (Never below zero: the row sums divide it unsigned.)
    Value kCount = arith::MaxSIOp::create(
        rewriter, loc,
        arith::MinSIOp::create(
            rewriter, loc, a.validCols,
            arith::MulIOp::create(rewriter, loc, b.validRows, i64Constant(rewriter, loc, g))),
        i64Constant(rewriter, loc, 0));
    Value full = arith::AndIOp::create(rewriter, loc, eq(a.validRows, m), eq(b.validCols, n * g));
    auto branch = scf::IfOp::create(
        rewriter, loc, full,
        [&](OpBuilder &builder, Location l) {
          scf::YieldOp::create(
              builder, l,
              groupedMicrokernel(builder, l, a, b, rows, k, instruction, true, true, kCount));
        },
        [&](OpBuilder &builder, Location l) {
          scf::YieldOp::create(
              builder, l, groupedMicrokernel(builder, l, a, b, rows, k, instruction, true, false));
        });
    rewriter.replaceOp(op, joinRows(rewriter, loc, adaptor.getAcc(), branch.getResults()));
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
                                          CpuDotFeatures features) {
  patterns.add<DotLowering>(converter, patterns.getContext(), features);
}
