#include "runtime/GpuDriver.h"

#include <cstdlib>
#include <dlfcn.h>
#include <link.h>
#include <mutex>
#include <stdexcept>

using namespace tile::runtime;

namespace {

template <typename Fn>
Fn symbol(void *library, const char *name, const std::string &path) {
  void *address = ::dlsym(library, name);
  if (!address)
    throw std::runtime_error(path + " has no " + name + "; is it a HIP/CUDA driver library?");
  return reinterpret_cast<Fn>(address);
}

std::string describeHip(const GpuDriver &driver, int status) {
  using GetErrorString = const char *(*)(int);
  auto getString = reinterpret_cast<GetErrorString>(::dlsym(driver.library, "hipGetErrorString"));
  return "hipError " + std::to_string(status) + (getString ? std::string(" (") + getString(status) + ")" : "");
}

std::string describeCuda(const GpuDriver &driver, int status) {
  using GetErrorString = int (*)(int, const char **);
  auto getString = reinterpret_cast<GetErrorString>(::dlsym(driver.library, "cuGetErrorString"));
  const char *text = nullptr;
  if (getString)
    getString(status, &text);
  return "CUresult " + std::to_string(status) + (text ? std::string(" (") + text + ")" : "");
}

/// dlopen of the first candidate that loads; the error lists every attempt.
void *openFirst(const std::vector<std::string> &candidates, const char *what, std::string &path) {
  std::string tried;
  for (const auto &candidate : candidates) {
    if (void *library = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      // The file the loader resolved the name to, for messages and `torch_tile env`.
      struct link_map *map = nullptr;
      path = ::dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name
                 ? map->l_name
                 : candidate;
      return library;
    }
    const char *error = ::dlerror();
    tried += "\n  " + candidate + ": " + (error ? error : "not loadable");
  }
  throw std::runtime_error(std::string("no ") + what + " found; tried:" + tried);
}

} // namespace

std::vector<std::string> tile::runtime::hipLibraryCandidates(const std::string &torchLibDir) {
  std::vector<std::string> candidates;
  if (const char *env = std::getenv("TILE_LIBHIP_PATH"); env && *env)
    candidates.push_back(env);
  candidates.push_back("libamdhip64.so");
  if (!torchLibDir.empty())
    candidates.push_back(torchLibDir + "/libamdhip64.so");
  candidates.push_back("/opt/rocm/lib/libamdhip64.so");
  return candidates;
}

GpuDriver tile::runtime::loadHipDriver(const std::vector<std::string> &candidates) {
  GpuDriver loaded;
  loaded.name = "HIP";
  loaded.library =
      openFirst(candidates, "HIP runtime (libamdhip64.so; set TILE_LIBHIP_PATH)", loaded.path);
  loaded.moduleLoadData = symbol<decltype(loaded.moduleLoadData)>(loaded.library, "hipModuleLoadData", loaded.path);
  loaded.moduleGetFunction =
      symbol<decltype(loaded.moduleGetFunction)>(loaded.library, "hipModuleGetFunction", loaded.path);
  loaded.launchKernel = symbol<decltype(loaded.launchKernel)>(loaded.library, "hipModuleLaunchKernel", loaded.path);
  loaded.describe = describeHip;
  return loaded;
}

const GpuDriver &tile::runtime::hipDriver(const std::string &torchLibDir) {
  static std::mutex mutex;
  static GpuDriver driver;
  std::lock_guard<std::mutex> lock(mutex);
  if (!driver.library)
    driver = loadHipDriver(hipLibraryCandidates(torchLibDir));
  return driver;
}

const GpuDriver &tile::runtime::cudaDriver() {
  static std::mutex mutex;
  static GpuDriver driver;
  std::lock_guard<std::mutex> lock(mutex);
  if (driver.library)
    return driver;
  GpuDriver loaded;
  loaded.name = "CUDA";
  loaded.library = openFirst({"libcuda.so.1"}, "CUDA driver (libcuda.so.1)", loaded.path);
  loaded.moduleLoadData = symbol<decltype(loaded.moduleLoadData)>(loaded.library, "cuModuleLoadData", loaded.path);
  loaded.moduleGetFunction =
      symbol<decltype(loaded.moduleGetFunction)>(loaded.library, "cuModuleGetFunction", loaded.path);
  loaded.launchKernel = symbol<decltype(loaded.launchKernel)>(loaded.library, "cuLaunchKernel", loaded.path);
  loaded.funcSetAttribute =
      symbol<decltype(loaded.funcSetAttribute)>(loaded.library, "cuFuncSetAttribute", loaded.path);
  loaded.linkCreate = symbol<decltype(loaded.linkCreate)>(loaded.library, "cuLinkCreate_v2", loaded.path);
  loaded.linkAddData = symbol<decltype(loaded.linkAddData)>(loaded.library, "cuLinkAddData_v2", loaded.path);
  loaded.linkComplete = symbol<decltype(loaded.linkComplete)>(loaded.library, "cuLinkComplete", loaded.path);
  loaded.linkDestroy = symbol<decltype(loaded.linkDestroy)>(loaded.library, "cuLinkDestroy", loaded.path);
  loaded.driverGetVersion =
      symbol<decltype(loaded.driverGetVersion)>(loaded.library, "cuDriverGetVersion", loaded.path);
  loaded.ctxGetDevice = symbol<decltype(loaded.ctxGetDevice)>(loaded.library, "cuCtxGetDevice", loaded.path);
  loaded.deviceGetAttribute =
      symbol<decltype(loaded.deviceGetAttribute)>(loaded.library, "cuDeviceGetAttribute", loaded.path);
  // Drivers before CUDA 12 have no tensor maps; kernels then copy with cp.async.
  loaded.tensorMapEncodeTiled = reinterpret_cast<decltype(loaded.tensorMapEncodeTiled)>(
      ::dlsym(loaded.library, "cuTensorMapEncodeTiled"));
  loaded.describe = describeCuda;
  driver = loaded;
  return driver;
}
