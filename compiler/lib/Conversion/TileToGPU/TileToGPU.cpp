// convert-tile-to-gpu: one program per workgroup, a block spread over its threads.
#include "GpuLowering.h"
#include "tile/Analysis/AffineLanes.h"
#include "tile/Conversion/BlockAccess.h"
#include "tile/Conversion/ElementwiseTypeLowering.h"
#include "tile/Conversion/Passes.h"
#include "tile/Dialect/Tile/IR/TileDialect.h"
#include "tile/Target/GpuArch.h"

#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/IR/Iterators.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tile {
#define GEN_PASS_DEF_CONVERTTILETOGPU
#include "tile/Conversion/Passes.h.inc"
} // namespace mlir::tile

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

Value mlir::tile::gpu_lowering::isAligned(OpBuilder &b, Location loc, Value ptr, int64_t bytes) {
  Type i64 = b.getI64Type();
  Value address = LLVM::PtrToIntOp::create(b, loc, i64, ptr);
  Value low = b.createOrFold<arith::AndIOp>(loc, address,
                                            arith::ConstantIntOp::create(b, loc, i64, bytes - 1));
  return b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, low,
                                       arith::ConstantIntOp::create(b, loc, i64, 0));
}

// Runs move in and out of a thread's vector by shuffles, which every GPU conversion
// lowers directly (strided-slice ops would need a vector-lowering pass first).
Value mlir::tile::gpu_lowering::sliceOf(OpBuilder &b, Location loc, Value v, int64_t first,
                                        int64_t count) {
  SmallVector<int64_t> mask = llvm::to_vector(llvm::seq<int64_t>(first, first + count));
  return vector::ShuffleOp::create(b, loc, v, v, mask);
}

ThreadLayout mlir::tile::gpu_lowering::layoutFor(int64_t size, int64_t threads,
                                                int64_t accessElements) {
  int64_t vec = std::min(accessElements, std::max<int64_t>(1, size / threads));
  int64_t reps = std::max<int64_t>(1, size / (threads * vec));
  return {size, threads, vec, reps};
}

GpuTypeConverter::GpuTypeConverter(MLIRContext *ctx, const Distribution &dist) {
  addConversion([](Type type) { return type; });
  addConversion([ctx](PointerType) -> Type {
    return LLVM::LLVMPointerType::get(ctx, kGlobalAddressSpace);
  });
  addConversion([this, &dist](RankedTensorType type) -> Type {
    Type element = convertType(type.getElementType());
    if (!element || type.getRank() > 2)
      return {};
    int64_t perThread =
        type.getRank() == 1 ? dist.of(type).perThread() : dist.matrixOf(type).perThread();
    return VectorType::get({perThread}, element);
  });
}

namespace {

/// Index in the block of the first element of run `rep` of this thread, as i32.
Value runStart(OpBuilder &b, Location loc, const Distribution &dist, const ThreadLayout &layout,
               int64_t rep) {
  Type i32 = b.getI32Type();
  Value first = b.createOrFold<arith::MulIOp>(
      loc, dist.threadId, arith::ConstantIntOp::create(b, loc, i32, layout.vec));
  first = b.createOrFold<arith::AddIOp>(
      loc, first, arith::ConstantIntOp::create(b, loc, i32, rep * layout.threads * layout.vec));
  if (layout.wraps())
    first = b.createOrFold<arith::RemUIOp>(loc, first,
                                           arith::ConstantIntOp::create(b, loc, i32, layout.size));
  return first;
}

template <typename Op>
struct DistributedPattern : OpConversionPattern<Op> {
  DistributedPattern(const TypeConverter &converter, MLIRContext *ctx, const Distribution &dist)
      : OpConversionPattern<Op>(converter, ctx), dist(dist) {}
  const Distribution &dist;
};

/// program_id and num_programs: the workgroup's id and the grid's size along the axis.
template <typename TileOp, typename GpuOp>
struct GridQueryLowering : OpConversionPattern<TileOp> {
  using OpConversionPattern<TileOp>::OpConversionPattern;
  LogicalResult matchAndRewrite(TileOp op, typename TileOp::Adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Value index = GpuOp::create(rewriter, op.getLoc(), gpu::Dimension(op.getAxis()));
    rewriter.replaceOpWithNewOp<arith::IndexCastUIOp>(op, rewriter.getI32Type(), index);
    return success();
  }
};
using ProgramIdLowering = GridQueryLowering<ProgramIdOp, gpu::BlockIdOp>;
using NumProgramsLowering = GridQueryLowering<NumProgramsOp, gpu::GridDimOp>;

struct MakeRangeLowering : DistributedPattern<MakeRangeOp> {
  using DistributedPattern::DistributedPattern;
  LogicalResult matchAndRewrite(MakeRangeOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ThreadLayout layout = dist.of(op.getType());
    auto type = VectorType::get({layout.perThread()}, rewriter.getI32Type());
    Value result = arith::ConstantOp::create(rewriter, loc, type, rewriter.getZeroAttr(type));
    for (int64_t rep = 0; rep < layout.reps; ++rep) {
      Value start = rewriter.createOrFold<arith::AddIOp>(
          loc, runStart(rewriter, loc, dist, layout, rep),
          arith::ConstantIntOp::create(rewriter, loc, rewriter.getI32Type(), op.getStart()));
      for (int64_t v = 0; v < layout.vec; ++v) {
        Value element = rewriter.createOrFold<arith::AddIOp>(
            loc, start, arith::ConstantIntOp::create(rewriter, loc, rewriter.getI32Type(), v));
        result = vector::InsertOp::create(rewriter, loc, element, result,
                                          ArrayRef<int64_t>{rep * layout.vec + v});
      }
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct SplatLowering : OpConversionPattern<SplatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SplatOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Type type = getTypeConverter()->convertType(op.getType());
    if (!type)
      return failure();
    rewriter.replaceOpWithNewOp<vector::BroadcastOp>(op, type, adaptor.getSrc());
    return success();
  }
};

struct AddPtrLowering : OpConversionPattern<AddPtrOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AddPtrOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Type type = getTypeConverter()->convertType(op.getType());
    Type element = getTypeConverter()->convertType(getPointeeType(op.getType()));
    if (!type)
      return failure();
    rewriter.replaceOpWithNewOp<LLVM::GEPOp>(op, type, element, adaptor.getPtr(),
                                             ArrayRef<LLVM::GEPArg>{adaptor.getOffset()});
    return success();
  }
};

