// 2-D blocks on GPUs: the matrix-unit accumulator layout, affine blocks built per
// element, and tile.dot as MFMA on operands staged through LDS.
#include "GpuLowering.h"

#include "tile/Analysis/AffineLanes.h"
#include "tile/Conversion/BlockAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"

#include <functional>

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

AccumulatorTile mlir::tile::gpu_lowering::accumulatorTileFor(const ::tile::GpuArch &arch,
                                                              int64_t nonKDim) {
  AccumulatorTile tile;
  if (arch.matrixUnit == ::tile::MatrixUnit::Mfma) {
    tile.swapped = true;
    tile.colRun = 4;
    if (nonKDim == 32) {
      tile.tileM = tile.tileN = 32;
      tile.perLane = 16;
      tile.kind = AccumulatorTile::Kind::Mfma32;
    }
  } else if (arch.matrixUnit == ::tile::MatrixUnit::Wmma) {
    tile.perLane = 8;
    tile.kind = arch.wmmaGeneration == 11 ? AccumulatorTile::Kind::WmmaGfx11
                                          : AccumulatorTile::Kind::WmmaGfx12;
    // Both compute C^T. gfx12's lanes then hold runs of 8 columns; gfx11's hold every
    // other column (its two half-waves split the instruction's rows by parity), which a
    // lane exchange turns into runs of 4 for the epilogue.
    tile.swapped = true;
    bool gfx12 = tile.kind == AccumulatorTile::Kind::WmmaGfx12;
    tile.colRun = gfx12 ? 8 : 1;
    tile.exchangedRun = gfx12 ? 0 : 4;
  } else if (arch.matrixUnit == ::tile::MatrixUnit::MmaSync ||
             arch.matrixUnit == ::tile::MatrixUnit::Wgmma) {
    tile.tileN = 8;
    tile.colRun = 2;
    tile.kind = AccumulatorTile::Kind::MmaM16N8;
  }
  return tile;
}

MatrixLayout Distribution::matrixOf(Type tensorType) const {
  auto type = cast<RankedTensorType>(tensorType);
  MatrixLayout layout;
  layout.rows = type.getDimSize(0);
  layout.cols = type.getDimSize(1);
  layout.tile = accumulatorTileFor(arch, nonKDim);
  int64_t tileM = layout.tile.tileM, tileN = layout.tile.tileN;
  if (warpgroupMma) {
    // Each warpgroup takes a band of rows in m64 instruction tiles across all columns;
    // its 4 warps take 16-row slices of each tile, in the mma.sync m16n8 accumulator
    // layout that wgmma's registers follow.
    layout.warpsM = numWarps;
    layout.interleaveM = 4;
    layout.fits = numWarps % 4 == 0 && layout.rows % (tileM * numWarps) == 0 && layout.cols % tileN == 0;
    layout.repM = layout.rows / (tileM * numWarps);
    layout.repN = layout.cols / tileN;
    return layout;
  }
  // Split the waves over M first while each keeps whole tiles, then over N.
  while (layout.warpsM * layout.warpsN < numWarps) {
    bool mHasRoom = layout.rows / (layout.warpsM * 2) >= tileM;
    bool nHasRoom = layout.cols / (layout.warpsN * 2) >= tileN;
    if (mHasRoom && (layout.warpsM <= layout.warpsN || !nHasRoom))
      layout.warpsM *= 2;
    else if (nHasRoom)
      layout.warpsN *= 2;
    else
      return layout; // does not fit
  }
  layout.fits = layout.rows % (tileM * layout.warpsM) == 0 && layout.cols % (tileN * layout.warpsN) == 0;
  layout.repM = layout.rows / (tileM * layout.warpsM);
  layout.repN = layout.cols / (tileN * layout.warpsN);
  return layout;
}

