#ifndef TILE_CONVERSION_ELEMENTWISETYPELOWERING_H
#define TILE_CONVERSION_ELEMENTWISETYPELOWERING_H

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tile {

/// arith and math ops are target-neutral; a lowering only changes their tensor types
/// into whatever its type converter makes of a block (a host vector, a thread's share).
/// Dense constants follow: splats to any shape, others only to one of as many elements.
void populateElementwiseTypeLowering(const TypeConverter &converter, RewritePatternSet &patterns);

} // namespace mlir::tile

#endif
