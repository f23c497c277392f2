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
  if (arch.matrixUnit == ::tile::MatrixUnit::Mfma && nonKDim == 32) {
    tile.tileM = tile.tileN = 32;
    tile.perLane = 16;
    tile.kind = AccumulatorTile::Kind::Mfma32;
  } else if (arch.matrixUnit == ::tile::MatrixUnit::Wmma) {
    tile.perLane = 8;
    tile.kind = arch.name.rfind("gfx11", 0) == 0 ? AccumulatorTile::Kind::WmmaGfx11
                                                  : AccumulatorTile::Kind::WmmaGfx12;
  } else if (!arch.amd) {
    tile.tileN = 8;
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

std::pair<Value, Value> AccumulatorTile::coordinates(OpBuilder &b, Location loc, Value lane,
                                                     int64_t j) const {
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  auto div = [&](Value x, int64_t y) { return arith::DivUIOp::create(b, loc, x, c(y)).getResult(); };
  auto rem = [&](Value x, int64_t y) { return arith::RemUIOp::create(b, loc, x, c(y)).getResult(); };
  auto mul = [&](Value x, int64_t y) { return arith::MulIOp::create(b, loc, x, c(y)).getResult(); };
  auto add = [&](Value x, int64_t y) { return arith::AddIOp::create(b, loc, x, c(y)).getResult(); };
  switch (kind) {
  case Kind::Mfma16:
    return {add(mul(div(lane, 16), 4), j), rem(lane, 16)};
  case Kind::Mfma32:
    return {add(mul(div(lane, 32), 4), 8 * (j / 4) + j % 4), rem(lane, 32)};
  case Kind::WmmaGfx11:
    return {add(div(lane, 16), 2 * j), rem(lane, 16)};
  case Kind::WmmaGfx12:
    return {add(mul(div(lane, 16), 8), j), rem(lane, 16)};
  case Kind::MmaM16N8:
    return {add(div(lane, 4), 8 * (j / 2)), add(mul(rem(lane, 4), 2), j % 2)};
  }
  return {};
}

std::pair<Value, Value> mlir::tile::gpu_lowering::matrixCoordinates(OpBuilder &b, Location loc,
                                                                   const Distribution &dist,
                                                                   const MatrixLayout &layout,
                                                                   int64_t index) {
  WaveCoordinates w = waveCoordinates(b, loc, dist, layout);
  int64_t tile = index / layout.tile.perLane, j = index % layout.tile.perLane;
  int64_t rm = tile / layout.repN, rn = tile % layout.repN;
  auto [inRow, inCol] = layout.tile.coordinates(b, loc, w.lane, j);
  Value row = arith::MulIOp::create(b, loc, w.waveM, i32Constant(b, loc, layout.rows / layout.warpsM));
  row = arith::AddIOp::create(b, loc, row, i32Constant(b, loc, rm * layout.tile.tileM));
  row = arith::AddIOp::create(b, loc, row, inRow);
  Value col = arith::MulIOp::create(b, loc, w.waveN, i32Constant(b, loc, layout.cols / layout.warpsN));
  col = arith::AddIOp::create(b, loc, col, i32Constant(b, loc, rn * layout.tile.tileN));
  col = arith::AddIOp::create(b, loc, col, inCol);
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
          // With index_bits=64 the offsets are already i64: a same-width trunci is invalid.
          scalar = element.getIntOrFloatBitWidth() < 64
                       ? Value(arith::TruncIOp::create(rewriter, loc, element, at))
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
  int64_t bytes = elementBytes(element);
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
    Value src = LLVM::GEPOp::create(
        b, loc, globalBase.getType(), element, globalBase,
        ArrayRef<LLVM::GEPArg>{Value(arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, row, rowStride), arith::MulIOp::create(b, loc, col, colStride)))});
    // Whole runs in range, contiguous and 16-byte aligned (rows of an odd K are not).
    Value whole = arith::AndIOp::create(
        b, loc, arith::AndIOp::create(b, loc, rowOn, unitStride),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, runEnd, validCols));
    whole = arith::AndIOp::create(b, loc, whole, isAligned(b, loc, src, vec * bytes));
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

