#include "tile/Compiler/Compile.h"

#include "CompileFaults.h"
#include "MachineCode.h"
#include "tile/Compiler/Pipeline.h"
#include "tile/Conversion/Passes.h"
#include "tile/Conversion/TileToCPU/TileToCPU.h"
#include "tile/Dialect/Tile/IR/TileDialect.h"
#include "tile/Target/CpuArch.h"
#include "tile/Target/GpuArch.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <functional>
#include <tuple>

#ifndef TILE_VERSION
#define TILE_VERSION "unknown"
#endif

using namespace tile;

const char *tile::compilerVersion() { return "torch-tile " TILE_VERSION; }

std::vector<std::string> tile::stageNames(const Target &target) {
  switch (target.kind) {
  case TargetKind::Cpu:
    return {"tile", "tile-cpu", "llvm", "asm", "bin"};
  case TargetKind::Hip:
  case TargetKind::Cuda:
    return {"tile", "tile-gpu", "llvm", "asm", "bin"};
  }
  return {};
}

std::unique_ptr<mlir::MLIRContext> tile::createContext(bool cpuOnly) {
  mlir::DialectRegistry registry;
  registerTileDialects(registry);
  auto context =
      std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  if (cpuOnly)
    context
        ->loadDialect<mlir::tile::TileDialect, mlir::arith::ArithDialect, mlir::math::MathDialect,
                      mlir::func::FuncDialect, mlir::scf::SCFDialect, mlir::cf::ControlFlowDialect,
                      mlir::vector::VectorDialect, mlir::LLVM::LLVMDialect>();
  else
    context->loadAllAvailableDialects();
  return context;
}

namespace {

std::string printed(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  module.print(stream);
  return text;
}

std::string printed(const llvm::Module &module) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  module.print(stream, nullptr);
  return text;
}

/// Collects the diagnostics of a compile, to put them into the CompileError.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext *context)
      : handler(context, [this](mlir::Diagnostic &diagnostic) {
          llvm::raw_string_ostream stream(messages);
          stream << "\n  " << diagnostic.getLocation() << ": " << diagnostic;
          return mlir::success();
        }) {}
  [[noreturn]] void fail(const std::string &what) const { throw CompileError(what + messages); }

private:
  std::string messages;
  mlir::ScopedDiagnosticHandler handler;
};

/// Whether the test hook injects a fault at `stage`; where it does, the fault's MLIR error
/// is emitted on `module` for the stage's failure message to carry.
bool injectedInto(mlir::ModuleOp module, llvm::StringRef stage) {
  if (!faultInjectedAt(stage))
    return false;
  module.emitError("fault injected by TILE_TEST_INJECT_FAULT=") << stage;
  return true;
}

/// Runs the pipeline of one stage and checks the module it leaves. The verifier runs once
/// per stage rather than after every pass: after the GPU conversion, whose module the next
/// pass folds to a fraction of its size, it cost a tenth of a GPU kernel's compile.
bool runStage(mlir::PassManager &pipeline, mlir::ModuleOp module) {
  pipeline.enableVerifier(false);
  return mlir::succeeded(pipeline.run(module)) && mlir::succeeded(mlir::verify(module));
}

/// Drops the tile dialect's attributes from the arguments of the LLVM functions of
/// `module` (the pointer ranges the lowerings read), which are done with by then. The
/// translation to LLVM IR warns about each argument attribute of a dialect it does not
/// know, and the warning prints the whole function into its message: 2.3 of the 3 ms a
/// 64x64 bf16 CPU kernel's translation took.
void dropTileArgumentAttributes(mlir::Operation *module) {
  module->walk([](mlir::LLVM::LLVMFuncOp function) {
    for (unsigned index = 0; index < function.getNumArguments(); ++index)
      if (mlir::DictionaryAttr attrs = function.getArgAttrDict(index))
        for (mlir::NamedAttribute attr : attrs)
          if (attr.getNameDialect() && attr.getNameDialect()->getNamespace() ==
                                           mlir::tile::TileDialect::getDialectNamespace())
            function.removeArgAttr(index, attr.getName());
  });
}

