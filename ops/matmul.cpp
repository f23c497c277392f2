// C = epilogue(A @ B) for matmul, matmul_leaky_relu and matmul_leaky_relu_backward: one
// generator, one tile program.
//
// Program instance p computes the BLOCK_M x BLOCK_N block of C at (pid_m, pid_n), where
// programs are ordered in groups of GROUP_M block rows (so consecutive programs share
// columns of B and rows of A in cache), and walks K in BLOCK_K steps with an f32 (i32
// for int8) accumulator. The epilogue acts on the accumulator before the cast to the
// output type, so leaky_relu sees the exact sum that torch's matmul would round.
//
// Arguments: a, b, c, M, N, K, then the strides (in elements) of a, b and c along their
// two dimensions (for b packed into panels, see `packed_b` below), then negative_slope (f32) for
// matmul_leaky_relu and matmul_leaky_relu_backward, then, where the spec names a third dtype,
// the bias pointer and its stride (matmul, matmul_leaky_relu) or the activation pointer and its
// two strides (matmul_leaky_relu_backward). Strides are arguments, so transposed and sliced
// views need no copy.
//
// The bias (length N) is added to the accumulator before the epilogue, in the
// accumulator's type, as torch's addmm adds it before rounding. It is read as a
// BLOCK_M x BLOCK_N block whose rows all point at the same N entries (row stride 0), so
// that it arrives in the accumulator's own layout with no change of layout on GPUs.
#include "ops/KernelBuilders.h"

#include "tile/Analysis/Divisibility.h"
#include "tile/Analysis/PointerRange.h"
#include "tile/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <stdexcept>

using namespace mlir;

namespace tile::ops {
namespace {

namespace tt = mlir::tile;

/// Builds the tile program with typed helpers for the block shapes it uses.
class MatmulBuilder {
public:
  MatmulBuilder(OpBuilder &b, Location loc, Type index) : b(b), loc(loc), index(index) {}

  Value constant(int64_t value) { return arith::ConstantIntOp::create(b, loc, index, value); }

  Value ceilDiv(Value x, int64_t y) {
    return arith::DivSIOp::create(b, loc, arith::AddIOp::create(b, loc, x, constant(y - 1)),
                                  constant(y));
  }

  /// start + [0, size) as a 1-D block of the index type.
  Value lanes(Value start, int64_t size) {
    Value range = tt::MakeRangeOp::create(b, loc, blockOf({size}, b.getI32Type()), 0, size);
    if (index != b.getI32Type())
      range = arith::ExtSIOp::create(b, loc, blockOf({size}, index), range);
    return arith::AddIOp::create(b, loc, splat(start, {size}), range);
  }

  Value splat(Value scalar, ArrayRef<int64_t> shape) {
    return tt::SplatOp::create(b, loc, blockOf(shape, scalar.getType()), scalar);
  }

  /// x[:, None] (axis 1) or x[None, :] (axis 0), stretched to `shape`.
  Value spread(Value x, int axis, ArrayRef<int64_t> shape) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> expanded(type.getShape());
    expanded.insert(expanded.begin() + axis, 1);
    Value column = tt::ExpandDimsOp::create(b, loc, blockOf(expanded, type.getElementType()), x,
                                            axis);
    return tt::BroadcastOp::create(b, loc, blockOf(shape, type.getElementType()), column);
  }

  /// The pointers base + rows[:, None] * rowStride + cols[None, :] * colStride and the
  /// mask rows[:, None] < rowCount & cols[None, :] < colCount of a 2-D block.
  std::pair<Value, Value> block(Value base, Value rows, Value rowStride, Value rowCount,
                                Value cols, Value colStride, Value colCount) {
    int64_t height = cast<RankedTensorType>(rows.getType()).getDimSize(0);
    int64_t width = cast<RankedTensorType>(cols.getType()).getDimSize(0);
    SmallVector<int64_t> shape = {height, width};
    Value rowOffsets = arith::MulIOp::create(b, loc, rows, splat(rowStride, {height}));
    Value colOffsets = arith::MulIOp::create(b, loc, cols, splat(colStride, {width}));
    Value offsets = arith::AddIOp::create(b, loc, spread(rowOffsets, 1, shape),
                                          spread(colOffsets, 0, shape));
    Value ptrs = tt::AddPtrOp::create(b, loc, blockOf(shape, base.getType()),
                                      splat(base, shape), offsets);
    Value rowsIn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, rows,
                                         splat(rowCount, {height}));
    Value colsIn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, cols,
                                         splat(colCount, {width}));
    Value mask = arith::AndIOp::create(b, loc, spread(rowsIn, 1, shape), spread(colsIn, 0, shape));
    return {ptrs, mask};
  }

  RankedTensorType blockOf(ArrayRef<int64_t> shape, Type element) {
    return RankedTensorType::get(shape, element);
  }

  OpBuilder &b;
  Location loc;
  Type index;
};

/// leaky_relu(x) = x where x > 0, else x * negative_slope, as torch computes it (NaN
/// stays NaN).
Value leakyRelu(OpBuilder &b, Location loc, Value acc, Value slope) {
  auto type = cast<RankedTensorType>(acc.getType());
  Value zero = arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
  Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, acc, zero);
  Value scaled = arith::MulFOp::create(
      b, loc, acc, tt::SplatOp::create(b, loc, type, slope));
  return arith::SelectOp::create(b, loc, positive, acc, scaled);
}

