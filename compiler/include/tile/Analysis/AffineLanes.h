#ifndef TILE_ANALYSIS_AFFINELANES_H
#define TILE_ANALYSIS_AFFINELANES_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir {
class OpBuilder;
} // namespace mlir

namespace mlir::tile {

/// A scalar that is a polynomial in scalar values of the original tile IR:
///   constant + sum(coefficient * product(factors)).
/// Runtime strides are such values: `rows * stride_am` has one monomial of two factors.
struct ScalarPoly {
  struct Monomial {
    llvm::SmallVector<Value, 2> factors;
    int64_t coefficient = 1;
  };
  llvm::SmallVector<Monomial, 2> monomials;
  int64_t constant = 0;

  static ScalarPoly of(int64_t constant);
  static ScalarPoly of(Value scalar);
  std::optional<int64_t> getConstant() const;
  bool isZero() const { return getConstant() == 0; }
  ScalarPoly operator+(const ScalarPoly &other) const;
  ScalarPoly operator*(const ScalarPoly &other) const;
  ScalarPoly operator*(int64_t factor) const;

  /// Emits the value as i64 at the builder's insertion point; `remap` gives the value
  /// that stands for each factor there (the converted value during a conversion).
  Value materialize(OpBuilder &builder, Location loc,
                    llvm::function_ref<Value(Value)> remap) const;
};

/// What an integer or pointer tensor is when it is affine in its lane indices i_d:
///   lane(i) = basePtr + offset + sum_d strides[d] * i_d
/// counted in elements. `basePtr` is the scalar `!tile.ptr` of a pointer tensor and null
/// for an integer tensor. The lowerings turn such pointer tensors into strided memory
/// accesses instead of vectors of addresses.
struct AffineLanes {
  Value basePtr;
  ScalarPoly offset;
  llvm::SmallVector<ScalarPoly, 2> strides;

  /// The same value on every lane.
  bool isUniform() const;
};

/// Follows splat, make_range, expand_dims, broadcast, addptr, arith.{addi,subi,muli,extsi}
/// (products only where one side is uniform) and integer constants; gives up
/// (std::nullopt) on anything else.
std::optional<AffineLanes> analyzeAffineLanes(Value value);

/// Where an i1 tensor is the conjunction of per-dimension bounds `i_d < bound`, which is
/// what the masks of blocked programs are (`offs_m[:, None] < M`, `k + offs_k < K`), the
/// bounds per dimension; an empty list for a dimension means no bound.
struct LaneBounds {
  llvm::SmallVector<llvm::SmallVector<ScalarPoly, 1>, 2> upper;
};

/// Follows arith.cmpi slt/sgt between a lane-affine tensor of stride 1 along one
/// dimension and a uniform one, arith.andi, expand_dims, broadcast and all-true constants.
std::optional<LaneBounds> analyzeLaneBounds(Value mask);

} // namespace mlir::tile

#endif
