#include "tile/Conversion/TileToCPU/AffineLanes.h"

#include "tile/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::tile;

static std::optional<AffineLanes> add(std::optional<AffineLanes> lhs,
                                      std::optional<AffineLanes> rhs) {
  if (!lhs || !rhs || (lhs->basePtr && rhs->basePtr))
    return std::nullopt;
  AffineLanes sum = *lhs;
  if (!sum.basePtr)
    sum.basePtr = rhs->basePtr;
  sum.terms.append(rhs->terms.begin(), rhs->terms.end());
  sum.constant += rhs->constant;
  sum.stride += rhs->stride;
  return sum;
}

static std::optional<int64_t> constantOf(const std::optional<AffineLanes> &lanes) {
  if (lanes && !lanes->basePtr && lanes->terms.empty() && lanes->stride == 0)
    return lanes->constant;
  return std::nullopt;
}

static std::optional<AffineLanes> scale(std::optional<AffineLanes> lanes, int64_t factor) {
  if (!lanes || lanes->basePtr)
    return std::nullopt;
  for (auto &term : lanes->terms)
    term.second *= factor;
  lanes->constant *= factor;
  lanes->stride *= factor;
  return lanes;
}

std::optional<AffineLanes> mlir::tile::analyzeAffineLanes(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (auto range = dyn_cast<MakeRangeOp>(def)) {
    AffineLanes lanes;
    lanes.constant = range.getStart();
    lanes.stride = 1;
    return lanes;
  }
  if (auto splat = dyn_cast<SplatOp>(def)) {
    AffineLanes lanes;
    Value src = splat.getSrc();
    if (isa<PointerType>(src.getType()))
      lanes.basePtr = src;
    else if (isa<IntegerType>(src.getType()))
      lanes.terms.push_back({src, 1});
    else
      return std::nullopt;
    return lanes;
  }
  if (auto addPtr = dyn_cast<AddPtrOp>(def)) {
    auto base = analyzeAffineLanes(addPtr.getPtr());
    if (!base || !base->basePtr)
      return std::nullopt;
    return add(base, analyzeAffineLanes(addPtr.getOffset()));
  }
  if (auto addi = dyn_cast<arith::AddIOp>(def))
    return add(analyzeAffineLanes(addi.getLhs()), analyzeAffineLanes(addi.getRhs()));
  if (auto muli = dyn_cast<arith::MulIOp>(def)) {
    auto lhs = analyzeAffineLanes(muli.getLhs()), rhs = analyzeAffineLanes(muli.getRhs());
    if (auto factor = constantOf(rhs))
      return scale(lhs, *factor);
    if (auto factor = constantOf(lhs))
      return scale(rhs, *factor);
    return std::nullopt;
  }
  // Offsets are summed in i64 after sign extension, so extsi is transparent.
  if (auto extsi = dyn_cast<arith::ExtSIOp>(def))
    return analyzeAffineLanes(extsi.getIn());
  APInt splatValue;
  if (matchPattern(value, m_ConstantInt(&splatValue))) {
    AffineLanes lanes;
    lanes.constant = splatValue.getSExtValue();
    return lanes;
  }
  return std::nullopt;
}
