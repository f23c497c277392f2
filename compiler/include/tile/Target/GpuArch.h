#ifndef TILE_TARGET_GPUARCH_H
#define TILE_TARGET_GPUARCH_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tile {

/// The matrix-multiply instruction family a GPU arch offers.
enum class MatrixUnit { None, Mfma, Wmma, MmaSync, Wgmma };

/// What the lowerings and the resource report need to know about one GPU arch, in one
/// table (as IREE keeps its ROCM arch data), instead of `if (arch == ...)` in passes.
struct GpuArch {
  std::string name;        ///< "gfx942", "sm_90"
  bool amd = false;
  unsigned waveSize = 64;  ///< threads per wavefront / warp
  unsigned ldsBytes = 0;   ///< LDS / shared memory per workgroup (NVIDIA: with the opt-in)
  unsigned vgprsPerSimd = 0;   ///< AMD: VGPRs per lane of one SIMD (the occupancy budget)
  unsigned maxVgprsPerWave = 0; ///< AMD: architected VGPRs one wave can address
  unsigned maxAgprsPerWave = 0; ///< AMD: accumulation VGPRs (0 where the arch has none)
  unsigned vgprGranule = 8;     ///< AMD: VGPR allocation granularity
  unsigned maxWavesPerSimd = 0; ///< AMD: hardware wave slots per SIMD
  unsigned sgprsPerWave = 0;    ///< AMD
  MatrixUnit matrixUnit = MatrixUnit::None;
  unsigned wmmaGeneration = 0;  ///< WMMA: 11 (RDNA3, rows repeated per half-wave) or 12
  /// Asynchronous global-to-shared copies that bypass registers (NVIDIA cp.async, sm_80+).
  bool asyncCopy = false;
  /// Shared memory is one dynamically sized array, sized at launch: NVIDIA caps static
  /// shared memory at 48 KiB per block, and the rest needs the launcher's opt-in.
  bool dynamicShared = false;
  /// NVIDIA: what one SM holds of the blocks resident on it (the CUDA programming
  /// guide's compute capability table), for the resource report's blocks per SM.
  unsigned registersPerSm = 0;
  unsigned sharedPerSm = 0;          ///< bytes, of which each block also takes
  unsigned sharedReservedPerBlock = 0; ///< bytes the system keeps per block
  unsigned maxThreadsPerSm = 0;
  unsigned maxBlocksPerSm = 0;
  std::string llvmTriple;       ///< "amdgcn-amd-amdhsa", "nvptx64-nvidia-cuda"
  std::string ptxFeatures;      ///< NVIDIA: "+ptx80"
};

/// The archs torch-tile compiles for; nullopt for any other name.
std::optional<GpuArch> lookupGpuArch(llvm::StringRef name);
const std::vector<GpuArch> &supportedGpuArchs();

/// Shared-memory buffers per operand of a K loop pipelined over `numStages`: with
/// asynchronous copies every stage is a buffer (Triton's NVIDIA pipeliner); without, one
/// stage waits in registers (Triton's AMD stream pipeliner), so num_stages 2 is one
/// buffer. The lowering allocates this many; config defaults size num_stages by it.
int64_t pipelineBuffers(const GpuArch &arch, int64_t numStages);

/// The waves a workgroup runs for a config of `numWarps` whose largest dot accumulates
/// `accumulatorWords` 32-bit words. AMD configs are written for 64-lane waves (the ROCm
/// tutorial's come from CDNA, and Triton's AMD guide tunes them there). On a 32-lane
/// arch (RDNA's WMMA runs in wave32) the same config gives each wave twice the
/// accumulator; where that takes half of the registers a wave can address or more,
/// the operands have no room left and the kernel spills, so the workgroup runs twice
/// the waves instead, each holding half: the registers per SIMD that num_warps 64-lane
/// waves take. Everywhere else, numWarps.
int64_t wavesPerWorkgroup(const GpuArch &arch, int64_t numWarps, int64_t accumulatorWords);

/// Waves per SIMD that fit by registers (the formula of the AMD Triton optimization
/// guide: VGPRs per SIMD divided by the granule-rounded VGPR+AGPR count, capped by the
/// wave slots), or by LDS when `ldsBytes` > 0 and `wavesPerGroup` waves share it.
unsigned occupancyWavesPerSimd(const GpuArch &arch, unsigned vgprs, unsigned agprs,
                               unsigned ldsBytes, unsigned wavesPerGroup);

} // namespace tile

#endif