Value insertSlice(OpBuilder &b, Location loc, Value part, Value into, int64_t first) {
  int64_t size = cast<VectorType>(into.getType()).getDimSize(0);
  int64_t count = cast<VectorType>(part.getType()).getDimSize(0);
  SmallVector<int64_t> mask;
  for (int64_t i = 0; i < size; ++i)
    mask.push_back(i >= first && i < first + count ? size + (i - first) : i);
  return vector::ShuffleOp::create(b, loc, into, part, mask);
}

/// The runs of a stride-1 block access: for each, its pointer, the i1 "whole run in
/// range" (null when there is no mask) and its slice of the mask.
struct Run {
  Value ptr, full, mask;
  int64_t first;
};

std::optional<SmallVector<Run>> contiguousRuns(ConversionPatternRewriter &rewriter, Location loc,
                                               const Distribution &dist, Value originalPtr,
                                               Value originalMask, Value mask, Type element) {
  if (cast<RankedTensorType>(originalPtr.getType()).getRank() != 1)
    return std::nullopt;
  auto lanes = analyzeAffineLanes(originalPtr);
  if (!lanes || !lanes->basePtr || lanes->strides[0].getConstant() != 1)
    return std::nullopt;
  ThreadLayout layout = dist.of(originalPtr.getType());
  std::optional<LaneBounds> bounds;
  if (originalMask)
    bounds = analyzeLaneBounds(originalMask);
  Value valid = bounds ? validLanes(rewriter, loc, *bounds, 0, layout.size) : Value();
  Value base = offsetBase(rewriter, loc, *lanes, element);
  SmallVector<Run> runs;
  Type i64 = rewriter.getI64Type();
  for (int64_t rep = 0; rep < layout.reps; ++rep) {
    Run run;
    run.first = rep * layout.vec;
    Value start =
        rewriter.createOrFold<arith::ExtUIOp>(loc, i64, runStart(rewriter, loc, dist, layout, rep));
    run.ptr = LLVM::GEPOp::create(rewriter, loc, base.getType(), element, base,
                                  ArrayRef<LLVM::GEPArg>{start});
    if (mask) {
      run.mask = sliceOf(rewriter, loc, mask, run.first, layout.vec);
      if (valid) {
        Value end = rewriter.createOrFold<arith::AddIOp>(
            loc, start, arith::ConstantIntOp::create(rewriter, loc, i64, layout.vec));
        run.full = rewriter.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::sle, end, valid);
      } else {
        run.full = vector::ReductionOp::create(rewriter, loc, vector::CombiningKind::AND, run.mask);
      }
    }
    if (layout.vec > 1) {
      // A view can start anywhere in its storage: the wide access needs its alignment
      // (NVIDIA faults on a misaligned ld.global.v4).
      Value aligned = isAligned(rewriter, loc, run.ptr, layout.vec * elementBytes(element));
      run.full = run.full ? rewriter.createOrFold<arith::AndIOp>(loc, run.full, aligned) : aligned;
      if (!run.mask)
        run.mask = allOnMask(rewriter, loc, {layout.vec});
    }
    runs.push_back(run);
  }
  return runs;
}

/// A run of `type` at `ptr`, `alignBytes` aligned, where `on` (i1), else zeros. NVIDIA
/// (`ptx`): one predicated PTX load where the run makes 32 or 64 bits, as the m16n8 layout's
/// pairs of 16- or 32-bit elements do, so that the edge's reads are all in flight at once
/// with no branches; elsewhere a branch around the load.
Value predicatedRunRead(OpBuilder &b, Location loc, VectorType type, Value ptr, Value on,
                        int64_t alignBytes, bool ptx) {
  unsigned bits = type.getNumElements() * type.getElementTypeBitWidth();
  if (ptx && (bits == 32 || bits == 64)) {
    std::string width = std::to_string(bits);
    std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, $1, 0;\nmov.b" + width +
                       " $0, 0;\n@p ld.global.b" + width + " $0, [$2];\n}";
    Type integer = b.getIntegerType(bits);
    Value flag = arith::ExtUIOp::create(b, loc, b.getI32Type(), on);
    auto read =
        LLVM::InlineAsmOp::create(b, loc, TypeRange{integer}, ValueRange{flag, ptr}, text,
                                  bits == 32 ? "=r,r,l" : "=l,r,l", /*has_side_effects=*/false,
                                  /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                                  LLVM::AsmDialectAttr(), ArrayAttr());
    return LLVM::BitcastOp::create(b, loc, type, read.getResult(0));
  }
  auto branch = scf::IfOp::create(
      b, loc, on,
      [&](OpBuilder &t, Location l) {
        scf::YieldOp::create(t, l, Value(LLVM::LoadOp::create(t, l, type, ptr, alignBytes)));
      },
      [&](OpBuilder &e, Location l) {
        scf::YieldOp::create(e, l,
                             Value(arith::ConstantOp::create(e, l, type, e.getZeroAttr(type))));
      });
  return branch.getResult(0);
}

