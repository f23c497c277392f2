// The ops on GPU tensors, for torch builds with CUDA or ROCm (the CUDA dispatch key
// serves both; ROCm's HIP devices are `cuda` devices in torch). The kernel is compiled
// on first call for the device's own target, cached in memory and on disk, loaded into
// the driver once per device and launched on the current torch stream.
//
// Built only where torch has GPU support (torch_tile builds it when Torch's CMake
// package provides CUDA; tests/device/build_torch_binding.sh on the GPU machine).
#include "DTypes.h"
#include "MatmulCall.h"
#include "MatmulTuning.h"
#include "VectorAddChecks.h"
#include "runtime/DeviceTarget.h"
#include "runtime/GpuLauncher.h"
#include "runtime/KernelCache.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <filesystem>
#include <limits>
#include <mutex>
#include <vector>

namespace {

using tile::runtime::Grid;

bool rocm() {
#ifdef USE_ROCM
  return true;
#else
  return false;
#endif
}

/// The compile target of a device, detected once.
const tile::Target &targetOf(int device) {
  static std::mutex mutex;
  static std::vector<std::optional<tile::Target>> targets;
  std::lock_guard<std::mutex> lock(mutex);
  if (targets.size() <= size_t(device))
    targets.resize(device + 1);
  if (!targets[device]) {
    const cudaDeviceProp *props = at::cuda::getDeviceProperties(device);
#ifdef USE_ROCM
    std::string arch = props->gcnArchName;
#else
    std::string arch;
#endif
    targets[device] = tile::runtime::deviceTarget(rocm() ? tile::TargetKind::Hip
                                                         : tile::TargetKind::Cuda,
                                                  arch, props->major, props->minor);
  }
  return *targets[device];
}

tile::runtime::GpuLauncher &launcher() {
  static tile::runtime::GpuLauncher instance = [] {
    if (rocm()) {
      // torch's ROCm wheels carry their own libamdhip64 beside libtorch.
      std::string torchLib;
      if (const char *path = std::getenv("TILE_TORCH_LIB_DIR"))
        torchLib = path;
      return tile::runtime::GpuLauncher(tile::runtime::hipDriver(torchLib));
    }
    return tile::runtime::GpuLauncher(tile::runtime::cudaDriver());
  }();
  return instance;
}

void launch(const char *op, const tile::runtime::LoadedKernel &kernel, const at::Tensor &any,
            void **args, int64_t programs) {
  TORCH_CHECK(programs <= std::numeric_limits<int32_t>::max(), op,
              ": more than 2**31 program instances");
  int device = any.get_device();
  try {
    launcher().launch(kernel, targetOf(device), device, args,
                      Grid{static_cast<int32_t>(programs), 1, 1},
                      at::cuda::getCurrentCUDAStream(device).stream());
  } catch (const std::runtime_error &error) {
    TORCH_CHECK(false, op, ": ", error.what());
  }
}

std::shared_ptr<const tile::runtime::LoadedKernel> kernelFor(const char *op,
                                                             const tile::ops::KernelSpec &spec,
                                                             const tile::Target &target) {
  try {
    return tile::runtime::KernelCache::global().get(spec, target);
  } catch (const std::exception &error) {
    TORCH_CHECK(false, op, ": cannot compile ", spec.str(), " for ", target.str(), ": ",
                error.what());
  }
}

at::Tensor vectorAddGpu(const at::Tensor &a, const at::Tensor &b) {
  tile::binding::checkVectorAddInputs(a, b);
  c10::cuda::CUDAGuard guard(a.device());
  at::Tensor aDense = a.contiguous(), bDense = b.contiguous();
  at::Tensor out = at::empty_like(aDense, at::MemoryFormat::Contiguous);
  int64_t numel = out.numel();
  if (numel == 0)
    return out;
  tile::ops::KernelSpec spec;
  spec.op = "vector_add";
  spec.dtypes = {tile::binding::specDtype(a.scalar_type())};
  // 4 waves, each thread 16 bytes of f16 per access (two runs of f32).
  spec.config = {{"BLOCK_SIZE", 2048},
                 {"num_warps", 4},
                 {"index_bits", numel < std::numeric_limits<int32_t>::max() ? 32 : 64}};
  auto kernel = kernelFor("tile::vector_add", spec, targetOf(a.get_device()));
  void *aPtr = aDense.data_ptr(), *bPtr = bDense.data_ptr(), *outPtr = out.data_ptr();
  int32_t n32 = static_cast<int32_t>(numel);
  int64_t n64 = numel;
  void *nArg = spec.config.at("index_bits") == 32 ? static_cast<void *>(&n32) : &n64;
  void *args[] = {&aPtr, &bPtr, &outPtr, nArg};
  launch("tile::vector_add", *kernel, a, args, (numel + 2047) / 2048);
  return out;
}

at::Tensor matmulGpu(const char *op, const at::Tensor &a, const at::Tensor &b,
                     std::optional<double> negativeSlope, std::optional<at::ScalarType> outDtype,
                     const std::optional<at::Tensor> &bias) {
  // Before the guard: a guard built from a CPU `a` (the dispatcher picks this kernel for
  // a CPU a with a GPU b or bias) would raise torch's error instead of these.
  TORCH_CHECK(a.device() == b.device(), op, ": tensor a is on ", a.device(), " but b is on ",
              b.device());
  TORCH_CHECK(!bias || bias->device() == a.device(), op, ": bias is on ", bias->device(),
              " but the operands are on ", a.device());
  c10::cuda::CUDAGuard guard(a.device());
  const tile::Target &target = targetOf(a.get_device());
  auto call = tile::binding::prepareMatmul(op, a, b, negativeSlope, outDtype, bias, target,
                                           /*contiguousRowsOfB=*/false);
  if (call->programs == 0)
    return call->c;
  auto launchConfig = [&](const tile::ops::KernelSpec &spec, int64_t programs) {
    launch(op, *kernelFor(op, spec, target), a, call->args, programs);
  };
  auto stream = at::cuda::getCurrentCUDAStream(a.get_device());
  // Under CUDA graph capture nothing may run: a known winner is used, else the default.
  bool capturing = c10::cuda::currentStreamCaptureStatusMayInitCtx() !=
                   c10::cuda::CaptureStatus::None;
  auto [spec, programs] = tile::binding::chooseMatmulConfig(
      *call, target, launchConfig, [&] { stream.synchronize(); }, !capturing);
  launchConfig(spec, programs);
  return call->c;
}

at::Tensor matmul(const at::Tensor &a, const at::Tensor &b, std::optional<at::ScalarType> outDtype,
                  const std::optional<at::Tensor> &bias) {
  return matmulGpu("tile::matmul", a, b, std::nullopt, outDtype, bias);
}

at::Tensor matmulLeakyRelu(const at::Tensor &a, const at::Tensor &b, double negativeSlope,
                           std::optional<at::ScalarType> outDtype,
                           const std::optional<at::Tensor> &bias) {
  return matmulGpu("tile::matmul_leaky_relu", a, b, negativeSlope, outDtype, bias);
}

} // namespace

TORCH_LIBRARY_IMPL(tile, CUDA, m) {
  m.impl("vector_add", vectorAddGpu);
  m.impl("matmul", matmul);
  m.impl("matmul_leaky_relu", matmulLeakyRelu);
}
