// tile.load and tile.store on the CPU. Where the pointer tensor is affine in its lanes,
// a whole block moves as vector loads and stores (one per row of an N-D block, which
// needs unit stride along the last dimension); blocks whose mask has some lanes off take
// masked loads and stores of those rows, and other blocks LLVM's gathers and scatters.
#include "CpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::cpu;

namespace {

/// Past this many rows a block is not unrolled into row accesses.
constexpr int64_t kMaxUnrolledRows = 512;

std::optional<AffineLanes> pointerLanes(Value ptrTensor) {
  auto lanes = analyzeAffineLanes(ptrTensor);
  if (!lanes || !lanes->basePtr)
    return std::nullopt;
  return lanes;
}

/// True when the last dimension may have unit stride; the check, if it needs one at
/// run time, is folded into the branch condition.
bool lastStrideMayBeOne(const AffineLanes &lanes) {
  auto stride = lanes.strides.back().getConstant();
  return !stride || *stride == 1;
}

/// i1 that the last stride is 1 at run time; null when it is known to be.
Value lastStrideIsOne(ConversionPatternRewriter &rewriter, Location loc, const AffineLanes &lanes) {
  if (lanes.strides.back().getConstant() == 1)
    return {};
  Value stride = lanes.strides.back().materialize(
      rewriter, loc, [&](Value v) { return rewriter.getRemappedValue(v); });
  return arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, stride,
                               arith::ConstantIntOp::create(rewriter, loc, rewriter.getI64Type(), 1));
}

/// Calls `access(rowPointer, position)` for every row of an N-D block, where `position`
/// indexes the row in the block's outer dimensions.
void forEachRow(ConversionPatternRewriter &rewriter, Location loc, const AffineLanes &lanes,
                Type elementType, ArrayRef<int64_t> shape,
                function_ref<void(Value, ArrayRef<int64_t>)> access) {
  auto remap = [&](Value v) { return rewriter.getRemappedValue(v); };
  Value base = offsetBase(rewriter, loc, lanes, elementType);
  SmallVector<Value> strides;
  for (const auto &stride : ArrayRef(lanes.strides).drop_back())
    strides.push_back(stride.materialize(rewriter, loc, remap));
  ArrayRef<int64_t> outer = shape.drop_back();
  if (outer.empty()) {
    access(base, {});
    return;
  }
  SmallVector<int64_t> position(outer.size(), 0);
  int64_t rows = 1;
  for (int64_t size : outer)
    rows *= size;
  Type i64 = rewriter.getI64Type();
  for (int64_t row = 0; row < rows; ++row) {
    Value offset = arith::ConstantIntOp::create(rewriter, loc, i64, 0);
    for (auto [index, stride] : llvm::zip(position, strides))
      offset = arith::AddIOp::create(
          rewriter, loc, offset,
          arith::MulIOp::create(rewriter, loc, stride,
                                arith::ConstantIntOp::create(rewriter, loc, i64, index)));
    Value rowPtr = LLVM::GEPOp::create(rewriter, loc, base.getType(), elementType, base,
                                       ArrayRef<LLVM::GEPArg>{offset});
    access(rowPtr, position);
    for (int64_t dim = outer.size() - 1; dim >= 0; --dim) {
      if (++position[dim] < outer[dim])
        break;
      position[dim] = 0;
    }
  }
}

/// A 1-D block at unit stride: a partial one still takes one masked vector access.
bool isContiguousRow(const AffineLanes &lanes, ArrayRef<int64_t> shape) {
  return shape.size() == 1 && lanes.strides[0].getConstant() == 1;
}

/// Gathers and scatters of elements narrower than 32 bits have no x86 instruction: LLVM
/// expands one into a branch and a scalar access per lane, unrolled (a partial 8x32 bf16
/// tile: 256 of them, where x86's code generator spent most of a matmul's compile). They
/// go lane by lane in a loop instead: the same scalar accesses, in a fraction of the code.
bool gathersByLanes(Type element) { return elementBytes(element) < 4; }

