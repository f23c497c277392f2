// 2-D blocks on GPUs: the matrix-unit accumulator layout, affine blocks built per
// element, and tile.dot as MFMA on operands staged through LDS.
#include "GpuLowering.h"

#include "tile/Analysis/AffineLanes.h"
#include "tile/Conversion/BlockAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

constexpr int64_t kTile = 16; // MFMA 16x16 tiles

MatrixLayout Distribution::matrixOf(Type tensorType) const {
  auto type = cast<RankedTensorType>(tensorType);
  MatrixLayout layout;
  layout.rows = type.getDimSize(0);
  layout.cols = type.getDimSize(1);
  // Split the waves over M first while each keeps whole tiles, then over N.
  while (layout.warpsM * layout.warpsN < numWarps) {
    bool mHasRoom = layout.rows / (layout.warpsM * 2) >= kTile;
    bool nHasRoom = layout.cols / (layout.warpsN * 2) >= kTile;
    if (mHasRoom && (layout.warpsM <= layout.warpsN || !nHasRoom))
      layout.warpsM *= 2;
    else if (nHasRoom)
      layout.warpsN *= 2;
    else
      return layout; // does not fit
  }
  layout.fits = arch.waveSize == 64 && layout.rows % (kTile * layout.warpsM) == 0 &&
                layout.cols % (kTile * layout.warpsN) == 0;
  layout.repM = layout.rows / (kTile * layout.warpsM);
  layout.repN = layout.cols / (kTile * layout.warpsN);
  return layout;
}

namespace {

Value i32Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), value);
}
Value i64Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value);
}

/// lane (0..63) and the wave's (m, n) position in the wave grid, as i32.
struct WaveCoordinates {
  Value lane, waveM, waveN;
};

WaveCoordinates waveCoordinates(OpBuilder &b, Location loc, const Distribution &dist,
                                const MatrixLayout &layout) {
  Value wave64 = i32Constant(b, loc, dist.arch.waveSize);
  Value lane = arith::RemUIOp::create(b, loc, dist.threadId, wave64);
  Value wave = arith::DivUIOp::create(b, loc, dist.threadId, wave64);
  Value n = i32Constant(b, loc, layout.warpsN);
  return {lane, arith::DivUIOp::create(b, loc, wave, n), arith::RemUIOp::create(b, loc, wave, n)};
}

} // namespace

std::pair<Value, Value> mlir::tile::gpu_lowering::matrixCoordinates(OpBuilder &b, Location loc,
                                                                   const Distribution &dist,
                                                                   const MatrixLayout &layout,
                                                                   int64_t index) {
  WaveCoordinates w = waveCoordinates(b, loc, dist, layout);
  int64_t tile = index / 4, j = index % 4;
  int64_t rm = tile / layout.repN, rn = tile % layout.repN;
  Value sixteen = i32Constant(b, loc, kTile);
  // row = waveM * (rows / warpsM) + rm * 16 + 4 * (lane / 16) + j
  Value row = arith::MulIOp::create(b, loc, w.waveM, i32Constant(b, loc, layout.rows / layout.warpsM));
  row = arith::AddIOp::create(b, loc, row, i32Constant(b, loc, rm * kTile + j));
  row = arith::AddIOp::create(
      b, loc, row,
      arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, w.lane, sixteen), i32Constant(b, loc, 4)));
  // col = waveN * (cols / warpsN) + rn * 16 + lane % 16
  Value col = arith::MulIOp::create(b, loc, w.waveN, i32Constant(b, loc, layout.cols / layout.warpsN));
  col = arith::AddIOp::create(b, loc, col, i32Constant(b, loc, rn * kTile));
  col = arith::AddIOp::create(b, loc, col, arith::RemUIOp::create(b, loc, w.lane, sixteen));
  return {row, col};
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
    for (int64_t e = 0; e < layout.perThread(); ++e) {
      auto [row32, col32] = matrixCoordinates(rewriter, loc, dist, layout, e);
      Value row = arith::ExtUIOp::create(rewriter, loc, i64, row32);
      Value col = arith::ExtUIOp::create(rewriter, loc, i64, col32);
      Value scalar;
      if (mask) {
        scalar = arith::ConstantIntOp::create(rewriter, loc, 1, 1);
        auto below = [&](Value index, Value bound) {
          scalar = arith::AndIOp::create(
              rewriter, loc, scalar,
              arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, index, bound));
        };
        for (Value bound : rowBounds)
          below(row, bound);
        for (Value bound : colBounds)
          below(col, bound);
      } else {
        Value at = arith::AddIOp::create(
            rewriter, loc, offset,
            arith::AddIOp::create(rewriter, loc, arith::MulIOp::create(rewriter, loc, row, rowStride),
                                  arith::MulIOp::create(rewriter, loc, col, colStride)));
        if (pointer) {
          Value base = remap(lanes->basePtr);
          Type pointee = getTypeConverter()->convertType(getPointeeType(type));
          scalar = LLVM::GEPOp::create(rewriter, loc, base.getType(), pointee, base,
                                       ArrayRef<LLVM::GEPArg>{at});
        } else {
          scalar = arith::TruncIOp::create(rewriter, loc, element, at);
          if (element.getIntOrFloatBitWidth() == 64)
            scalar = at;
        }
      }
      result = vector::InsertOp::create(rewriter, loc, scalar, result, ArrayRef<int64_t>{e});
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  const Distribution &dist;
};

