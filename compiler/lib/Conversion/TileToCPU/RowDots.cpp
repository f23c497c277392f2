// Rows of a against columns of b whose k is unit-stride: a matrix-vector product with b
// transposed, as a Linear's weight is stored (x @ W^T for a few tokens, or a small batch). Each
// column of b is then a contiguous run of k, like a's rows, so the dots of the runs along
// k in vector lanes read b once, front to back, with no copy: one 64-byte load of each
// row and column per step, one multiply-add (or dot-product instruction) per row and
// column, and the lanes summed across at the end. Without it, such a call copied all of b
// into panels (a transpose) for a few rows of products.
#include "CpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::cpu;

namespace {

/// Lanes of one 512-bit accumulator vector (32-bit elements).
constexpr int64_t kLanes = 16;
/// Row-column sums a block carries in vector registers (with int8's row sums beside them,
/// and a span of each row and column loaded per step).
constexpr int64_t kMaxRowDots = 16;
/// How far ahead of a step each column's lines are prefetched (float16).
constexpr int64_t kPrefetchBytes = 1024;
/// The sub-blocks of a float16 block from which its columns are widened once, ahead of
/// them (see columnsWidenedAhead).
constexpr int64_t kSubBlocksToWidenAhead = 8;
/// The most rows a block takes, in sub-blocks of kMaxRowDots sums that each read the
/// block's columns again (from the L1 after the first).
constexpr int64_t kMaxRows = 64;

/// The start of run r of `count` (row r of a or column r of b, its k contiguous, runs
/// `stride` elements apart): the runs past the `kept` ones read the first (their results
/// are dropped where the block is stored), so that no read leaves the operand.
SmallVector<Value> runStarts(OpBuilder &b, Location loc, Value base, int64_t count, Value kept,
                             Value stride, Type element) {
  SmallVector<Value> starts;
  for (int64_t r = 0; r < count; ++r) {
    Value on =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i64Constant(b, loc, r), kept);
    Value index =
        arith::SelectOp::create(b, loc, on, i64Constant(b, loc, r), i64Constant(b, loc, 0));
    starts.push_back(LLVM::GEPOp::create(
        b, loc, base.getType(), element, base,
        ArrayRef<LLVM::GEPArg>{Value(arith::MulIOp::create(b, loc, index, stride))}));
  }
  return starts;
}

/// Each run's lines kPrefetchBytes ahead of its k = `kk`, asked for in software.
void prefetchAhead(OpBuilder &b, Location loc, ValueRange starts, Value kk, Type element) {
  Value ahead = arith::AddIOp::create(
      b, loc, kk, i64Constant(b, loc, kPrefetchBytes / int64_t(elementBytes(element))));
  for (Value start : starts)
    LLVM::Prefetch::create(
        b, loc,
        LLVM::GEPOp::create(b, loc, start.getType(), element, start, ArrayRef<LLVM::GEPArg>{ahead}),
        /*rw=*/0, /*hint=*/3, /*cache=*/1);
}

/// How a step multiplies 16 lanes' worth of k: the dot-product instruction that adds
/// `group` products of consecutive k to each lane, or (group 1) a multiply-add of 16 k.
struct StepInstruction {
  int64_t group = 1;
  StringRef intrinsic; ///< empty: vector.fma on float32 lanes, 16 k at a time
  bool int8 = false;   ///< vpdpbusd: b taken as b + 128 (unsigned), a's sums taken off
  /// float16 spans widened to float32 16 lanes at a time as loaded (vcvtph2ps): b read
  /// once in place, where a float32 copy of it had converted all of it on every call.
  bool widen = false;
};