Value laneAt(OpBuilder &b, Location loc, Value vector, Value lane) {
  return vector::ExtractOp::create(b, loc, vector, ArrayRef<OpFoldResult>{lane});
}

/// A loop over the lanes of a 1-D vector of `lanes` elements, carrying `carried`.
scf::ForOp laneLoop(OpBuilder &b, Location loc, int64_t lanes, ValueRange carried,
                    function_ref<void(OpBuilder &, Location, Value, ValueRange)> body) {
  return scf::ForOp::create(b, loc, arith::ConstantIndexOp::create(b, loc, 0),
                            arith::ConstantIndexOp::create(b, loc, lanes),
                            arith::ConstantIndexOp::create(b, loc, 1), carried, body);
}

/// Loads each lane of the 1-D `ptrs` whose `mask` lane is on, the others from `other`.
Value gatherLaneByLane(OpBuilder &b, Location loc, Value ptrs, Value mask, Value other,
                       unsigned align) {
  auto type = cast<VectorType>(other.getType());
  auto loop = laneLoop(
      b, loc, type.getNumElements(), other,
      [&](OpBuilder &b, Location loc, Value lane, ValueRange acc) {
        auto on = scf::IfOp::create(
            b, loc, laneAt(b, loc, mask, lane),
            [&](OpBuilder &b, Location loc) {
              Value loaded = LLVM::LoadOp::create(b, loc, type.getElementType(),
                                                  laneAt(b, loc, ptrs, lane), align);
              scf::YieldOp::create(b, loc,
                                   Value(vector::InsertOp::create(b, loc, loaded, acc[0],
                                                                  ArrayRef<OpFoldResult>{lane})));
            },
            [&](OpBuilder &b, Location loc) { scf::YieldOp::create(b, loc, acc[0]); });
        scf::YieldOp::create(b, loc, on.getResults());
      });
  return loop.getResult(0);
}

/// Stores each lane of the 1-D `value` whose `mask` lane is on.
void scatterLaneByLane(OpBuilder &b, Location loc, Value value, Value ptrs, Value mask,
                       unsigned align) {
  int64_t lanes = cast<VectorType>(value.getType()).getNumElements();
  laneLoop(b, loc, lanes, {}, [&](OpBuilder &b, Location loc, Value lane, ValueRange) {
    scf::IfOp::create(b, loc, laneAt(b, loc, mask, lane), [&](OpBuilder &b, Location loc) {
      LLVM::StoreOp::create(b, loc, laneAt(b, loc, value, lane), laneAt(b, loc, ptrs, lane), align);
      scf::YieldOp::create(b, loc);
    });
    scf::YieldOp::create(b, loc);
  });
}

bool rowsUnrollable(ArrayRef<int64_t> shape) {
  int64_t rows = 1;
  for (int64_t size : shape.drop_back())
    rows *= size;
  return rows <= kMaxUnrolledRows;
}

Value gather(OpBuilder &b, Location loc, VectorType type, Value ptrs, Value mask, Value other,
             unsigned align) {
  Value flat = gatherLanes(b, loc, flatten(b, loc, ptrs), flatten(b, loc, mask),
                           flatten(b, loc, other), align);
  return reshapeTo(b, loc, flat, type);
}