/// A 2-D block a dot reads from memory (the load that made it is not lowered itself).
struct StagedOperand {
  AffineLanes lanes;
  LaneBounds bounds;
};

std::optional<StagedOperand> stagedOperandOf(Value operand) {
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

bool stagesOperands(DotOp dot) {
  return stagedOperandOf(dot.getA()) && stagedOperandOf(dot.getB());
}

/// The LDS array of a staged operand: a module-level global in address space 3.
Value ldsBuffer(ConversionPatternRewriter &rewriter, Operation *op, Type element, int64_t count,
                StringRef name) {
  auto module = op->getParentOfType<gpu::GPUModuleOp>();
  auto arrayType = LLVM::LLVMArrayType::get(element, count);
  std::string symbol = name.str();
  for (int i = 0; module.lookupSymbol(symbol); ++i)
    symbol = (name + "_" + std::to_string(i)).str();
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(module.getBody());
    auto global = LLVM::GlobalOp::create(rewriter, op->getLoc(), arrayType, /*isConstant=*/false,
                                         LLVM::Linkage::Internal, symbol, Attribute(),
                                         /*alignment=*/16, kSharedAddressSpace);
    (void)global;
  }
  return LLVM::AddressOfOp::create(rewriter, op->getLoc(),
                                   LLVM::LLVMPointerType::get(rewriter.getContext(), kSharedAddressSpace),
                                   symbol);
}