struct LoadLowering : DistributedPattern<LoadOp> {
  using DistributedPattern::DistributedPattern;
  Value loadRowInvariant(LoadOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const;
  Value loadWholeRuns(LoadOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const;
  LogicalResult matchAndRewrite(LoadOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type type = getTypeConverter()->convertType(op.getType());
    if (!type)
      return failure();
    auto vectorType = dyn_cast<VectorType>(type);
    if (!vectorType) {
      rewriter.replaceOpWithNewOp<LLVM::LoadOp>(op, type, adaptor.getPtr(), elementBytes(type));
      return success();
    }
    if (isStagedByDots(op)) {
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, rewriter.getZeroAttr(type));
      return success();
    }
    if (Value rows = loadRowInvariant(op, adaptor, rewriter)) {
      rewriter.replaceOp(op, rows);
      return success();
    }
    if (Value runs = loadWholeRuns(op, adaptor, rewriter)) {
      rewriter.replaceOp(op, runs);
      return success();
    }
    Type element = vectorType.getElementType();
    Value other = adaptor.getOther();
    if (!other)
      other = arith::ConstantOp::create(rewriter, loc, type, rewriter.getZeroAttr(type));
    auto runs = contiguousRuns(rewriter, loc, dist, op.getPtr(), op.getMask(), adaptor.getMask(), element);
    if (!runs) {
      Value mask = adaptor.getMask();
      if (!mask)
        mask = allOnMask(rewriter, loc, vectorType.getShape());
      rewriter.replaceOpWithNewOp<LLVM::masked_gather>(op, type, adaptor.getPtr(), mask, other,
                                                       elementBytes(element));
      return success();
    }
    ThreadLayout layout = dist.of(op.getType());
    auto runType = VectorType::get({layout.vec}, element);
    // Runs start at multiples of vec elements from a base that torch allocates 16-byte
    // aligned; the launcher must keep that true for the pointers it passes.
    unsigned align = layout.vec * elementBytes(element);
    Value result = other;
    for (const Run &run : *runs) {
      auto plainLoad = [&](OpBuilder &b, Location l) -> Value {
        return LLVM::LoadOp::create(b, l, runType, run.ptr, align);
      };
      Value loaded;
      if (!run.full) {
        loaded = plainLoad(rewriter, loc);
      } else {
        Value otherRun = sliceOf(rewriter, loc, other, run.first, layout.vec);
        auto branch = scf::IfOp::create(
            rewriter, loc, run.full,
            [&](OpBuilder &b, Location l) { scf::YieldOp::create(b, l, plainLoad(b, l)); },
            [&](OpBuilder &b, Location l) {
              scf::YieldOp::create(b, l, Value(LLVM::MaskedLoadOp::create(b, l, runType, run.ptr, run.mask,
                                                                          otherRun, elementBytes(element))));
            });
        loaded = branch.getResult(0);
      }
      result = insertSlice(rewriter, loc, loaded, result, run.first);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// A 2-D block in a matrix unit's accumulator layout whose runs of consecutive columns
/// are proven aligned, and under a mask wholly in or out of bounds (from the kernel's
/// divisibility promises), such as stream-K's partial sums read back in the layout they
/// were stored in, or an epilogue operand of c's shape (leaky_relu's backward reads the
/// activation): each run is one vector load, as the store of such a block is, where a
/// gather would read element by element (gfx11's WMMA layout, whose lanes hold one column
/// of a row each, reads element by element too, but with no branch inside the block). Under a mask,
/// a block wholly inside the bounds (one uniform branch) reads with no checks; one at the edge
/// reads each run predicated on its first element's place. Null where the block is not of that
/// form.
Value LoadLowering::loadWholeRuns(LoadOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const {
  auto type = cast<RankedTensorType>(op.getType());
  if (type.getRank() != 2 || op.getOther())
    return {};
  MatrixLayout layout = dist.matrixOf(type);
  int64_t run = layout.tile.colRun;
  auto lanes = analyzeAffineLanes(op.getPtr());
  if (!layout.fits || run < 1 || !lanes || !lanes->basePtr)
    return {};
  auto vectorType = cast<VectorType>(getTypeConverter()->convertType(type));
  Type element = vectorType.getElementType();
  unsigned bytes = elementBytes(element);
  int64_t alignBytes = std::min<int64_t>(run * bytes, 16);
  std::optional<LaneBounds> bounds;
  if (!wholeRunsProven(*lanes, op.getMask(), dist, alignBytes / bytes, run, &bounds))
    return {};
  Location loc = op.getLoc();
  auto runType = VectorType::get({run}, element);
  Value zeros =
      arith::ConstantOp::create(rewriter, loc, vectorType, rewriter.getZeroAttr(vectorType));
  auto remap = [&](Value v) { return rewriter.getRemappedValue(v); };
  auto readAll = [&](OpBuilder &b, Location l, bool checked) {
    Value result = zeros;
    std::optional<MatrixPlaces> places;
    SmallVector<Value> rowBounds, colBounds;
    if (checked) {
      places.emplace(b, l, dist, layout);
      for (const ScalarPoly &bound : bounds->upper[0])
        rowBounds.push_back(bound.materialize(b, l, remap));
      for (const ScalarPoly &bound : bounds->upper[1])
        colBounds.push_back(bound.materialize(b, l, remap));
    }
    for (int64_t first = 0; first < layout.perThread(); first += run) {
      Value start = vector::ExtractOp::create(b, l, adaptor.getPtr(), ArrayRef<int64_t>{first});
      Value loaded;
      if (!checked) {
        loaded = LLVM::LoadOp::create(b, l, runType, start, alignBytes);
      } else {
        auto [row32, col32] = places->at(b, l, first);
        Value on = arith::ConstantIntOp::create(b, l, 1, 1);
        auto below = [&](Value lane32, ArrayRef<Value> limits) {
          Value lane = b.createOrFold<arith::ExtUIOp>(l, b.getI64Type(), lane32);
          for (Value limit : limits)
            on = b.createOrFold<arith::AndIOp>(
                l, on, b.createOrFold<arith::CmpIOp>(l, arith::CmpIPredicate::slt, lane, limit));
        };
        below(row32, rowBounds);
        below(col32, colBounds);
        loaded = predicatedRunRead(b, l, runType, start, on, alignBytes, !dist.arch.amd);
      }
      result = insertSlice(b, l, loaded, result, first);
    }
    return result;
  };
  if (!bounds)
    return readAll(rewriter, loc, /*checked=*/false);
  // The block's last row and column inside every bound: then all of it is.
  Value lastIn = arith::ConstantIntOp::create(rewriter, loc, 1, 1);
  for (int d = 0; d < 2; ++d) {
    Value last =
        arith::ConstantIntOp::create(rewriter, loc, rewriter.getI64Type(), type.getDimSize(d) - 1);
    for (const ScalarPoly &bound : bounds->upper[d])
      lastIn = rewriter.createOrFold<arith::AndIOp>(
          loc, lastIn,
          rewriter.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, last,
                                               bound.materialize(rewriter, loc, remap)));
  }
  auto guarded = scf::IfOp::create(
      rewriter, loc, lastIn,
      [&](OpBuilder &b, Location l) {
        scf::YieldOp::create(b, l, readAll(b, l, /*checked=*/false));
      },
      [&](OpBuilder &b, Location l) {
        scf::YieldOp::create(b, l, readAll(b, l, /*checked=*/true));
      });
  return guarded.getResult(0);
}

/// `element` (16 or 32 bits) at `ptr` where `on` (i1), else zero: one predicated PTX load.
Value predicatedRead(OpBuilder &b, Location loc, Type element, Value ptr, Value on) {
  unsigned bits = element.getIntOrFloatBitWidth();
  Type integer = b.getIntegerType(bits);
  std::string ptx = "{\n.reg .pred p;\nsetp.ne.b32 p, $1, 0;\nmov.b" + std::to_string(bits) +
                    " $0, 0;\n@p ld.global.b" + std::to_string(bits) + " $0, [$2];\n}";
  Value flag = arith::ExtUIOp::create(b, loc, b.getI32Type(), on);
  auto read = LLVM::InlineAsmOp::create(
      b, loc, TypeRange{integer}, ValueRange{flag, ptr}, ptx, bits == 16 ? "=h,r,l" : "=r,r,l",
      /*has_side_effects=*/false, /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr(), ArrayAttr());
  return LLVM::BitcastOp::create(b, loc, element, read.getResult(0));
}

/// A 2-D block whose rows all read the same elements (row stride 0, a mask over the
/// columns only), such as a bias broadcast over the rows of the accumulator: each
/// distinct column of this thread's elements is read once and shared by the elements of
/// its column. A gather would read every element. The reads have no branches, so that
/// they are all in flight at once: a column outside the mask reads the block's first
/// column instead (in bounds whenever any column is, which one branch around them all
/// checks) and keeps zero. Null where the block is not of that form.
Value LoadLowering::loadRowInvariant(LoadOp op, OpAdaptor adaptor,
                                     ConversionPatternRewriter &rewriter) const {
  auto type = cast<RankedTensorType>(op.getType());
  if (type.getRank() != 2 || op.getOther())
    return {};
  MatrixLayout layout = dist.matrixOf(type);
  auto lanes = analyzeAffineLanes(op.getPtr());
  if (!layout.fits || !lanes || !lanes->basePtr || lanes->strides[0].getConstant() != 0)
    return {};
  std::optional<LaneBounds> bounds;
  if (Value mask = op.getMask()) {
    bounds = analyzeLaneBounds(mask);
    if (!bounds || bounds->upper.size() != 2 || !bounds->upper[0].empty())
      return {};
  }
  Location loc = op.getLoc();
  auto remap = [&](Value v) { return rewriter.getRemappedValue(v); };
  auto vectorType = cast<VectorType>(getTypeConverter()->convertType(type));
  Type element = vectorType.getElementType();
  Type i64 = rewriter.getI64Type();
  Value base = offsetBase(rewriter, loc, *lanes, element);
  Value colStride = lanes->strides[1].materialize(rewriter, loc, remap);
  SmallVector<Value> colBounds;
  if (bounds)
    for (const ScalarPoly &bound : bounds->upper[1])
      colBounds.push_back(bound.materialize(rewriter, loc, remap));
  auto inBounds = [&](OpBuilder &b, Location l, Value col) {
    Value on = arith::ConstantIntOp::create(b, l, 1, 1);
    for (Value bound : colBounds)
      on = b.createOrFold<arith::AndIOp>(
          l, on, b.createOrFold<arith::CmpIOp>(l, arith::CmpIPredicate::slt, col, bound));
    return on;
  };
  Value zeros = arith::ConstantOp::create(rewriter, loc, vectorType, rewriter.getZeroAttr(vectorType));
  // `checked`: each column's read is redirected to column 0 and its value zeroed where the
  // column is outside the mask. Unchecked (every column of the block inside), each read is
  // at a fixed offset from one address: the checked reads' 64 addresses and selects had
  // raised a 128 x 256 wgmma kernel's epilogue from 154 registers to 255 and spills, and
  // the bias had cost it 4.5% at 4096x16384x4096 on an H100.
  unsigned bits = element.getIntOrFloatBitWidth();
  bool predicatedReads = !dist.arch.amd && (bits == 16 || bits == 32);
  // Where a lane's columns come in runs (the m16n8 layout's pairs) at a unit stride from
  // an address proven aligned to a run, the unchecked reads take a run at a time: a
  // 16-bit bias then arrives as the 32-bit pairs the widening reads halves of, where
  // single reads had cost a 128 x 256 wgmma epilogue a packing of each pair besides
  // (H100, ncu's cycles of the busiest SM at 4096x16384x4096: the bias's cost over the
  // plain kernel 2.0% -> 0.9%).
  int64_t run = layout.tile.colRun;
  bool runReads = run > 1 && wholeRunsProven(*lanes, Value(), dist, run, run);
  auto readAll = [&](OpBuilder &b, Location l, bool checked) {
    Value zero = arith::ConstantOp::create(b, l, element, b.getZeroAttr(element));
    Value result = zeros;
    int64_t perLane = layout.tile.perLane;
    MatrixPlaces places(b, l, dist, layout);
    for (int64_t rn = 0; rn < layout.repN; ++rn) {
      DenseMap<int64_t, Value> byClass;
      for (int64_t j = 0; j < perLane; ++j) {
        if (!checked && runReads && j % run == 0 && !byClass.count(layout.tile.columnClass(j))) {
          // Elements j .. j + run - 1: consecutive columns of one row.
          auto [row, col32] = places.at(b, l, rn * perLane + j);
          Value at = b.createOrFold<arith::ExtUIOp>(l, i64, col32);
          Value ptr =
              LLVM::GEPOp::create(b, l, base.getType(), element, base, ArrayRef<LLVM::GEPArg>{at});
          Value runOfColumns = LLVM::LoadOp::create(b, l, VectorType::get({run}, element), ptr,
                                                    run * elementBytes(element));
          for (int64_t t = 0; t < run; ++t)
            byClass[layout.tile.columnClass(j + t)] =
                vector::ExtractOp::create(b, l, runOfColumns, ArrayRef<int64_t>{t});
        }
        Value &value = byClass[layout.tile.columnClass(j)];
        if (!value) {
          // Row tile 0's element (rn, j): its column is every row tile's.
          auto [row, col32] = places.at(b, l, rn * perLane + j);
          Value col = b.createOrFold<arith::ExtUIOp>(l, i64, col32);
          Value at = b.createOrFold<arith::MulIOp>(l, col, colStride);
          Value on = checked ? inBounds(b, l, col) : Value();
          // NVIDIA: a checked read predicated on its column, at its own offset (no select
          // of the address): the edge blocks' reads hold no more registers than the others'.
          bool predicated = checked && predicatedReads;
          if (checked && !predicated)
            at = b.createOrFold<arith::SelectOp>(l, on, at,
                                                 arith::ConstantIntOp::create(b, l, i64, 0));
          Value ptr = LLVM::GEPOp::create(b, l, base.getType(), element, base, ArrayRef<LLVM::GEPArg>{at});
          if (predicated) {
            value = predicatedRead(b, l, element, ptr, on);
          } else {
            Value read = LLVM::LoadOp::create(b, l, element, ptr, elementBytes(element));
            value = checked ? b.createOrFold<arith::SelectOp>(l, on, read, zero) : read;
          }
        }
        for (int64_t rm = 0; rm < layout.repM; ++rm)
          result = vector::InsertOp::create(b, l, value, result,
                                            ArrayRef<int64_t>{(rm * layout.repN + rn) * perLane + j});
      }
    }
    return result;
  };
  if (colBounds.empty())
    return readAll(rewriter, loc, /*checked=*/false);
  Value firstIn = inBounds(rewriter, loc, arith::ConstantIntOp::create(rewriter, loc, i64, 0));
  Value lastIn = inBounds(rewriter, loc,
                          arith::ConstantIntOp::create(rewriter, loc, i64, type.getDimSize(1) - 1));
  auto guarded = scf::IfOp::create(
      rewriter, loc, lastIn,
      [&](OpBuilder &b, Location l) {
        scf::YieldOp::create(b, l, readAll(b, l, /*checked=*/false));
      },
      [&](OpBuilder &b, Location l) {
        auto edge = scf::IfOp::create(
            b, l, firstIn,
            [&](OpBuilder &b, Location l) {
              scf::YieldOp::create(b, l, readAll(b, l, /*checked=*/true));
            },
            [&](OpBuilder &b, Location l) { scf::YieldOp::create(b, l, zeros); });
        scf::YieldOp::create(b, l, edge.getResult(0));
      });
  return guarded.getResult(0);
}

struct StoreLowering : DistributedPattern<StoreOp> {
  using DistributedPattern::DistributedPattern;
  bool storeRowRuns(StoreOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const;
  void storeExchangedRuns(ConversionPatternRewriter &rewriter, Location loc, const MatrixLayout &layout,
                          Value value, Value ptrs, function_ref<Value(OpBuilder &, Location, int64_t)> bit,
                          int64_t alignBytes) const;
  LogicalResult matchAndRewrite(StoreOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value value = adaptor.getValue();
    auto vectorType = dyn_cast<VectorType>(value.getType());
    if (!vectorType) {
      LLVM::StoreOp::create(rewriter, loc, value, adaptor.getPtr(), elementBytes(value.getType()));
      rewriter.eraseOp(op);
      return success();
    }
    Type element = vectorType.getElementType();
    if (storeThroughShared(op, value, rewriter, dist) || storeRowRuns(op, adaptor, rewriter)) {
      rewriter.eraseOp(op);
      return success();
    }
    auto runs = contiguousRuns(rewriter, loc, dist, op.getPtr(), op.getMask(), adaptor.getMask(), element);
    if (!runs) {
      Value mask = adaptor.getMask();
      if (!mask)
        mask = allOnMask(rewriter, loc, vectorType.getShape());
      LLVM::masked_scatter::create(rewriter, loc, value, adaptor.getPtr(), mask, elementBytes(element));
      rewriter.eraseOp(op);
      return success();
    }
    ThreadLayout layout = dist.of(op.getPtr().getType());
    unsigned align = layout.vec * elementBytes(element);
    for (const Run &run : *runs) {
      Value slice = sliceOf(rewriter, loc, value, run.first, layout.vec);
      if (!run.full) {
        LLVM::StoreOp::create(rewriter, loc, slice, run.ptr, align);
        continue;
      }
      scf::IfOp::create(
          rewriter, loc, run.full,
          [&](OpBuilder &b, Location l) {
            LLVM::StoreOp::create(b, l, slice, run.ptr, align);
            scf::YieldOp::create(b, l);
          },
          [&](OpBuilder &b, Location l) {
            LLVM::MaskedStoreOp::create(b, l, slice, run.ptr, run.mask, elementBytes(element));
            scf::YieldOp::create(b, l);
          });
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// A 2-D block in a matrix layout whose lanes hold runs of consecutive columns (the
/// accumulator of C^T-computing matrix instructions): each run is one vector store where
/// it is wholly in range, aligned and the columns are contiguous, a masked scatter
/// otherwise. False when the layout has no runs.
bool StoreLowering::storeRowRuns(StoreOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const {
  auto type = cast<RankedTensorType>(op.getPtr().getType());
  if (type.getRank() != 2)
    return false;
  MatrixLayout layout = dist.matrixOf(type);
  bool exchange = layout.tile.colRun < 2 && layout.tile.exchangedRun > 1;
  int64_t run = exchange ? layout.tile.exchangedRun : layout.tile.colRun;
  auto lanes = analyzeAffineLanes(op.getPtr());
  if (!layout.fits || run < 2 || !lanes)
    return false;
  Location loc = op.getLoc();
  Value value = adaptor.getValue(), ptrs = adaptor.getPtr(), mask = adaptor.getMask();
  Type element = cast<VectorType>(value.getType()).getElementType();
  unsigned bytes = elementBytes(element);
  Value unitColumns;
  if (lanes->strides[1].getConstant() != 1) {
    Value stride = lanes->strides[1].materialize(rewriter, loc, [&](Value v) { return rewriter.getRemappedValue(v); });
    unitColumns = rewriter.createOrFold<arith::CmpIOp>(
        loc, arith::CmpIPredicate::eq, stride,
        arith::ConstantIntOp::create(rewriter, loc, rewriter.getI64Type(), 1));
  }
  // Mask bits are taken one by one: shuffles and reductions of i1 vectors go through
  // scratch memory on AMDGPU.
  auto bit = [&](OpBuilder &b, Location l, int64_t e) -> Value {
    if (!mask)
      return arith::ConstantIntOp::create(b, l, 1, 1);
    return vector::ExtractOp::create(b, l, mask, ArrayRef<int64_t>{e});
  };
  // Proven at compile time (from the kernel's divisibility promises): every run starts
  // aligned to its width (up to 16 bytes: wider runs are stored 16 bytes at a time), and
  // the column bounds are multiples of the run, so a run's mask bits are all equal. Then
  // each run is one masked vector store, with no fallback.
  int64_t alignBytes = std::min<int64_t>(run * bytes, 16);
  bool proven = wholeRunsProven(*lanes, op.getMask(), dist, alignBytes / bytes, run);
  if (exchange) {
    // Only where the runs are proven whole and aligned; else element by element.
    if (!proven)
      return false;
    storeExchangedRuns(rewriter, loc, layout, value, ptrs, bit, alignBytes);
    return true;
  }
  for (int64_t first = 0; first < layout.perThread(); first += run) {
    Value slice = sliceOf(rewriter, loc, value, first, run);
    Value start = vector::ExtractOp::create(rewriter, loc, ptrs, ArrayRef<int64_t>{first});
    if (proven) {
      scf::IfOp::create(rewriter, loc, bit(rewriter, loc, first), [&](OpBuilder &b, Location l) {
        LLVM::StoreOp::create(b, l, slice, start, alignBytes);
        scf::YieldOp::create(b, l);
      });
      continue;
    }
    Value whole = isAligned(rewriter, loc, start, run * bytes);
    for (int64_t e = first; e < first + run; ++e)
      if (mask)
        whole = rewriter.createOrFold<arith::AndIOp>(loc, whole, bit(rewriter, loc, e));
    if (unitColumns)
      whole = rewriter.createOrFold<arith::AndIOp>(loc, whole, unitColumns);
    scf::IfOp::create(
        rewriter, loc, whole,
        [&](OpBuilder &b, Location l) {
          LLVM::StoreOp::create(b, l, slice, start, run * bytes);
          scf::YieldOp::create(b, l);
        },
        [&](OpBuilder &b, Location l) {
          for (int64_t e = first; e < first + run; ++e) {
            Value ptr = vector::ExtractOp::create(b, l, ptrs, ArrayRef<int64_t>{e});
            Value one = vector::ExtractOp::create(b, l, value, ArrayRef<int64_t>{e});
            scf::IfOp::create(b, l, bit(b, l, e), [&](OpBuilder &b, Location l) {
              LLVM::StoreOp::create(b, l, one, ptr, bytes);
              scf::YieldOp::create(b, l);
            });
          }
          scf::YieldOp::create(b, l);
        });
  }
  return true;
}

/// gfx11 WMMA's accumulator (computing C^T): lanes 0-15 hold columns 0, 2, .., 14 of
/// their row and lanes 16-31 columns 1, 3, .., 15. Each lane trades four of them with
/// lane l ^ 16 through v_permlanex16 (kExchangeSends), which leaves it two runs of four
/// consecutive columns (kExchangeRuns), each stored as one access. A run starts at its
/// first own element's column minus that element's position, and its mask bit is that
/// element's (proven runs are all in or all out).
void StoreLowering::storeExchangedRuns(ConversionPatternRewriter &rewriter, Location loc,
                                       const MatrixLayout &layout, Value value, Value ptrs,
                                       function_ref<Value(OpBuilder &, Location, int64_t)> bit,
                                       int64_t alignBytes) const {
  auto element = cast<VectorType>(value.getType()).getElementType();
  unsigned bits = element.getIntOrFloatBitWidth();
  Type i32 = rewriter.getI32Type();
  Value lane = rewriter.createOrFold<arith::RemUIOp>(
      loc, dist.threadId, i32Constant(rewriter, loc, dist.arch.waveSize));
  Value upper = rewriter.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::uge, lane,
                                                     i32Constant(rewriter, loc, 16));
  auto asWord = [&](Value v) -> Value {
    Value asInt = rewriter.createOrFold<arith::BitcastOp>(loc, rewriter.getIntegerType(bits), v);
    return bits == 32 ? asInt : rewriter.createOrFold<arith::ExtUIOp>(loc, i32, asInt);
  };
  auto fromWord = [&](Value w) -> Value {
    Value asInt =
        bits == 32 ? w
                   : rewriter.createOrFold<arith::TruncIOp>(loc, rewriter.getIntegerType(bits), w);
    return rewriter.createOrFold<arith::BitcastOp>(loc, element, asInt);
  };
  // Lane i of each half reads lane i of the other half.
  auto fromPartner = [&](Value v) {
    Value word = asWord(v);
    Value no = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI1Type(), 0);
    Value other = LLVM::CallIntrinsicOp::create(
                      rewriter, loc, i32, rewriter.getStringAttr("llvm.amdgcn.permlanex16"),
                      ValueRange{word, word, i32Constant(rewriter, loc, 0x76543210),
                                 i32Constant(rewriter, loc, int32_t(0xfedcba98)), no, no})
                      .getResult(0);
    return fromWord(other);
  };
  auto pick = [&](Value high, Value low) {
    return rewriter.createOrFold<arith::SelectOp>(loc, upper, high, low);
  };
  for (int64_t first = 0; first < layout.perThread(); first += layout.tile.perLane) {
    auto own = [&](int64_t j) { return vector::ExtractOp::create(rewriter, loc, value, ArrayRef<int64_t>{first + j}).getResult(); };
    Value received[4];
    for (int t = 0; t < 4; ++t)
      received[t] = fromPartner(pick(own(kExchangeSends[1][t]), own(kExchangeSends[0][t])));
    auto source = [&](int64_t entry) { return entry >= 0 ? own(entry) : received[-1 - entry]; };
    for (int64_t r = 0; r < 2; ++r) {
      SmallVector<Value> elements;
      for (int64_t i = 0; i < 4; ++i)
        elements.push_back(pick(source(kExchangeRuns[1][r][i]), source(kExchangeRuns[0][r][i])));
      Value runValue = vector::FromElementsOp::create(rewriter, loc, VectorType::get({4}, element), elements);
      Value starts[2], keeps[2];
      for (int64_t h = 0; h < 2; ++h) {
        const int64_t *entries = kExchangeRuns[h][r];
        int64_t i = std::find_if(entries, entries + 4, [](int64_t e) { return e >= 0; }) - entries;
        Value ptr = vector::ExtractOp::create(rewriter, loc, ptrs, ArrayRef<int64_t>{first + entries[i]});
        starts[h] = i == 0 ? ptr
                           : LLVM::GEPOp::create(rewriter, loc, ptr.getType(), element, ptr,
                                                 ArrayRef<LLVM::GEPArg>{int32_t(-i)});
        keeps[h] = bit(rewriter, loc, first + entries[i]);
      }
      Value start = pick(starts[1], starts[0]), keep = pick(keeps[1], keeps[0]);
      scf::IfOp::create(rewriter, loc, keep, [&](OpBuilder &b, Location l) {
        LLVM::StoreOp::create(b, l, runValue, start, alignBytes);
        scf::YieldOp::create(b, l);
      });
    }
  }
}

struct ReturnLowering : OpConversionPattern<func::ReturnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(func::ReturnOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<gpu::ReturnOp>(op);
    return success();
  }
};

/// 16 bytes of the narrowest element type the kernel loads or stores.
int64_t accessElementsOf(func::FuncOp kernel) {
  unsigned narrowest = 16;
  kernel.walk([&](Operation *op) {
    Value ptr;
    if (auto load = dyn_cast<LoadOp>(op))
      ptr = load.getPtr();
    else if (auto store = dyn_cast<StoreOp>(op))
      ptr = store.getPtr();
    if (ptr)
      narrowest = std::min(narrowest, elementBytes(getPointeeType(ptr.getType())));
  });
  return 16 / narrowest;
}

LogicalResult checkDistributable(func::FuncOp kernel, const Distribution &dist) {
  WalkResult walk = kernel.walk([&](Operation *op) {
    for (Type type : op->getResultTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || tensor.getRank() == 1)
        continue;
      if (tensor.getRank() > 2) {
        op->emitError("GPU lowering distributes 1-D and 2-D blocks; got ") << type;
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// The waves the kernel's workgroup runs: the config's numWarps, or more where the arch
/// splits a large accumulator over more waves (wavesPerWorkgroup) and every dot's
/// accumulator still divides into whole instruction tiles per wave.
int64_t wavesFor(func::FuncOp kernel, Distribution dist) {
  int64_t accumulatorWords = 0;
  kernel.walk([&](DotOp dot) {
    auto type = dot.getType();
    int64_t bits = type.getElementType().getIntOrFloatBitWidth();
    accumulatorWords = std::max(accumulatorWords, type.getNumElements() * bits / 32);
  });
  int64_t waves = ::tile::wavesPerWorkgroup(dist.arch, dist.numWarps, accumulatorWords);
  if (waves == dist.numWarps)
    return waves;
  int64_t configured = dist.numWarps;
  dist.numWarps = waves;
  bool fits = true;
  kernel.walk([&](DotOp dot) { fits = fits && dist.matrixOf(dot.getType()).fits; });
  return fits ? waves : configured;
}

/// Drops the tensor-map parameters (from `firstMap` on: a, b, c) that no lowering
/// recorded, and orders the records as the parameters that stay.
LogicalResult keepReadTensorMaps(gpu::GPUFuncOp func, unsigned firstMap) {
  SmallVector<DictionaryAttr> read;
  if (auto recorded = func->getAttrOfType<ArrayAttr>(kTensorMapsAttrName))
    for (Attribute map : recorded)
      read.push_back(cast<DictionaryAttr>(map));
  auto operandOf = [](DictionaryAttr map) { return cast<IntegerAttr>(map.get("operand")).getInt(); };
  llvm::sort(read, [&](DictionaryAttr x, DictionaryAttr y) { return operandOf(x) < operandOf(y); });
  llvm::BitVector unread(func.getNumArguments());
  unread.set(firstMap, func.getNumArguments());
  for (DictionaryAttr map : read)
    unread.reset(firstMap + operandOf(map));
  if (failed(func.eraseArguments(unread)))
    return failure();
  if (!read.empty())
    func->setAttr(kTensorMapsAttrName, ArrayAttr::get(func.getContext(), SmallVector<Attribute>(read.begin(), read.end())));
  return success();
}

/// Erases the ops of `root` that have no effect and whose results nothing reads. The
/// conversion builds each thread's addresses and masks for every access of the tile
/// program, also those the bulk copies then make unused: most of what it builds for a
/// warpgroup MMA kernel. Swept here in one walk (users before their definitions), they no
/// longer cost every later pass and the canonicalizer's worklist, about a third of a
/// first call's compile.
void eraseDeadOps(Operation *root) {
  root->walk<WalkOrder::PostOrder, ReverseIterator>([&](Operation *op) {
    // An op that carries an attribute may be a marker the steps after the conversion
    // look for (where a K loop's last step begins): kept for them.
    if (op != root && op->getDiscardableAttrDictionary().empty() && isOpTriviallyDead(op))
      op->erase();
  });
}

struct ConvertTileToGPUPass : mlir::tile::impl::ConvertTileToGPUBase<ConvertTileToGPUPass> {
  using ConvertTileToGPUBase::ConvertTileToGPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    std::optional<::tile::GpuArch> arch = ::tile::lookupGpuArch(chipset);
    if (!arch) {
      module.emitError("unknown GPU chipset '") << std::string(chipset) << "'";
      return signalPassFailure();
    }
    if (kpack != 1 && kpack != 2) {
      module.emitError("kpack must be 1 or 2, got ") << int64_t(kpack);
      return signalPassFailure();
    }
    if (numStages < 1 || numStages > 8) {
      module.emitError("num_stages must be in [1, 8], got ") << int64_t(numStages);
      return signalPassFailure();
    }
    // Only the warpgroup MMA's bulk copies have a producer to split off; elsewhere the
    // knob would be hashed and ignored.
    if (warpSpecialize != 0 && (warpSpecialize != 1 || arch->matrixUnit != ::tile::MatrixUnit::Wgmma ||
                                numStages < 2)) {
      module.emitError("warp_specialize=")
          << int64_t(warpSpecialize) << " gives the bulk tensor copies of a pipelined K loop a producer warpgroup; "
          << "it takes 0 or 1, and 1 needs sm_90a's warpgroup MMA and num_stages >= 2 (got " << arch->name
          << ", num_stages=" << int64_t(numStages) << ")";
      return signalPassFailure();
    }
    if (matrixInstrNonKDim != 16 && matrixInstrNonKDim != 32) {
      module.emitError("matrix_instr_nonkdim must be 16 or 32, got ") << int64_t(matrixInstrNonKDim);
      return signalPassFailure();
    }
    // Only MFMA has a second shape; elsewhere 32 would be hashed and ignored.
    if (arch->matrixUnit != ::tile::MatrixUnit::Mfma && matrixInstrNonKDim != 16) {
      module.emitError("matrix_instr_nonkdim=")
          << int64_t(matrixInstrNonKDim) << " picks an MFMA shape; " << arch->name
          << "'s matrix instructions are 16 wide: use matrix_instr_nonkdim=16";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> kernels;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(kKernelAttrName) && !func.isExternal())
        kernels.push_back(func);
    if (kernels.empty())
      return;

    OpBuilder builder(ctx);
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), builder.getUnitAttr());
    builder.setInsertionPointToEnd(module.getBody());
    auto gpuModule = gpu::GPUModuleOp::create(builder, module.getLoc(), "tile_kernels");

    for (auto kernel : kernels) {
      Distribution dist;
      dist.arch = *arch;
      dist.nonKDim = matrixInstrNonKDim;
      dist.kpack = kpack;
      dist.numStages = numStages;
      dist.allowTf32 = allowTf32;
      dist.warpSpecialize = warpSpecialize != 0;
      dist.persistent = kernel->hasAttr(kPersistentAttrName);
      // Only the warp-specialized pipeline counts its stages' phases across the tiles of
      // a walk; elsewhere the knob would be honoured by no code.
      if (dist.persistent && !dist.warpSpecialize) {
        kernel.emitError("persistent=1 walks the tiles with a producer warpgroup prefetching the next "
                         "tile's copies; it needs warp_specialize=1 on sm_90a (")
            << arch->name << ")";
        return signalPassFailure();
      }
      if (kernel->hasAttr(kStreamKAttrName) && (!dist.persistent || arch->amd)) {
        kernel.emitError("stream_k=1 or 2 splits K steps over programs that wait on each other's partial sums; "
                         "it needs persistent=1 (warp_specialize=1 on sm_90a), got ")
            << arch->name << (dist.persistent ? "" : " without persistent=1");
        return signalPassFailure();
      }
      if (auto ctas = kernel->getAttrOfType<IntegerAttr>(kClusterCtasAttrName))
        dist.clusterCtas = ctas.getInt();
      // Only the producer warpgroup's multicast copies use the cluster; elsewhere it
      // would only constrain the launch.
      if (dist.clusterCtas != 1 && (dist.clusterCtas != 2 || !dist.warpSpecialize)) {
        kernel.emitError("num_ctas=")
            << dist.clusterCtas
            << " runs clusters of blocks that share the B tiles through multicast bulk copies; it takes 1 "
               "or 2, and 2 needs warp_specialize=1 on sm_90a ("
            << arch->name << ")";
        return signalPassFailure();
      }
      dist.numWarps = numWarps;
      dist.numWarps = wavesFor(kernel, dist);
      int64_t threads = dist.numWarps * arch->waveSize;
      dist.threads = threads;
      if (failed(checkDistributable(kernel, dist)))
        return signalPassFailure();
      dist.accessElements = accessElementsOf(kernel);
      bool anyDot = false, allOnWarpgroups = true;
      kernel.walk([&](DotOp dot) {
        anyDot = true;
        allOnWarpgroups = allOnWarpgroups && warpgroupMmaFits(dot, *arch, dist.numWarps);
      });
      dist.warpgroupMma = anyDot && allOnWarpgroups;
      dist.divisibility = Divisibility(kernel);
      dist.pointerRanges = PointerRanges(kernel);

      builder.setInsertionPointToEnd(gpuModule.getBody());
      auto func = gpu::GPUFuncOp::create(builder, kernel.getLoc(), kernel.getName(),
                                         kernel.getFunctionType());
      func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), builder.getUnitAttr());
      if (dist.persistent)
        func->setAttr(kPersistentAttrName, builder.getUnitAttr());
      if (auto streamK = kernel->getAttr(kStreamKAttrName))
        func->setAttr(kStreamKAttrName, streamK);
      if (dist.clusterCtas > 1)
        func->setAttr(kClusterCtasAttrName, builder.getI64IntegerAttr(dist.clusterCtas));
      func.setKnownBlockSizeAttr(builder.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
      func.getBody().front().erase();
      func.getBody().takeBody(kernel.getBody());
      kernel.erase();

      // With the warpgroup MMA's pipelined K loop, the kernel may read its dot's operands
      // through bulk tensor copies: it takes a tensor map for each as its last parameters.
      // The dot's lowering decides and records the maps it reads; unread ones go again.
      unsigned firstMap = func.getNumArguments();
      bool mayTakeMaps = dist.warpgroupMma && numStages > 1;
      if (mayTakeMaps) {
        auto pointer = LLVM::LLVMPointerType::get(ctx);
        for (unsigned i = 0; i < 3; ++i) {
          if (failed(func.insertArgument(firstMap + i, pointer, DictionaryAttr::get(ctx), func.getLoc())))
            return signalPassFailure();
          dist.tensorMaps[i] = func.getArgument(firstMap + i);
        }
      }

      builder.setInsertionPointToStart(&func.getBody().front());
      Value tid = gpu::ThreadIdOp::create(builder, func.getLoc(), gpu::Dimension::x);
      dist.threadId = arith::IndexCastUIOp::create(builder, func.getLoc(), builder.getI32Type(), tid);
      PipelinePlans pipelines = planPipelines(func, numStages, ::tile::pipelineBuffers(*arch, numStages),
                                              dist.warpSpecialize && dist.warpgroupMma);
      dist.pipelines = &pipelines;

      GpuTypeConverter converter(ctx, dist);
      ConversionTarget target(*ctx);
      target.addLegalDialect<LLVM::LLVMDialect, vector::VectorDialect, gpu::GPUDialect>();
      target.addIllegalDialect<TileDialect>();
      target.addIllegalOp<func::ReturnOp>();
      target.addDynamicallyLegalDialect<arith::ArithDialect, math::MathDialect>(
          [&](Operation *op) { return converter.isLegal(op); });
      target.addDynamicallyLegalOp<gpu::GPUFuncOp>([&](gpu::GPUFuncOp op) {
        return converter.isSignatureLegal(op.getFunctionType());
      });
      RewritePatternSet patterns(ctx);
      patterns.add<ProgramIdLowering, NumProgramsLowering, SplatLowering, AddPtrLowering,
                   ReturnLowering>(converter, ctx);
      patterns.add<MakeRangeLowering, LoadLowering, StoreLowering>(converter, ctx, dist);
      populateMatrixPatterns(converter, patterns, dist);
      populateProgramFlagPatterns(converter, patterns, dist);
      populateElementwiseTypeLowering(converter, patterns);
      populateFunctionOpInterfaceTypeConversionPattern<gpu::GPUFuncOp>(patterns, converter);
      scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, target);
      // The epilogue's staging boxes (deferEpilogueStaging, after the conversion).
      target.addLegalOp<scf::ExecuteRegionOp>();
      if (failed(applyPartialConversion(func, target, std::move(patterns))))
        return signalPassFailure();
      eraseDeadOps(func);
      if (mayTakeMaps && failed(keepReadTensorMaps(func, firstMap)))
        return signalPassFailure();
      prefetchFirstFragments(func);
      waitAfterWarpgroupLoops(func);
      bool specialized = splitProducerWarpgroup(func, dist.threadId, threads, dist.arch);
      if (specialized)
        func.setKnownBlockSizeAttr(
            builder.getDenseI32ArrayAttr({int32_t(threads + kWarpgroupThreads), 1, 1}));
      deferEpilogueStaging(func, specialized && deferEpilogue);
      // The epilogue's staging area overlays the K loop's buffers from the array's start.
      if (auto staged = func->getAttrOfType<IntegerAttr>(kEpilogueSharedBytesAttr)) {
        int64_t bytes = staged.getInt();
        if (auto used = func->getAttrOfType<IntegerAttr>(kDynamicSharedBytesAttrName))
          bytes = std::max(bytes, used.getInt());
        func->setAttr(kDynamicSharedBytesAttrName, builder.getI64IntegerAttr(bytes));
        func->removeAttr(kEpilogueSharedBytesAttr);
      }
    }
  }
};

} // namespace