/// The matrix instruction of an arch for one input type: its K, the elements of a and
/// b each lane holds, where element j of a lane's fragment sits ((row, k) of a, (k, col)
/// of b), and the call itself.
struct MatrixInstruction {
  int64_t tileK = 0, aPerLane = 0, bPerLane = 0;
  std::function<std::pair<Value, Value>(OpBuilder &, Location, Value lane, int64_t j)> a, b;
  std::function<Value(OpBuilder &, Location, Value a, Value b, Value acc)> multiply;
};

Value callIntrinsic(OpBuilder &b, Location loc, Type result, StringRef name, ValueRange args) {
  return LLVM::CallIntrinsicOp::create(b, loc, result, b.getStringAttr(name), args).getResult(0);
}

Value bitcastElements(OpBuilder &b, Location loc, Value v, Type element) {
  auto type = cast<VectorType>(v.getType());
  return LLVM::BitcastOp::create(b, loc, type.clone(element), v);
}

/// Pairs of 16-bit elements as the 32-bit registers mma.sync takes: <2 x half> for f16,
/// i32 for bf16.
SmallVector<Value> pairsOf(OpBuilder &b, Location loc, Value v, bool asI32) {
  int64_t n = cast<VectorType>(v.getType()).getDimSize(0);
  SmallVector<Value> pairs;
  for (int64_t i = 0; i < n; i += 2) {
    Value pair = vector::ShuffleOp::create(b, loc, v, v, ArrayRef<int64_t>{i, i + 1});
    if (asI32)
      pair = LLVM::BitcastOp::create(b, loc, b.getI32Type(), pair);
    pairs.push_back(pair);
  }
  return pairs;
}

/// An mma.sync call: the a and b registers in `args`, then the 4 accumulator elements;
/// its 4-field result struct back into a vector like `acc`.
Value mmaSync(OpBuilder &b, Location loc, StringRef name, SmallVector<Value> args, Value acc) {
  for (int64_t i = 0; i < 4; ++i)
    args.push_back(vector::ExtractOp::create(b, loc, acc, ArrayRef<int64_t>{i}));
  Type element = cast<VectorType>(acc.getType()).getElementType();
  auto resultType = LLVM::LLVMStructType::getLiteral(b.getContext(), {element, element, element, element});
  Value d = callIntrinsic(b, loc, resultType, name, args);
  Value result = acc;
  for (int64_t i = 0; i < 4; ++i)
    result = vector::InsertOp::create(b, loc, LLVM::ExtractValueOp::create(b, loc, d, i), result,
                                      ArrayRef<int64_t>{i});
  return result;
}

/// The bytes of an i8 fragment as one `packed` value (an integer or a vector of i32).
Value packBytes(OpBuilder &b, Location loc, Value bytes, Type packed) {
  return LLVM::BitcastOp::create(b, loc, packed, bytes);
}

