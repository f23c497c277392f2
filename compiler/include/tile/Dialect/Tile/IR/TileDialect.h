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

/// Marks a persistent kernel that splits its K steps evenly over its programs (stream-K,
/// i64: the elements of one BLOCK_M x BLOCK_N tile). A program that runs a tile's later
/// K steps leaves its f32 partial sum in the kernel's workspace (one tile per program)
/// and signals its flag; the program that runs the tile's first K steps adds those
/// partial sums and stores the tile. The kernel takes the workspace and the flags (i32,
/// zero at launch, zero again when it ends) after its other parameters, and is launched
/// with every program resident.
inline constexpr llvm::StringLiteral kStreamKAttrName = "tile.stream_k";

/// On a K loop of a kernel that walks its tiles: its induction variable counts the K
/// steps the program has run since the kernel started (the loop starts where the previous
/// tile's stopped, with step 1), so that a pipeline may count its stages' uses from it.
inline constexpr llvm::StringLiteral kProgramStepsAttrName = "tile.counts_program_steps";

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
