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
#include "TorchLibraryDir.h"
#include "VectorAddChecks.h"
#include "runtime/DeviceTarget.h"
#include "runtime/GpuLauncher.h"
#include "runtime/KernelCache.h"
#include "ops/VectorAddConfig.h"
#include "runtime/LaunchPlans.h"
#include "runtime/TensorMap.h"
#include "runtime/Autotuner.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <filesystem>
#include <limits>
#include <map>
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
    if (rocm()) // torch's ROCm wheels carry their own libamdhip64 beside libtorch.
      return tile::runtime::GpuLauncher(tile::runtime::hipDriver(tile::binding::torchLibraryDir()));
    return tile::runtime::GpuLauncher(tile::runtime::cudaDriver());
  }();
  return instance;
}

/// The programs a kernel is launched with for `programs` tiles: one per tile, but a
/// persistent kernel's walk all its tiles, one per multiprocessor (in whole clusters),
/// and a stream-K kernel's split the tiles' K steps over every multiprocessor.
int64_t launchedPrograms(const tile::runtime::LoadedKernel &kernel, int device, int64_t programs) {
  if (!kernel.binary.persistent)
    return programs;
  int64_t ctas = std::max<int64_t>(1, kernel.binary.clusterCtas);
  int64_t resident = std::max(at::cuda::getDeviceProperties(device)->multiProcessorCount / ctas * ctas, ctas);
  return kernel.binary.streamKTileElements > 0 ? resident : std::min<int64_t>(programs, resident);
}

/// Where a stream-K kernel's programs leave their partial sums (f32 or i32, one tile per
/// program) and signal them (an i32 flag per program). The flags are zero at launch and
/// each launch clears every flag it sets, so launches on one stream (which run in order)
/// share a workspace, kept per device and stream and grown as needed. A launch being
/// captured into a CUDA graph gets its own, from the graph's memory, with its flags
/// zeroed by a node of the graph, since the graph may be replayed anywhere.
std::pair<void *, void *> streamKWorkspace(int device, cudaStream_t stream, int64_t programs, int64_t tileElements) {
  auto options = at::TensorOptions().device(at::kCUDA, device);
  int64_t partials = programs * tileElements;
  if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) {
    at::Tensor memory = at::empty({partials}, options.dtype(at::kFloat));
    at::Tensor flags = at::zeros({programs}, options.dtype(at::kInt));
    // Freed to the graph's pool after this call: the captured launch still owns them.
    return {memory.data_ptr(), flags.data_ptr()};
  }
  struct Workspace {
    at::Tensor partials, flags;
  };
  static std::mutex mutex;
  // Never destroyed: CUDA memory must not be freed after the runtime shuts down.
  static auto *byStream = new std::map<std::pair<int, cudaStream_t>, Workspace>();
  std::lock_guard<std::mutex> lock(mutex);
  Workspace &workspace = (*byStream)[{device, stream}];
  if (!workspace.partials.defined() || workspace.partials.numel() < partials)
    workspace.partials = at::empty({partials}, options.dtype(at::kFloat));
  if (!workspace.flags.defined() || workspace.flags.numel() < programs)
    workspace.flags = at::zeros({programs}, options.dtype(at::kInt));
  return {workspace.partials.data_ptr(), workspace.flags.data_ptr()};
}

void launch(const char *op, const tile::runtime::LoadedKernel &kernel, const at::Tensor &any,
            void **args, int64_t programs) {
  int device = any.get_device();
  programs = launchedPrograms(kernel, device, programs);
  TORCH_CHECK(programs <= std::numeric_limits<int32_t>::max(), op,
              ": more than 2**31 program instances");
  try {
    launcher().launch(kernel, targetOf(device), device, args,
                      Grid{static_cast<int32_t>(programs), 1, 1},
                      at::cuda::getCurrentCUDAStream(device).stream());
  } catch (const std::runtime_error &error) {
    TORCH_CHECK(false, op, ": ", error.what());
  }
}

tile::runtime::TensorMapCache &tensorMaps() {
  static tile::runtime::TensorMapCache cache(tile::runtime::cudaDriver());
  return cache;
}

/// A matmul kernel's launch: its arguments, with the tensor maps it takes (NVIDIA kernels
/// whose operands arrive by bulk tensor copies), encoded for this call's operands.
void launchMatmul(const char *op, tile::binding::MatmulCall &call, const tile::runtime::LoadedKernel &kernel,
                  int64_t programs) {
  std::pair<void *, void *> workspace{nullptr, nullptr};
  if (kernel.binary.streamKTileElements > 0) {
    int device = call.a.get_device();
    workspace = streamKWorkspace(device, at::cuda::getCurrentCUDAStream(device).stream(),
                                 launchedPrograms(kernel, device, programs), kernel.binary.streamKTileElements);
  }
  call.arguments.setStreamKWorkspace(workspace.first, workspace.second);
  void **args = call.args();
  if (!kernel.binary.tensorMaps.empty()) {
    try {
      args = call.arguments.withTensorMaps(kernel.binary.tensorMaps, tensorMaps());
    } catch (const std::runtime_error &error) {
      TORCH_CHECK(false, op, ": ", error.what());
    }
  }
  launch(op, kernel, call.a, args, programs);
}

