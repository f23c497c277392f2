#include "tile/Analysis/AffineLanes.h"

#include "tile/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::tile;

ScalarPoly ScalarPoly::of(int64_t constant) {
  ScalarPoly poly;
  poly.constant = constant;
  return poly;
}

ScalarPoly ScalarPoly::of(Value scalar) {
  // Integer constants fold, so that a stride given as the constant 1 reads as one.
  APInt value;
  if (matchPattern(scalar, m_ConstantInt(&value)) && value.getSignificantBits() <= 64)
    return of(value.getSExtValue());
  ScalarPoly poly;
  poly.monomials.push_back({{scalar}, 1});
  return poly;
}

std::optional<int64_t> ScalarPoly::getConstant() const {
  if (monomials.empty())
    return constant;
  return std::nullopt;
}

ScalarPoly ScalarPoly::operator+(const ScalarPoly &other) const {
  ScalarPoly sum = *this;
  sum.monomials.append(other.monomials.begin(), other.monomials.end());
  sum.constant += other.constant;
  return sum;
}

ScalarPoly ScalarPoly::operator*(int64_t factor) const {
  ScalarPoly product;
  if (factor == 0)
    return product;
  product = *this;
  for (auto &monomial : product.monomials)
    monomial.coefficient *= factor;
  product.constant *= factor;
  return product;
}

ScalarPoly ScalarPoly::operator*(const ScalarPoly &other) const {
  ScalarPoly product = *this * other.constant;
  for (const auto &right : other.monomials) {
    if (constant != 0)
      product.monomials.push_back({right.factors, right.coefficient * constant});
    for (const auto &left : monomials) {
      Monomial term{left.factors, left.coefficient * right.coefficient};
      term.factors.append(right.factors.begin(), right.factors.end());
      product.monomials.push_back(term);
    }
  }
  return product;
}

Value ScalarPoly::materialize(OpBuilder &builder, Location loc,
                              function_ref<Value(Value)> remap) const {
  Type i64 = builder.getI64Type();
  auto constantOf = [&](int64_t value) -> Value {
    return arith::ConstantIntOp::create(builder, loc, i64, value);
  };
  Value sum = constantOf(constant);
  for (const auto &monomial : monomials) {
    Value product = constantOf(monomial.coefficient);
    for (Value factor : monomial.factors) {
      Value value = remap(factor);
      if (value.getType() != i64)
        value = arith::ExtSIOp::create(builder, loc, i64, value);
      product = arith::MulIOp::create(builder, loc, product, value);
    }
    sum = arith::AddIOp::create(builder, loc, sum, product);
  }
  return sum;
}

bool AffineLanes::isUniform() const {
  return !basePtr && llvm::all_of(strides, [](const ScalarPoly &s) { return s.isZero(); });
}

static int64_t rankOf(Value value) {
  if (auto type = dyn_cast<RankedTensorType>(value.getType()))
    return type.getRank();
  return 0;
}

static std::optional<AffineLanes> add(std::optional<AffineLanes> lhs,
                                      std::optional<AffineLanes> rhs) {
  if (!lhs || !rhs || (lhs->basePtr && rhs->basePtr) ||
      lhs->strides.size() != rhs->strides.size())
    return std::nullopt;
  AffineLanes sum = *lhs;
  if (!sum.basePtr)
    sum.basePtr = rhs->basePtr;
  sum.offset = sum.offset + rhs->offset;
  for (auto [total, stride] : llvm::zip(sum.strides, rhs->strides))
    total = total + stride;
  return sum;
}

static std::optional<AffineLanes> scale(std::optional<AffineLanes> lanes,
                                        const ScalarPoly &factor) {
  if (!lanes || lanes->basePtr)
    return std::nullopt;
  lanes->offset = lanes->offset * factor;
  for (auto &stride : lanes->strides)
    stride = stride * factor;
  return lanes;
}

static std::optional<AffineLanes> multiply(std::optional<AffineLanes> lhs,
                                           std::optional<AffineLanes> rhs) {
  if (!lhs || !rhs)
    return std::nullopt;
  if (rhs->isUniform())
    return scale(lhs, rhs->offset);
  if (lhs->isUniform())
    return scale(rhs, lhs->offset);
  return std::nullopt;
}

