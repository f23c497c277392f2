#ifndef TILE_RUNTIME_GPUDRIVER_H
#define TILE_RUNTIME_GPUDRIVER_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tile::runtime {

/// The few driver entry points a GPU launcher needs, as a table: HIP's hipModule* and
/// CUDA's cuModule* calls have the same shapes, and tests substitute a fake table.
/// Handles are opaque pointers; every call returns the driver's status (0 = success).
struct GpuDriver {
  std::string name; ///< "HIP" or "CUDA"
  std::string path; ///< the library it was loaded from
  int (*moduleLoadData)(void **module, const void *image) = nullptr;
  int (*moduleGetFunction)(void **function, void *module, const char *name) = nullptr;
  int (*launchKernel)(void *function, unsigned gridX, unsigned gridY, unsigned gridZ,
                      unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes,
                      void *stream, void **params, void **extra) = nullptr;
  /// Sets a function attribute (cuFuncSetAttribute); null where the launcher never needs
  /// one (HIP: LDS is declared statically).
  int (*funcSetAttribute)(void *function, int attribute, int value) = nullptr;
  /// The attribute id of the most dynamic shared memory a launch may give the function
  /// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
  int maxDynamicSharedAttribute = 8;
  /// CUDA's linker (cuLinkCreate/AddData/Complete/Destroy), which compiles PTX to the
  /// current device's cubin and hands it back, so it can be kept on disk; with the
  /// driver's version and the current device's compute capability, which the cubin
  /// depends on. Null in HIP's table (code objects are machine code already).
  int (*linkCreate)(unsigned numOptions, int *options, void **optionValues, void **state) = nullptr;
  int (*linkAddData)(void *state, int inputType, void *data, size_t size, const char *name,
                     unsigned numOptions, int *options, void **optionValues) = nullptr;
  int (*linkComplete)(void *state, void **image, size_t *size) = nullptr;
  int (*linkDestroy)(void *state) = nullptr;
  int (*driverGetVersion)(int *version) = nullptr;
  int (*ctxGetDevice)(int *device) = nullptr;
  int (*deviceGetAttribute)(int *value, int attribute, int device) = nullptr;
  /// cuTensorMapEncodeTiled: encodes a tensor map for bulk tensor copies (CUDA 12 and
  /// later; null where the driver has none).
  int (*tensorMapEncodeTiled)(void *map, int dataType, unsigned rank, void *address,
                              const uint64_t *sizes, const uint64_t *strides, const uint32_t *box,
                              const uint32_t *elementStrides, int interleave, int swizzle,
                              int l2Promotion, int outOfBoundsFill) = nullptr;
  /// The driver's text for a status.
  std::string (*describe)(const GpuDriver &driver, int status) = nullptr;
  void *library = nullptr; ///< dlopen handle, kept for describe()
};

/// Loads libamdhip64 by dlopen, trying $TILE_LIBHIP_PATH, then the loader's search path,
/// torch's own lib folder (`torchLibDir`, may be empty) and /opt/rocm/lib. Throws
/// std::runtime_error naming every place it looked and why each failed.
const GpuDriver &hipDriver(const std::string &torchLibDir = "");

/// The HIP table from the first of `candidates` that loads (not cached).
GpuDriver loadHipDriver(const std::vector<std::string> &candidates);

/// Loads libcuda.so.1 by dlopen; throws like hipDriver().
const GpuDriver &cudaDriver();

/// The candidates hipDriver() tries, in order (for messages and `python -m torch_tile env`).
std::vector<std::string> hipLibraryCandidates(const std::string &torchLibDir);

} // namespace tile::runtime

#endif