std::shared_ptr<const tile::runtime::LoadedKernel> kernelFor(const char *op,
                                                             const tile::ops::KernelSpec &spec,
                                                             const tile::Target &target) {
  try {
    return tile::runtime::KernelCache::global().get(spec, target);
  } catch (const tile::CompileError &error) { // names the kernel already
    TORCH_CHECK(false, op, ": ", error.what());
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
  bool index32 = numel < std::numeric_limits<int32_t>::max();
  // As the CPU's (VectorAdd.cpp), with the device in slot 3.
  tile::runtime::CallSignature signature{-1, static_cast<int64_t>(a.scalar_type()), numel,
                                         a.get_device()};
  std::optional<tile::runtime::LaunchPlan> plan = tile::runtime::reusePlan(signature);
  if (!plan) {
    const tile::Target &target = targetOf(a.get_device());
    auto spec = tile::ops::vectorAddSpec(target, tile::binding::specDtype(a.scalar_type()), numel);
    int64_t block = spec.config.at("BLOCK_SIZE");
    plan = tile::runtime::LaunchPlan{kernelFor("tile::vector_add", spec, target),
                                     (numel + block - 1) / block, 1};
    tile::runtime::LaunchPlans::global().insert(signature, *plan);
  }
  void *aPtr = aDense.data_ptr(), *bPtr = bDense.data_ptr(), *outPtr = out.data_ptr();
  int32_t n32 = static_cast<int32_t>(numel);
  int64_t n64 = numel;
  void *args[] = {&aPtr, &bPtr, &outPtr, index32 ? static_cast<void *>(&n32) : &n64};
  launch("tile::vector_add", *plan->kernel, a, args, plan->programs);
  return out;
}

at::Tensor matmulGpu(const char *op, const at::Tensor &a, const at::Tensor &b,
                     std::optional<double> negativeSlope, std::optional<at::ScalarType> outDtype,
                     const std::optional<at::Tensor> &bias,
                     const std::optional<at::Tensor> &activation = std::nullopt) {
  // Before the guard: a guard built from a CPU `a` (the dispatcher picks this kernel for
  // a CPU a with a GPU b or bias) would raise torch's error instead of these.
  TORCH_CHECK(a.device() == b.device(), op, ": tensor a is on ", a.device(), " but b is on ",
              b.device());
  TORCH_CHECK(!bias || bias->device() == a.device(), op, ": bias is on ", bias->device(),
              " but the operands are on ", a.device());
  TORCH_CHECK(!activation || activation->device() == a.device(), op, ": activation is on ",
              activation->device(), " but the operands are on ", a.device());
  c10::cuda::CUDAGuard guard(a.device());
  const tile::Target &target = targetOf(a.get_device());
  tile::binding::MatmulCall call;
  tile::binding::prepareMatmul(call, op, a, b, negativeSlope, outDtype, bias, target,
                               /*contiguousRowsOfB=*/false, /*termsOfHalves=*/false,
                               /*cScratch=*/std::nullopt, activation);
  if (call.empty())
    return call.c;
  if (auto plan = tile::runtime::reusePlan(call.signature)) {
    launchMatmul(op, call, *plan->kernel, plan->programs);
    return call.c;
  }
  call.specify();
  auto launchConfig = [&](const tile::ops::KernelSpec &spec, int64_t programs) {
    launchMatmul(op, call, *kernelFor(op, spec, target), programs);
  };
  auto stream = at::cuda::getCurrentCUDAStream(a.get_device());
  // Under CUDA graph capture nothing may run: a known winner is used, else the default,
  // which is not remembered (a later call outside the capture may still tune).
  bool capturing = c10::cuda::currentStreamCaptureStatusMayInitCtx() !=
                   c10::cuda::CaptureStatus::None;
  auto [spec, programs] = tile::binding::chooseMatmulConfig(
      call, target, launchConfig, [&] { stream.synchronize(); }, !capturing);
  tile::runtime::LaunchPlan plan{kernelFor(op, spec, target), programs, 1};
  if (!capturing || !tile::runtime::Autotuner::global().enabled())
    tile::runtime::LaunchPlans::global().insert(call.signature, plan);
  launchMatmul(op, call, *plan.kernel, plan.programs);
  return call.c;
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

at::Tensor matmulLeakyReluBackward(const at::Tensor &a, const at::Tensor &b,
                                   const at::Tensor &activation, double negativeSlope,
                                   std::optional<at::ScalarType> outDtype) {
  return matmulGpu("tile::matmul_leaky_relu_backward", a, b, negativeSlope, outDtype, std::nullopt,
                   activation);
}

} // namespace

TORCH_LIBRARY_IMPL(tile, CUDA, m) {
  m.impl("vector_add", vectorAddGpu);
  m.impl("matmul", matmul);
  m.impl("matmul_leaky_relu", matmulLeakyRelu);
  m.impl("matmul_leaky_relu_backward", matmulLeakyReluBackward);
}
