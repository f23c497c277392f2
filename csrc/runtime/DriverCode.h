#ifndef TILE_RUNTIME_DRIVERCODE_H
#define TILE_RUNTIME_DRIVERCODE_H

#include "runtime/DiskCache.h"
#include "runtime/GpuDriver.h"
#include "runtime/LoadedKernel.h"

#include <string>

namespace tile::runtime {

/// What a GPU launcher hands the driver's module loader for one kernel.
struct DriverImage {
  std::string bytes;
  /// Where the bytes are the driver's own machine code: its disk cache key, and whether
  /// they were read from the disk (a load that fails then drops the entry).
  std::string diskKey;
  bool fromDisk = false;
  /// The bytes are the cubin ptxas made with the kernel (a load that fails then takes
  /// the PTX).
  bool fromPtxas = false;
};

/// The image to load for `kernel` on the driver's current device.
///
/// CUDA kernels are PTX, which the driver compiles to the device's machine code at every
/// module load: milliseconds for a GEMM even when the driver's own JIT cache hits, the
/// larger part of a warm first call. So the cubin that CUDA's linker makes of the PTX is
/// kept in `disk`, under a key of the kernel, the driver version and the device's
/// compute capability (the cubin depends on all three), and loaded as is from then on.
///
/// Where the kernel came with ptxas's cubin (Binary::cubin) and `withPtxasCubin`, that
/// cubin takes the linker's place: it is kept and loaded the same way.
///
/// HIP code objects are machine code already; they, and PTX where the table has no
/// linker or the linker fails (the module load then reports the error), load as built.
DriverImage driverImage(const GpuDriver &driver, const LoadedKernel &kernel, DiskCache &disk,
                        bool withPtxasCubin = true);

} // namespace tile::runtime

#endif
