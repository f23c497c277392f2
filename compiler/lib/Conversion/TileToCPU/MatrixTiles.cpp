// A dot's full blocks on x86's tile registers (AMX).
//
// Sapphire Rapids and later Xeons multiply 16x64-byte tiles: tdpbf16ps adds a 16x32 bf16
// tile times a 32x16 one (b's k in pairs, the layout of b_k_group = 2) into a 16x16 f32
// tile, and tdpbssd does the same for int8 (b's k in quads) into i32: 16 K multiply-adds
// per instruction, eight times vdpbf16ps's. The block's accumulator, BLOCK_M x BLOCK_N in
// 16x16 tiles, goes into tile registers once per dot (through a buffer on the stack) and
// stays there for the whole K loop, as loop values LLVM allocates to tmm0-7; a's rows are
// loaded as tiles straight from a's memory, 64 bytes of k each.
//
// The instructions are LLVM's (`llvm.x86.*.internal`, whose tile shapes the backend
// configures with ldtilecfg). MLIR's amx dialect wraps the same intrinsics, but reads its
// tiles from memrefs, where this lowering has pointers.
#include "CpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::cpu;

namespace {

/// A tile's rows, and its row length in bytes.
constexpr int64_t kTileRows = 16, kTileRowBytes = 64;

Value i16Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI16Type(), value);
}

Value i64Value(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value);
}

Value intrinsic(OpBuilder &b, Location loc, Type result, StringRef name, ValueRange operands) {
  if (!result) {
    LLVM::CallIntrinsicOp::create(b, loc, b.getStringAttr(name), operands);
    return Value();
  }
  return LLVM::CallIntrinsicOp::create(b, loc, result, b.getStringAttr(name), operands).getResult(0);
}

/// A full 16x64-byte tile from `ptr`, its rows `strideBytes` apart.
Value loadTile(OpBuilder &b, Location loc, Value ptr, Value strideBytes) {
  return intrinsic(b, loc, LLVM::LLVMX86AMXType::get(b.getContext()), "llvm.x86.tileloadd64.internal",
                   {i16Constant(b, loc, kTileRows), i16Constant(b, loc, kTileRowBytes), ptr, strideBytes});
}

Value elementsFrom(OpBuilder &b, Location loc, Value base, Type element, Value offset) {
  return LLVM::GEPOp::create(b, loc, base.getType(), element, base, ArrayRef<LLVM::GEPArg>{offset});
}

} // namespace

bool mlir::tile::cpu::fitsMatrixTiles(int64_t blockM, int64_t blockN) {
  constexpr int64_t kTileRegisters = 8;
  int64_t bands = blockM / kTileRows, chunks = blockN / kTileRows;
  // The accumulator's tiles, and one tile of a and of b per band and chunk.
  return blockM % kTileRows == 0 && blockN % kTileRows == 0 && bands * chunks + bands + chunks <= kTileRegisters;
}

SmallVector<Value> mlir::tile::cpu::matrixTileMicrokernel(OpBuilder &b, Location loc, const TileOperand &a,
                                                          const TileOperand &bGroups, ValueRange accRows, Value kEnd) {
  auto rowType = cast<VectorType>(accRows.front().getType());
  int64_t m = accRows.size(), n = rowType.getDimSize(0);
  int64_t bands = m / kTileRows, chunks = n / kTileRows;
  int64_t elementBytes = a.element.getIntOrFloatBitWidth() / 8;
  int64_t group = 4 / elementBytes, kStep = kTileRowBytes / elementBytes;
  bool integer = a.element.isInteger(8);
  Type amx = LLVM::LLVMX86AMXType::get(b.getContext());
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  auto bytes = [&](Value elements) -> Value {
    return arith::MulIOp::create(b, loc, elements, i64Value(b, loc, elementBytes));
  };

  // The accumulator through a stack buffer (freed again after the dot) into its tiles.
  Value stack = LLVM::StackSaveOp::create(b, loc, ptrType);
  int64_t rowBytes = n * 4;
  Value buffer = LLVM::AllocaOp::create(b, loc, ptrType, b.getI8Type(), i64Value(b, loc, m * rowBytes), 64);
  auto rowAt = [&](int64_t i) {
    return LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), buffer, ArrayRef<LLVM::GEPArg>{int32_t(i * rowBytes)});
  };
  for (auto [i, row] : llvm::enumerate(accRows))
    LLVM::StoreOp::create(b, loc, row, rowAt(i), 64);
  Value bufferStride = i64Value(b, loc, rowBytes);
  SmallVector<Value> tiles;
  for (int64_t band = 0; band < bands; ++band)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      Value corner = LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), rowAt(band * kTileRows),
                                         ArrayRef<LLVM::GEPArg>{int32_t(chunk * kTileRowBytes)});
      tiles.push_back(loadTile(b, loc, corner, bufferStride));
    }

  Value aStride = bytes(a.rowStride), bStride = bytes(bGroups.rowStride);
  auto loop = scf::ForOp::create(
      b, loc, i64Value(b, loc, 0), kEnd, i64Value(b, loc, kStep), tiles,
      [&](OpBuilder &b, Location loc, Value kk, ValueRange state) {
        SmallVector<Value> aTiles, bTiles;
        for (int64_t band = 0; band < bands; ++band) {
          Value offset = arith::AddIOp::create(
              b, loc, arith::MulIOp::create(b, loc, i64Value(b, loc, band * kTileRows), a.rowStride), kk);
          aTiles.push_back(loadTile(b, loc, elementsFrom(b, loc, a.base, a.element, offset), aStride));
        }
        // b's row of groups kk / group, chunk c's 16 columns of `group` k each.
        Value groupRow = arith::DivUIOp::create(b, loc, kk, i64Value(b, loc, group));
        Value rowStart = arith::MulIOp::create(b, loc, groupRow, bGroups.rowStride);
        for (int64_t chunk = 0; chunk < chunks; ++chunk) {
          Value offset = arith::AddIOp::create(b, loc, rowStart, i64Value(b, loc, chunk * kTileRows * group));
          bTiles.push_back(loadTile(b, loc, elementsFrom(b, loc, bGroups.base, bGroups.element, offset), bStride));
        }
        SmallVector<Value> next;
        for (int64_t band = 0; band < bands; ++band)
          for (int64_t chunk = 0; chunk < chunks; ++chunk)
            next.push_back(intrinsic(b, loc, amx, integer ? "llvm.x86.tdpbssd.internal" : "llvm.x86.tdpbf16ps.internal",
                                     {i16Constant(b, loc, kTileRows), i16Constant(b, loc, kTileRowBytes),
                                      i16Constant(b, loc, kTileRowBytes), state[band * chunks + chunk], aTiles[band],
                                      bTiles[chunk]}));
        scf::YieldOp::create(b, loc, next);
      });

  for (int64_t band = 0; band < bands; ++band)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      Value corner = LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), rowAt(band * kTileRows),
                                         ArrayRef<LLVM::GEPArg>{int32_t(chunk * kTileRowBytes)});
      intrinsic(b, loc, Type(), "llvm.x86.tilestored64.internal",
                {i16Constant(b, loc, kTileRows), i16Constant(b, loc, kTileRowBytes), corner, bufferStride,
                 loop.getResult(band * chunks + chunk)});
    }
  SmallVector<Value> rows;
  for (int64_t i = 0; i < m; ++i)
    rows.push_back(LLVM::LoadOp::create(b, loc, rowType, rowAt(i), 64));
  LLVM::StackRestoreOp::create(b, loc, stack);
  return rows;
}