std::optional<StepInstruction> stepInstructionFor(Type element, Type accElement,
                                                  const CpuDotFeatures &features) {
  if (element.isF32() && accElement.isF32())
    return StepInstruction{};
  // Steps of 32 k, 64 bytes of each row and column: steps of 16 read one float16 row at
  // 43 GB/s where bf16's 64-byte steps read at 54 (1 x 11008 x 4096, 2-core znver5).
  if (element.isF16() && accElement.isF32())
    return StepInstruction{2, "", false, true};
  if (features.bf16 && element.isBF16() && accElement.isF32())
    return StepInstruction{2, "llvm.x86.avx512bf16.dpbf16ps.512", false};
  if (features.int8 && element.isInteger(8) && accElement.isInteger(32))
    return StepInstruction{4, "llvm.x86.avx512.vpdpbusd.512", true};
  return std::nullopt;
}

/// Lane o of the result: the sum of `vectors[o]`'s lanes, for a power of two of vectors up
/// to their lanes. Pairs of vectors are folded into one, each half of every run of 2g lanes
/// the pairwise sums of one of them (g = 1, 2, 4, ...), until one is left; its halves are
/// then added until as many lanes as vectors remain. 15 shuffle pairs and adds for 16 sums
/// where a sum across each vector alone took 8 instructions.
Value sumsAcrossLanes(OpBuilder &b, Location loc, ValueRange vectors) {
  auto type = cast<VectorType>(vectors.front().getType());
  int64_t lanes = type.getDimSize(0), count = vectors.size();
  bool isFloat = isa<FloatType>(type.getElementType());
  auto add = [&](Value x, Value y) -> Value {
    return isFloat ? Value(arith::AddFOp::create(b, loc, x, y))
                   : Value(arith::AddIOp::create(b, loc, x, y));
  };
  SmallVector<Value> level(vectors);
  for (int64_t g = 1; level.size() > 1; g *= 2) {
    SmallVector<int64_t> low, high;
    for (int64_t run = 0; run < lanes; run += 2 * g)
      for (int64_t side : {int64_t(0), lanes})
        for (int64_t t = 0; t < g; ++t) {
          low.push_back(side + run + t);
          high.push_back(side + run + g + t);
        }
    SmallVector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2)
      next.push_back(add(vector::ShuffleOp::create(b, loc, level[i], level[i + 1], low),
                         vector::ShuffleOp::create(b, loc, level[i], level[i + 1], high)));
    level = std::move(next);
  }
  Value sums = level.front();
  for (int64_t width = lanes; width > count; width /= 2) {
    auto half = [&](int64_t first) -> Value {
      return vector::ExtractStridedSliceOp::create(b, loc, sums, ArrayRef<int64_t>{first},
                                                   ArrayRef<int64_t>{width / 2},
                                                   ArrayRef<int64_t>{1});
    };
    sums = add(half(0), half(width / 2));
  }
  return sums;
}

