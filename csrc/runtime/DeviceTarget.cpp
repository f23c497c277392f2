#include "runtime/DeviceTarget.h"

#include "tile/Target/GpuArch.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

using namespace tile;

Target runtime::deviceTarget(TargetKind kind, const std::string &gcnArchName, int major,
                             int minor) {
  std::string detected = kind == TargetKind::Hip
                             ? "hip:" + gcnArchName
                             : "cuda:sm_" + std::to_string(major) + std::to_string(minor);
  // The arch-specific variant (sm_90a) where there is one: a binary for it runs only on
  // that compute capability, which is the device's own, and it alone has the arch's
  // fastest instructions (Hopper's warpgroup MMA).
  if (kind == TargetKind::Cuda && lookupGpuArch(detected.substr(5) + "a"))
    detected += "a";
  Target target;
  if (const char *forced = std::getenv("TILE_TARGET"); forced && *forced) {
    target = Target::parse(forced);
    if (target.kind != kind)
      throw std::runtime_error(std::string("TILE_TARGET=") + forced + " is not a target for this " +
                               (kind == TargetKind::Hip ? "HIP" : "CUDA") + " device (" +
                               detected + ")");
  } else {
    target = Target::parse(detected);
  }
  if (!lookupGpuArch(target.arch)) {
    std::string supported;
    for (const auto &arch : supportedGpuArchs())
      supported += (supported.empty() ? "" : ", ") + arch.name;
    throw std::runtime_error("GPU target " + target.str() + " is not one torch-tile compiles for (" +
                             supported + ")");
  }
  return target;
}

const Target &runtime::cpuTarget() {
  const Target &host = Target::host();
  const char *forced = std::getenv("TILE_TARGET");
  if (!forced || !*forced)
    return host;
  // The text last found acceptable: a cache hit compares, it does not parse.
  static std::mutex mutex;
  static std::string accepted;
  std::lock_guard<std::mutex> lock(mutex);
  if (accepted == forced)
    return host;
  Target target;
  try {
    target = Target::parse(forced);
  } catch (const std::invalid_argument &error) {
    throw std::invalid_argument(std::string("TILE_TARGET=") + forced + ": " + error.what());
  }
  if (target.kind == TargetKind::Cpu && (target.arch != host.arch || target.features != host.features))
    throw std::invalid_argument(std::string("TILE_TARGET=") + forced + " names a CPU other than this host (" +
                                host.str() + "): CPU kernels run on the host; TILE_TARGET picks the target "
                                "of GPU devices (python -m torch_tile compile --target compiles for "
                                "another CPU)");
  accepted = forced;
  return host;
}