/// acc + bias[None, :] in the accumulator's type, the bias widened first (extf for
/// floats, extsi for int8). Its lanes past N read nothing and add zero.
Value addBias(MatmulBuilder &mb, Value acc, Value bias, Value biasStride, Value cols, Value n) {
  OpBuilder &b = mb.b;
  Location loc = mb.loc;
  auto accType = cast<RankedTensorType>(acc.getType());
  ArrayRef<int64_t> shape = accType.getShape();
  int64_t width = shape[1];
  Value offsets = arith::MulIOp::create(b, loc, cols, mb.splat(biasStride, {width}));
  Value ptrs = tt::AddPtrOp::create(b, loc, mb.blockOf(shape, bias.getType()),
                                    mb.splat(bias, shape), mb.spread(offsets, 0, shape));
  Value colsIn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, cols, mb.splat(n, {width}));
  Value values = tt::LoadOp::create(b, loc, ptrs, mb.spread(colsIn, 0, shape));
  Type element = cast<RankedTensorType>(values.getType()).getElementType();
  Type accElement = accType.getElementType();
  if (element != accElement)
    values = isa<FloatType>(accElement)
                 ? Value(arith::ExtFOp::create(b, loc, accType, values))
                 : Value(arith::ExtSIOp::create(b, loc, accType, values));
  return isa<FloatType>(accElement) ? Value(arith::AddFOp::create(b, loc, acc, values))
                                    : Value(arith::AddIOp::create(b, loc, acc, values));
}

/// leaky_relu's backward applied to the accumulator, the gradient of its output:
/// acc where activation > 0, else acc * negative_slope, as torch's leaky_relu_backward
/// computes it from leaky_relu's input or, for a slope >= 0, its output (the two are > 0 at
/// the same places). The activation is read as the M x N block of c's own place, in the
/// accumulator's layout; its lanes past M or N read nothing.
Value leakyReluBackward(MatmulBuilder &mb, Value acc, Value activation, Value rowStride,
                        Value colStride, Value rows, Value cols, Value m, Value n, Value slope) {
  OpBuilder &b = mb.b;
  Location loc = mb.loc;
  auto accType = cast<RankedTensorType>(acc.getType());
  auto [ptrs, mask] = mb.block(activation, rows, rowStride, m, cols, colStride, n);
  Value values = tt::LoadOp::create(b, loc, ptrs, mask);
  if (cast<RankedTensorType>(values.getType()).getElementType() != accType.getElementType())
    values = arith::ExtFOp::create(b, loc, accType, values);
  Value zero = arith::ConstantOp::create(b, loc, accType, b.getZeroAttr(accType));
  Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, values, zero);
  Value scaled = arith::MulFOp::create(b, loc, acc, tt::SplatOp::create(b, loc, accType, slope));
  return arith::SelectOp::create(b, loc, positive, acc, scaled);
}

/// Stream-K, after CUTLASS's hybrid: where the tiles make more than one wave and the
/// last is partly filled, the tiles before the split ones go whole to the programs in the
/// persistent kernel's strided order (tile p, p + programs, ...: the tiles that run at
/// once stay neighbours in the grouped order, sharing the L2), and the K steps of the
/// split tiles are shared so that no program waits out a partly filled wave. Two ways:
///
/// - Mode 1 (CUTLASS's): the split tiles are those of the last two waves; their steps,
///   laid end to end (tile t's are [t * steps, (t + 1) * steps)), are split evenly over
///   the programs, q * programs + r of them, the first r programs taking q + 1 and the
///   others q. A share is then at least a tile's steps and less than two tiles'; only
///   its first tile can start inside a tile, so a program leaves at most one partial sum
///   (in its own slot). The programs run at K offsets spread over the whole tile, so
///   the L2 must hold every K slab of the split tiles' operands at once: at 4096^3 on an
///   H100 it does not, and the DRAM reads grow by 2.5x.
/// - Mode 2 (lock-step): only the r tiles of the partly filled last wave are split. Tile
///   j's first c = ceil(r * steps / programs) steps run on program j, as a whole tile
///   would, and their remaining steps (`tail` each), laid end to end, are split evenly
///   over the programs - r that have no tile in that wave (which then finish by step c
///   too). The first programs walk K in step with each other as in the whole waves, and
///   the others only read the tails' slabs, a small part of the operands, so the L2 holds
///   what both read. Helper h's piece of tile j leaves its partial sum in slot j + h:
///   both grow along the tails, so no two pieces share a slot, and j + h < programs.
///
/// The program that runs a tile's first step finishes it: the programs whose shares
/// start inside it ran their parts first (mode 1) or alongside (mode 2), left their
/// partial sums in the workspace and signalled; the finisher adds them once signalled.
///
/// All of it is 32-bit arithmetic: the builder takes stream-K only with 32-bit indices,
/// where the split tiles' steps (fewer than twice the programs' tiles' worth) stay far
/// below 2^31, and a 64-bit division on NVIDIA is a call into a runtime helper, which
/// makes the driver's compiler serialize the kernel's warpgroup MMAs.
struct StreamKShare {
  Value steps;                    ///< i32: each tile's K steps
  Value quotient, remainder;      ///< i32: the shared steps, q * sharers + r
  Value tile;                     ///< i32: the walk's tile
  Value kBegin, kEnd;             ///< i32: the tile's steps this program runs (0 .. steps)
  Value firstStep, endStep;       ///< index type: the K loop's bounds, the program's steps
  Value stepShift;                ///< index type: loop count - shift = the tile's own step
  Value storeSlot;                ///< i32: where a piece that starts inside its tile leaves its sum
  Value waitBegin, waitEnd;       ///< i32: the sharers whose partial sums a finisher adds
  Value waitSlotShift;            ///< i32: sharer + shift = the slot it left its sum in

