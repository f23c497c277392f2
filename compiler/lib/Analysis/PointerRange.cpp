#include "tile/Analysis/PointerRange.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::tile;

PointerRanges::PointerRanges(FunctionOpInterface kernel) {
  if (kernel.isExternal())
    return;
  for (unsigned i = 0; i < kernel.getNumArguments(); ++i)
    if (auto attr = kernel.getArgAttrOfType<IntegerAttr>(i, kPointerRangeAttrName))
      promised[kernel.getArgument(i)] = attr.getInt();
}

int64_t PointerRanges::bitsOf(Value pointer) const {
  auto it = promised.find(pointer);
  return it == promised.end() ? 64 : it->second;
}
