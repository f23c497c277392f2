#ifndef TILE_COMPILER_PIPELINE_H
#define TILE_COMPILER_PIPELINE_H

#include <cstdint>
#include <string>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace tile {

/// Every dialect and external interface that tile IR and its lowerings need.
void registerTileDialects(mlir::DialectRegistry &registry);

/// tile -> tile-cpu: clean-up, then the CPU lowering of tile ops. `bf16Dot` / `int8Dot`:
/// the host has AVX512-BF16 / AVX512-VNNI (its bf16 / int8 dots take vdpbf16ps /
/// vpdpbusd); `amxBf16` / `amxInt8`: it has AMX tile registers for them; `maskedStores`:
/// it has AVX512-BW, whose masked stores of any element width cost a plain one.
void buildTileToCpuPipeline(mlir::OpPassManager &pm, bool bf16Dot = false, bool int8Dot = false,
                            bool amxBf16 = false, bool amxInt8 = false, bool maskedStores = false);

/// tile-cpu -> llvm: the upstream conversions of what remains to the LLVM dialect.
/// `nativeBf16`: the host has AVX512-BF16, and f32 -> bf16 stays one operation.
void buildCpuToLLVMPipeline(mlir::OpPassManager &pm, bool nativeBf16 = false);

/// tile -> tile-gpu: clean-up, then the distribution over the threads of a workgroup of
/// `numWarps` waves of `chipset` (gfx942, sm_90, ...).
void buildTileToGpuPipeline(mlir::OpPassManager &pm, const std::string &chipset,
                            int64_t numWarps = 4, int64_t matrixInstrNonKDim = 16,
                            int64_t kpack = 1, int64_t numStages = 1,
                            bool allowTf32 = false, int64_t warpSpecialize = 0,
                            bool deferEpilogue = false);

/// tile-gpu -> llvm: the gpu.module to the LLVM dialect with ROCDL (AMD) or NVVM (NVIDIA)
/// intrinsics, chosen by the chipset.
void buildGpuToLLVMPipeline(mlir::OpPassManager &pm, const std::string &chipset);

/// The tile passes and the named pipelines above, for tile-opt.
void registerTilePassesAndPipelines();

} // namespace tile

#endif