Value mlir::tile::gpu_lowering::dynamicSharedArray(OpBuilder &b, Operation *op, int64_t alignment) {
  constexpr StringLiteral symbol = "__tile_dynamic_shared";
  auto module = op->getParentOfType<gpu::GPUModuleOp>();
  Location loc = op->getLoc();
  auto global = module.lookupSymbol<LLVM::GlobalOp>(symbol);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    global = LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), 0),
                                    /*isConstant=*/false, LLVM::Linkage::External, symbol, Attribute(),
                                    alignment, kSharedAddressSpace);
  } else if (global.getAlignment().value_or(1) < uint64_t(alignment)) {
    global.setAlignment(alignment);
  }
  return LLVM::AddressOfOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), kSharedAddressSpace),
                                   symbol);
}

Value mlir::tile::gpu_lowering::inlinePtx(OpBuilder &b, Location loc, StringRef ptx, int64_t results,
                                          StringRef operandConstraints, ValueRange operands, ValueRange tied) {
  std::string constraints;
  for (int64_t i = 0; i < results; ++i)
    constraints += (i ? ",=f" : "=f");
  if (!operandConstraints.empty())
    constraints += (constraints.empty() ? "" : ",") + operandConstraints.str();
  for (int64_t i = 0; i < int64_t(tied.size()); ++i)
    constraints += "," + std::to_string(i);
  SmallVector<Value> all(operands);
  all.append(tied.begin(), tied.end());
  Type resultType;
  if (results > 0) {
    SmallVector<Type> fields(results, b.getF32Type());
    resultType = LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
  }
  auto op = LLVM::InlineAsmOp::create(b, loc, resultType ? TypeRange{resultType} : TypeRange{}, all, ptx,
                                      constraints, /*has_side_effects=*/true, /*is_align_stack=*/false,
                                      LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
                                      ArrayAttr());
  return results > 0 ? op.getResult(0) : Value();
}

Value mlir::tile::gpu_lowering::i32Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), value);
}

WaveCoordinates mlir::tile::gpu_lowering::waveCoordinates(OpBuilder &b, Location loc,
                                                          const Distribution &dist,
                                                          const MatrixLayout &layout) {
  Value waveSize = i32Constant(b, loc, dist.arch.waveSize);
  Value lane = b.createOrFold<arith::RemUIOp>(loc, dist.threadId, waveSize);
  Value wave = b.createOrFold<arith::DivUIOp>(loc, dist.threadId, waveSize);
  Value n = i32Constant(b, loc, layout.warpsN);
  return {lane, b.createOrFold<arith::DivUIOp>(loc, wave, n),
          b.createOrFold<arith::RemUIOp>(loc, wave, n)};
}

std::pair<Value, Value> AccumulatorTile::coordinates(OpBuilder &b, Location loc, Value lane,
                                                     int64_t j) const {
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  auto div = [&](Value x, int64_t y) { return b.createOrFold<arith::DivUIOp>(loc, x, c(y)); };
  auto rem = [&](Value x, int64_t y) { return b.createOrFold<arith::RemUIOp>(loc, x, c(y)); };
  auto mul = [&](Value x, int64_t y) { return b.createOrFold<arith::MulIOp>(loc, x, c(y)); };
  auto add = [&](Value x, int64_t y) { return b.createOrFold<arith::AddIOp>(loc, x, c(y)); };
  // The instruction's own (row, col) of the element; transposed when it computes C^T.
  auto place = [&](Value row, Value col) {
    return swapped ? std::pair{col, row} : std::pair{row, col};
  };
  switch (kind) {
  case Kind::Mfma16:
    return place(add(mul(div(lane, 16), 4), j), rem(lane, 16));
  case Kind::Mfma32:
    return place(add(mul(div(lane, 32), 4), 8 * (j / 4) + j % 4), rem(lane, 32));
  case Kind::WmmaGfx11:
    return place(add(div(lane, 16), 2 * j), rem(lane, 16));
  case Kind::WmmaGfx12:
    return place(add(mul(div(lane, 16), 8), j), rem(lane, 16));
  case Kind::MmaM16N8:
    return {add(div(lane, 4), 8 * (j / 2)), add(mul(rem(lane, 4), 2), j % 2)};
  }
  return {};
}

