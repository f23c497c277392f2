// tile_runtime::* ops: what the runtime knows, for the Python package and the demo.
#include "runtime/DiskCache.h"
#include "runtime/KernelCache.h"
#include "tile/Compiler/Compile.h"

#include <torch/library.h>

#include <sstream>

namespace {

std::string hostTarget() { return tile::Target::host().str(); }

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


void clearCache() { tile::runtime::KernelCache::global().clear(); }

std::string compilerVersion() { return tile::compilerVersion(); }

} // namespace

TORCH_LIBRARY(tile_runtime, m) {
  m.def("host_target() -> str", hostTarget);
  m.def("cache_stats() -> str", cacheStats);
  m.def("clear_cache() -> ()", clearCache);
  m.def("compiler_version() -> str", compilerVersion);
  m.def("cache_dir() -> str", cacheDir);
}