std::optional<MatrixInstruction> matrixInstructionFor(const AccumulatorTile &tile, Type input,
                                                      StringRef arch) {
  bool f16 = input.isF16(), bf16 = input.isBF16(), i8 = input.isInteger(8);
  auto c = [](OpBuilder &b, Location loc, int64_t v) { return i32Constant(b, loc, v); };
  auto div = [c](OpBuilder &b, Location loc, Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, c(b, loc, y)).getResult();
  };
  auto rem = [c](OpBuilder &b, Location loc, Value x, int64_t y) {
    return arith::RemUIOp::create(b, loc, x, c(b, loc, y)).getResult();
  };
  auto affine = [c](OpBuilder &b, Location loc, Value x, int64_t scale, int64_t offset) {
    Value scaled = arith::MulIOp::create(b, loc, x, c(b, loc, scale));
    return arith::AddIOp::create(b, loc, scaled, c(b, loc, offset)).getResult();
  };
  MatrixInstruction mi;
  switch (tile.kind) {
  case AccumulatorTile::Kind::Mfma16:
  case AccumulatorTile::Kind::Mfma32: {
    if (!f16 && !bf16 && !i8 && !input.isF32())
      return std::nullopt;
    // Lane l holds a[l % edge][groups of k by l / edge]: 4 groups of 16 lanes for the
    // 16x16 shapes, 2 groups of 32 for the 32x32 ones.
    bool wide = tile.kind == AccumulatorTile::Kind::Mfma32;
    int64_t edge = wide ? 32 : 16, groups = 64 / edge;
    // int8: 4 bytes per lane (one VGPR) on gfx90a, 8 (two) on gfx942 and later.
    bool i8Pairs = i8 && arch != "gfx90a";
    int64_t perLane = input.isF32() ? 1 : i8Pairs ? 8 : 4;
    mi.tileK = perLane * groups;
    mi.aPerLane = mi.bPerLane = perLane;
    mi.a = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      return std::pair{rem(b, loc, lane, edge), affine(b, loc, div(b, loc, lane, edge), perLane, j)};
    };
    mi.b = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      return std::pair{affine(b, loc, div(b, loc, lane, edge), perLane, j), rem(b, loc, lane, edge)};
    };
    std::string name;
    if (i8)
      name = std::string("llvm.amdgcn.mfma.i32.") +
             (wide ? (i8Pairs ? "32x32x16.i8" : "32x32x8i8") : (i8Pairs ? "16x16x32.i8" : "16x16x16i8"));
    else
      name = std::string("llvm.amdgcn.mfma.f32.") +
             (wide ? (f16 ? "32x32x8f16" : bf16 ? "32x32x8bf16.1k" : "32x32x2f32")
                   : (f16 ? "16x16x16f16" : bf16 ? "16x16x16bf16.1k" : "16x16x4f32"));
    mi.multiply = [=](OpBuilder &b, Location loc, Value a, Value bv, Value acc) {
      if (bf16) {
        a = bitcastElements(b, loc, a, b.getI16Type());
        bv = bitcastElements(b, loc, bv, b.getI16Type());
      } else if (i8) {
        Type packed = b.getIntegerType(perLane * 8);
        a = packBytes(b, loc, a, packed);
        bv = packBytes(b, loc, bv, packed);
      }
      Value zero = LLVM::ConstantOp::create(b, loc, b.getI32Type(), 0);
      return callIntrinsic(b, loc, acc.getType(), name, {a, bv, acc, zero, zero, zero});
    };
    return mi;
  }
  case AccumulatorTile::Kind::WmmaGfx11:
  case AccumulatorTile::Kind::WmmaGfx12: {
    if (!f16 && !bf16 && !i8)
      return std::nullopt;
    bool gfx11 = tile.kind == AccumulatorTile::Kind::WmmaGfx11;
    // gfx11: every lane holds all 16 k of its row (lanes 16..31 repeat 0..15); gfx12:
    // the two half-waves hold k 0..7 and 8..15.
    int64_t perLane = gfx11 ? 16 : 8;
    mi.tileK = 16;
    mi.aPerLane = mi.bPerLane = perLane;
    mi.a = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      Value k = gfx11 ? c(b, loc, j) : affine(b, loc, div(b, loc, lane, 16), 8, j);
      return std::pair{rem(b, loc, lane, 16), k};
    };
    mi.b = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      Value k = gfx11 ? c(b, loc, j) : affine(b, loc, div(b, loc, lane, 16), 8, j);
      return std::pair{k, rem(b, loc, lane, 16)};
    };
    mi.multiply = [=](OpBuilder &b, Location loc, Value a, Value bv, Value acc) {
      if (i8) {
        // Bytes travel packed in i32s; both operands signed, no clamping.
        auto packed = VectorType::get({perLane / 4}, b.getI32Type());
        Value yes = LLVM::ConstantOp::create(b, loc, b.getI1Type(), 1);
        Value no = LLVM::ConstantOp::create(b, loc, b.getI1Type(), 0);
        return callIntrinsic(b, loc, acc.getType(), "llvm.amdgcn.wmma.i32.16x16x16.iu8",
                             {yes, packBytes(b, loc, a, packed), yes, packBytes(b, loc, bv, packed), acc, no});
      }
      if (bf16) {
        a = bitcastElements(b, loc, a, b.getI16Type());
        bv = bitcastElements(b, loc, bv, b.getI16Type());
      }
      return callIntrinsic(b, loc, acc.getType(),
                           bf16 ? "llvm.amdgcn.wmma.f32.16x16x16.bf16" : "llvm.amdgcn.wmma.f32.16x16x16.f16",
                           {a, bv, acc});
    };
    return mi;
  }
  case AccumulatorTile::Kind::MmaM16N8: {
    if (!f16 && !bf16 && !i8)
      return std::nullopt;
    // mma.sync.m16n8k(8e) row.col, with e elements per 32-bit register (2 for 16-bit
    // types, 4 for int8): lane l is in group g = l / 4 at position t = l % 4; a holds
    // 4 registers, at rows g and g + 8 and k blocks of 4e, b holds 2, at column g.
    int64_t e = i8 ? 4 : 2;
    mi.tileK = 8 * e;
    mi.aPerLane = 4 * e;
    mi.bPerLane = 2 * e;
    mi.a = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      Value row = affine(b, loc, div(b, loc, lane, 4), 1, 8 * ((j / e) % 2));
      Value k = affine(b, loc, rem(b, loc, lane, 4), e, j % e + 4 * e * (j / (2 * e)));
      return std::pair{row, k};
    };
    mi.b = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      Value k = affine(b, loc, rem(b, loc, lane, 4), e, j % e + 4 * e * (j / e));
      return std::pair{k, div(b, loc, lane, 4)};
    };
    if (i8) {
      mi.multiply = [=](OpBuilder &b, Location loc, Value a, Value bv, Value acc) {
        SmallVector<Value> args;
        for (Value fragment : {a, bv}) {
          int64_t words = cast<VectorType>(fragment.getType()).getDimSize(0) / 4;
          Value packed = packBytes(b, loc, fragment, VectorType::get({words}, b.getI32Type()));
          for (int64_t w = 0; w < words; ++w)
            args.push_back(vector::ExtractOp::create(b, loc, packed, ArrayRef<int64_t>{w}));
        }
        return mmaSync(b, loc, "llvm.nvvm.mma.m16n8k32.row.col.s8", args, acc);
      };
      return mi;
    }
    mi.multiply = [=](OpBuilder &b, Location loc, Value a, Value bv, Value acc) {
      SmallVector<Value> args = pairsOf(b, loc, a, bf16);
      args.append(pairsOf(b, loc, bv, bf16));
      return mmaSync(b, loc,
                     bf16 ? "llvm.nvvm.mma.m16n8k16.row.col.bf16" : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
                     args, acc);
    };
    return mi;
  }
  }
  return std::nullopt;
}

