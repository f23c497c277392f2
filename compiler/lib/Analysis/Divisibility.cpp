// Known power-of-two divisors of scalar values, as Triton's axis analysis tracks
// divisibility, for the alignment facts the GPU lowering needs at compile time.
#include "tile/Analysis/Divisibility.h"
#include "tile/Analysis/ArgumentPromises.h"
#include "tile/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::tile;

namespace {

constexpr int64_t kUnbounded = int64_t(1) << 30; // zero is a multiple of everything

int64_t powerOfTwoIn(int64_t value) {
  if (value == 0)
    return kUnbounded;
  uint64_t magnitude = value < 0 ? uint64_t(0) - uint64_t(value) : uint64_t(value);
  return int64_t(std::min<uint64_t>(magnitude & (~magnitude + 1), kUnbounded));
}

int64_t product(int64_t a, int64_t b) { return std::min<int64_t>(a * b, kUnbounded); }

} // namespace

Divisibility::Divisibility(FunctionOpInterface kernel) {
  for (auto [argument, value] : argumentPromises(kernel, kDivisibilityAttrName))
    promised[argument] = powerOfTwoIn(value);
}

int64_t Divisibility::of(Value scalar) const {
  if (auto it = promised.find(scalar); it != promised.end())
    return it->second;
  if (auto arg = dyn_cast<BlockArgument>(scalar)) {
    auto loop = dyn_cast_or_null<scf::ForOp>(arg.getOwner()->getParentOp());
    if (loop && arg == loop.getInductionVar())
      return std::min(of(loop.getLowerBound()), of(loop.getStep()));
    return 1;
  }
  Operation *op = scalar.getDefiningOp();
  if (auto constant = dyn_cast_or_null<arith::ConstantOp>(op))
    if (auto integer = dyn_cast<IntegerAttr>(constant.getValue()))
      return powerOfTwoIn(integer.getInt());
  if (isa_and_nonnull<arith::AddIOp, arith::SubIOp>(op))
    return std::min(of(op->getOperand(0)), of(op->getOperand(1)));
  if (isa_and_nonnull<arith::MulIOp>(op))
    return product(of(op->getOperand(0)), of(op->getOperand(1)));
  if (auto shift = dyn_cast_or_null<arith::ShLIOp>(op)) {
    std::optional<int64_t> by = getConstantIntValue(shift.getRhs());
    return by && *by >= 0 && *by < 30 ? product(of(shift.getLhs()), int64_t(1) << *by)
                                      : of(shift.getLhs());
  }
  if (isa_and_nonnull<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp, arith::ExtUIOp>(op))
    return of(op->getOperand(0));
  // A pointer's divisor is in bytes, an offset's in elements of its pointee (a
  // workspace tile's base: the workspace plus slot * tile elements).
  if (auto addPtr = dyn_cast_or_null<AddPtrOp>(op)) {
    if (!isa<PointerType>(addPtr.getType()))
      return 1;
    int64_t bytes = std::max<int64_t>(1, getPointeeType(addPtr.getType()).getIntOrFloatBitWidth() / 8);
    return std::min(of(addPtr.getPtr()), product(of(addPtr.getOffset()), powerOfTwoIn(bytes)));
  }
  return 1;
}

bool Divisibility::divides(const ScalarPoly &poly, int64_t divisor) const {
  if (powerOfTwoIn(poly.constant) < divisor)
    return false;
  for (const auto &monomial : poly.monomials) {
    int64_t known = powerOfTwoIn(monomial.coefficient);
    for (Value factor : monomial.factors)
      known = product(known, of(factor));
    if (known < divisor)
      return false;
  }
  return true;
}
