#include "tile/Analysis/PointerRange.h"

#include "tile/Analysis/ArgumentPromises.h"

using namespace mlir;
using namespace mlir::tile;

PointerRanges::PointerRanges(FunctionOpInterface kernel)
    : promised(argumentPromises(kernel, kPointerRangeAttrName)) {}

int64_t PointerRanges::bitsOf(Value pointer) const {
  auto it = promised.find(pointer);
  return it == promised.end() ? 64 : it->second;
}