Value widenTo(OpBuilder &b, Location loc, Value v, Type accElement) {
  if (v.getType() == accElement)
    return v;
  if (isa<FloatType>(accElement))
    return arith::ExtFOp::create(b, loc, accElement, v);
  return arith::ExtSIOp::create(b, loc, accElement, v);
}

struct DotOnGpu : OpConversionPattern<DotOp> {
  DotOnGpu(const TypeConverter &converter, MLIRContext *ctx, const Distribution &dist)
      : OpConversionPattern(converter, ctx), dist(dist) {}

  LogicalResult matchAndRewrite(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto aType = op.getA().getType(), bType = op.getB().getType();
    Type input = aType.getElementType();
    auto a = stagedOperandOf(op.getA()), b = stagedOperandOf(op.getB());
    if (!a || !b)
      return op.emitError("a GPU dot needs both operands loaded from affine addresses with "
                          "bounds masks (as blocked matmuls load them)");
    MatrixLayout layout = dist.matrixOf(op.getType());
    int64_t m = aType.getDimSize(0), k = aType.getDimSize(1), n = bType.getDimSize(1);
    auto instruction = matrixInstructionFor(layout.tile, input, dist.arch.name);
    if (instruction && k % instruction->tileK != 0)
      instruction.reset();
    if (!layout.fits)
      return op.emitError("a ") << m << "x" << n << " accumulator does not fit " << dist.numWarps
                                << " waves of " << layout.tile.tileM << "x" << layout.tile.tileN
                                << " tiles on " << dist.arch.name
                                << "; use BLOCK_M, BLOCK_N that give each wave whole tiles";
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
    // The previous K step may still read the buffers.
    gpu::BarrierOp::create(rewriter, loc);
    stageBlock(rewriter, loc, dist, av[0], av[1], av[2], av[3], av[4], ldsA, input, m, k);
    stageBlock(rewriter, loc, dist, bv[0], bv[1], bv[2], bv[3], bv[4], ldsB, input, k, n);
    gpu::BarrierOp::create(rewriter, loc);

    unsigned bytes = elementBytes(input);
    Type i64 = rewriter.getI64Type();
    auto load = [&](Value buffer, Value row, Value col, int64_t width) {
      Value index = arith::AddIOp::create(
          rewriter, loc,
          arith::MulIOp::create(rewriter, loc, arith::ExtUIOp::create(rewriter, loc, i64, row),
                                i64Constant(rewriter, loc, width)),
          arith::ExtUIOp::create(rewriter, loc, i64, col));
      Value ptr = LLVM::GEPOp::create(rewriter, loc, buffer.getType(), input, buffer,
                                      ArrayRef<LLVM::GEPArg>{index});
      return LLVM::LoadOp::create(rewriter, loc, input, ptr, bytes).getResult();
    };
    Value acc = adaptor.getAcc();
    Value result = instruction ? onMatrixUnits(rewriter, loc, layout, *instruction, acc, ldsA, ldsB, m, k, n, load)
                               : onFmas(rewriter, loc, layout, acc, ldsA, ldsB, k, n, load);
    rewriter.replaceOp(op, result);
    return success();
  }