  /// The walk over program `pid`'s whole tiles, then over its pieces of the split ones
  /// (all i32, `steps` of the index type); the builder is left in its body.
  static StreamKShare of(MatmulBuilder &mb, Value pid, Value programs, Value tiles, Value steps, int64_t mode) {
    OpBuilder &b = mb.b;
    Location loc = mb.loc;
    StreamKShare s;
    auto c = [&](int64_t v) { return constant(b, loc, v); };
    auto add = [&](Value x, Value y) { return arith::AddIOp::create(b, loc, x, y).getResult(); };
    auto sub = [&](Value x, Value y) { return arith::SubIOp::create(b, loc, x, y).getResult(); };
    auto mul = [&](Value x, Value y) { return arith::MulIOp::create(b, loc, x, y).getResult(); };
    auto div = [&](Value x, Value y) { return arith::DivSIOp::create(b, loc, x, y).getResult(); };
    auto max = [&](Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y).getResult(); };
    auto min = [&](Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y).getResult(); };
    auto less = [&](Value x, Value y) {
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y).getResult();
    };
    auto equal = [&](Value x, Value y) {
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, y).getResult();
    };
    auto both = [&](Value x, Value y) { return arith::AndIOp::create(b, loc, x, y).getResult(); };
    auto select = [&](Value when, Value x, Value y) { return arith::SelectOp::create(b, loc, when, x, y).getResult(); };
    // K = 0 still has one (empty, masked) step per tile: its programs store zeros.
    if (steps.getType() != b.getI32Type())
      steps = arith::TruncIOp::create(b, loc, b.getI32Type(), steps);
    s.steps = max(steps, c(1));
    Value lastWave = arith::RemSIOp::create(b, loc, tiles, programs);
    Value splits = both(less(programs, tiles), arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, lastWave, c(0)));
    Value splitTiles = select(splits, mode == 2 ? lastWave : add(lastWave, programs), c(0));
    Value wholeTiles = sub(tiles, splitTiles);
    // Whole tiles p, p + programs, ... below wholeTiles.
    Value wholeCount = select(less(pid, wholeTiles), div(add(sub(wholeTiles, pid), sub(programs, c(1))), programs), c(0));

    // The shared steps, laid end to end in pieces of `piece` steps per split tile, that
    // this program (sharer `sharer`) takes [start, end) of; each split tile's own first
    // `headSteps` steps (mode 2) run on the program of its number.
    Value piece, sharer, sharers, units, headSteps, heads;
    if (mode == 2) {
      headSteps = div(add(mul(lastWave, s.steps), sub(programs, c(1))), programs);
      piece = sub(s.steps, headSteps);
      heads = both(splits, less(pid, lastWave));
      Value helps = both(splits, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, pid, lastWave));
      sharer = select(helps, sub(pid, lastWave), c(0));
      sharers = sub(programs, lastWave);
      // Every program needs the shares' sizes: the finishers to find the pieces' owners.
      units = select(splits, mul(lastWave, piece), c(0));
    } else {
      piece = s.steps;
      sharer = pid;
      sharers = programs;
      units = mul(splitTiles, s.steps);
    }
    s.quotient = div(units, sharers);
    s.remainder = arith::RemSIOp::create(b, loc, units, sharers);
    Value start = s.shareStart(b, loc, sharer);
    Value end = s.shareStart(b, loc, add(sharer, c(1)));
    // A piece may be empty (mode 2, where the heads take every step); the floor of 1
    // keeps the unused divisions defined.
    Value pieceOr1 = max(piece, c(1));
    Value firstSplit = div(start, pieceOr1);
    Value lastSplit = div(add(end, sub(pieceOr1, c(1))), pieceOr1);
    Value splitCount = select(equal(start, end), c(0), sub(lastSplit, firstSplit));
    if (mode == 2)
      splitCount = select(heads, c(1), splitCount);

    auto walk = scf::ForOp::create(b, loc, c(0), add(wholeCount, splitCount), c(1));
    b.setInsertionPoint(walk.getBody()->getTerminator());
    Value item = walk.getInductionVar();
    Value whole = less(item, wholeCount);
    Value splitTile = add(firstSplit, sub(item, wholeCount)); // among the split tiles
    if (mode == 2)
      splitTile = select(heads, pid, splitTile);
    s.tile = select(whole, add(pid, mul(item, programs)), add(wholeTiles, splitTile));
    Value pieceStart = mul(splitTile, piece);
    Value from = max(start, pieceStart);
    Value to = min(end, add(pieceStart, piece));
    Value offset = mode == 2 ? headSteps : c(0); // where in its tile a piece's steps begin
    Value kBegin = add(offset, sub(from, pieceStart));
    Value kEnd = add(offset, sub(to, pieceStart));
    Value shared = sub(from, start); // the program's steps of its share before this piece
    if (mode == 2) {
      kBegin = select(heads, c(0), kBegin);
      kEnd = select(heads, headSteps, kEnd);
      shared = select(heads, c(0), shared);
    }
    s.kBegin = select(whole, c(0), kBegin);
    s.kEnd = select(whole, s.steps, kEnd);
    // The program's steps before this tile: its whole tiles', then its share's.
    Value before = select(whole, mul(item, s.steps), add(mul(wholeCount, s.steps), shared));
    s.firstStep = indexOf(mb, before);
    s.endStep = indexOf(mb, add(before, sub(s.kEnd, s.kBegin)));
    s.stepShift = indexOf(mb, sub(before, s.kBegin));

    // The sharers whose pieces a finisher adds: those holding the split tile's shared
    // steps, where it holds only some of them.
    Value shortOfEnd = less(s.kEnd, s.steps);
    if (mode == 2) {
      Value firstShared = mul(pid, piece);
      s.waitBegin = s.owner(b, loc, firstShared);
      s.waitEnd = select(shortOfEnd, add(s.owner(b, loc, sub(add(firstShared, piece), c(1))), c(1)), s.waitBegin);
      s.waitSlotShift = pid;
      s.storeSlot = add(splitTile, sharer);
    } else {
      // Programs program + 1 .. the owner of the tile's last step started inside it.
      s.waitBegin = add(pid, c(1));
      s.waitEnd = select(shortOfEnd, add(s.owner(b, loc, sub(add(pieceStart, piece), c(1))), c(1)), s.waitBegin);
      s.waitSlotShift = c(0);
      s.storeSlot = pid;
    }
    return s;
  }

  /// After the tile's K loop (`acc`): the finishing program adds the other programs'
  /// partial sums and runs `epilogue`; the others store theirs and signal.
  void finishTile(MatmulBuilder &mb, Value acc, Value workspace, Value flags, int64_t blockM, int64_t blockN,
                  function_ref<void(Value)> epilogue) const {
    OpBuilder &b = mb.b;
    Location loc = mb.loc;
    auto tilePointers = [&](Value slot) {
      Value first = arith::MulIOp::create(b, loc, indexOf(mb, slot), mb.constant(blockM * blockN));
      Value base = tt::AddPtrOp::create(b, loc, workspace.getType(), workspace, first);
      return mb.block(base, mb.lanes(mb.constant(0), blockM), mb.constant(blockN), mb.constant(blockM),
                      mb.lanes(mb.constant(0), blockN), mb.constant(1), mb.constant(blockN))
          .first;
    };
    auto flagOf = [&](Value slot) {
      return tt::AddPtrOp::create(b, loc, flags.getType(), flags, indexOf(mb, slot)).getResult();
    };
    Value finishes = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, kBegin, constant(b, loc, 0));
    auto split = scf::IfOp::create(b, loc, finishes, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(split.thenBlock());
      auto others = scf::ForOp::create(b, loc, waitBegin, waitEnd, constant(b, loc, 1), ValueRange{acc});
      {
        OpBuilder::InsertionGuard inner(b);
        b.setInsertionPointToStart(others.getBody());
        Value slot = arith::AddIOp::create(b, loc, others.getInductionVar(), waitSlotShift);
        Value sum = others.getRegionIterArg(0);
        tt::WaitFlagOp::create(b, loc, flagOf(slot));
        Value partial = tt::LoadOp::create(b, loc, tilePointers(slot));
        Value total = isa<FloatType>(cast<RankedTensorType>(sum.getType()).getElementType())
                          ? Value(arith::AddFOp::create(b, loc, sum, partial))
                          : Value(arith::AddIOp::create(b, loc, sum, partial));
        scf::YieldOp::create(b, loc, total);
      }
      epilogue(others.getResult(0));
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(split.elseBlock());
    tt::StoreOp::create(b, loc, tilePointers(storeSlot), acc, Value());
    tt::SignalFlagOp::create(b, loc, flagOf(storeSlot));
  }