struct LoadLowering : OpConversionPattern<LoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LoadOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type type = getTypeConverter()->convertType(op.getType());
    auto vectorType = dyn_cast<VectorType>(type);
    if (!vectorType) {
      Type element = type;
      rewriter.replaceOpWithNewOp<LLVM::LoadOp>(op, type, adaptor.getPtr(), elementBytes(element));
      return success();
    }
    if (isFusedIntoDots(op)) {
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, rewriter.getZeroAttr(type));
      return success();
    }
    Type element = vectorType.getElementType();
    unsigned align = elementBytes(element);
    ArrayRef<int64_t> shape = vectorType.getShape();
    Value mask = adaptor.getMask() ? adaptor.getMask() : allOnMask(rewriter, loc, shape);
    Value other = adaptor.getOther();
    if (!other)
      other = arith::ConstantOp::create(rewriter, loc, type, rewriter.getZeroAttr(type));
    auto slowLoad = [&](OpBuilder &b, Location l) -> Value {
      return gather(b, l, vectorType, adaptor.getPtr(), mask, other, align);
    };
    auto lanes = pointerLanes(op.getPtr());
    if (!lanes || !lastStrideMayBeOne(*lanes) || !rowsUnrollable(shape)) {
      rewriter.replaceOp(op, slowLoad(rewriter, loc));
      return success();
    }
    auto rowLoads = [&]() {
      auto rowType = VectorType::get({shape.back()}, element);
      Value block = arith::ConstantOp::create(rewriter, loc, type, rewriter.getZeroAttr(type));
      forEachRow(rewriter, loc, *lanes, element, shape, [&](Value rowPtr, ArrayRef<int64_t> at) {
        Value row = LLVM::LoadOp::create(rewriter, loc, rowType, rowPtr, align);
        block = at.empty() ? row : vector::InsertOp::create(rewriter, loc, row, block, at);
      });
      return block;
    };
    Value full = conjunction(rewriter, loc,
                             {allLanesOn(rewriter, loc, op.getMask(), adaptor.getMask(), shape),
                              lastStrideIsOne(rewriter, loc, *lanes)});
    if (!full) {
      rewriter.replaceOp(op, rowLoads());
      return success();
    }
    auto branch = scf::IfOp::create(rewriter, loc, type, full, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(branch.thenBlock());
      scf::YieldOp::create(rewriter, loc, rowLoads());
      rewriter.setInsertionPointToStart(branch.elseBlock());
      Value partial;
      if (isContiguousRow(*lanes, shape)) {
        partial = LLVM::MaskedLoadOp::create(rewriter, loc, type,
                                             offsetBase(rewriter, loc, *lanes, element), mask,
                                             other, align);
      } else {
        // Rows at unit stride (checked at run time where the stride is not known): one
        // masked load per row.
        auto rowMaskedLoads = [&]() {
          auto rowType = VectorType::get({shape.back()}, element);
          Value block = other;
          forEachRow(rewriter, loc, *lanes, element, shape,
                     [&](Value rowPtr, ArrayRef<int64_t> at) {
                       if (at.empty()) {
                         block = LLVM::MaskedLoadOp::create(rewriter, loc, rowType, rowPtr, mask,
                                                            other, align);
                         return;
                       }
                       Value row = LLVM::MaskedLoadOp::create(
                           rewriter, loc, rowType, rowPtr,
                           vector::ExtractOp::create(rewriter, loc, mask, at),
                           vector::ExtractOp::create(rewriter, loc, other, at), align);
                       block = vector::InsertOp::create(rewriter, loc, row, block, at);
                     });
          return block;
        };
        Value unitRows = lastStrideIsOne(rewriter, loc, *lanes);
        if (!unitRows) {
          partial = rowMaskedLoads();
        } else {
          auto rows = scf::IfOp::create(rewriter, loc, type, unitRows, /*withElse=*/true);
          rewriter.setInsertionPointToStart(rows.thenBlock());
          scf::YieldOp::create(rewriter, loc, rowMaskedLoads());
          rewriter.setInsertionPointToStart(rows.elseBlock());
          scf::YieldOp::create(rewriter, loc, slowLoad(rewriter, loc));
          rewriter.setInsertionPointAfter(rows);
          partial = rows.getResult(0);
        }
      }
      scf::YieldOp::create(rewriter, loc, partial);
    }
    rewriter.replaceOp(op, branch.getResult(0));
    return success();
  }
};

/// Marks the masked store of one row of a block, for storeOnlyRowsWithLanesOn.
constexpr StringLiteral kRowOfBlockStoreAttr = "tile.row_of_block_store";

struct StoreLowering : OpConversionPattern<StoreOp> {
  StoreLowering(const TypeConverter &converter, MLIRContext *context, bool maskedStores)
      : OpConversionPattern(converter, context), maskedStores(maskedStores) {}