Value mlir::tile::gpu_lowering::waveRowBase(OpBuilder &b, Location loc, const MatrixLayout &layout,
                                            Value waveM) {
  int64_t group = layout.interleaveM;
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  if (group == 1)
    return b.createOrFold<arith::MulIOp>(loc, waveM, c(layout.rows / layout.warpsM));
  Value band =
      b.createOrFold<arith::MulIOp>(loc, b.createOrFold<arith::DivUIOp>(loc, waveM, c(group)),
                                    c(layout.rows / (layout.warpsM / group)));
  Value slice = b.createOrFold<arith::MulIOp>(
      loc, b.createOrFold<arith::RemUIOp>(loc, waveM, c(group)), c(layout.tile.tileM));
  return b.createOrFold<arith::AddIOp>(loc, band, slice);
}

MatrixPlaces::MatrixPlaces(OpBuilder &b, Location loc, const Distribution &dist,
                           const MatrixLayout &layout)
    : layout(layout) {
  WaveCoordinates w = waveCoordinates(b, loc, dist, layout);
  waveRow = waveRowBase(b, loc, layout, w.waveM);
  waveCol =
      b.createOrFold<arith::MulIOp>(loc, w.waveN, i32Constant(b, loc, layout.cols / layout.warpsN));
  for (int64_t j = 0; j < layout.tile.perLane; ++j)
    inTile.push_back(layout.tile.coordinates(b, loc, w.lane, j));
}

std::pair<Value, Value> MatrixPlaces::at(OpBuilder &b, Location loc, int64_t index) const {
  int64_t tile = index / layout.tile.perLane, j = index % layout.tile.perLane;
  int64_t rm = tile / layout.repN, rn = tile % layout.repN;
  auto add = [&](Value x, Value y) { return b.createOrFold<arith::AddIOp>(loc, x, y); };
  Value row = add(waveRow, i32Constant(b, loc, rm * layout.tile.tileM * layout.interleaveM));
  Value col = add(waveCol, i32Constant(b, loc, rn * layout.tile.tileN));
  return {add(row, inTile[j].first), add(col, inTile[j].second)};
}

