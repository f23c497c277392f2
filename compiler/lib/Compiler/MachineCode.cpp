#include "MachineCode.h"

#include "tile/Compiler/Compile.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/OptBisect.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <mutex>
#include <optional>

using namespace tile;

std::unique_ptr<llvm::TargetMachine> tile::createCpuTargetMachine(const Target &target) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *llvmTarget = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    throw CompileError("no LLVM backend for the host triple " + triple.str() + ": " + error);
  // An unknown CPU name reaches LLVM's fatal error handler (it falls back to a generic
  // 32-bit subtarget, then aborts on 64-bit code), which ends the process: refuse it here.
  std::unique_ptr<llvm::MCSubtargetInfo> generic(llvmTarget->createMCSubtargetInfo(triple, "", ""));
  if (!generic || !generic->isCPUStringValid(target.arch))
    throw CompileError("unknown CPU '" + target.arch + "' in target " + target.str() + ": cpu:<name> takes " +
                       "one of LLVM's CPU names for " + triple.str() + ", for example cpu:" +
                       llvm::sys::getHostCPUName().str() + " (this machine) or cpu:x86-64-v3");
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, target.arch, target.features, options, llvm::Reloc::PIC_, llvm::CodeModel::Small,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    throw CompileError("LLVM cannot create a target machine for " + target.str());
  return machine;
}

void tile::inlineLocalCalls(llvm::Module &module) {
  llvm::SmallVector<llvm::CallBase *> calls;
  for (llvm::Function &function : module) {
    if (!function.hasLocalLinkage() || function.isDeclaration())
      continue;
    for (llvm::User *user : function.users())
      if (auto *call = llvm::dyn_cast<llvm::CallBase>(user);
          call && call->getCalledFunction() == &function)
        calls.push_back(call);
  }
  for (llvm::CallBase *call : calls) {
    llvm::InlineFunctionInfo info;
    llvm::InlineResult inlined = llvm::InlineFunction(*call, info);
    if (!inlined.isSuccess())
      throw CompileError(std::string("cannot inline a kernel's call: ") +
                         inlined.getFailureReason());
  }
  for (llvm::Function &function : llvm::make_early_inc_range(module))
    if (function.hasLocalLinkage() && !function.isDeclaration() && function.use_empty())
      function.eraseFromParent();
}

namespace {

/// O3's passes that change no instruction of a CPU kernel's machine code, by class, and
/// by run for InstCombine (its runs in pipeline order, from 0). Found by leaving each out
/// in turn over 236 kernels (every dtype, bias, leaky_relu, 32- and 64-bit indices,
/// vector_add; for this host's CPU, sapphirerapids, znver4, skylake-avx512, x86-64-v3)
/// and keeping it out where their assembly stayed the same; together they were a sixth of
/// the optimizer's time.
constexpr llvm::StringLiteral kPassesCpuKernelsSkip[] = {"AggressiveInstCombinePass",
                                                         "BDCEPass",
                                                         "CallSiteSplittingPass",
                                                         "CalledValuePropagationPass",
                                                         "ConstraintEliminationPass",
                                                         "ControlHeightReductionPass",
                                                         "DSEPass",
                                                         "DeadArgumentEliminationPass",
                                                         "Float2IntPass",
                                                         "GlobalDCEPass",
                                                         "GlobalOptPass",
                                                         "InstSimplifyPass",
                                                         "LibCallsShrinkWrapPass",
                                                         "LoopDeletionPass",
                                                         "LoopDistributePass",
                                                         "LoopIdiomRecognizePass",
                                                         "LoopInstSimplifyPass",
                                                         "LoopLoadEliminationPass",
                                                         "LoopSinkPass",
                                                         "MemCpyOptPass",
                                                         "MergedLoadStoreMotionPass",
                                                         "PostOrderFunctionAttrsPass",
                                                         "PromotePass",
                                                         "ReversePostOrderFunctionAttrsPass",
                                                         "SROAPass",
                                                         "SpeculativeExecutionPass",
                                                         "TailCallElimPass"};
constexpr unsigned kInstCombineRunsCpuKernelsSkip[] = {3, 4, 6};

} // namespace

