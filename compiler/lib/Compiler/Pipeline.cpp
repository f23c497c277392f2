#include "tile/Compiler/Pipeline.h"

#include "tile/Conversion/Passes.h"
#include "tile/Dialect/Tile/IR/TileDialect.h"
#include "tile/Target/GpuArch.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/GPUToROCDL/GPUToROCDLPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void ::tile::registerTileDialects(DialectRegistry &registry) {
  registry.insert<mlir::tile::TileDialect, arith::ArithDialect, math::MathDialect, func::FuncDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, vector::VectorDialect,
                  LLVM::LLVMDialect, gpu::GPUDialect, ROCDL::ROCDLDialect, NVVM::NVVMDialect>();
  // The GPU conversions collect the to-LLVM patterns of every loaded dialect through
  // these interfaces.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerROCDLDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

void ::tile::buildTileToCpuPipeline(OpPassManager &pm, bool bf16Dot, bool int8Dot, bool amxBf16,
                                    bool amxInt8, bool maskedStores) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  mlir::tile::ConvertTileToCPUOptions options;
  options.bf16Dot = bf16Dot;
  options.int8Dot = int8Dot;
  options.amxBf16 = amxBf16;
  options.amxInt8 = amxInt8;
  options.maskedStores = maskedStores;
  pm.addPass(mlir::tile::createConvertTileToCPU(options));
}

/// bf16 <-> f32 become integer bit operations: x86 without AVX512-BF16 would otherwise
/// call __truncsfbf2, which the host's libgcc may not have, and AMD's GPUs before gfx950
/// have no conversion instruction either. NVIDIA's have one from sm_80 on (cvt.rn.bf16.f32,
/// which rounds the same way): there the expansion only costs a dozen integer
/// instructions per element of an epilogue.
static void expandBf16(OpPassManager &pm, bool nativeBf16 = false) {
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = !nativeBf16;
  pm.addPass(arith::createArithExpandOpsPass(expand));
}

void ::tile::buildTileToGpuPipeline(OpPassManager &pm, const std::string &chipset,
                                    int64_t numWarps, int64_t matrixInstrNonKDim,
                                    int64_t kpack, int64_t numStages, bool allowTf32,
                                    int64_t warpSpecialize, bool deferEpilogue) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  mlir::tile::ConvertTileToGPUOptions options;
  options.chipset = chipset;
  options.numWarps = numWarps;
  options.matrixInstrNonKDim = matrixInstrNonKDim;
  options.kpack = kpack;
  options.numStages = numStages;
  options.allowTf32 = allowTf32;
  options.warpSpecialize = warpSpecialize;
  options.deferEpilogue = deferEpilogue;
  pm.addPass(mlir::tile::createConvertTileToGPU(options));
  // The conversion builds every element's index arithmetic where it is used; folded and
  // shared once here, each later stage (and LLVM's optimizer) sees a small module: the
  // 128x256 sm_90a matmul's tile-gpu stage went from 58,000 lines to 1,900.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void ::tile::buildGpuToLLVMPipeline(OpPassManager &pm, const std::string &chipset) {
  std::optional<GpuArch> arch = lookupGpuArch(chipset);
  expandBf16(pm, /*nativeBf16=*/arch && !arch->amd);
  pm.addPass(createSCFToControlFlowPass());
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  if (arch && !arch->amd) {
    kernels.addPass(createConvertGpuOpsToNVVMOps());
  } else {
    ConvertGpuOpsToROCDLOpsOptions options;
    options.chipset = chipset;
    options.runtime = gpu::amd::Runtime::HIP;
    kernels.addPass(createConvertGpuOpsToROCDLOps(options));
  }
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void ::tile::buildCpuToLLVMPipeline(OpPassManager &pm, bool nativeBf16) {
  // A host with AVX512-BF16 converts f32 to bf16 in one instruction (vcvtneps2bf16, which
  // rounds to nearest even as the expansion does, and flushes denormal results to zero as
  // oneDNN's bf16 kernels do): a 32x32 accumulator's conversion alone was 500 IR
  // instructions, a third of such a kernel's compile time.
  expandBf16(pm, nativeBf16);
  pm.addPass(createSCFToControlFlowPass());
  // Dots that were not fused with their loads become vector.contract; outer products
  // keep them as a sequence of FMAs over k, like the fused microkernel.
  ConvertVectorToLLVMPassOptions vectorOptions;
  vectorOptions.vectorContractLowering = vector::VectorContractLowering::OuterProduct;
  pm.addPass(createConvertVectorToLLVMPass(vectorOptions));
  pm.addPass(createConvertMathToLLVMPass());
  // Vector unrolling starts N-D vectors from ub.poison.
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(mlir::tile::createAttachLoopAnnotations());
}

namespace {
struct GpuPipelineOptions : PassPipelineOptions<GpuPipelineOptions> {
  Option<std::string> chipset{*this, "chipset", llvm::cl::desc("gfx90a, gfx942, gfx950, gfx1100, gfx1201, sm_80, sm_90, sm_90a"),
                              llvm::cl::init("gfx942")};
  Option<int64_t> numWarps{*this, "num-warps", llvm::cl::desc("waves per workgroup"),
                           llvm::cl::init(4)};
  Option<int64_t> matrixInstrNonKDim{*this, "matrix-instr-nonkdim",
                                     llvm::cl::desc("MFMA tile edge, 16 or 32"), llvm::cl::init(16)};
  Option<int64_t> kpack{*this, "kpack", llvm::cl::desc("MFMA instructions per fragment read"),
                        llvm::cl::init(1)};
  Option<int64_t> numStages{*this, "num-stages", llvm::cl::desc("software-pipelining depth"),
                            llvm::cl::init(1)};
  Option<bool> allowTf32{*this, "allow-tf32",
                         llvm::cl::desc("f32 dots on NVIDIA may use TF32 mma.sync"),
                         llvm::cl::init(false)};
  Option<int64_t> warpSpecialize{*this, "warp-specialize",
                                 llvm::cl::desc("sm_90a: a producer warpgroup issues the bulk copies"),
                                 llvm::cl::init(0)};
  Option<bool> deferEpilogue{*this, "defer-epilogue",
                             llvm::cl::desc("sm_90a persistent kernels: stage each tile's results in the next tile"),
                             llvm::cl::init(false)};
};
} // namespace

void ::tile::registerTilePassesAndPipelines() {
  mlir::tile::registerTileConversionPasses();
  PassPipelineRegistration<>("tile-to-cpu", "tile -> tile-cpu stage",
                            [](OpPassManager &pm) { buildTileToCpuPipeline(pm); });
  PassPipelineRegistration<>("tile-cpu-to-llvm", "tile-cpu -> llvm stage",
                             [](OpPassManager &pm) { buildCpuToLLVMPipeline(pm); });
  PassPipelineRegistration<GpuPipelineOptions>(
      "tile-to-gpu", "tile -> tile-gpu stage", [](OpPassManager &pm, const GpuPipelineOptions &o) {
        buildTileToGpuPipeline(pm, o.chipset, o.numWarps, o.matrixInstrNonKDim, o.kpack,
                               o.numStages, o.allowTf32, o.warpSpecialize, o.deferEpilogue);
      });
  PassPipelineRegistration<GpuPipelineOptions>(
      "tile-gpu-to-llvm", "tile-gpu -> llvm stage (ROCDL or NVVM by chipset)",
      [](OpPassManager &pm, const GpuPipelineOptions &o) { buildGpuToLLVMPipeline(pm, o.chipset); });
}