namespace {

/// Builds 2-D offsets, pointers and masks per element from their affine form, in the
/// matrix layout: what ops made them (expand_dims, broadcast, arith, addptr) does not
/// matter, and no 1-D block has to change layout.
struct AffineBlockMaterialization : ConversionPattern {
  AffineBlockMaterialization(const TypeConverter &converter, MLIRContext *ctx,
                             const Distribution &dist)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/10, ctx), dist(dist) {}

  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value>,
                                ConversionPatternRewriter &rewriter) const override {
    if (op->getNumResults() != 1 || isa<LoadOp, DotOp>(op))
      return failure();
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || type.getRank() != 2)
      return failure();
    Type element = type.getElementType();
    bool pointer = isa<PointerType>(element), mask = element.isInteger(1);
    if (!pointer && !isa<IntegerType>(element))
      return failure();
    Location loc = op->getLoc();
    auto converted = cast<VectorType>(getTypeConverter()->convertType(type));
    MatrixLayout layout = dist.matrixOf(type);
    Value value = op->getResult(0);
    auto remap = [&](Value v) { return rewriter.getRemappedValue(v); };
    std::optional<AffineLanes> lanes;
    std::optional<LaneBounds> bounds;
    if (mask)
      bounds = analyzeLaneBounds(value);
    else
      lanes = analyzeAffineLanes(value);
    if (!lanes && !bounds)
      return rewriter.notifyMatchFailure(op, "not affine in its indices");
    if (!layout.fits) {
      // Only staged loads read such blocks, through the analysis; keep a placeholder.
      rewriter.replaceOpWithNewOp<LLVM::PoisonOp>(op, converted);
      return success();
    }
    Value offset, rowStride, colStride;
    SmallVector<Value> rowBounds, colBounds;
    if (lanes) {
      offset = lanes->offset.materialize(rewriter, loc, remap);
      rowStride = lanes->strides[0].materialize(rewriter, loc, remap);
      colStride = lanes->strides[1].materialize(rewriter, loc, remap);
    } else {
      for (const auto &bound : bounds->upper[0])
        rowBounds.push_back(bound.materialize(rewriter, loc, remap));
      for (const auto &bound : bounds->upper[1])
        colBounds.push_back(bound.materialize(rewriter, loc, remap));
    }
    Type i64 = rewriter.getI64Type();
    Value result = pointer ? Value(LLVM::PoisonOp::create(rewriter, loc, converted))
                           : Value(arith::ConstantOp::create(rewriter, loc, converted,
                                                             rewriter.getZeroAttr(converted)));
    MatrixPlaces places(rewriter, loc, dist, layout);
    for (int64_t e = 0; e < layout.perThread(); ++e) {
      auto [row32, col32] = places.at(rewriter, loc, e);
      Value row = rewriter.createOrFold<arith::ExtUIOp>(loc, i64, row32);
      Value col = rewriter.createOrFold<arith::ExtUIOp>(loc, i64, col32);
      Value scalar;
      if (mask) {
        scalar = arith::ConstantIntOp::create(rewriter, loc, 1, 1);
        auto below = [&](Value index, Value bound) {
          scalar = rewriter.createOrFold<arith::AndIOp>(
              loc, scalar,
              rewriter.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, index, bound));
        };
        for (Value bound : rowBounds)
          below(row, bound);
        for (Value bound : colBounds)
          below(col, bound);
      } else {
        Value at = rewriter.createOrFold<arith::AddIOp>(
            loc, offset,
            rewriter.createOrFold<arith::AddIOp>(
                loc, rewriter.createOrFold<arith::MulIOp>(loc, row, rowStride),
                rewriter.createOrFold<arith::MulIOp>(loc, col, colStride)));
        if (pointer) {
          Value base = remap(lanes->basePtr);
          Type pointee = getTypeConverter()->convertType(getPointeeType(type));
          scalar = LLVM::GEPOp::create(rewriter, loc, base.getType(), pointee, base,
                                       ArrayRef<LLVM::GEPArg>{at});
        } else {
          // With index_bits=64 the offsets are already i64: a same-width trunci is invalid.
          scalar = element.getIntOrFloatBitWidth() < 64
                       ? rewriter.createOrFold<arith::TruncIOp>(loc, element, at)
                       : at;
        }
      }
      result = vector::InsertOp::create(rewriter, loc, scalar, result, ArrayRef<int64_t>{e});
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  const Distribution &dist;
};

} // namespace

std::optional<StagedOperand> mlir::tile::gpu_lowering::stagedOperandOf(Value operand) {
  auto load = operand.getDefiningOp<LoadOp>();
  if (!load || load.getOther())
    return std::nullopt;
  auto lanes = analyzeAffineLanes(load.getPtr());
  if (!lanes || !lanes->basePtr)
    return std::nullopt;
  StagedOperand staged{*lanes, {}};
  if (Value mask = load.getMask()) {
    auto bounds = analyzeLaneBounds(mask);
    if (!bounds)
      return std::nullopt;
    staged.bounds = *bounds;
  } else {
    staged.bounds.upper.resize(2);
  }
  return staged;
}

static bool stagesOperands(DotOp dot) {
  return stagedOperandOf(dot.getA()) && stagedOperandOf(dot.getB());
}

bool mlir::tile::gpu_lowering::isStagedByDots(LoadOp load) {
  if (load->use_empty())
    return false;
  for (OpOperand &use : load->getUses()) {
    auto dot = dyn_cast<DotOp>(use.getOwner());
    if (!dot || use.getOperandNumber() == 2 || !stagesOperands(dot))
      return false;
  }
  return true;
}

void mlir::tile::gpu_lowering::populateMatrixPatterns(const TypeConverter &converter,
                                                      RewritePatternSet &patterns,
                                                      const Distribution &dist) {
  patterns.add<AffineBlockMaterialization>(converter, patterns.getContext(), dist);
  populateDotPatterns(converter, patterns, dist);
}
