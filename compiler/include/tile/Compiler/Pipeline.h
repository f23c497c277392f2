#ifndef TILE_COMPILER_PIPELINE_H
#define TILE_COMPILER_PIPELINE_H

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace tile {

/// Every dialect and external interface that tile IR and its lowerings need.
void registerTileDialects(mlir::DialectRegistry &registry);

/// tile -> tile-cpu: clean-up, then the CPU lowering of tile ops.
void buildTileToCpuPipeline(mlir::OpPassManager &pm);

/// tile-cpu -> llvm: the upstream conversions of what remains to the LLVM dialect.
void buildCpuToLLVMPipeline(mlir::OpPassManager &pm);

/// The tile passes and the named pipelines above, for tile-opt.
void registerTilePassesAndPipelines();

} // namespace tile

#endif