  using LdsLoad = function_ref<Value(Value buffer, Value row, Value col, int64_t width)>;

  Value onMatrixUnits(ConversionPatternRewriter &rewriter, Location loc, const MatrixLayout &layout,
                      const MatrixInstruction &mi, Value acc, Value ldsA, Value ldsB, int64_t m,
                      int64_t k, int64_t n, LdsLoad load) const {
    WaveCoordinates w = waveCoordinates(rewriter, loc, dist, layout);
    auto add = [&](Value x, int64_t y) {
      return arith::AddIOp::create(rewriter, loc, x, i32Constant(rewriter, loc, y)).getResult();
    };
    Value waveRow = arith::MulIOp::create(rewriter, loc, w.waveM, i32Constant(rewriter, loc, m / layout.warpsM));
    Value waveCol = arith::MulIOp::create(rewriter, loc, w.waveN, i32Constant(rewriter, loc, n / layout.warpsN));
    int64_t perLane = layout.tile.perLane;
    SmallVector<Value> tiles;
    for (int64_t t = 0; t < layout.repM * layout.repN; ++t)
      tiles.push_back(vector::ShuffleOp::create(
          rewriter, loc, acc, acc, llvm::to_vector(llvm::seq<int64_t>(t * perLane, (t + 1) * perLane))));
    for (int64_t step = 0; step < k / mi.tileK; ++step) {
      SmallVector<Value> aFrags, bFrags;
      for (int64_t rm = 0; rm < layout.repM; ++rm) {
        Value frag;
        for (int64_t j = 0; j < mi.aPerLane; ++j) {
          auto [row, kk] = mi.a(rewriter, loc, w.lane, j);
          Value element = load(ldsA, arith::AddIOp::create(rewriter, loc, waveRow, add(row, rm * layout.tile.tileM)),
                               add(kk, step * mi.tileK), k);
          if (mi.aPerLane == 1) {
            frag = element;
            continue;
          }
          if (!frag) {
            auto fragType = VectorType::get({mi.aPerLane}, element.getType());
            frag = arith::ConstantOp::create(rewriter, loc, fragType, rewriter.getZeroAttr(fragType));
          }
          frag = vector::InsertOp::create(rewriter, loc, element, frag, ArrayRef<int64_t>{j});
        }
        aFrags.push_back(frag);
      }
      for (int64_t rn = 0; rn < layout.repN; ++rn) {
        Value frag;
        for (int64_t j = 0; j < mi.bPerLane; ++j) {
          auto [kk, col] = mi.b(rewriter, loc, w.lane, j);
          Value element = load(ldsB, add(kk, step * mi.tileK),
                               arith::AddIOp::create(rewriter, loc, waveCol, add(col, rn * layout.tile.tileN)), n);
          if (mi.bPerLane == 1) {
            frag = element;
            continue;
          }
          if (!frag) {
            auto fragType = VectorType::get({mi.bPerLane}, element.getType());
            frag = arith::ConstantOp::create(rewriter, loc, fragType, rewriter.getZeroAttr(fragType));
          }
          frag = vector::InsertOp::create(rewriter, loc, element, frag, ArrayRef<int64_t>{j});
        }
        bFrags.push_back(frag);
      }
      for (int64_t rm = 0; rm < layout.repM; ++rm)
        for (int64_t rn = 0; rn < layout.repN; ++rn) {
          Value &tile = tiles[rm * layout.repN + rn];
          tile = mi.multiply(rewriter, loc, aFrags[rm], bFrags[rn], tile);
        }
    }
    Value result = acc;
    int64_t size = cast<VectorType>(acc.getType()).getDimSize(0);
    for (auto [t, tile] : llvm::enumerate(tiles)) {
      int64_t first = int64_t(t) * perLane;
      SmallVector<int64_t> mask;
      for (int64_t i = 0; i < size; ++i)
        mask.push_back(i >= first && i < first + perLane ? size + (i - first) : i);
      result = vector::ShuffleOp::create(rewriter, loc, result, tile, mask);
    }
    return result;
  }