private:
  static Value constant(OpBuilder &b, Location loc, int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  }
  static Value indexOf(MatmulBuilder &mb, Value v) {
    return mb.index.isInteger(32) ? v : arith::ExtSIOp::create(mb.b, mb.loc, mb.index, v).getResult();
  }
  /// The first step of sharer p's share: p * q + min(p, r).
  Value shareStart(OpBuilder &b, Location loc, Value p) const {
    return arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, p, quotient),
                                 arith::MinSIOp::create(b, loc, p, remainder));
  }
  /// The sharer whose share holds shared step `step`: the first r shares have q + 1
  /// steps, the rest q. Where q is 0 (fewer shared steps than sharers, which mode 2
  /// allows) every step lies in the first r shares; the divisor's floor of 1 only keeps
  /// the unused division defined.
  Value owner(OpBuilder &b, Location loc, Value step) const {
    Value one = constant(b, loc, 1);
    Value longShare = arith::AddIOp::create(b, loc, quotient, one);
    Value longSteps = arith::MulIOp::create(b, loc, remainder, longShare);
    Value inLong = arith::DivSIOp::create(b, loc, step, longShare);
    Value inShort = arith::AddIOp::create(
        b, loc, remainder,
        arith::DivSIOp::create(b, loc, arith::SubIOp::create(b, loc, step, longSteps),
                               arith::MaxSIOp::create(b, loc, quotient, one)));
    Value isLong = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, step, longSteps);
    return arith::SelectOp::create(b, loc, isLong, inLong, inShort);
  }
};

Value castAccumulator(OpBuilder &b, Location loc, Value acc, Type out) {
  auto type = cast<RankedTensorType>(acc.getType());
  if (type.getElementType() == out)
    return acc;
  return arith::TruncFOp::create(b, loc, type.clone(out), acc);
}

} // namespace

