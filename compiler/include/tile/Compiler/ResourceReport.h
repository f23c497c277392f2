#ifndef TILE_COMPILER_RESOURCEREPORT_H
#define TILE_COMPILER_RESOURCEREPORT_H

#include <cstdint>
#include <optional>
#include <string>

namespace tile {

struct GpuArch;

/// What one GPU kernel uses, from the code object metadata the AMDGPU backend writes
/// (`amdhsa.kernels`), and the occupancy that follows. NVIDIA registers are only known
/// after the driver's JIT of the PTX, so they stay at -1 there.
struct ResourceReport {
  std::string arch;
  int64_t vgprs = -1, agprs = -1, sgprs = -1;
  int64_t ldsBytes = 0;        ///< static LDS / shared memory per workgroup
  int64_t scratchBytes = -1;   ///< private segment per lane (0: no scratch)
  int64_t vgprSpills = -1, sgprSpills = -1;
  int64_t blockThreads = 0;
  int64_t wavesPerSimd = -1;   ///< occupancy, AMD Triton guide formula
  /// NVIDIA, from ptxas (-1 where it was not run): registers per thread, bytes spilled
  /// (stores and loads to local memory), and the blocks one SM holds by registers,
  /// shared memory and threads.
  int64_t registers = -1, spillBytes = -1, blocksPerSm = -1;

  /// One "key: value" line per field, for the CLI's report stage.
  std::string str() const;
};

/// Reads the report of `kernel` from AMDGPU assembly (its amdhsa.kernels metadata).
ResourceReport amdResourcesFromAssembly(const std::string &assembly, const std::string &kernel,
                                        const GpuArch &arch, int64_t blockThreads);

/// The report of a PTX kernel: static shared memory from its `.shared` declarations.
ResourceReport nvidiaResourcesFromPtx(const std::string &ptx, const GpuArch &arch,
                                      int64_t blockThreads);

/// What ptxas made of a PTX kernel: the cubin and its verbose log.
struct PtxasOutput {
  std::string cubin;
  std::string log;
};

/// Adds ptxas's view of a kernel (registers, spills, from its verbose log) and the blocks
/// per SM that follow.
void addPtxasResources(ResourceReport &report, const PtxasOutput &assembled, const GpuArch &arch);

/// Whether a ptxas is on PATH.
bool ptxasOnPath();

/// `ptx` assembled by the ptxas on PATH for the exact arch (`-arch=sm_90a`, as the driver
/// would at load), or nothing where there is none or it fails.
std::optional<PtxasOutput> assembleWithPtxas(const std::string &ptx, const GpuArch &arch);

/// Throws CompileError naming the limit when the kernel needs more LDS, registers or
/// threads per workgroup than the arch has.
void checkResourceLimits(const ResourceReport &report, const GpuArch &arch);

} // namespace tile

#endif