/// Copies a rows x cols block from global memory (strides in elements, the leading
/// validRows x validCols of it in range, zeros elsewhere) into row-major LDS. Threads
/// take runs of `vec` elements along the columns: one 16-byte load each when the run is
/// whole and the column stride is 1.
void stageBlock(OpBuilder &b, Location loc, const Distribution &dist, Value globalBase,
                Value rowStride, Value colStride, Value validRows, Value validCols, Value lds,
                Type element, int64_t rows, int64_t cols) {
  int64_t bytes = std::max(1u, element.getIntOrFloatBitWidth() / 8);
  int64_t vec = std::min<int64_t>(16 / bytes, cols);
  int64_t runsPerRow = cols / vec, runs = rows * runsPerRow;
  auto runType = VectorType::get({vec}, element);
  Type i64 = b.getI64Type();
  Value tid = arith::ExtUIOp::create(b, loc, i64, dist.threadId);
  Value unitStride = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, colStride, i64Constant(b, loc, 1));
  for (int64_t first = 0; first < runs; first += dist.threads) {
    Value run = arith::AddIOp::create(b, loc, tid, i64Constant(b, loc, first));
    Value row = arith::DivUIOp::create(b, loc, run, i64Constant(b, loc, runsPerRow));
    Value col = arith::MulIOp::create(
        b, loc, arith::RemUIOp::create(b, loc, run, i64Constant(b, loc, runsPerRow)), i64Constant(b, loc, vec));
    Value inBlock = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, run, i64Constant(b, loc, runs));
    Value rowOn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, row, validRows);
    Value runEnd = arith::AddIOp::create(b, loc, col, i64Constant(b, loc, vec));
    Value whole = arith::AndIOp::create(
        b, loc, arith::AndIOp::create(b, loc, rowOn, unitStride),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, runEnd, validCols));
    Value src = LLVM::GEPOp::create(
        b, loc, globalBase.getType(), element, globalBase,
        ArrayRef<LLVM::GEPArg>{Value(arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, row, rowStride), arith::MulIOp::create(b, loc, col, colStride)))});
    Value dst = LLVM::GEPOp::create(
        b, loc, lds.getType(), element, lds,
        ArrayRef<LLVM::GEPArg>{Value(arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, row, i64Constant(b, loc, cols)), col))});
    auto guarded = scf::IfOp::create(b, loc, inBlock, [&](OpBuilder &b, Location loc) {
      auto data = scf::IfOp::create(
          b, loc, whole,
          [&](OpBuilder &b, Location loc) {
            scf::YieldOp::create(b, loc, Value(LLVM::LoadOp::create(b, loc, runType, src, vec * bytes)));
          },
          [&](OpBuilder &b, Location loc) {
            // Edge of the matrix or a strided view: element by element, zeros outside.
            Value values = arith::ConstantOp::create(b, loc, runType, b.getZeroAttr(runType));
            for (int64_t j = 0; j < vec; ++j) {
              Value c = arith::AddIOp::create(b, loc, col, i64Constant(b, loc, j));
              Value on = arith::AndIOp::create(
                  b, loc, rowOn, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, c, validCols));
              Value ptr = LLVM::GEPOp::create(
                  b, loc, globalBase.getType(), element, globalBase,
                  ArrayRef<LLVM::GEPArg>{Value(arith::AddIOp::create(
                      b, loc, arith::MulIOp::create(b, loc, row, rowStride),
                      arith::MulIOp::create(b, loc, c, colStride)))});
              auto one = scf::IfOp::create(
                  b, loc, on,
                  [&](OpBuilder &b, Location loc) {
                    scf::YieldOp::create(b, loc, Value(LLVM::LoadOp::create(b, loc, element, ptr, bytes)));
                  },
                  [&](OpBuilder &b, Location loc) {
                    scf::YieldOp::create(b, loc, Value(arith::ConstantOp::create(
                                                     b, loc, element, b.getZeroAttr(element))));
                  });
              values = vector::InsertOp::create(b, loc, one.getResult(0), values, ArrayRef<int64_t>{j});
            }
            scf::YieldOp::create(b, loc, values);
          });
      LLVM::StoreOp::create(b, loc, data.getResult(0), dst, vec * bytes);
      scf::YieldOp::create(b, loc);
    });
    (void)guarded;
  }
}

/// The MFMA of one 16 x 16 tile for a k step, by element type: (intrinsic, k per
/// instruction, elements of a and b per lane).
struct MfmaKind {
  const char *intrinsic;
  int64_t k, perLane;
};

std::optional<MfmaKind> mfmaFor(Type input) {
  if (input.isF16())
    return MfmaKind{"llvm.amdgcn.mfma.f32.16x16x16f16", 16, 4};
  if (input.isBF16())
    return MfmaKind{"llvm.amdgcn.mfma.f32.16x16x16bf16.1k", 16, 4};
  if (input.isF32())
    return MfmaKind{"llvm.amdgcn.mfma.f32.16x16x4f32", 4, 1};
  return std::nullopt;
}

struct DotToMfma : OpConversionPattern<DotOp> {
  DotToMfma(const TypeConverter &converter, MLIRContext *ctx, const Distribution &dist)
      : OpConversionPattern(converter, ctx), dist(dist) {}

