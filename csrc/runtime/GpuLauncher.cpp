#include "runtime/GpuLauncher.h"

#include "runtime/DriverCode.h"

#include <stdexcept>

using namespace tile;
using namespace tile::runtime;

void GpuLauncher::fail(const std::string &what, const LoadedKernel &kernel, int status) const {
  throw std::runtime_error(driver_.name + " " + what + " failed for kernel " + kernel.spec +
                           ": " + (driver_.describe ? driver_.describe(driver_, status)
                                                    : "status " + std::to_string(status)));
}

void *GpuLauncher::functionFor(const LoadedKernel &kernel, int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = functions_.find({kernel.key, device});
  if (found != functions_.end())
    return found->second;
  void *module = nullptr, *function = nullptr;
  DriverImage image = driverImage(driver_, kernel, disk_);
  int status = driver_.moduleLoadData(&module, image.bytes.data());
  if (status && image.fromPtxas) {
    // A driver older than the ptxas that made the cubin: it compiles the PTX itself.
    disk_.discard(image.diskKey, kernel.binary.target, "the driver refused ptxas's cubin");
    image = driverImage(driver_, kernel, disk_, /*withPtxasCubin=*/false);
    status = driver_.moduleLoadData(&module, image.bytes.data());
  }
  if (status && image.fromDisk) {
    // A cubin the driver no longer takes is dropped, and the PTX compiled again.
    disk_.discard(image.diskKey, kernel.binary.target,
                  "the driver refused it: " + (driver_.describe ? driver_.describe(driver_, status)
                                                                : std::to_string(status)));
    image = driverImage(driver_, kernel, disk_);
    status = driver_.moduleLoadData(&module, image.bytes.data());
  }
  if (status)
    fail("module load", kernel, status);
  if (int status = driver_.moduleGetFunction(&function, module, kernel.binary.entrySymbol.c_str()))
    fail("lookup of " + kernel.binary.entrySymbol, kernel, status);
  // Past 48 KiB, a launch may only give a function the dynamic shared memory it opted in to.
  constexpr int64_t defaultDynamicShared = 48 * 1024;
  if (kernel.binary.dynamicSharedBytes > defaultDynamicShared) {
    if (!driver_.funcSetAttribute)
      throw std::runtime_error("kernel " + kernel.spec + " needs " +
                               std::to_string(kernel.binary.dynamicSharedBytes) +
                               " bytes of shared memory, and the " + driver_.name +
                               " driver table cannot raise the limit");
    if (int status = driver_.funcSetAttribute(function, driver_.maxDynamicSharedAttribute,
                                              int(kernel.binary.dynamicSharedBytes)))
      fail("raising the shared memory limit to " +
               std::to_string(kernel.binary.dynamicSharedBytes) + " bytes",
           kernel, status);
  }
  functions_[{kernel.key, device}] = function;
  return function;
}

void GpuLauncher::launch(const LoadedKernel &kernel, const Target &deviceTarget, int device,
                         void **args, Grid grid, void *stream) {
  const Target &built = kernel.binary.target;
  if (built.kind != deviceTarget.kind || built.arch != deviceTarget.arch ||
      (built.kind == TargetKind::Hip && !built.features.empty() &&
       built.features != deviceTarget.features))
    throw std::runtime_error("kernel " + kernel.spec + " was compiled for " + built.str() +
                             " but device " + std::to_string(device) + " is " +
                             deviceTarget.str() + "; not loading it (set TILE_TARGET only to "
                             "the device's own target)");
  if (grid.count() == 0)
    return;
  if (kernel.binary.blockThreads <= 0)
    throw std::runtime_error("kernel " + kernel.spec + " has no workgroup size");
  void *function = functionFor(kernel, device);
  if (int status = driver_.launchKernel(function, unsigned(grid.x), unsigned(grid.y),
                                        unsigned(grid.z), unsigned(kernel.binary.blockThreads), 1, 1,
                                        unsigned(kernel.binary.dynamicSharedBytes), stream, args,
                                        nullptr))
    fail("launch", kernel, status);
}