  LogicalResult matchAndRewrite(StoreOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value value = adaptor.getValue();
    auto vectorType = dyn_cast<VectorType>(value.getType());
    Type element = vectorType ? vectorType.getElementType() : value.getType();
    unsigned align = elementBytes(element);
    if (!vectorType) {
      LLVM::StoreOp::create(rewriter, loc, value, adaptor.getPtr(), align);
      rewriter.eraseOp(op);
      return success();
    }
    ArrayRef<int64_t> shape = vectorType.getShape();
    Value mask = adaptor.getMask() ? adaptor.getMask() : allOnMask(rewriter, loc, shape);
    auto slowStore = [&](OpBuilder &b, Location l) {
      if (gathersByLanes(element))
        scatterLaneByLane(b, l, flatten(b, l, value), flatten(b, l, adaptor.getPtr()),
                          flatten(b, l, mask), align);
      else
        LLVM::masked_scatter::create(b, l, flatten(b, l, value), flatten(b, l, adaptor.getPtr()),
                                     flatten(b, l, mask), align);
    };
    auto lanes = pointerLanes(op.getPtr());
    if (!lanes || !lastStrideMayBeOne(*lanes) || !rowsUnrollable(shape)) {
      slowStore(rewriter, loc);
      rewriter.eraseOp(op);
      return success();
    }
    auto rowStores = [&]() {
      forEachRow(rewriter, loc, *lanes, element, shape, [&](Value rowPtr, ArrayRef<int64_t> at) {
        Value row = at.empty() ? value : vector::ExtractOp::create(rewriter, loc, value, at);
        LLVM::StoreOp::create(rewriter, loc, row, rowPtr, align);
      });
    };
    auto maskedRowStores = [&]() {
      if (isContiguousRow(*lanes, shape)) {
        LLVM::MaskedStoreOp::create(rewriter, loc, value,
                                    offsetBase(rewriter, loc, *lanes, element), mask, align);
        return;
      }
      // Rows at unit stride (checked at run time where the stride is not known): one
      // masked store per row.
      auto rowMaskedStores = [&]() {
        forEachRow(rewriter, loc, *lanes, element, shape, [&](Value rowPtr, ArrayRef<int64_t> at) {
          Value row =
              at.empty() ? value : vector::ExtractOp::create(rewriter, loc, value, at).getResult();
          Value rowMask =
              at.empty() ? mask : vector::ExtractOp::create(rewriter, loc, mask, at).getResult();
          auto store = LLVM::MaskedStoreOp::create(rewriter, loc, row, rowPtr, rowMask, align);
          if (!at.empty())
            store->setAttr(kRowOfBlockStoreAttr, rewriter.getUnitAttr());
        });
      };
      Value unitRows = lastStrideIsOne(rewriter, loc, *lanes);
      if (!unitRows) {
        rowMaskedStores();
        return;
      }
      OpBuilder::InsertionGuard guard(rewriter);
      auto rows = scf::IfOp::create(rewriter, loc, TypeRange{}, unitRows, /*withElse=*/true);
      rewriter.setInsertionPoint(rows.thenBlock()->getTerminator());
      rowMaskedStores();
      rewriter.setInsertionPoint(rows.elseBlock()->getTerminator());
      slowStore(rewriter, loc);
    };
    // A masked store where masked stores cost a plain one: one path for every block, and
    // the epilogue's rows in straight-line code, where a branch for whole blocks kept
    // every row of the value live into both of its sides.
    if (maskedStores && adaptor.getMask()) {
      maskedRowStores();
      rewriter.eraseOp(op);
      return success();
    }
    Value full = conjunction(rewriter, loc,
                             {allLanesOn(rewriter, loc, op.getMask(), adaptor.getMask(), shape),
                              lastStrideIsOne(rewriter, loc, *lanes)});
    if (!full) {
      rowStores();
      rewriter.eraseOp(op);
      return success();
    }
    auto branch = scf::IfOp::create(rewriter, loc, TypeRange{}, full, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(branch.thenBlock()->getTerminator());
      rowStores();
      rewriter.setInsertionPoint(branch.elseBlock()->getTerminator());
      maskedRowStores();
    }
    rewriter.eraseOp(op);
    return success();
  }

private:
  bool maskedStores;
};

} // namespace

