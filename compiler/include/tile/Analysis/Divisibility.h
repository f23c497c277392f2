#ifndef TILE_ANALYSIS_DIVISIBILITY_H
#define TILE_ANALYSIS_DIVISIBILITY_H

#include "tile/Analysis/AffineLanes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::tile {

/// The argument attribute by which a kernel's caller promises that an argument is a
/// multiple of a power of two: a pointer's address in bytes, an integer's value. It is
/// Triton's `tt.divisibility`; the binding specializes kernels on it, so that the GPU
/// lowering can prove 16-byte alignment at compile time and drop run-time checks.
inline constexpr llvm::StringLiteral kDivisibilityAttrName = "tile.divisibility";

/// The largest power of two (up to 2^30) known to divide scalar values of a kernel: from
/// its arguments' promises, constants, loop induction variables and +, -, *, shifts and
/// casts over them.
class Divisibility {
public:
  Divisibility() = default;
  /// The promises of `kernel`'s arguments, read before its body moves elsewhere (the
  /// block arguments keep their identity).
  explicit Divisibility(FunctionOpInterface kernel);

  int64_t of(Value scalar) const;
  /// Every value of the polynomial is a multiple of `divisor` (a power of two).
  bool divides(const ScalarPoly &poly, int64_t divisor) const;

private:
  llvm::DenseMap<Value, int64_t> promised;
};

} // namespace mlir::tile

#endif
