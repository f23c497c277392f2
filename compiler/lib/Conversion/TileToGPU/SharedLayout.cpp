// Swizzled shared-memory layouts: Triton's (vec, perPhase, maxPhase) XOR swizzle.
#include "GpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::tile::gpu_lowering;

SharedLayout mlir::tile::gpu_lowering::swizzledLayout(int64_t outer, int64_t inner,
                                                      int64_t elementBytes, int64_t accessBytes) {
  SharedLayout layout;
  layout.outer = outer;
  layout.inner = inner;
  layout.vec = std::clamp<int64_t>(accessBytes / elementBytes, 1, inner);
  int64_t rowBytes = inner * elementBytes;
  // Rows shorter than the 128 bytes of one bank cycle share a cycle: perPhase rows per
  // phase. The phases that one access cycle touches must land in distinct units.
  layout.perPhase = std::max<int64_t>(1, 128 / rowBytes);
  int64_t lanesPerCycle = std::max<int64_t>(1, 128 / (layout.vec * elementBytes));
  layout.maxPhase = std::max<int64_t>(
      1, std::min(lanesPerCycle / layout.perPhase, inner / layout.vec));
  return layout;
}

SharedLayout mlir::tile::gpu_lowering::warpgroupSharedLayout(int64_t outer, int64_t inner,
                                                             int64_t elementBytes) {
  int64_t chunk = std::min<int64_t>(inner, 128 / elementBytes);
  // A row of `chunk` elements is one swizzle atom row (32, 64 or 128 bytes); 16-byte
  // reads of 128 bytes at a time give the XOR pattern of the matching swizzle mode.
  SharedLayout layout = swizzledLayout(outer, chunk, elementBytes, 16);
  layout.inner = inner;
  layout.chunk = chunk;
  return layout;
}

Value SharedLayout::offset(OpBuilder &b, Location loc, Value outerIndex, Value innerIndex) const {
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  int64_t rowLength = chunked() ? chunk : inner;
  Value within = chunked() ? b.createOrFold<arith::RemUIOp>(loc, innerIndex, c(chunk)) : innerIndex;
  Value unit = b.createOrFold<arith::DivUIOp>(loc, within, c(vec));
  if (maxPhase > 1) {
    Value phase = b.createOrFold<arith::RemUIOp>(
        loc, b.createOrFold<arith::DivUIOp>(loc, outerIndex, c(perPhase)), c(maxPhase));
    unit = b.createOrFold<arith::XOrIOp>(loc, unit, phase);
  }
  Value rowStart = b.createOrFold<arith::MulIOp>(loc, outerIndex, c(rowLength));
  if (chunked()) {
    Value chunkStart = b.createOrFold<arith::MulIOp>(
        loc, b.createOrFold<arith::DivUIOp>(loc, innerIndex, c(chunk)), c(outer * chunk));
    rowStart = b.createOrFold<arith::AddIOp>(loc, chunkStart, rowStart);
  }
  return place(b, loc, rowStart, unit, innerIndex);
}

Value SharedLayout::place(OpBuilder &b, Location loc, Value rowStart, Value unit,
                          Value innerIndex) const {
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  Value within = b.createOrFold<arith::RemUIOp>(loc, innerIndex, c(vec));
  Value column =
      b.createOrFold<arith::AddIOp>(loc, b.createOrFold<arith::MulIOp>(loc, unit, c(vec)), within);
  return b.createOrFold<arith::AddIOp>(loc, rowStart, column);
}

Value SharedLayout::offsetFrom(OpBuilder &b, Location loc, Value outerBase, int64_t multiple,
                               int64_t step, Value innerIndex) const {
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  if (maxPhase == 1 || multiple % perPhase != 0 || chunked())
    return offset(b, loc, b.createOrFold<arith::AddIOp>(loc, outerBase, c(step)), innerIndex);
  // outerBase / perPhase is a multiple of multiple / perPhase, which step / perPhase is
  // below: their sum's bits are disjoint, so its phase is the XOR of their phases.
  Value phase = b.createOrFold<arith::RemUIOp>(
      loc, b.createOrFold<arith::DivUIOp>(loc, outerBase, c(perPhase)), c(maxPhase));
  Value unit = b.createOrFold<arith::XOrIOp>(
      loc, b.createOrFold<arith::DivUIOp>(loc, innerIndex, c(vec)), phase);
  if (int64_t stepPhase = step / perPhase % maxPhase)
    unit = b.createOrFold<arith::XOrIOp>(loc, unit, c(stepPhase));
  Value row = b.createOrFold<arith::AddIOp>(
      loc, b.createOrFold<arith::MulIOp>(loc, outerBase, c(inner)), c(step * inner));
  return place(b, loc, row, unit, innerIndex);
}