/// The dots of one sub-block: every row against every column, m * n of at most
/// kMaxRowDots.
SmallVector<Value> rowDotSubBlock(OpBuilder &b, Location loc, const RowDotOperands &ops,
                                  ValueRange accRows, const CpuDotFeatures &features) {
  auto rowType = cast<VectorType>(accRows.front().getType());
  int64_t m = accRows.size();
  Type accElement = rowType.getElementType();
  int64_t n = rowType.getDimSize(0);
  StepInstruction step = *stepInstructionFor(ops.element, accElement, features);
  int64_t span = kLanes * step.group; // k per step
  Type i32 = b.getI32Type();
  auto laneType = VectorType::get({kLanes}, accElement);
  auto spanType = VectorType::get({span}, ops.element);
  Type ptrType = ops.aBase.getType();
  // b's columns may be float16 widened ahead into float32 (see rowDotMicrokernel).
  Type bElement = ops.bElement ? ops.bElement : ops.element;
  auto at = [&](OpBuilder &b, Location loc, Value base, Value offset, Type element) -> Value {
    return LLVM::GEPOp::create(b, loc, ptrType, element, base, ArrayRef<LLVM::GEPArg>{offset});
  };
  // Row i of a and column j of b, for every i and j of the block.
  SmallVector<Value> rows =
      runStarts(b, loc, ops.aBase, m, ops.aValidRows, ops.aRowStride, ops.element);
  SmallVector<Value> columns =
      runStarts(b, loc, ops.bBase, n, ops.bValidCols, ops.bColStride, bElement);
  // int8: b's sign bits flipped (vpdpbusd's unsigned side is then b + 128), and ones
  // against a's bytes for the row's sum that comes off 128 times.
  auto splat = [&](int64_t value) -> Value {
    return vector::BroadcastOp::create(b, loc, spanType,
                                       arith::ConstantIntOp::create(b, loc, ops.element, value));
  };
  Value signs = step.int8 ? splat(-128) : Value();
  Value ones = step.int8 ? splat(1) : Value();
  auto dot = [&](OpBuilder &b, Location loc, Value acc, Value x, Value y) -> Value {
    return LLVM::CallIntrinsicOp::create(b, loc, laneType, b.getStringAttr(step.intrinsic),
                                         ValueRange{acc, x, y})
        .getResult(0);
  };
  // One step over k [kk, kk + span): the partial sums of each row and column (i * n + j)
  // and, for int8, of each of a's rows (m * n + i) after it. `load` reads a span of a run
  // (of the given type) at an offset.
  auto stepAt = [&](OpBuilder &b, Location loc, Value kk, ValueRange sums,
                    function_ref<Value(OpBuilder &, Location, Value, VectorType)> load) {
    SmallVector<Value> next(sums);
    // A span as the step multiplies it: float16 widened 16 lanes at a time, float32
    // (float16 widened ahead) in its 16 lanes' parts.
    auto loadSpan = [&](Value ptr, Type element) -> SmallVector<Value> {
      Value loaded = load(b, loc, ptr, VectorType::get({span}, element));
      if (!step.widen)
        return {loaded};
      SmallVector<Value> parts;
      for (int64_t first = 0; first < span; first += kLanes) {
        Value part =
            vector::ExtractStridedSliceOp::create(b, loc, loaded, ArrayRef<int64_t>{first},
                                                  ArrayRef<int64_t>{kLanes}, ArrayRef<int64_t>{1});
        parts.push_back(
            element == accElement ? part : Value(arith::ExtFOp::create(b, loc, laneType, part)));
      }
      return parts;
    };
    SmallVector<SmallVector<Value>> aParts, bParts;
    for (int64_t i = 0; i < m; ++i)
      aParts.push_back(loadSpan(at(b, loc, rows[i], kk, ops.element), ops.element));
    for (int64_t j = 0; j < n; ++j) {
      SmallVector<Value> bSpan = loadSpan(at(b, loc, columns[j], kk, bElement), bElement);
      if (step.int8)
        bSpan.front() = arith::XOrIOp::create(b, loc, bSpan.front(), signs);
      bParts.push_back(bSpan);
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        Value &sum = next[i * n + j];
        if (!step.intrinsic.empty()) {
          sum = dot(b, loc, sum, bParts[j].front(), aParts[i].front());
          continue;
        }
        for (auto [x, y] : llvm::zip(aParts[i], bParts[j]))
          sum = vector::FMAOp::create(b, loc, x, y, sum);
      }
      if (step.int8)
        next[m * n + i] = dot(b, loc, next[m * n + i], ones, aParts[i].front());
    }
    return next;
  };
  SmallVector<Value> sums(m * n + (step.int8 ? m : 0),
                          arith::ConstantOp::create(b, loc, laneType, b.getZeroAttr(laneType)));
  // Whole steps, then the rest of k from masked loads (zeros past k add nothing: for int8
  // b's zeros count 128 times a's zeros).
  Value spanValue = i64Constant(b, loc, span);
  Value whole = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, ops.kCount, spanValue),
                                      spanValue);
  auto loop = scf::ForOp::create(
      b, loc, i64Constant(b, loc, 0), whole, spanValue, sums,
      [&](OpBuilder &b, Location loc, Value kk, ValueRange state) {
        // float16: each column's lines 1 KB ahead of the step, asked for in software.
        // The hardware's stream prefetchers, following a block's columns (each its own
        // stream), left the widening steps waiting on memory (2 threads, znver5, in the
        // processes the VM did not slow: 1 x 4096 x 11008 1.29-1.37 -> 0.96-1.05 ms,
        // 1 x 11008 x 4096 1.44-1.49 -> 1.13-1.16, 16 x 4096 x 4096 1.66-1.75 -> 1.50-1.65,
        // 64 rows 5.90-6.02 -> 5.74-5.77). The other dtypes' steps keep up without: bf16
        // and int8 ran the same, float32 64 rows 8% slower. Past a column's end the lines
        // are the next column's. Columns widened ahead (columnsWidenedAhead) were
        // prefetched there, as they were widened.
        if (step.widen && bElement == ops.element)
          prefetchAhead(b, loc, columns, kk, bElement);
        scf::YieldOp::create(
            b, loc,
            stepAt(b, loc, kk, state, [&](OpBuilder &b, Location loc, Value ptr, VectorType type) {
              return Value(
                  LLVM::LoadOp::create(b, loc, type, ptr, elementBytes(type.getElementType())));
            }));
      });
  Value rest = arith::SubIOp::create(b, loc, ops.kCount, whole);
  Value anyRest =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, rest, i64Constant(b, loc, 0));
  auto tail = scf::IfOp::create(
      b, loc, anyRest,
      [&](OpBuilder &b, Location loc) {
        auto indexType = VectorType::get({span}, b.getI64Type());
        Value iota = arith::ConstantOp::create(
            b, loc, indexType, b.getI64VectorAttr(llvm::to_vector(llvm::seq<int64_t>(0, span))));
        Value on = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iota,
                                         vector::BroadcastOp::create(b, loc, indexType, rest));
        scf::YieldOp::create(b, loc,
                             stepAt(b, loc, whole, loop.getResults(),
                                    [&](OpBuilder &b, Location loc, Value ptr, VectorType type) {
                                      Value zero = arith::ConstantOp::create(b, loc, type,
                                                                             b.getZeroAttr(type));
                                      return Value(LLVM::MaskedLoadOp::create(
                                          b, loc, type, ptr, on, zero,
                                          elementBytes(type.getElementType())));
                                    }));
      },
      [&](OpBuilder &b, Location loc) { scf::YieldOp::create(b, loc, loop.getResults()); });
  // Each row and column's lanes summed across; for int8, 128 times the row's sum of a off
  // each.
  Value products = sumsAcrossLanes(b, loc, ValueRange(tail.getResults()).take_front(m * n));
  Value rowSums = step.int8
                      ? sumsAcrossLanes(b, loc, ValueRange(tail.getResults()).drop_front(m * n))
                      : Value();
  SmallVector<Value> out;
  for (int64_t i = 0; i < m; ++i) {
    Value row =
        m == 1 ? products
               : vector::ExtractStridedSliceOp::create(b, loc, products, ArrayRef<int64_t>{i * n},
                                                       ArrayRef<int64_t>{n}, ArrayRef<int64_t>{1});
    if (rowSums) {
      Value sum = vector::ExtractOp::create(b, loc, rowSums, ArrayRef<int64_t>{i});
      Value offset =
          arith::MulIOp::create(b, loc, sum, arith::ConstantIntOp::create(b, loc, i32, 128));
      row =
          arith::SubIOp::create(b, loc, row, vector::BroadcastOp::create(b, loc, rowType, offset));
    }
    out.push_back(isa<FloatType>(accElement)
                      ? Value(arith::AddFOp::create(b, loc, accRows[i], row))
                      : Value(arith::AddIOp::create(b, loc, accRows[i], row)));
  }
  return out;
}

