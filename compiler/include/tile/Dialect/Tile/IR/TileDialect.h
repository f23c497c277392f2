#ifndef TILE_DIALECT_TILE_IR_TILEDIALECT_H
#define TILE_DIALECT_TILE_IR_TILEDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tile/Dialect/Tile/IR/TileOpsDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "tile/Dialect/Tile/IR/TileOpsTypes.h.inc"

#define GET_OP_CLASSES
#include "tile/Dialect/Tile/IR/TileOps.h.inc"

namespace mlir::tile {

/// The attribute that marks a func.func as a kernel entry (one program instance).
inline constexpr llvm::StringLiteral kKernelAttrName = "tile.kernel";

/// Marks a kernel whose programs walk its tiles (t = program_id, t + num_programs, ...):
/// correct at any grid size, and launched with no more programs than the device has
/// multiprocessors, each staying resident for all its tiles.
inline constexpr llvm::StringLiteral kPersistentAttrName = "tile.persistent";

/// The number of consecutive programs (thread blocks) that run as one cluster
/// (i64; absent: 1). The kernel promises that the programs of a cluster read the same
/// right-hand operand tiles in each dot's K loop, so that one copy of each tile can
/// serve all of them (Hopper's multicast bulk copies); its launch grid is a multiple of
/// the cluster.
inline constexpr llvm::StringLiteral kClusterCtasAttrName = "tile.cluster_ctas";

/// The pointee type of a `!tile.ptr` or of a tensor of them.
Type getPointeeType(Type ptrLike);

/// `type` with its element type replaced (tensors keep their shape and encoding).
Type withElementType(Type type, Type elementType);

} // namespace mlir::tile

#endif // TILE_DIALECT_TILE_IR_TILEDIALECT_H