void tile::optimizeModule(llvm::Module &module, llvm::TargetMachine &machine,
                          OptimizerPasses passes) {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PipelineTuningOptions tuning;
  // The lowerings emit vector code for every target (the CPU microkernel's rows, the GPU
  // kernels' chosen accesses): LLVM's loop and SLP vectorizers changed no instruction of
  // any of 52 CPU kernels (four x86 CPUs) and 100 GPU kernels (every arch), while on a
  // 128x256 sm_90a matmul SLP and the InstCombine work after it took two thirds of the
  // optimizer's time.
  tuning.LoopVectorization = false;
  tuning.SLPVectorization = false;
  // Passes are left out through the instrumentation, so that every pass that runs keeps
  // the parameters O3 gives it.
  llvm::PassInstrumentationCallbacks callbacks;
  llvm::DenseMap<const llvm::Function *, unsigned> instCombineRuns;
  if (passes == OptimizerPasses::CpuKernel) {
    // A kernel calls nothing that throws. The attribute inference left out had found so;
    // without the mark its code would carry unwind tables.
    for (llvm::Function &function : module)
      if (!function.isDeclaration())
        function.addFnAttr(llvm::Attribute::NoUnwind);
    callbacks.registerShouldRunOptionalPassCallback([&](llvm::StringRef name, llvm::Any ir) {
      if (name == "InstCombinePass") {
        const auto *function = llvm::any_cast<const llvm::Function *>(&ir);
        unsigned run = function ? instCombineRuns[*function]++ : 0;
        return !llvm::is_contained(kInstCombineRunsCpuKernelsSkip, run);
      }
      return !llvm::is_contained(kPassesCpuKernelsSkip, name);
    });
  }
  llvm::PassBuilder builder(&machine, tuning, std::nullopt, &callbacks);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(module, modules);
}

namespace {

/// Leaves out loop strength reduction, and passes every other pass.
struct WithoutLoopStrengthReduction : llvm::OptPassGate {
  bool isEnabled() const override { return true; }
  bool shouldRunPass(llvm::StringRef pass, llvm::StringRef) const override {
    return pass != "Loop Strength Reduction";
  }
};

/// Whether the module multiplies on AMX tile registers (tdpbf16ps, tdpbssd and kin).
bool multipliesOnMatrixTiles(const llvm::Module &module) {
  return llvm::any_of(module, [](const llvm::Function &function) {
    return function.isDeclaration() && function.getName().starts_with("llvm.x86.td") &&
           !function.use_empty();
  });
}

/// Sets a pass gate on a context for one scope.
class ScopedPassGate {
public:
  ScopedPassGate(llvm::LLVMContext &context, llvm::OptPassGate &gate) : context_(context) {
    context_.setOptPassGate(gate);
  }
  ~ScopedPassGate() { context_.setOptPassGate(llvm::getGlobalPassGate()); }

private:
  llvm::LLVMContext &context_;
};

} // namespace

std::string tile::emitMachineCode(llvm::Module &module, llvm::TargetMachine &machine,
                                  bool assembly) {
  // Code generation rewrites the IR it is given (CodeGenPrepare), so it runs on a copy.
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);
  // A kernel on AMX tiles spends its loops in the tile multiplies (16 cycles each for
  // tdpbf16ps), so strength reduction of their address arithmetic changes nothing
  // measurable (bf16 and int8 256^3-2048^3, interleaved A/B), while it and the
  // instruction selection of what it rewrites took a sixth of the code generation time.
  WithoutLoopStrengthReduction withoutLsr;
  std::optional<ScopedPassGate> gate;
  if (multipliesOnMatrixTiles(*copy))
    gate.emplace(copy->getContext(), withoutLsr);
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  auto fileType = assembly ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile;
  if (machine.addPassesToEmitFile(passes, stream, nullptr, fileType))
    throw CompileError("LLVM cannot emit " + std::string(assembly ? "assembly" : "objects") +
                       " for " + machine.getTargetTriple().str());
  passes.run(*copy);
  return std::string(buffer.begin(), buffer.end());
}
