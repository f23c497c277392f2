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

Value SharedLayout::offset(OpBuilder &b, Location loc, Value outerIndex, Value innerIndex) const {
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  Value unit = arith::DivUIOp::create(b, loc, innerIndex, c(vec));
  if (maxPhase > 1) {
    Value phase = arith::RemUIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, outerIndex, c(perPhase)), c(maxPhase));
    unit = arith::XOrIOp::create(b, loc, unit, phase);
  }
  Value within = arith::RemUIOp::create(b, loc, innerIndex, c(vec));
  Value row = arith::MulIOp::create(b, loc, outerIndex, c(inner));
  Value column = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, unit, c(vec)), within);
  return arith::AddIOp::create(b, loc, row, column);
}