  /// Archs or types with no matrix instruction: each thread forms its accumulator
  /// elements with FMAs (multiply-adds for integers) over the staged blocks.
  Value onFmas(ConversionPatternRewriter &rewriter, Location loc, const MatrixLayout &layout, Value acc,
               Value ldsA, Value ldsB, int64_t k, int64_t n, LdsLoad load) const {
    int64_t perThread = layout.perThread();
    SmallVector<std::pair<Value, Value>> coordinates;
    for (int64_t e = 0; e < perThread; ++e)
      coordinates.push_back(matrixCoordinates(rewriter, loc, dist, layout, e));
    Type accElement = cast<VectorType>(acc.getType()).getElementType();
    auto loop = scf::ForOp::create(
        rewriter, loc, i32Constant(rewriter, loc, 0), i32Constant(rewriter, loc, k),
        i32Constant(rewriter, loc, 1), ValueRange{acc},
        [&](OpBuilder &b, Location loc, Value kk, ValueRange iter) {
          Value sums = iter[0];
          for (int64_t e = 0; e < perThread; ++e) {
            auto [row, col] = coordinates[e];
            Value x = widenTo(b, loc, load(ldsA, row, kk, k), accElement);
            Value y = widenTo(b, loc, load(ldsB, kk, col, n), accElement);
            Value sum = vector::ExtractOp::create(b, loc, sums, ArrayRef<int64_t>{e});
            // llvm.fma, not math.fma: the GPU conversions turn math.fma into calls of
            // __nv_fmaf / __ocml_fma_f32 from device libraries.
            sum = isa<FloatType>(accElement)
                      ? Value(LLVM::FMAOp::create(b, loc, x, y, sum))
                      : Value(arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, x, y), sum));
            sums = vector::InsertOp::create(b, loc, sum, sums, ArrayRef<int64_t>{e});
          }
          scf::YieldOp::create(b, loc, sums);
        });
    return loop.getResult(0);
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
  patterns.add<DotOnGpu>(converter, patterns.getContext(), dist);
}
