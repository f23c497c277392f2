#ifndef TILE_ANALYSIS_POINTERRANGE_H
#define TILE_ANALYSIS_POINTERRANGE_H

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::tile {

/// The argument attribute by which a kernel's caller promises that every element the
/// kernel reads or writes through a pointer argument lies less than 2^(bits - 1)
/// elements past it. It is Triton's `tt.pointer_range`; the binding compiles a kernel
/// with 32-bit indices only where it holds for every tensor (index_bits=32), and the GPU
/// lowering then forms an address as a uniform 64-bit base plus a 32-bit per-lane
/// offset (one register per address on AMD instead of two).
inline constexpr llvm::StringLiteral kPointerRangeAttrName = "tile.pointer_range";

/// The promised ranges of a kernel's pointer arguments.
class PointerRanges {
public:
  PointerRanges() = default;
  explicit PointerRanges(FunctionOpInterface kernel);

  /// The promised bits of `pointer` (an argument of the kernel); 64 where none is.
  int64_t bitsOf(Value pointer) const;

private:
  llvm::DenseMap<Value, int64_t> promised;
};

} // namespace mlir::tile

#endif