Value mlir::tile::cpu::gatherLanes(OpBuilder &b, Location loc, Value ptrs, Value mask, Value other,
                                   unsigned align) {
  if (gathersByLanes(cast<VectorType>(other.getType()).getElementType()))
    return gatherLaneByLane(b, loc, ptrs, mask, other, align);
  return LLVM::masked_gather::create(b, loc, other.getType(), ptrs, mask, other, align);
}

Value mlir::tile::cpu::flatten(OpBuilder &builder, Location loc, Value v) {
  auto type = cast<VectorType>(v.getType());
  if (type.getRank() == 1)
    return v;
  return vector::ShapeCastOp::create(
      builder, loc, VectorType::get({type.getNumElements()}, type.getElementType()), v);
}

Value mlir::tile::cpu::reshapeTo(OpBuilder &builder, Location loc, Value v, VectorType type) {
  if (v.getType() == type)
    return v;
  return vector::ShapeCastOp::create(builder, loc, type, v);
}

Value mlir::tile::cpu::allLanesOn(ConversionPatternRewriter &rewriter, Location loc,
                                  Value originalMask, Value mask, ArrayRef<int64_t> shape) {
  if (!originalMask)
    return {};
  if (auto bounds = analyzeLaneBounds(originalMask)) {
    Type i64 = rewriter.getI64Type();
    SmallVector<Value> full;
    for (auto [dim, size] : llvm::enumerate(shape))
      if (!bounds->upper[dim].empty())
        full.push_back(arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                             validLanes(rewriter, loc, *bounds, dim, size),
                                             arith::ConstantIntOp::create(rewriter, loc, i64, size)));
    return conjunction(rewriter, loc, full);
  }
  return vector::ReductionOp::create(rewriter, loc, vector::CombiningKind::AND,
                                     flatten(rewriter, loc, mask));
}

void mlir::tile::cpu::populateMemoryAccessPatterns(const TypeConverter &converter,
                                                   RewritePatternSet &patterns, bool maskedStores) {
  patterns.add<LoadLowering>(converter, patterns.getContext());
  patterns.add<StoreLowering>(converter, patterns.getContext(), maskedStores);
}

namespace {

/// The row of `block`, a rank-2 tensor whose rows are all alike (a splat, a row spread
/// over the rows, pointers that add such blocks), as a rank-1 tensor built at `b`; null
/// where `block` is not one. With `b` null it only answers (`block` or null).
Value repeatedRow(OpBuilder *b, Value block) {
  auto type = dyn_cast<RankedTensorType>(block.getType());
  if (!type || type.getRank() != 2)
    return Value();
  auto rowType = RankedTensorType::get({type.getDimSize(1)}, type.getElementType());
  if (auto splat = block.getDefiningOp<SplatOp>())
    return b ? SplatOp::create(*b, splat.getLoc(), rowType, splat.getSrc()).getResult() : block;
  if (auto broadcast = block.getDefiningOp<BroadcastOp>()) {
    auto expand = broadcast.getSrc().getDefiningOp<ExpandDimsOp>();
    if (!expand || expand.getAxis() != 0 || expand.getSrc().getType() != rowType)
      return Value();
    return b ? expand.getSrc() : block;
  }
  if (auto add = block.getDefiningOp<AddPtrOp>()) {
    if (!repeatedRow(nullptr, add.getPtr()) || !repeatedRow(nullptr, add.getOffset()))
      return Value();
    if (!b)
      return block;
    return AddPtrOp::create(*b, add.getLoc(), rowType, repeatedRow(b, add.getPtr()),
                            repeatedRow(b, add.getOffset()));
  }
  return Value();
}

/// A rank-2 load whose rows read the same lanes (the bias of a matmul, `bias[None, :]`)
/// -> the load of one row, spread over the rows: one vector load where the block took one
/// per row, and an epilogue whose rows then all add the same value.
struct LoadRepeatedRowOnce : OpRewritePattern<LoadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LoadOp load, PatternRewriter &rewriter) const override {
    if (!repeatedRow(nullptr, load.getPtr()) ||
        (load.getMask() && !repeatedRow(nullptr, load.getMask())) ||
        (load.getOther() && !repeatedRow(nullptr, load.getOther())))
      return failure();
    Location loc = load.getLoc();
    auto type = cast<RankedTensorType>(load.getType());
    Value mask = load.getMask() ? repeatedRow(&rewriter, load.getMask()) : Value();
    Value other = load.getOther() ? repeatedRow(&rewriter, load.getOther()) : Value();
    Value row = LoadOp::create(rewriter, loc, repeatedRow(&rewriter, load.getPtr()), mask, other);
    auto oneRow = RankedTensorType::get({1, type.getDimSize(1)}, type.getElementType());
    Value expanded = ExpandDimsOp::create(rewriter, loc, oneRow, row, 0);
    rewriter.replaceOpWithNewOp<BroadcastOp>(load, type, expanded);
    return success();
  }
};

} // namespace