OwningOpRef<ModuleOp> buildMatmul(MLIRContext &context, const KernelSpec &spec) {
  bool leaky = spec.op == "matmul_leaky_relu";
  bool leakyBackward = spec.op == "matmul_leaky_relu_backward";
  if (leakyBackward ? spec.dtypes.size() != 3 : spec.dtypes.size() != 2 && spec.dtypes.size() != 3)
    throw std::invalid_argument(
        spec.op +
        (leakyBackward ? " takes an input, an output and an activation dtype, got spec "
                       : " takes an input, an output and optionally a bias dtype, got spec ") +
        spec.str());
  bool hasBias = !leakyBackward && spec.dtypes.size() == 3;
  int64_t blockM = spec.knob("BLOCK_M"), blockN = spec.knob("BLOCK_N");
  int64_t blockK = spec.knob("BLOCK_K"), groupM = spec.knob("GROUP_M");
  int64_t indexBits = spec.knob("index_bits");
  for (auto [name, value] : {std::pair{"BLOCK_M", blockM}, {"BLOCK_N", blockN}, {"BLOCK_K", blockK}})
    if (value <= 0 || (value & (value - 1)) != 0 || value > 1024)
      throw std::invalid_argument(spec.op + " " + name +
                                  " must be a power of two in [1, 1024], got " +
                                  std::to_string(value));
  if (groupM <= 0)
    throw std::invalid_argument(spec.op + " GROUP_M must be positive, got " + std::to_string(groupM));
  if (indexBits != 32 && indexBits != 64)
    throw std::invalid_argument(spec.op + " index_bits must be 32 or 64");

  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  Type input = elementTypeOf(context, spec.dtypes[0]);
  Type output = elementTypeOf(context, spec.dtypes[1]);
  bool integer = input.isInteger(8);
  Type accElement = integer ? Type(b.getI32Type()) : Type(b.getF32Type());
  if (integer ? output != accElement : !isa<FloatType>(output))
    throw std::invalid_argument(spec.op + " cannot produce " + spec.dtypes[1] + " from " +
                                spec.dtypes[0] + " inputs");
  if ((leaky || leakyBackward) && integer)
    throw std::invalid_argument(spec.op + " needs floating-point inputs, got " + spec.dtypes[0]);
  Type activationElement = leakyBackward ? elementTypeOf(context, spec.dtypes[2]) : Type();
  if (leakyBackward && !isa<FloatType>(activationElement))
    throw std::invalid_argument(spec.op + " takes a floating-point activation, got " +
                                spec.dtypes[2]);
  Type biasElement = hasBias ? elementTypeOf(context, spec.dtypes[2]) : Type();
  if (hasBias && biasElement != input && biasElement != output)
    throw std::invalid_argument(spec.op + " takes a bias in the input or the output dtype (" +
                                spec.dtypes[0] + " or " + spec.dtypes[1] + "), got " +
                                spec.dtypes[2]);
  Type index = b.getIntegerType(indexBits);
  Type inPtr = tt::PointerType::get(&context, input);
  Type outPtr = tt::PointerType::get(&context, output);

  SmallVector<Type> argTypes = {inPtr, inPtr, outPtr};
  argTypes.append(9, index); // M, N, K and the six strides
  if (leaky || leakyBackward)
    argTypes.push_back(b.getF32Type());
  unsigned biasArg = argTypes.size();
  if (hasBias) {
    argTypes.push_back(tt::PointerType::get(&context, biasElement));
    argTypes.push_back(index); // its stride
  }
  unsigned activationArg = argTypes.size();
  if (leakyBackward) {
    argTypes.push_back(tt::PointerType::get(&context, activationElement));
    argTypes.append(2, index); // its strides
  }
  // Stream-K (a persistent kernel whose programs take equal shares of all tiles' K
  // steps): its workspace (one accumulator tile per program) and a flag per program.
  int64_t streamKMode = spec.config.count("stream_k") ? spec.knob("stream_k") : 0;
  if (streamKMode < 0 || streamKMode > 2)
    throw std::invalid_argument(spec.op + " stream_k must be 0, 1 or 2, got " + std::to_string(streamKMode));
  bool streamKAsked = streamKMode != 0;
  // With 64-bit indices (an operand past 2^31 elements) the kernel walks whole tiles:
  // its share arithmetic stays 32-bit only where indices are (see StreamKShare), and
  // such problems make enough tiles that a partly filled last wave costs little.
  bool streamK = streamKAsked && indexBits == 32;
  unsigned workspaceArg = argTypes.size();
  if (streamK) {
    argTypes.push_back(tt::PointerType::get(&context, accElement));
    argTypes.push_back(tt::PointerType::get(&context, b.getI32Type()));
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(b, loc, spec.op, b.getFunctionType(argTypes, {}));
  func->setAttr(tt::kKernelAttrName, b.getUnitAttr());
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  auto arg = [&](unsigned i) { return body->getArgument(i); };
  Value a = arg(0), bPtr = arg(1), c = arg(2), m = arg(3), n = arg(4), k = arg(5);
  // Strides the caller guarantees to be 1 (bit i of `unit_strides` for argument 6 + i)
  // become constants, as Triton specializes arguments equal to 1: the GPU lowering then
  // knows at compile time which dimension of each operand is contiguous, and lays out
  // shared memory and picks its wide accesses by it.
  int64_t unitStrides = spec.config.count("unit_strides") ? spec.knob("unit_strides") : 0;
  MatmulBuilder mb(b, loc, index);
  // Bit 6 is the bias's stride, bits 7 and 8 the activation's.
  auto unitBit = [&](unsigned i) {
    if (leakyBackward && i > activationArg)
      return 7u + (i - activationArg - 1);
    return i == biasArg + 1 ? 6u : i - 6;
  };
  auto isUnit = [&](unsigned i) { return ((unitStrides >> unitBit(i)) & 1) != 0; };
  auto stride = [&](unsigned i) { return isUnit(i) ? mb.constant(1) : arg(i); };
  // Tensors the caller guarantees to be 16-byte aligned, in their data and their strides
  // (bit i of `divisibility_16` for a, b, c), and sizes it guarantees to be multiples of
  // 16 (bits 3, 4, 5 for M, N, K) have their arguments marked with the divisors the GPU
  // lowering proves its 16-byte accesses aligned, and whole at the edges, with. Bit 6:
  // the bias's data is 16-byte aligned (its reads then take a lane's columns in runs). Bit 7:
  // the activation's data and row stride are (its reads take runs of a lane's columns too).
  // Bits 8 and 9: a's and b's data and strides are 4-byte aligned where bits 0 and 1 are
  // not (no tensor map takes them; the lowering copies them in pieces of 4 or 8 bytes).
  int64_t divisibility16 = spec.config.count("divisibility_16") ? spec.knob("divisibility_16") : 0;
  for (unsigned size = 0; size < 3; ++size)
    if ((divisibility16 >> (3 + size)) & 1)
      func.setArgAttr(3 + size, mlir::tile::kDivisibilityAttrName, b.getI64IntegerAttr(16));
  if (hasBias && ((divisibility16 >> 6) & 1))
    func.setArgAttr(biasArg, mlir::tile::kDivisibilityAttrName, b.getI64IntegerAttr(16));
  // a, b, c and, for leaky_relu's backward, the activation (bit 7): data and strides.
  SmallVector<std::tuple<int, unsigned, unsigned, Type>, 4> aligned = {
      {0, 0u, 6u, input}, {1, 1u, 8u, input}, {2, 2u, 10u, output}};
  if (leakyBackward)
    aligned.push_back({7, activationArg, activationArg + 1, activationElement});
  for (auto [tensor, pointerArg, firstStride, element] : aligned) {
    int64_t bytes = (divisibility16 >> tensor) & 1                         ? 16
                    : tensor < 2 && ((divisibility16 >> (8 + tensor)) & 1) ? 4
                                                                           : 0;
    if (bytes == 0)
      continue;
    func.setArgAttr(pointerArg, mlir::tile::kDivisibilityAttrName, b.getI64IntegerAttr(bytes));
    int64_t elements = std::max<int64_t>(1, bytes / ((element.getIntOrFloatBitWidth() + 7) / 8));
    for (unsigned i = firstStride; i < firstStride + 2; ++i)
      if (!isUnit(i))
        func.setArgAttr(i, mlir::tile::kDivisibilityAttrName, b.getI64IntegerAttr(elements));
  }
  // With 32-bit indices the caller keeps every element's offset from its tensor's pointer
  // below 2^31 (index_bits=32 is chosen only then).
  // The launcher allocates the workspace (256-byte aligned, as torch's allocator), and
  // its offsets stay below 2^31 (a tile per resident program).
  if (streamK)
    func.setArgAttr(workspaceArg, mlir::tile::kDivisibilityAttrName, b.getI64IntegerAttr(16));
  if (indexBits == 32) {
    SmallVector<unsigned> pointerArgs = {0, 1, 2};
    if (hasBias)
      pointerArgs.push_back(biasArg);
    if (leakyBackward)
      pointerArgs.push_back(activationArg);
    if (streamK)
      pointerArgs.append({workspaceArg, workspaceArg + 1});
    for (unsigned pointerArg : pointerArgs)
      func.setArgAttr(pointerArg, mlir::tile::kPointerRangeAttrName, b.getI64IntegerAttr(32));
  }
  Value strideAm = stride(6), strideAk = stride(7), strideBk = stride(8), strideBn = stride(9);
  Value strideCm = stride(10), strideCn = stride(11);
  // b packed into panels (`packed_b`, set by the CPU binding): the columns of each block
  // column lie in their own panel, K rows of BLOCK_N contiguous elements, and the panels
  // are stride_bn elements apart (the caller passes the panel stride there; stride_bk is
  // BLOCK_N). A program's panel is then one contiguous run that it reads front to back,
  // where b's own rows may lie far apart (a page or more: a TLB miss and the same cache
  // sets for every row).
  //
  // packed_b = g > 1 keeps g consecutive k of each column side by side in the panel: row r
  // of the panel holds (k = r * g + s, column j) at r * BLOCK_N * g + j * g + s. That is
  // the operand of x86's dot-product instructions (vdpbf16ps takes pairs of bf16, vpdpbusd
  // quads of int8; AMX's tile registers 16 rows of such groups), which then read it with no
  // shuffle. The panel is whole: its rows of groups are rounded up to a multiple of 16 (64
  // bytes of k, one tile) and its BLOCK_N columns filled, with zeros past b's own (the
  // caller writes them); the mask keeps all of it, so that whole tiles are read from it.
  // The dot reads each group of a's k as one 32-bit word, so a's k must be unit-stride.
  int64_t packedB = spec.config.count("packed_b") ? spec.knob("packed_b") : 0;
  if (packedB != 0 && packedB != 1 && packedB != 2 && packedB != 4)
    throw std::invalid_argument(spec.op +
                                " packed_b must be 0 (b read in place), 1 (panels) or the k "
                                "per group of its panels, 2 or 4; got " +
                                std::to_string(packedB));
  int64_t kGroup = std::max<int64_t>(packedB, 1);
  if (kGroup > 1 && blockK % kGroup != 0)
    throw std::invalid_argument(spec.op + " packed_b=" + std::to_string(kGroup) +
                                " needs BLOCK_K a multiple of " + std::to_string(kGroup) +
                                ", got " + std::to_string(blockK));
  if (kGroup > 1 && !isUnit(7))
    throw std::invalid_argument(
        spec.op + " packed_b=" + std::to_string(kGroup) +
        " reads a's k in groups, which needs a's column stride to be 1 (unit_strides bit 1)");
  if (packedB)
    strideBk = mb.constant(blockN * kGroup);
  // unsigned_a (int8 on vpdpbusd, set by the CPU binding): the dot takes a + 128, vpdpbusd's
  // own unsigned side, and the bias carries what that adds, -128 times b's column sums,
  // which the caller computed once per call. Done inside the dot, the correction had each
  // program sum its rows of a in its K loop and reduce them after it, again for every
  // block column: 2-8% of an int8 call of K up to 256 past 1024 rows (a third at K = 4).
  bool unsignedA = spec.config.count("unsigned_a") && spec.knob("unsigned_a") != 0;
  if (unsignedA && (!integer || kGroup != 4 || !hasBias || spec.dtypes[2] != "i32"))
    throw std::invalid_argument(spec.op +
                                " unsigned_a=1 takes int8 with packed_b=4 and an int32 "
                                "bias (b's column sums times -128), got spec " +
                                spec.str());

  // Clusters of num_ctas programs (Hopper): the programs of a cluster take vertically
  // adjacent blocks of one block column, so that they read the same tiles of B, which
  // one multicast copy then brings to all of them. The cluster is the unit of the
  // grouped order below; a cluster's program whose rows lie past M computes nothing
  // that is stored (its rows are masked), and the launcher rounds the grid up to whole
  // clusters.
  int64_t clusterCtas = spec.config.count("num_ctas") ? spec.knob("num_ctas") : 1;
  if (clusterCtas != 1 && clusterCtas != 2)
    throw std::invalid_argument(spec.op + " num_ctas must be 1 or 2, got " + std::to_string(clusterCtas));
  if (clusterCtas > 1)
    func->setAttr(mlir::tile::kClusterCtasAttrName, b.getI64IntegerAttr(clusterCtas));
  bool persistent = spec.config.count("persistent") && spec.knob("persistent") != 0;
  bool grid2d = spec.config.count("grid_2d") && spec.knob("grid_2d") != 0;
  if (grid2d && (persistent || clusterCtas != 1))
    throw std::invalid_argument(spec.op +
                                " grid_2d=1 takes a program per block from a 2-D grid; it "
                                "needs persistent=0 and num_ctas=1");
  if (streamKAsked && (!persistent || clusterCtas != 1))
    throw std::invalid_argument(spec.op + " stream_k=" + std::to_string(streamKMode) + " splits the K steps of a persistent kernel's tiles over its "
                                "programs; it needs persistent=1 and num_ctas=1");
  // Tile numbers, and the walk over them, are 32-bit whatever the index width: a
  // non-persistent grid has a program per tile and stops below 2^31, and a 64-bit
  // division on NVIDIA is a call into a runtime helper, which makes the driver's
  // compiler serialize the kernel's warpgroup MMAs.
  Type i32 = b.getI32Type();
  MatmulBuilder tiling(b, loc, i32);
  auto toI32 = [&](Value v) {
    return v.getType() == i32 ? v : arith::TruncIOp::create(b, loc, i32, v).getResult();
  };
  Value pid = tt::ProgramIdOp::create(b, loc, i32, 0);
  Value programsM = toI32(mb.ceilDiv(m, blockM)), programsN = toI32(mb.ceilDiv(n, blockN));
  Value rank = tiling.constant(0);
  Value clusterRowsM = programsM;
  int64_t clusterGroupM = groupM;
  if (clusterCtas > 1) {
    rank = arith::RemSIOp::create(b, loc, pid, tiling.constant(clusterCtas));
    pid = arith::DivSIOp::create(b, loc, pid, tiling.constant(clusterCtas));
    clusterRowsM = tiling.ceilDiv(programsM, clusterCtas);
    clusterGroupM = std::max<int64_t>(1, groupM / clusterCtas);
  }
  // Persistent: each program walks the tiles pid, pid + programs, ... (the launcher
  // starts one per multiprocessor), so that one tile's epilogue overlaps the next one's
  // first copies where a producer issues them. A cluster walks its tiles together.
  Value steps = mb.ceilDiv(k, blockK);
  std::optional<StreamKShare> share;
  if (persistent) {
    func->setAttr(mlir::tile::kPersistentAttrName, b.getUnitAttr());
    Value programs = tt::NumProgramsOp::create(b, loc, i32, 0);
    if (clusterCtas > 1)
      programs = arith::DivSIOp::create(b, loc, programs, tiling.constant(clusterCtas));
    Value tiles = arith::MulIOp::create(b, loc, clusterRowsM, programsN);
    if (streamK) {
      func->setAttr(mlir::tile::kStreamKAttrName, b.getI64IntegerAttr(blockM * blockN));
      share = StreamKShare::of(mb, pid, programs, tiles, steps, streamKMode);
      pid = share->tile;
    } else {
      auto walk = scf::ForOp::create(b, loc, pid, tiles, programs);
      b.setInsertionPoint(walk.getBody()->getTerminator());
      pid = walk.getInductionVar();
    }
  }
  // Grouped order: GROUP_M block rows share each block column before moving on.
  Value perGroup = arith::MulIOp::create(b, loc, tiling.constant(clusterGroupM), programsN);
  Value group = arith::DivSIOp::create(b, loc, pid, perGroup);
  Value firstM = arith::MulIOp::create(b, loc, group, tiling.constant(clusterGroupM));
  Value groupRows = arith::MinSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, clusterRowsM, firstM), tiling.constant(clusterGroupM));
  Value inGroup = arith::RemSIOp::create(b, loc, pid, perGroup);
  Value pidM = arith::AddIOp::create(b, loc, firstM, arith::RemSIOp::create(b, loc, inGroup, groupRows));
  Value pidN = arith::DivSIOp::create(b, loc, inGroup, groupRows);
  if (clusterCtas > 1)
    pidM = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, pidM, tiling.constant(clusterCtas)), rank);
  // grid_2d: the launch's grid is (block rows, block columns), block rows fastest, and the
  // program's ids are its block's; the grouped order's two divisions per program are gone.
  // That is the grouped order of a single group (GROUP_M at least the block rows), which
  // the CPU's launches run: int8 512x512x64 and 1024x512x64 (a program of 4 x 64 x 64
  // multiply-adds) ran 4-5% faster so (znver5, 2 threads, three alternations).
  if (grid2d) {
    pidM = tt::ProgramIdOp::create(b, loc, i32, 0);
    pidN = tt::ProgramIdOp::create(b, loc, i32, 1);
  }
  if (index != i32) {
    pidM = arith::ExtSIOp::create(b, loc, index, pidM);
    pidN = arith::ExtSIOp::create(b, loc, index, pidN);
  }

  Value rows = mb.lanes(arith::MulIOp::create(b, loc, pidM, mb.constant(blockM)), blockM);
  Value cols = mb.lanes(arith::MulIOp::create(b, loc, pidN, mb.constant(blockN)), blockN);
  auto accType = mb.blockOf({blockM, blockN}, accElement);
  Value zero = arith::ConstantOp::create(b, loc, accType, b.getZeroAttr(accType));
  // Stream-K: the loop counts this program's K steps (from its first tile on); the
  // tile's own step is that count shifted by where the tile started.
  auto loop = share ? scf::ForOp::create(b, loc, share->firstStep, share->endStep, mb.constant(1), ValueRange{zero})
                    : scf::ForOp::create(b, loc, mb.constant(0), steps, mb.constant(1), ValueRange{zero});
  if (share)
    loop->setAttr(mlir::tile::kProgramStepsAttrName, b.getUnitAttr());
  b.setInsertionPointToStart(loop.getBody());
  {
    Value step = loop.getInductionVar();
    if (share)
      step = arith::SubIOp::create(b, loc, step, share->stepShift);
    Value ks = mb.lanes(arith::MulIOp::create(b, loc, step, mb.constant(blockK)), blockK);
    auto [aPtrs, aMask] = mb.block(a, rows, strideAm, m, ks, strideAk, k);
    auto [bPtrs, bMask] = mb.block(bPtr, ks, strideBk, k, cols, strideBn, n);
    if (kGroup > 1) {
      // The program's panel as (BLOCK_K / g) x (BLOCK_N * g): its rows of groups up to
      // the panel's (ceil(K / 16g) * 16), every lane of a row.
      constexpr int64_t kTileGroupRows = 16;
      Value panelStart = arith::MulIOp::create(b, loc, pidN, arg(9));
      Value groupRows = mb.lanes(arith::MulIOp::create(b, loc, step, mb.constant(blockK / kGroup)),
                                 blockK / kGroup);
      bPtrs = mb.block(bPtr, groupRows, strideBk, k, mb.lanes(panelStart, blockN * kGroup),
                       mb.constant(1), n)
                  .first;
      Value panelRows = arith::MulIOp::create(b, loc, mb.ceilDiv(k, kTileGroupRows * kGroup),
                                              mb.constant(kTileGroupRows));
      Value rowsIn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, groupRows,
                                           mb.splat(panelRows, {blockK / kGroup}));
      bMask = mb.spread(rowsIn, 1, {blockK / kGroup, blockN * kGroup});
    } else if (packedB) {
      // Offsets within the program's panel. The panels are written whole (zeros past b's
      // columns), so the mask is by b's rows alone: a block column at N's edge reads its
      // panel as a full one, on the microkernel's full blocks' loop (a masked edge path
      // took 16% of a 1024x1000x1024 f32 matmul for its one block column in 16), and only
      // c's store masks the columns.
      Value panelStart = arith::MulIOp::create(b, loc, pidN, arg(9));
      bPtrs =
          mb.block(bPtr, ks, strideBk, k, mb.lanes(panelStart, blockN), mb.constant(1), n).first;
      Value rowsIn =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, ks, mb.splat(k, {blockK}));
      bMask = mb.spread(rowsIn, 1, {blockK, blockN});
    }
    Value aBlock = tt::LoadOp::create(b, loc, aPtrs, aMask);
    Value bBlock = tt::LoadOp::create(b, loc, bPtrs, bMask);
    auto dot = tt::DotOp::create(b, loc, accType, aBlock, bBlock, loop.getRegionIterArg(0));
    if (kGroup > 1)
      dot.setBKGroup(kGroup);
    if (unsignedA)
      dot.setUnsignedA(true);
    Value acc = dot;
    scf::YieldOp::create(b, loc, acc);
  }
  b.setInsertionPointAfter(loop);
  auto epilogue = [&](Value acc) {
    if (hasBias)
      acc = addBias(mb, acc, arg(biasArg), stride(biasArg + 1), cols, n);
    if (leaky)
      acc = leakyRelu(b, loc, acc, arg(12));
    if (leakyBackward)
      acc = leakyReluBackward(mb, acc, arg(activationArg), stride(activationArg + 1),
                              stride(activationArg + 2), rows, cols, m, n, arg(12));
    Value result = castAccumulator(b, loc, acc, output);
    auto [cPtrs, cMask] = mb.block(c, rows, strideCm, m, cols, strideCn, n);
    tt::StoreOp::create(b, loc, cPtrs, result, cMask);
  };
  if (share)
    share->finishTile(mb, loop.getResult(0), arg(workspaceArg), arg(workspaceArg + 1), blockM, blockN, epilogue);
  else
    epilogue(loop.getResult(0));
  if (persistent)
    b.setInsertionPointToEnd(body);
  func::ReturnOp::create(b, loc);
  return module;
}

} // namespace tile::ops
