// tile_runtime::* ops: what the runtime knows, for the Python package and the demo.
#include "TorchLibraryDir.h"
#include "runtime/BuildId.h"
#include "runtime/DiskCache.h"
#include "runtime/GpuDriver.h"
#include "runtime/KernelCache.h"
#include "tile/Compiler/Compile.h"

#include <torch/library.h>

#include <sstream>

namespace {

std::string hostTarget() { return tile::Target::host().str(); }

/// Whether the host target has an LLVM CPU feature ("amx-bf16"): what its kernels may
/// use, the OS's grants applied (the AMX tile state).
bool hostHasFeature(std::string feature) { return tile::Target::host().hasFeature(feature); }

/// Cache counters as JSON: {"hits": H, "misses": M, "disk_loads": D}: in-memory hits,
/// misses (each one compiled or read from disk), and binaries read from the disk cache.
std::string cacheStats() {
  auto stats = tile::runtime::KernelCache::global().stats();
  std::ostringstream json;
  json << "{\"hits\": " << stats.hits << ", \"misses\": " << stats.misses
       << ", \"disk_loads\": " << tile::runtime::DiskCache::global().loads() << "}";
  return json.str();
}

std::string cacheDir() { return tile::runtime::DiskCache::global().root(); }

/// "<library path>" when the driver loads, else "error: <where it looked and why>". An
/// empty torchLibDir searches as the launcher does (torchLibraryDir()).
std::string driverStatus(std::string driver, std::string torchLibDir) {
  if (torchLibDir.empty())
    torchLibDir = tile::binding::torchLibraryDir();
  try {
    if (driver == "hip")
      return tile::runtime::hipDriver(torchLibDir).path;
    if (driver == "cuda")
      return tile::runtime::cudaDriver().path;
  } catch (const std::exception &error) {
    return std::string("error: ") + error.what();
  }
  TORCH_CHECK(false, "driver_status: no driver named '", driver, "' (hip, cuda)");
}


void clearCache() { tile::runtime::KernelCache::global().clear(); }

std::string compilerVersion() { return tile::compilerVersion(); }

std::string coreBuildId() { return tile::runtime::coreBuildId(); }

} // namespace

TORCH_LIBRARY(tile_runtime, m) {
  m.def("host_target() -> str", hostTarget);
  m.def("host_has_feature(str feature) -> bool", hostHasFeature);
  m.def("cache_stats() -> str", cacheStats);
  m.def("clear_cache() -> ()", clearCache);
  m.def("compiler_version() -> str", compilerVersion);
  // The build of the loaded compiler core: the disk cache keys binaries by it.
  m.def("core_build_id() -> str", coreBuildId);
  m.def("cache_dir() -> str", cacheDir);
  m.def("driver_status(str driver, str torch_lib_dir) -> str", driverStatus);
}