std::optional<AffineLanes> mlir::tile::analyzeAffineLanes(Value value) {
  int64_t rank = rankOf(value);
  auto uniform = [&](ScalarPoly offset) {
    AffineLanes lanes;
    lanes.offset = std::move(offset);
    lanes.strides.assign(rank, ScalarPoly());
    return lanes;
  };
  APInt splatValue;
  if (matchPattern(value, m_ConstantInt(&splatValue)))
    return uniform(ScalarPoly::of(splatValue.getSExtValue()));
  Operation *def = value.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (auto range = dyn_cast<MakeRangeOp>(def)) {
    AffineLanes lanes = uniform(ScalarPoly::of(range.getStart()));
    lanes.strides[0] = ScalarPoly::of(1);
    return lanes;
  }
  if (auto splat = dyn_cast<SplatOp>(def)) {
    Value src = splat.getSrc();
    if (isa<PointerType>(src.getType())) {
      AffineLanes lanes = uniform(ScalarPoly());
      lanes.basePtr = src;
      return lanes;
    }
    if (isa<IntegerType>(src.getType()))
      return uniform(ScalarPoly::of(src));
    return std::nullopt;
  }
  if (auto expand = dyn_cast<ExpandDimsOp>(def)) {
    auto lanes = analyzeAffineLanes(expand.getSrc());
    if (lanes)
      lanes->strides.insert(lanes->strides.begin() + expand.getAxis(), ScalarPoly());
    return lanes;
  }
  if (auto broadcast = dyn_cast<BroadcastOp>(def)) {
    // A size-1 dimension has only lane 0, so its stride never mattered; stretched, the
    // value repeats along it.
    auto lanes = analyzeAffineLanes(broadcast.getSrc());
    if (lanes)
      for (auto [dim, size] : llvm::enumerate(broadcast.getSrc().getType().getShape()))
        if (size == 1)
          lanes->strides[dim] = ScalarPoly();
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
  if (auto subi = dyn_cast<arith::SubIOp>(def))
    return add(analyzeAffineLanes(subi.getLhs()),
               scale(analyzeAffineLanes(subi.getRhs()), ScalarPoly::of(-1)));
  if (auto muli = dyn_cast<arith::MulIOp>(def))
    return multiply(analyzeAffineLanes(muli.getLhs()), analyzeAffineLanes(muli.getRhs()));
  // Offsets are summed in i64 after sign extension, so extsi is transparent.
  if (auto extsi = dyn_cast<arith::ExtSIOp>(def))
    return analyzeAffineLanes(extsi.getIn());
  if (rank == 0 && isa<IntegerType>(value.getType()))
    return uniform(ScalarPoly::of(value));
  return std::nullopt;
}

/// `lhs < rhs` as a bound on one lane index, when lhs is lane + uniform along one
/// dimension and rhs is uniform.
static std::optional<LaneBounds> boundOf(Value lhs, Value rhs, int64_t rank) {
  auto lanes = analyzeAffineLanes(lhs), limit = analyzeAffineLanes(rhs);
  if (!lanes || !limit || lanes->basePtr || !limit->isUniform())
    return std::nullopt;
  LaneBounds bounds;
  bounds.upper.resize(rank);
  std::optional<int64_t> boundDim;
  for (auto [dim, stride] : llvm::enumerate(lanes->strides)) {
    if (stride.isZero())
      continue;
    if (boundDim || stride.getConstant() != 1)
      return std::nullopt;
    boundDim = dim;
  }
  if (!boundDim)
    return std::nullopt;
  bounds.upper[*boundDim].push_back(limit->offset + lanes->offset * -1);
  return bounds;
}

std::optional<LaneBounds> mlir::tile::analyzeLaneBounds(Value mask) {
  int64_t rank = rankOf(mask);
  if (matchPattern(mask, m_One())) {
    LaneBounds bounds;
    bounds.upper.resize(rank);
    return bounds;
  }
  Operation *def = mask.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (auto cmp = dyn_cast<arith::CmpIOp>(def)) {
    if (cmp.getPredicate() == arith::CmpIPredicate::slt)
      return boundOf(cmp.getLhs(), cmp.getRhs(), rank);
    if (cmp.getPredicate() == arith::CmpIPredicate::sgt)
      return boundOf(cmp.getRhs(), cmp.getLhs(), rank);
    return std::nullopt;
  }
  if (auto both = dyn_cast<arith::AndIOp>(def)) {
    auto lhs = analyzeLaneBounds(both.getLhs()), rhs = analyzeLaneBounds(both.getRhs());
    if (!lhs || !rhs)
      return std::nullopt;
    for (auto [into, from] : llvm::zip(lhs->upper, rhs->upper))
      into.append(from.begin(), from.end());
    return lhs;
  }
  if (auto expand = dyn_cast<ExpandDimsOp>(def)) {
    auto bounds = analyzeLaneBounds(expand.getSrc());
    if (bounds)
      bounds->upper.insert(bounds->upper.begin() + expand.getAxis(),
                           SmallVector<ScalarPoly, 1>());
    return bounds;
  }
  if (auto broadcast = dyn_cast<BroadcastOp>(def)) {
    // Stretched, a bound on a size-1 dimension switches whole rows on or off at once,
    // which is no longer a bound on the lane index: give up on it.
    auto bounds = analyzeLaneBounds(broadcast.getSrc());
    if (!bounds)
      return std::nullopt;
    for (auto [dim, size] : llvm::enumerate(broadcast.getSrc().getType().getShape()))
      if (size == 1 && broadcast.getType().getDimSize(dim) != 1 && !bounds->upper[dim].empty())
        return std::nullopt;
    return bounds;
  }
  return std::nullopt;
}