  LogicalResult matchAndRewrite(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto aType = op.getA().getType(), bType = op.getB().getType();
    Type input = aType.getElementType();
    auto kind = mfmaFor(input);
    if (!kind)
      return rewriter.notifyMatchFailure(op, "no MFMA for this element type yet");
    auto a = stagedOperandOf(op.getA()), b = stagedOperandOf(op.getB());
    if (!a || !b)
      return op.emitError("a GPU dot needs both operands loaded from affine addresses with "
                          "bounds masks (as blocked matmuls load them)");
    MatrixLayout layout = dist.matrixOf(op.getType());
    int64_t m = aType.getDimSize(0), k = aType.getDimSize(1), n = bType.getDimSize(1);
    if (!layout.fits || k % kind->k != 0)
      return op.emitError("a ") << m << "x" << n << "x" << k << " dot does not fit "
                                << dist.numWarps << " waves of 16x16x" << kind->k
                                << " MFMA tiles; use BLOCK_M, BLOCK_N multiples of 16 per wave";
    auto remap = [&](Value v) { return rewriter.getRemappedValue(v); };
    auto view = [&](const StagedOperand &operand, RankedTensorType type) {
      Value base = offsetBase(rewriter, loc, operand.lanes, input);
      return std::array<Value, 5>{base, operand.lanes.strides[0].materialize(rewriter, loc, remap),
                                  operand.lanes.strides[1].materialize(rewriter, loc, remap),
                                  validLanes(rewriter, loc, operand.bounds, 0, type.getDimSize(0)),
                                  validLanes(rewriter, loc, operand.bounds, 1, type.getDimSize(1))};
    };
    auto av = view(*a, aType), bv = view(*b, bType);
    Value ldsA = ldsBuffer(rewriter, op, input, m * k, "__tile_lds_a");
    Value ldsB = ldsBuffer(rewriter, op, input, k * n, "__tile_lds_b");
    // The previous K step's MFMAs may still read the buffers.
    gpu::BarrierOp::create(rewriter, loc);
    stageBlock(rewriter, loc, dist, av[0], av[1], av[2], av[3], av[4], ldsA, input, m, k);
    stageBlock(rewriter, loc, dist, bv[0], bv[1], bv[2], bv[3], bv[4], ldsB, input, k, n);
    gpu::BarrierOp::create(rewriter, loc);

    WaveCoordinates w = waveCoordinates(rewriter, loc, dist, layout);
    Type i64 = rewriter.getI64Type();
    auto wide = [&](Value v) { return arith::ExtUIOp::create(rewriter, loc, i64, v).getResult(); };
    Value laneRow = wide(arith::RemUIOp::create(rewriter, loc, w.lane, i32Constant(rewriter, loc, 16)));
    Value laneGroup = wide(arith::DivUIOp::create(rewriter, loc, w.lane, i32Constant(rewriter, loc, 16)));
    Value waveRow = arith::MulIOp::create(rewriter, loc, wide(w.waveM), i64Constant(rewriter, loc, m / layout.warpsM));
    Value waveCol = arith::MulIOp::create(rewriter, loc, wide(w.waveN), i64Constant(rewriter, loc, n / layout.warpsN));
    Value kFirst = arith::MulIOp::create(rewriter, loc, laneGroup, i64Constant(rewriter, loc, kind->perLane));
    unsigned bytes = std::max(1u, input.getIntOrFloatBitWidth() / 8);
    auto fragType = VectorType::get({kind->perLane}, input);
    Type operandType = kind->perLane == 1 ? input : Type(fragType);
    if (input.isBF16())
      operandType = VectorType::get({kind->perLane}, rewriter.getI16Type());
    auto accTileType = VectorType::get({4}, rewriter.getF32Type());

    Value acc = adaptor.getAcc();
    SmallVector<Value> tiles;
    for (int64_t t = 0; t < layout.repM * layout.repN; ++t)
      tiles.push_back(vector::ShuffleOp::create(rewriter, loc, acc, acc,
                                                ArrayRef<int64_t>{4 * t, 4 * t + 1, 4 * t + 2, 4 * t + 3}));
    auto ldsAt = [&](Value buffer, Value index) {
      return LLVM::GEPOp::create(rewriter, loc, buffer.getType(), input, buffer, ArrayRef<LLVM::GEPArg>{index});
    };
    Value zeroI32 = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI32Type(), 0);
    for (int64_t step = 0; step < k / kind->k; ++step) {
      Value kBase = arith::AddIOp::create(rewriter, loc, kFirst, i64Constant(rewriter, loc, step * kind->k));
      SmallVector<Value> aFrags, bFrags;
      for (int64_t rm = 0; rm < layout.repM; ++rm) {
        // a[row][kBase .. kBase + perLane): contiguous in row-major LDS.
        Value row = arith::AddIOp::create(rewriter, loc, waveRow,
                                          arith::AddIOp::create(rewriter, loc, laneRow, i64Constant(rewriter, loc, rm * 16)));
        Value index = arith::AddIOp::create(rewriter, loc, arith::MulIOp::create(rewriter, loc, row, i64Constant(rewriter, loc, k)), kBase);
        Value frag = LLVM::LoadOp::create(rewriter, loc, operandType == input ? input : Type(fragType),
                                          ldsAt(ldsA, index), bytes * kind->perLane);
        aFrags.push_back(frag);
      }
      for (int64_t rn = 0; rn < layout.repN; ++rn) {
        // b[kBase + j][col] for j < perLane: a column, one element per LDS row.
        Value col = arith::AddIOp::create(rewriter, loc, waveCol,
                                          arith::AddIOp::create(rewriter, loc, laneRow, i64Constant(rewriter, loc, rn * 16)));
        Value frag = kind->perLane == 1 ? Value() : Value(arith::ConstantOp::create(rewriter, loc, fragType, rewriter.getZeroAttr(fragType)));
        for (int64_t j = 0; j < kind->perLane; ++j) {
          Value kRow = arith::AddIOp::create(rewriter, loc, kBase, i64Constant(rewriter, loc, j));
          Value index = arith::AddIOp::create(rewriter, loc, arith::MulIOp::create(rewriter, loc, kRow, i64Constant(rewriter, loc, n)), col);
          Value element = LLVM::LoadOp::create(rewriter, loc, input, ldsAt(ldsB, index), bytes);
          frag = kind->perLane == 1 ? element
                                    : Value(vector::InsertOp::create(rewriter, loc, element, frag, ArrayRef<int64_t>{j}));
        }
        bFrags.push_back(frag);
      }
      for (int64_t rm = 0; rm < layout.repM; ++rm)
        for (int64_t rn = 0; rn < layout.repN; ++rn) {
          Value aFrag = aFrags[rm], bFrag = bFrags[rn];
          if (input.isBF16()) {
            aFrag = LLVM::BitcastOp::create(rewriter, loc, operandType, aFrag);
            bFrag = LLVM::BitcastOp::create(rewriter, loc, operandType, bFrag);
          }
          Value &tile = tiles[rm * layout.repN + rn];
          tile = LLVM::CallIntrinsicOp::create(
                     rewriter, loc, accTileType, rewriter.getStringAttr(kind->intrinsic),
                     ValueRange{aFrag, bFrag, tile, zeroI32, zeroI32, zeroI32})
                     .getResult(0);
        }
    }
    Value result = acc;
    for (auto [t, tile] : llvm::enumerate(tiles)) {
      SmallVector<int64_t> mask;
      int64_t size = cast<VectorType>(acc.getType()).getDimSize(0);
      for (int64_t i = 0; i < size; ++i)
        mask.push_back(i >= 4 * int64_t(t) && i < 4 * int64_t(t) + 4 ? size + (i - 4 * int64_t(t)) : i);
      result = vector::ShuffleOp::create(rewriter, loc, result, tile, mask);
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  const Distribution &dist;
};

} // namespace

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
  patterns.add<DotToMfma>(converter, patterns.getContext(), dist);
}
