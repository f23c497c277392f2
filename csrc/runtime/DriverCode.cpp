#include "runtime/DriverCode.h"

#include "runtime/KernelKey.h"

#include <optional>

using namespace tile;
using namespace tile::runtime;

namespace {

// CUDA driver API values (cuda.h).
constexpr int kJitInputPtx = 1;                 // CU_JIT_INPUT_PTX
constexpr int kComputeCapabilityMajor = 75;     // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;     // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

/// The disk key of the cubin for `kernel` on the current device, or nothing where the
/// driver cannot say which driver and device it is.
std::optional<std::string> driverCodeKey(const GpuDriver &driver, const LoadedKernel &kernel) {
  int version = 0, device = 0, major = 0, minor = 0;
  if (!driver.driverGetVersion || !driver.ctxGetDevice || !driver.deviceGetAttribute ||
      driver.driverGetVersion(&version) || driver.ctxGetDevice(&device) ||
      driver.deviceGetAttribute(&major, kComputeCapabilityMajor, device) ||
      driver.deviceGetAttribute(&minor, kComputeCapabilityMinor, device))
    return std::nullopt;
  return sha256Hex("driver-code\nkernel " + kernel.key + "\ndriver " + driver.name + " " +
                   std::to_string(version) + "\ncompute capability " + std::to_string(major) +
                   "." + std::to_string(minor));
}

/// The cubin CUDA's linker makes of `ptx` (NUL-terminated), or nothing if it fails.
std::optional<std::string> linkPtx(const GpuDriver &driver, std::string &ptx) {
  void *state = nullptr;
  if (driver.linkCreate(0, nullptr, nullptr, &state))
    return std::nullopt;
  std::optional<std::string> cubin;
  void *image = nullptr;
  size_t size = 0;
  if (!driver.linkAddData(state, kJitInputPtx, ptx.data(), ptx.size(), "kernel.ptx", 0, nullptr,
                          nullptr) &&
      !driver.linkComplete(state, &image, &size) && image && size)
    cubin.emplace(static_cast<const char *>(image), size); // owned by the state: copied
  driver.linkDestroy(state);
  return cubin;
}

/// The PTX (with the NUL the driver reads it up to) or code object, as built.
DriverImage builtImage(const LoadedKernel &kernel) {
  DriverImage built;
  built.bytes = kernel.binary.object;
  // PTX is text and the driver reads it up to its terminating NUL.
  if (kernel.binary.target.kind == TargetKind::Cuda)
    built.bytes.push_back('\0');
  return built;
}

} // namespace

DriverImage runtime::driverImage(const GpuDriver &driver, const LoadedKernel &kernel,
                                 DiskCache &disk, bool withPtxasCubin) {
  DriverImage built = builtImage(kernel);
  if (kernel.binary.target.kind != TargetKind::Cuda || !driver.linkCreate || !driver.linkAddData ||
      !driver.linkComplete || !driver.linkDestroy)
    return built;
  std::optional<std::string> key = driverCodeKey(driver, kernel);
  if (!key)
    return built;
  const Target &target = kernel.binary.target;
  if (std::optional<std::string> cached = disk.loadDriverCode(*key, target))
    return DriverImage{std::move(*cached), *key, true};
  // ptxas's cubin, made with the kernel, is what the driver would make of the PTX; a
  // driver that refuses it (older than that ptxas) gets the PTX (withPtxasCubin false).
  if (withPtxasCubin && !kernel.binary.cubin.empty()) {
    disk.storeDriverCode(*key, target, kernel.binary.cubin);
    return DriverImage{kernel.binary.cubin, *key, false, true};
  }
  std::optional<std::string> cubin = linkPtx(driver, built.bytes);
  if (!cubin)
    return built;
  disk.storeDriverCode(*key, target, *cubin);
  return DriverImage{std::move(*cubin), *key, false};
}