/// float16 columns for a block of many sub-blocks: the block's `n` columns over its k
/// widened once into a float32 buffer (the kernel's own, on the stack), which every
/// sub-block then reads as float32. Widened as each sub-block loaded them, a column's
/// conversions were repeated for every pair of rows, and on Intel cores vcvtph2ps takes
/// the ports of the multiply-adds. Against that, alternating (2 threads, b transposed,
/// x 4096 x 4096): on the AMX Xeon 16 rows 0.77-0.80 -> 0.89x of torch, 24 rows
/// 0.63-0.69 -> 0.81-0.93x, 16 x 11008 x 4096 0.81-0.82 -> 0.88-0.95x; on the znver5 16
/// and 24 rows the same, 64 rows 5.73-5.87 -> 5.38-5.49 ms. Blocks of 4 and 8 rows lost
/// on both (the pass over the buffer costs more than the conversions it saves: Xeon 8
/// rows 1.12-1.21 -> 1.03-1.04x, znver5 8 rows 0.81-0.87 -> 1.03-1.09 ms), and keep
/// widening as they load. The columns past the kept ones are the first's, as
/// rowDotSubBlock reads them.
RowDotOperands columnsWidenedAhead(OpBuilder &b, Location loc, const RowDotOperands &ops,
                                   int64_t n) {
  Type f32 = b.getF32Type();
  Type ptrType = ops.bBase.getType();
  Value widened = kernelStackBuffer(b, loc, n * ops.kBound * 4);
  auto halves = VectorType::get({kLanes}, ops.element);
  auto floats = VectorType::get({kLanes}, f32);
  auto indexType = VectorType::get({kLanes}, b.getI64Type());
  Value iota = arith::ConstantOp::create(
      b, loc, indexType, b.getI64VectorAttr(llvm::to_vector(llvm::seq<int64_t>(0, kLanes))));
  Value zeros = arith::ConstantOp::create(b, loc, halves, b.getZeroAttr(halves));
  Value lanes = i64Constant(b, loc, kLanes);
  SmallVector<Value> sources =
      runStarts(b, loc, ops.bBase, n, ops.bValidCols, ops.bColStride, ops.element);
  SmallVector<Value> targets;
  for (int64_t j = 0; j < n; ++j)
    targets.push_back(LLVM::GEPOp::create(b, loc, ptrType, f32, widened,
                                          ArrayRef<LLVM::GEPArg>{int32_t(j * ops.kBound)}));
  // Whole groups of 16 k up to k's end, the last masked (zeros past it).
  Value end = arith::MulIOp::create(
      b, loc,
      arith::DivUIOp::create(
          b, loc, arith::AddIOp::create(b, loc, ops.kCount, i64Constant(b, loc, kLanes - 1)),
          lanes),
      lanes);
  scf::ForOp::create(
      b, loc, i64Constant(b, loc, 0), end, lanes, ValueRange{},
      [&](OpBuilder &b, Location loc, Value kk, ValueRange) {
        Value on = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::slt,
            arith::AddIOp::create(b, loc, iota, vector::BroadcastOp::create(b, loc, indexType, kk)),
            vector::BroadcastOp::create(b, loc, indexType, ops.kCount));
        for (int64_t j = 0; j < n; ++j) {
          prefetchAhead(b, loc, sources[j], kk, ops.element);
          Value loaded = LLVM::MaskedLoadOp::create(b, loc, halves,
                                                    LLVM::GEPOp::create(b, loc, ptrType,
                                                                        ops.element, sources[j],
                                                                        ArrayRef<LLVM::GEPArg>{kk}),
                                                    on, zeros, elementBytes(ops.element));
          LLVM::StoreOp::create(
              b, loc, arith::ExtFOp::create(b, loc, floats, loaded),
              LLVM::GEPOp::create(b, loc, ptrType, f32, targets[j], ArrayRef<LLVM::GEPArg>{kk}),
              elementBytes(f32));
        }
        scf::YieldOp::create(b, loc);
      });
  RowDotOperands widenedOps = ops;
  widenedOps.bBase = widened;
  widenedOps.bColStride = i64Constant(b, loc, ops.kBound);
  widenedOps.bElement = f32;
  return widenedOps;
}

} // namespace

