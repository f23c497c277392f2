#include "runtime/DeviceTarget.h"

#include "tile/Target/GpuArch.h"

#include <cstdlib>
#include <stdexcept>

using namespace tile;

Target runtime::deviceTarget(TargetKind kind, const std::string &gcnArchName, int major,
                             int minor) {
  std::string detected = kind == TargetKind::Hip
                             ? "hip:" + gcnArchName
                             : "cuda:sm_" + std::to_string(major) + std::to_string(minor);
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
