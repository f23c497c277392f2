// GPU arch data. AMD numbers from the CDNA/RDNA ISA guides and the AMD Triton
// optimization guide; NVIDIA from the CUDA programming guide's compute capability table.
#include "tile/Target/GpuArch.h"

#include <algorithm>

namespace tile {

const std::vector<GpuArch> &supportedGpuArchs() {
  static const std::vector<GpuArch> archs = [] {
    auto amd = [](const char *name, unsigned wave, unsigned lds, unsigned vgprsPerSimd,
                  unsigned maxVgprs, unsigned maxAgprs, unsigned granule, unsigned waves,
                  MatrixUnit unit) {
      GpuArch arch;
      arch.name = name;
      arch.amd = true;
      arch.waveSize = wave;
      arch.ldsBytes = lds;
      arch.vgprsPerSimd = vgprsPerSimd;
      arch.maxVgprsPerWave = maxVgprs;
      arch.maxAgprsPerWave = maxAgprs;
      arch.vgprGranule = granule;
      arch.maxWavesPerSimd = waves;
      arch.sgprsPerWave = 102;
      arch.matrixUnit = unit;
      arch.llvmTriple = "amdgcn-amd-amdhsa";
      return arch;
    };
    auto nvidia = [](const char *name, unsigned smem, MatrixUnit unit, const char *ptx) {
      GpuArch arch;
      // 64 K registers and 1 KiB of shared memory reserved per block on sm_80 and
      // sm_90; the SM's shared memory is the block limit plus that reserve.
      arch.registersPerSm = 65536;
      arch.sharedPerSm = smem + 1024;
      arch.sharedReservedPerBlock = 1024;
      arch.maxThreadsPerSm = 2048;
      arch.maxBlocksPerSm = 32;
      arch.name = name;
      arch.waveSize = 32;
      arch.ldsBytes = smem;
      arch.matrixUnit = unit;
      arch.llvmTriple = "nvptx64-nvidia-cuda";
      arch.ptxFeatures = ptx;
      arch.asyncCopy = true; // cp.async, on every NVIDIA arch listed (sm_80 and later)
      arch.dynamicShared = true;
      return arch;
    };
    // CDNA: 512 VGPRs per SIMD lane, shared by the waves on it, of which one wave
    // addresses up to 256 architected VGPRs and 256 AGPRs, allocated in granules of 8.
    // RDNA3/4 in wave32: 1536 VGPRs per SIMD lane, up to 256 per wave, in granules of
    // 24 (LLVM's AMDGPUBaseInfo for wave32 with 1536 VGPRs), 16 wave slots.
    auto wmma = [&](const char *name, unsigned generation) {
      GpuArch arch = amd(name, 32, 64 * 1024, 1536, 256, 0, 24, 16, MatrixUnit::Wmma);
      arch.wmmaGeneration = generation;
      return arch;
    };
    return std::vector<GpuArch>{
        amd("gfx90a", 64, 64 * 1024, 512, 256, 256, 8, 8, MatrixUnit::Mfma),
        amd("gfx942", 64, 64 * 1024, 512, 256, 256, 8, 8, MatrixUnit::Mfma),
        amd("gfx950", 64, 160 * 1024, 512, 256, 256, 8, 8, MatrixUnit::Mfma),
        wmma("gfx1100", 11),
        wmma("gfx1201", 12),
        // The most shared memory one block may opt in to (the CUDA programming guide's
        // compute capability table): 163 KiB on sm_80, 227 KiB on sm_90.
        // PTX 7.5 (CUDA 11.5): the pipeline's cp.async copies take an ignore-src operand.
        nvidia("sm_80", 163 * 1024, MatrixUnit::MmaSync, "+ptx75"),
        // sm_90 keeps to the instructions every later arch has (mma.sync); Hopper's
        // warpgroup MMA exists only in the arch-specific sm_90a, which the runtime picks
        // on a compute capability 9.0 device.
        nvidia("sm_90", 227 * 1024, MatrixUnit::MmaSync, "+ptx80"),
        nvidia("sm_90a", 227 * 1024, MatrixUnit::Wgmma, "+ptx80"),
    };
  }();
  return archs;
}

int64_t pipelineBuffers(const GpuArch &arch, int64_t numStages) {
  if (numStages < 2)
    return 1;
  return arch.asyncCopy ? numStages : numStages - 1;
}

int64_t wavesPerWorkgroup(const GpuArch &arch, int64_t numWarps, int64_t accumulatorWords) {
  constexpr int64_t kConfigWaveLanes = 64, kMaxWorkgroupThreads = 1024;
  if (!arch.amd || arch.waveSize >= kConfigWaveLanes || numWarps < 1)
    return numWarps;
  int64_t wordsPerLane = accumulatorWords / (numWarps * arch.waveSize);
  int64_t doubled = numWarps * kConfigWaveLanes / arch.waveSize;
  if (2 * wordsPerLane < int64_t(arch.maxVgprsPerWave) || doubled * arch.waveSize > kMaxWorkgroupThreads)
    return numWarps;
  return doubled;
}

std::optional<GpuArch> lookupGpuArch(llvm::StringRef name) {
  for (const auto &arch : supportedGpuArchs())
    if (arch.name == name)
      return arch;
  return std::nullopt;
}

unsigned occupancyWavesPerSimd(const GpuArch &arch, unsigned vgprs, unsigned agprs,
                               unsigned ldsBytes, unsigned wavesPerGroup) {
  auto roundUp = [](unsigned x, unsigned to) { return (x + to - 1) / to * to; };
  // Where AGPRs share the file (gfx90a on), they follow the VGPRs at a 4-aligned
  // offset, and the sum is allocated in granules (LLVM's getTotalNumVGPRs).
  unsigned total = std::max(1u, vgprs);
  if (arch.maxAgprsPerWave > 0)
    total = roundUp(total, 4) + agprs;
  unsigned registers = roundUp(total, arch.vgprGranule);
  unsigned waves = std::min(arch.maxWavesPerSimd, arch.vgprsPerSimd / registers);
  if (ldsBytes > 0 && wavesPerGroup > 0) {
    // A CU has 4 SIMDs (2 per WGP half on RDNA); groups that fit in LDS spread their
    // waves over them.
    unsigned groups = arch.ldsBytes / ldsBytes;
    waves = std::min(waves, groups * wavesPerGroup / 4);
  }
  return waves;
}

} // namespace tile