bool mlir::tile::cpu::takesRowDots(Type element, Type accElement, int64_t m, int64_t n,
                                   const CpuDotFeatures &features) {
  return n <= kMaxRowDots && m <= kMaxRows &&
         (m * n <= kMaxRowDots || m % (kMaxRowDots / n) == 0) &&
         stepInstructionFor(element, accElement, features).has_value();
}

SmallVector<Value> mlir::tile::cpu::rowDotMicrokernel(OpBuilder &b, Location loc,
                                                      const RowDotOperands &ops, ValueRange accRows,
                                                      const CpuDotFeatures &features) {
  auto rowType = cast<VectorType>(accRows.front().getType());
  int64_t m = accRows.size(), n = rowType.getDimSize(0);
  int64_t rows = std::min(m, kMaxRowDots / n);
  if (rows == m)
    return rowDotSubBlock(b, loc, ops, accRows, features);
  RowDotOperands all = ops;
  if (ops.element.isF16() && rowType.getElementType().isF32() && ops.kBound > 0 &&
      m / rows >= kSubBlocksToWidenAhead)
    all = columnsWidenedAhead(b, loc, ops, n);
  // Sub-blocks of `rows` rows one after another over the same columns, each its rows of
  // a from its first, in a loop up to the last sub-block with a row of a (the next's first
  // row would be past a). The accumulator's rows wait in a buffer on the stack, the
  // kernel's own, made once at its entry; as code unrolled per sub-block, a 64-row
  // block's first call took 670 ms to compile.
  int64_t rowBytes = n * rowType.getElementType().getIntOrFloatBitWidth() / 8;
  Type ptrType = ops.aBase.getType();
  Value buffer = kernelStackBuffer(b, loc, m * rowBytes);
  auto rowAddress = [&](OpBuilder &b, Location loc, Value row) -> Value {
    return LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), buffer,
                               ArrayRef<LLVM::GEPArg>{Value(arith::MulIOp::create(
                                   b, loc, row, i64Constant(b, loc, rowBytes)))});
  };
  for (int64_t i = 0; i < m; ++i)
    LLVM::StoreOp::create(b, loc, accRows[i], rowAddress(b, loc, i64Constant(b, loc, i)));
  Value step = i64Constant(b, loc, rows);
  Value keptRows = arith::MaxSIOp::create(
      b, loc, arith::MinSIOp::create(b, loc, ops.aValidRows, i64Constant(b, loc, m)),
      i64Constant(b, loc, 0));
  Value end = arith::MulIOp::create(
      b, loc,
      arith::DivUIOp::create(
          b, loc, arith::AddIOp::create(b, loc, keptRows, i64Constant(b, loc, rows - 1)), step),
      step);
  scf::ForOp::create(
      b, loc, i64Constant(b, loc, 0), end, step, ValueRange{},
      [&](OpBuilder &b, Location loc, Value first, ValueRange) {
        RowDotOperands sub = all;
        sub.aBase = LLVM::GEPOp::create(
            b, loc, ptrType, ops.element, ops.aBase,
            ArrayRef<LLVM::GEPArg>{Value(arith::MulIOp::create(b, loc, first, ops.aRowStride))});
        sub.aValidRows = arith::SubIOp::create(b, loc, ops.aValidRows, first);
        SmallVector<Value> addresses, subRows;
        for (int64_t r = 0; r < rows; ++r) {
          addresses.push_back(
              rowAddress(b, loc, arith::AddIOp::create(b, loc, first, i64Constant(b, loc, r))));
          subRows.push_back(LLVM::LoadOp::create(b, loc, rowType, addresses.back()));
        }
        for (auto [address, row] :
             llvm::zip(addresses, rowDotSubBlock(b, loc, sub, subRows, features)))
          LLVM::StoreOp::create(b, loc, row, address);
        scf::YieldOp::create(b, loc);
      });
  SmallVector<Value> out;
  for (int64_t i = 0; i < m; ++i)
    out.push_back(
        LLVM::LoadOp::create(b, loc, rowType, rowAddress(b, loc, i64Constant(b, loc, i))));
  return out;
}