mlir::func::FuncOp findKernel(mlir::ModuleOp module) {
  mlir::func::FuncOp kernel;
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    if (!func->hasAttr(mlir::tile::kKernelAttrName))
      continue;
    if (kernel)
      throw CompileError("module holds more than one tile.kernel function");
    kernel = func;
  }
  if (!kernel)
    throw CompileError("module holds no function marked tile.kernel");
  return kernel;
}

} // namespace

std::pair<std::string, std::string> tile::kernelSymbols(mlir::ModuleOp module, const Target &target) {
  std::string name = findKernel(module).getName().str();
  std::string symbol = target.kind == TargetKind::Cpu ? mlir::tile::cpuEntryName(name) : name;
  return {name, symbol};
}

namespace {

/// Keeps the text of a compile stage (CompileOptions::keepStages); the text is made only
/// when it is kept.
using StageKeeper = std::function<void(const char *, llvm::function_ref<std::string()>)>;

/// The tile-gpu, llvm, asm and bin stages of a GPU target.
void compileForGpu(mlir::ModuleOp module, const Target &target, const CompileOptions &options,
                   DiagnosticCollector &diagnostics, Binary &binary,
                   const StageKeeper &keep) {
  mlir::MLIRContext *context = module.getContext();
  std::optional<GpuArch> arch = lookupGpuArch(target.arch);
  if (!arch || arch->amd != (target.kind == TargetKind::Hip))
    throw CompileError("no GPU arch " + target.str() + "; supported: hip:gfx90a, hip:gfx942, "
                       "hip:gfx950, hip:gfx1100, hip:gfx1201, cuda:sm_80, cuda:sm_90, cuda:sm_90a");
  binary.blockThreads = options.numWarps * arch->waveSize;
  if (options.numWarps < 1 || binary.blockThreads > 1024)
    throw CompileError("num_warps=" + std::to_string(options.numWarps) + " gives " +
                       std::to_string(binary.blockThreads) + " threads per workgroup; " +
                       arch->name + " allows 1 to 1024 (num_warps 1.." +
                       std::to_string(1024 / arch->waveSize) + ")");

  // waves_per_eu is an AMD backend attribute: refused on NVIDIA rather than hashed and
  // ignored (the lowering refuses the other knobs an arch cannot honour).
  if (!arch->amd && options.wavesPerEu != 0)
    throw CompileError("waves_per_eu=" + std::to_string(options.wavesPerEu) +
                       " is an AMD occupancy hint; " + arch->name + " takes waves_per_eu=0");
  // ptxas, where it assembles the kernel, allocates the registers a deferred epilogue
  // needs; the driver's PTX compiler spills them (in the MMA warps' loop over tiles).
  bool assembledByPtxas = !arch->amd && options.assembleWithPtxas && ptxasOnPath();
  mlir::PassManager toGpu(context);
  buildTileToGpuPipeline(toGpu, arch->name, options.numWarps, options.matrixInstrNonKDim,
                         options.kpack, options.numStages, options.allowTf32, options.warpSpecialize,
                         /*deferEpilogue=*/assembledByPtxas);
  if (!runStage(toGpu, module) || injectedInto(module, "lowering"))
    diagnostics.fail("lowering tile -> tile-gpu failed:");
  keep("tile-gpu", [&] { return printed(module); });
  std::string mapsKernel, clusterKernel;
  unsigned firstMap = 0;
  module.walk([&](mlir::gpu::GPUFuncOp func) {
    // The lowering may run more waves than num_warps (wavesPerWorkgroup): the launch
    // takes the block size the kernel was lowered for.
    if (std::optional<llvm::ArrayRef<int32_t>> block = func.getKnownBlockSize())
      binary.blockThreads = (*block)[0];
    if (func->hasAttr(mlir::tile::kPersistentAttrName))
      binary.persistent = true;
    if (auto tile = func->getAttrOfType<mlir::IntegerAttr>(mlir::tile::kStreamKAttrName))
      binary.streamKTileElements = tile.getInt();
    if (auto ctas = func->getAttrOfType<mlir::IntegerAttr>(mlir::tile::kClusterCtasAttrName)) {
      binary.clusterCtas = ctas.getInt();
      clusterKernel = func.getName().str();
    }
    if (auto bytes = func->getAttrOfType<mlir::IntegerAttr>(mlir::tile::kDynamicSharedBytesAttrName))
      binary.dynamicSharedBytes = std::max(binary.dynamicSharedBytes, bytes.getInt());
    if (auto maps = func->getAttrOfType<mlir::ArrayAttr>(mlir::tile::kTensorMapsAttrName)) {
      for (mlir::Attribute map : maps) {
        auto fields = mlir::cast<mlir::DictionaryAttr>(map);
        auto field = [&](llvm::StringRef name) { return mlir::cast<mlir::IntegerAttr>(fields.get(name)).getInt(); };
        binary.tensorMaps.push_back({field("operand"), field("contiguous_dim"), field("box_inner"),
                                     field("box_outer"), field("swizzle_bytes"), field("data_type")});
      }
      mapsKernel = func.getName().str();
      firstMap = func.getNumArguments() - maps.size();
    }
  });

  mlir::PassManager toLLVM(context);
  buildGpuToLLVMPipeline(toLLVM, arch->name);
  if (!runStage(toLLVM, module))
    diagnostics.fail("lowering tile-gpu -> llvm failed:");
  mlir::gpu::GPUModuleOp kernels;
  module.walk([&](mlir::gpu::GPUModuleOp op) { kernels = op; });
  if (!kernels)
    diagnostics.fail("the GPU lowering produced no gpu.module:");
  // A kernel of clusters carries their shape (PTX .reqnctapercluster), so that the
  // driver forms them at any launch.
  if (!clusterKernel.empty())
    kernels.walk([&](mlir::LLVM::LLVMFuncOp func) {
      if (func.getName() == clusterKernel)
        func->setAttr(mlir::NVVM::NVVMDialect::getClusterDimAttrName(),
                      mlir::DenseI32ArrayAttr::get(func.getContext(), {int32_t(binary.clusterCtas), 1, 1}));
    });
  // A tensor map is a 128-byte parameter (64-byte aligned) that the kernel reads in place
  // (grid constant): the bulk copies take its address. The GPU-to-NVVM lowering keeps no
  // byval attribute of a gpu.func, so they are set on the LLVM function it made.
  if (!mapsKernel.empty())
    kernels.walk([&](mlir::LLVM::LLVMFuncOp func) {
      if (func.getName() != mapsKernel)
        return;
      mlir::MLIRContext *ctx = func.getContext();
      mlir::OpBuilder b(ctx);
      for (unsigned i = firstMap; i < func.getNumArguments(); ++i) {
        func.setArgAttr(i, mlir::LLVM::LLVMDialect::getByValAttrName(),
                        mlir::TypeAttr::get(mlir::LLVM::LLVMArrayType::get(b.getI8Type(), 128)));
        func.setArgAttr(i, mlir::LLVM::LLVMDialect::getAlignAttrName(), b.getI64IntegerAttr(64));
        func.setArgAttr(i, mlir::NVVM::NVVMDialect::getGridConstantAttrName(), b.getUnitAttr());
      }
    });

  // LDS is checked before LLVM sees it: the AMDGPU backend reports too much LDS as a
  // fatal error.
  ResourceReport staged;
  staged.blockThreads = binary.blockThreads;
  staged.ldsBytes = binary.dynamicSharedBytes;
  kernels.walk([&](mlir::LLVM::GlobalOp global) {
    if (global.getAddrSpace() == 3)
      if (auto array = mlir::dyn_cast<mlir::LLVM::LLVMArrayType>(global.getType()))
        staged.ldsBytes += int64_t(array.getNumElements()) *
                           std::max(1u, array.getElementType().getIntOrFloatBitWidth() / 8);
  });
  if (faultInjectedAt("resources"))
    staged.ldsBytes = int64_t(arch->ldsBytes) + 1; // as a kernel with one byte too many
  checkResourceLimits(staged, *arch);

  llvm::LLVMContext llvmContext;
  std::string backendErrors;
  llvmContext.setDiagnosticHandlerCallBack(
      [](const llvm::DiagnosticInfo *info, void *errors) {
        if (info->getSeverity() != llvm::DS_Error)
          return;
        llvm::raw_string_ostream stream(*static_cast<std::string *>(errors));
        llvm::DiagnosticPrinterRawOStream printer(stream);
        stream << "\n  ";
        info->print(printer);
      },
      &backendErrors);
  dropTileArgumentAttributes(kernels);
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(kernels, llvmContext, "tile_kernels");
  if (!llvmModule || injectedInto(module, "translation"))
    diagnostics.fail("translation to LLVM IR failed:");
  CompileStage codegen("code generation");
  std::unique_ptr<llvm::TargetMachine> machine = createGpuTargetMachine(target);
  llvmModule->setTargetTriple(machine->getTargetTriple());
  llvmModule->setDataLayout(machine->createDataLayout());
  if (arch->amd) {
    // Code object v5, what ROCm 6 loaders expect.
    llvmModule->addModuleFlag(llvm::Module::Error, "amdhsa_code_object_version", 500);
    linkDeviceLibraries(*llvmModule, *arch);
  }
  if (arch->amd && options.wavesPerEu > 0)
    for (llvm::Function &function : *llvmModule)
      if (!function.isDeclaration())
        function.addFnAttr("amdgpu-waves-per-eu", std::to_string(options.wavesPerEu));
  optimizeModule(*llvmModule, *machine);
  keep("llvm", [&] { return printed(*llvmModule); });
  if (faultInjectedAt("fatal"))
    llvm::report_fatal_error("fault injected by TILE_TEST_INJECT_FAULT=fatal");
  std::string assembly = emitMachineCode(*llvmModule, *machine, /*assembly=*/true);
  if (faultInjectedAt("backend"))
    backendErrors += "\n  fault injected by TILE_TEST_INJECT_FAULT=backend";
  if (!backendErrors.empty())
    throw CompileError("the " + arch->name + " backend rejected the kernel:" + backendErrors);
  if (arch->amd) {
    binary.resources =
        amdResourcesFromAssembly(assembly, binary.kernelName, *arch, binary.blockThreads);
    checkResourceLimits(binary.resources, *arch);
    binary.object = linkHsaco(emitMachineCode(*llvmModule, *machine, /*assembly=*/false));
  } else {
    binary.resources = nvidiaResourcesFromPtx(assembly, *arch, binary.blockThreads);
    binary.resources.ldsBytes += binary.dynamicSharedBytes;
    checkResourceLimits(binary.resources, *arch);
    // One ptxas run serves both the report and the cubin.
    std::optional<PtxasOutput> assembled;
    if (options.reportFromPtxas || options.assembleWithPtxas)
      assembled = assembleWithPtxas(assembly, *arch);
    if (assembled && options.reportFromPtxas)
      addPtxasResources(binary.resources, *assembled, *arch);
    if (assembled && options.assembleWithPtxas)
      binary.cubin = std::move(assembled->cubin);
    binary.object = assembly; // PTX, JIT-compiled by the driver at load where no cubin is
  }
  keep("asm", [&] { return std::move(assembly); });
}

} // namespace

