#include "MachineCode.h"

#include "tile/Compiler/Compile.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <mutex>

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

namespace {

// O3's passes that CPU kernels need. The lowering hands LLVM one function of explicit
// vector code and loops, and much of O3 changes nothing in it: with each pass of O3 left
// out in turn, and kept only where the machine code of some kernel changed, the rest
// give byte-identical assembly for 73 kernels (float32, float16, bfloat16 and int8
// matmuls with and without bias and leaky_relu, 32- and 64-bit indices, vector_add; the
// AVX2, AVX-512, AVX512-BF16 / VNNI and AMX paths on x86-64-v3, skylake-avx512, znver4,
// sapphirerapids and an AMX Xeon) in 84% of O3's time. LLVM's own O3
// (tile::CompileOptions::wholeO3) stays the reference a GoogleTest compares against.
constexpr const char *kSimplifyCfg =
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;"
    "no-switch-to-arithmetic;no-switch-to-lookup;keep-loops;no-hoist-common-insts;"
    "no-hoist-loads-stores-with-cond-faulting;no-sink-common-insts;speculate-blocks;"
    "simplify-cond-branch;no-speculate-unpredictables>";
constexpr const char *kInstCombine = "instcombine<max-iterations=1;no-verify-fixpoint>";

std::string cpuKernelPipeline() {
  std::string early = kSimplifyCfg, instCombine = kInstCombine;
  early.replace(early.find("switch-range-to-icmp"), 20, "no-switch-range-to-icmp");
  std::string late = "simplifycfg<bonus-inst-threshold=1;forward-switch-cond;switch-range-to-icmp;"
                     "switch-to-arithmetic;switch-to-lookup;no-keep-loops;hoist-common-insts;"
                     "no-hoist-loads-stores-with-cond-faulting;sink-common-insts;speculate-blocks;"
                     "simplify-cond-branch;no-speculate-unpredictables>";
  std::string last =
      "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;"
      "switch-to-arithmetic;no-switch-to-lookup;keep-loops;no-hoist-common-insts;"
      "hoist-loads-stores-with-cond-faulting;no-sink-common-insts;speculate-blocks;"
      "simplify-cond-branch;speculate-unpredictables>";
  // O3's module simplification: the early cleanup, constant propagation, the inliner
  // (the entry point calls the kernel) and the function simplification around LICM,
  // induction variables and full unrolling.
  std::string simplification =
      "function<eager-inv>(" + early + ",early-cse<>),ipsccp,function<eager-inv>(" + instCombine +
      "),cgscc(devirt<4>(inline,function<eager-inv;no-rerun>(early-cse<memssa>,jump-threading,"
      "correlated-propagation," +
      kSimplifyCfg +
      ",reassociate,"
      "loop-mssa(loop-simplifycfg,licm<no-allowspeculation>,"
      "loop-rotate<header-duplication;no-prepare-for-lto>,licm<allowspeculation>,"
      "simple-loop-unswitch<nontrivial;trivial>)," +
      instCombine +
      ",loop(indvars,loop-unroll-full),vector-combine,gvn<>,sccp,jump-threading,"
      "correlated-propagation,adce," +
      instCombine + ")))";
  // O3's function optimization: the unroller and the cleanup after it.
  std::string optimization = "function<eager-inv>(" + late + ",loop-unroll<O3>,infer-alignment," +
                             instCombine + ",loop-mssa(licm<allowspeculation>),div-rem-pairs," +
                             last + ")";
  return simplification + "," + optimization;
}

} // namespace

void tile::optimizeModule(llvm::Module &module, llvm::TargetMachine &machine, bool cpuKernel,
                          bool wholeO3) {
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
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  if (!cpuKernel || wholeO3) {
    builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(module, modules);
    return;
  }
  llvm::ModulePassManager passes;
  if (llvm::Error error = builder.parsePassPipeline(passes, cpuKernelPipeline()))
    throw CompileError("LLVM rejects the CPU kernels' pass pipeline: " +
                       llvm::toString(std::move(error)));
  passes.run(module, modules);
}

std::string tile::emitMachineCode(llvm::Module &module, llvm::TargetMachine &machine,
                                  bool assembly) {
  // Code generation rewrites the IR it is given (CodeGenPrepare), so it runs on a copy.
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);
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
