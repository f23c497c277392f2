#ifndef TILE_RUNTIME_GPULAUNCHER_H
#define TILE_RUNTIME_GPULAUNCHER_H

#include "runtime/CpuLauncher.h"
#include "runtime/DiskCache.h"
#include "runtime/GpuDriver.h"
#include "runtime/LoadedKernel.h"

#include <map>
#include <mutex>

namespace tile::runtime {

/// Loads kernels into a GPU's driver (once per kernel and device) and launches them.
class GpuLauncher {
public:
  /// `disk` keeps the machine code the driver makes of portable (PTX) kernels.
  explicit GpuLauncher(const GpuDriver &driver, DiskCache &disk = DiskCache::global())
      : driver_(driver), disk_(disk) {}

  /// `deviceTarget` is the device's own target (e.g. hip:gfx942:sramecc+:xnack-): a
  /// binary compiled for another is refused with an error naming both, before the
  /// driver sees it (a wrong-arch code object can crash the process).
  /// args[i] points at the value of the kernel's i-th argument; one workgroup of
  /// kernel.binary.blockThreads threads per program instance.
  void launch(const LoadedKernel &kernel, const Target &deviceTarget, int device, void **args,
              Grid grid, void *stream);

private:
  void *functionFor(const LoadedKernel &kernel, int device);
  [[noreturn]] void fail(const std::string &what, const LoadedKernel &kernel, int status) const;

  const GpuDriver &driver_;
  DiskCache &disk_;
  std::mutex mutex_;
  std::map<std::pair<std::string, int>, void *> functions_; ///< (key, device) -> function
};

} // namespace tile::runtime

#endif
