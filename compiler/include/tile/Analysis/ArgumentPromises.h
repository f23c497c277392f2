#ifndef TILE_ANALYSIS_ARGUMENTPROMISES_H
#define TILE_ANALYSIS_ARGUMENTPROMISES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::tile {

/// The value of the integer attribute `name` on each argument of `kernel` that carries
/// it: what the kernel's caller promises about that argument (the binding specializes
/// kernels on such facts). Read before the kernel's body moves elsewhere; its block
/// arguments keep their identity.
inline llvm::DenseMap<Value, int64_t> argumentPromises(FunctionOpInterface kernel, StringRef name) {
  llvm::DenseMap<Value, int64_t> promised;
  if (kernel.isExternal())
    return promised;
  for (unsigned i = 0; i < kernel.getNumArguments(); ++i)
    if (auto attr = kernel.getArgAttrOfType<IntegerAttr>(i, name))
      promised[kernel.getArgument(i)] = attr.getInt();
  return promised;
}

} // namespace mlir::tile

#endif
