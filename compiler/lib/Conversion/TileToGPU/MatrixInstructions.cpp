// The matrix instructions of each arch: their fragment layouts (where each lane's a and
// b elements sit) and the intrinsic calls, as data the dot lowering reads.
#include "GpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

namespace {

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

} // namespace

std::optional<MatrixInstruction>
mlir::tile::gpu_lowering::matrixInstructionFor(const AccumulatorTile &tile, Type input,
                                               const ::tile::GpuArch &arch, int64_t kpack,
                                               bool allowTf32) {
  bool f16 = input.isF16(), bf16 = input.isBF16(), i8 = input.isInteger(8);
  auto c = [](OpBuilder &b, Location loc, int64_t v) { return i32Constant(b, loc, v); };
  auto div = [c](OpBuilder &b, Location loc, Value x, int64_t y) {
    return b.createOrFold<arith::DivUIOp>(loc, x, c(b, loc, y));
  };
  auto rem = [c](OpBuilder &b, Location loc, Value x, int64_t y) {
    return b.createOrFold<arith::RemUIOp>(loc, x, c(b, loc, y));
  };
  auto affine = [c](OpBuilder &b, Location loc, Value x, int64_t scale, int64_t offset) {
    Value scaled = b.createOrFold<arith::MulIOp>(loc, x, c(b, loc, scale));
    return b.createOrFold<arith::AddIOp>(loc, scaled, c(b, loc, offset));
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
    bool i8Pairs = i8 && arch.name != "gfx90a";
    int64_t perLane = input.isF32() ? 1 : i8Pairs ? 8 : 4;
    // kpack instructions share one fragment read: lane l holds kpack * perLane
    // consecutive k, which instruction p takes slice p of (one 16-byte LDS read for
    // 16-bit types at kpack 2).
    int64_t fragment = perLane * kpack;
    mi.tileK = fragment * groups;
    mi.aPerLane = mi.bPerLane = mi.kRun = fragment;
    mi.a = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      return std::pair{rem(b, loc, lane, edge), affine(b, loc, div(b, loc, lane, edge), fragment, j)};
    };
    mi.b = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      return std::pair{affine(b, loc, div(b, loc, lane, edge), fragment, j), rem(b, loc, lane, edge)};
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
      auto operand = [&](Value fragmentValue, int64_t p) {
        SmallVector<int64_t> part = llvm::to_vector(llvm::seq<int64_t>(p * perLane, (p + 1) * perLane));
        Value v = vector::ShuffleOp::create(b, loc, fragmentValue, fragmentValue, part);
        if (perLane == 1)
          return Value(vector::ExtractOp::create(b, loc, v, ArrayRef<int64_t>{0}));
        if (bf16)
          return bitcastElements(b, loc, v, b.getI16Type());
        if (i8)
          return packBytes(b, loc, v, b.getIntegerType(perLane * 8));
        return v;
      };
      Value zero = LLVM::ConstantOp::create(b, loc, b.getI32Type(), 0);
      for (int64_t p = 0; p < kpack; ++p) {
        Value x = operand(a, p), y = operand(bv, p);
        // C^T = b^T a^T: the instruction's a takes b's fragment (see AccumulatorTile).
        acc = callIntrinsic(b, loc, acc.getType(), name, {y, x, acc, zero, zero, zero});
      }
      return acc;
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
    mi.aPerLane = mi.bPerLane = mi.kRun = perLane;
    mi.a = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      Value k = gfx11 ? c(b, loc, j) : affine(b, loc, div(b, loc, lane, 16), 8, j);
      return std::pair{rem(b, loc, lane, 16), k};
    };
    mi.b = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
      Value k = gfx11 ? c(b, loc, j) : affine(b, loc, div(b, loc, lane, 16), 8, j);
      return std::pair{k, rem(b, loc, lane, 16)};
    };
    mi.multiply = [=](OpBuilder &b, Location loc, Value a, Value bv, Value acc) {
      // C^T from swapped operands (see AccumulatorTile).
      std::swap(a, bv);
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
    bool tf32 = input.isF32() && allowTf32;
    if (tf32) {
      // mma.sync.m16n8k8 on TF32: one element per register (ldmatrix moves 16-bit
      // elements, so fragments are read element by element): a at (g + 8 (j % 2),
      // t + 4 (j / 2)), b at (t + 4 j, g), each rounded to TF32 (cvt.rna) first.
      mi.tileK = 8;
      mi.aPerLane = 4;
      mi.bPerLane = 2;
      mi.kRun = 1;
      mi.a = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
        Value row = affine(b, loc, div(b, loc, lane, 4), 1, 8 * (j % 2));
        Value k = affine(b, loc, rem(b, loc, lane, 4), 1, 4 * (j / 2));
        return std::pair{row, k};
      };
      mi.b = [=](OpBuilder &b, Location loc, Value lane, int64_t j) {
        Value k = affine(b, loc, rem(b, loc, lane, 4), 1, 4 * j);
        return std::pair{k, div(b, loc, lane, 4)};
      };
      mi.multiply = [=](OpBuilder &b, Location loc, Value a, Value bv, Value acc) {
        SmallVector<Value> args;
        for (Value fragment : {a, bv})
          for (int64_t i = 0; i < cast<VectorType>(fragment.getType()).getDimSize(0); ++i) {
            Value element = vector::ExtractOp::create(b, loc, fragment, ArrayRef<int64_t>{i});
            args.push_back(callIntrinsic(b, loc, b.getI32Type(), "llvm.nvvm.f2tf32.rna", element));
          }
        return mmaSync(b, loc, "llvm.nvvm.mma.m16n8k8.row.col.tf32", args, acc);
      };
      return mi;
    }
    if (!f16 && !bf16 && !i8)
      return std::nullopt;
    // mma.sync.m16n8k(8e) row.col, with e elements per 32-bit register (2 for 16-bit
    // types, 4 for int8): lane l is in group g = l / 4 at position t = l % 4; a holds
    // 4 registers, at rows g and g + 8 and k blocks of 4e, b holds 2, at column g.
    int64_t e = i8 ? 4 : 2;
    mi.tileK = 8 * e;
    mi.aPerLane = 4 * e;
    mi.bPerLane = 2 * e;
    mi.kRun = e;
    mi.ldmatrix = true;
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