void mlir::tile::cpu::loadRepeatedRowsOnce(Operation *kernel) {
  RewritePatternSet patterns(kernel->getContext());
  patterns.add<LoadRepeatedRowOnce>(kernel->getContext());
  (void)applyPatternsGreedily(kernel, std::move(patterns));
}

Value mlir::tile::cpu::pointerRoot(Value ptr) {
  while (auto gep = ptr.getDefiningOp<LLVM::GEPOp>())
    ptr = gep.getBase();
  return ptr;
}

Value mlir::tile::cpu::kernelStackBuffer(OpBuilder &b, Location loc, int64_t bytes) {
  OpBuilder::InsertionGuard guard(b);
  Block &entry = b.getInsertionBlock()
                     ->getParent()
                     ->getParentOfType<FunctionOpInterface>()
                     .getFunctionBody()
                     .front();
  b.setInsertionPointToStart(&entry);
  return LLVM::AllocaOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()), b.getI8Type(),
                                i64Constant(b, loc, bytes), 64);
}

bool mlir::tile::cpu::writesMemory(Operation *op) {
  WalkResult walk = op->walk([](Operation *nested) {
    if (auto effects = dyn_cast<MemoryEffectOpInterface>(nested)) {
      if (effects.hasEffect<MemoryEffects::Write>() || effects.hasEffect<MemoryEffects::Free>())
        return WalkResult::interrupt();
      return WalkResult::advance();
    }
    // Ops with no interface take their effects from the ops they hold (scf.if), only
    // read (LLVM's masked loads and gathers, which declare no effects), or may do anything.
    return nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
                   isa<LLVM::MaskedLoadOp, LLVM::masked_gather>(nested)
               ? WalkResult::advance()
               : WalkResult::interrupt();
  });
  return walk.wasInterrupted();
}

void mlir::tile::cpu::storeOnlyRowsWithLanesOn(Operation *kernel) {
  SmallVector<LLVM::MaskedStoreOp> rowStores;
  kernel->walk([&](LLVM::MaskedStoreOp store) {
    if (store->hasAttr(kRowOfBlockStoreAttr))
      rowStores.push_back(store);
  });
  for (LLVM::MaskedStoreOp store : rowStores) {
    store->removeAttr(kRowOfBlockStoreAttr);
    OpBuilder b(store);
    Location loc = store.getLoc();
    Value anyOn = vector::ReductionOp::create(b, loc, vector::CombiningKind::OR, store.getMask());
    auto on = scf::IfOp::create(b, loc, TypeRange{}, anyOn, /*withElse=*/false);
    store->moveBefore(on.thenBlock()->getTerminator());
  }
}