Binary tile::compile(mlir::ModuleOp module, const Target &target, const CompileOptions &options) {
  mlir::MLIRContext *context = module.getContext();
  DiagnosticCollector diagnostics(context);
  Binary binary;
  binary.target = target;
  std::tie(binary.kernelName, binary.entrySymbol) = kernelSymbols(module, target);
  // A stage's text is only made where it is kept: printing every stage's IR took a
  // good share of a first call's compile.
  StageKeeper keep = [&](const char *stage, llvm::function_ref<std::string()> text) {
    if (options.keepStages)
      binary.stages.emplace_back(stage, text());
  };

  if (mlir::failed(mlir::verify(module)) || injectedInto(module, "verify"))
    diagnostics.fail("invalid tile IR:");
  keep("tile", [&] { return printed(module); });
  if (target.kind != TargetKind::Cpu) {
    // Where ptxas is on PATH but cannot assemble the kernel (a toolkit that predates the
    // arch), the lowering has already counted on it: the kernel is built again for the
    // driver's compiler, from the IR as it came.
    bool ptxasMayFail = target.kind == TargetKind::Cuda && options.assembleWithPtxas && ptxasOnPath();
    mlir::OwningOpRef<mlir::ModuleOp> asGiven;
    if (ptxasMayFail)
      asGiven = module.clone();
    compileForGpu(module, target, options, diagnostics, binary, keep);
    if (ptxasMayFail && binary.cubin.empty()) {
      CompileOptions forTheDriver = options;
      forTheDriver.assembleWithPtxas = false;
      return compile(*asGiven, target, forTheDriver);
    }
    return binary;
  }
  // Collected first and checked after the walk: no exception may unwind through MLIR.
  // Dots whose b holds its k in groups take the tile registers where the target has them.
  std::vector<std::pair<mlir::RankedTensorType, bool>> accumulators;
  module.walk([&](mlir::tile::DotOp dot) {
    mlir::Type element = dot.getA().getType().getElementType();
    bool onTiles = dot.kGroup() > 1 && hasCpuMatrixTiles(target, element.isBF16()       ? "bf16"
                                                                 : element.isInteger(8) ? "i8"
                                                                                        : "");
    accumulators.push_back({mlir::cast<mlir::RankedTensorType>(dot.getType()), onTiles});
  });
  for (auto [accumulator, onTiles] : accumulators)
    checkCpuAccumulator(accumulator.getDimSize(0), accumulator.getDimSize(1),
                        std::max(1u, accumulator.getElementTypeBitWidth() / 8), target, onTiles);
  if (faultInjectedAt("resources")) // as an accumulator of 1024 x 1024 f32
    checkCpuAccumulator(1024, 1024, 4, target);

  mlir::PassManager toCpu(context);
  buildTileToCpuPipeline(toCpu, target.hasFeature("avx512bf16"), target.hasFeature("avx512vnni"),
                         hasCpuMatrixTiles(target, "bf16"), hasCpuMatrixTiles(target, "i8"),
                         target.hasFeature("avx512bw"));
  if (!runStage(toCpu, module) || injectedInto(module, "lowering"))
    diagnostics.fail("lowering tile -> tile-cpu failed:");
  keep("tile-cpu", [&] { return printed(module); });

  mlir::PassManager toLLVM(context);
  buildCpuToLLVMPipeline(toLLVM, target.hasFeature("avx512bf16"));
  if (!runStage(toLLVM, module))
    diagnostics.fail("lowering tile-cpu -> llvm failed:");

  llvm::LLVMContext llvmContext;
  dropTileArgumentAttributes(module);
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule || injectedInto(module, "translation"))
    diagnostics.fail("translation to LLVM IR failed:");
  CompileStage codegen("code generation");
  std::unique_ptr<llvm::TargetMachine> machine = createCpuTargetMachine(target);
  llvmModule->setTargetTriple(machine->getTargetTriple());
  llvmModule->setDataLayout(machine->createDataLayout());
  inlineLocalCalls(*llvmModule);
  optimizeModule(*llvmModule, *machine,
                 options.allOptimizerPasses ? OptimizerPasses::All : OptimizerPasses::CpuKernel);
  moveSixteenBitFloatVectorsAsIntegers(*llvmModule);
  if (!target.hasFeature("avx512bw"))
    loopNarrowMaskedMoves(*llvmModule);
  keep("llvm", [&] { return printed(*llvmModule); });
  if (faultInjectedAt("fatal"))
    llvm::report_fatal_error("fault injected by TILE_TEST_INJECT_FAULT=fatal");
  keep("asm", [&] { return emitMachineCode(*llvmModule, *machine, /*assembly=*/true); });
  binary.object = emitMachineCode(*llvmModule, *machine, /*assembly=*/false);
  // x86's code generator reports its errors as fatal ones; the hook's backend error
  // is one it reports as a diagnostic, as the GPU backends do.
  if (faultInjectedAt("backend"))
    throw CompileError("the " + target.str() + " backend rejected the kernel:\n  fault injected by "
                       "TILE_TEST_INJECT_FAULT=backend");
  return binary;
}
