#include "TorchLibraryDir.h"

#include <c10/core/CPUAllocator.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

std::string tile::binding::torchLibraryDir() {
  if (const char *path = std::getenv("TILE_TORCH_LIB_DIR"); path && *path)
    return path;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&c10::GetCPUAllocator), &info) == 0 || !info.dli_fname)
    return {};
  return std::filesystem::path(info.dli_fname).parent_path().string();
}
