#include "runtime/CompileAndLoad.h"

#include "ops/KernelBuilders.h"
#include "runtime/CpuJit.h"
#include "runtime/DiskCache.h"
#include "runtime/KernelKey.h"
#include "runtime/StageDump.h"
#include "tile/Conversion/TileToCPU/TileToCPU.h"

#include "mlir/IR/MLIRContext.h"

#include <chrono>

using namespace tile;

std::shared_ptr<const runtime::LoadedKernel>
runtime::compileAndLoad(const ops::KernelSpec &spec, const Target &target) {
  auto start = std::chrono::steady_clock::now();
  auto kernel = std::make_shared<LoadedKernel>();
  kernel->key = kernelKey(spec, target);
  kernel->spec = spec.str();
  DiskCache &disk = DiskCache::global();
  std::string dumpDir = stageDumpDir();
  // A warm cache is read without an MLIR context: the key stands for the tile IR, and
  // building it would be half of a warm first call.
  std::optional<Binary> cached = disk.load(kernel->key, target);
  // A whole entry can still be the wrong binary or one that does not load: it is
  // dropped and compiled again, never run. The kernel builders name a kernel after its op.
  std::string symbol = target.kind == TargetKind::Cpu ? mlir::tile::cpuEntryName(spec.op) : spec.op;
  if (cached && (cached->kernelName != spec.op || cached->entrySymbol != symbol)) {
    disk.discard(kernel->key, target,
                 "it holds " + cached->kernelName + " (" + cached->entrySymbol + "), not " + spec.op);
    cached.reset();
  }
  if (cached && target.kind == TargetKind::Cpu) {
    try {
      kernel->setCpuCode(loadCpuObject(*cached, kernel->key));
    } catch (const std::exception &error) {
      disk.discard(kernel->key, target, error.what());
      cached.reset();
    }
  }
  if (cached) {
    disk.countLoad();
    kernel->binary = std::move(*cached);
    kernel->fromDisk = true;
    // The disk keeps no stages: a dump asked for compiles them again, off the hot path.
    if (!dumpDir.empty())
      dumpStages(dumpDir, spec, kernel->key, compileWithStages(spec, target));
  } else {
    std::unique_ptr<mlir::MLIRContext> context = createContext(target.kind == TargetKind::Cpu);
    mlir::OwningOpRef<mlir::ModuleOp> module = ops::buildKernel(*context, spec);
    CompileOptions options = ops::compileOptionsFor(spec);
    options.keepStages = !dumpDir.empty();
    // Where ptxas is at hand, its cubin replaces the driver's compile of the PTX at load
    // (the same work, so the first call costs no more) and lets the kernel use registers
    // the driver's compiler would spill.
    options.assembleWithPtxas = target.kind == TargetKind::Cuda;
    try {
      kernel->binary = compile(*module, target, options);
    } catch (const CompileError &error) {
      // What failed, and in which kernel: the op's caller sees no spec otherwise.
      throw CompileError("cannot compile " + spec.str() + " for " + target.str() + ": " + error.what());
    }
    disk.store(kernel->key, kernel->binary);
    if (!dumpDir.empty())
      dumpStages(dumpDir, spec, kernel->key, kernel->binary);
    kernel->binary.stages.clear();
  }
  // GPU binaries are loaded by the GpuLauncher, per device, at their first launch.
  if (target.kind == TargetKind::Cpu && !kernel->cpuEntry)
    kernel->setCpuCode(loadCpuObject(kernel->binary, kernel->key));
  kernel->compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return kernel;
}

bool runtime::storedOnDisk(const ops::KernelSpec &spec, const Target &target) {
  return DiskCache::global().holds(kernelKey(spec, target), target);
}

Binary runtime::compileWithStages(const ops::KernelSpec &spec, const Target &target) {
  std::unique_ptr<mlir::MLIRContext> context = createContext();
  mlir::OwningOpRef<mlir::ModuleOp> module = ops::buildKernel(*context, spec);
  CompileOptions options = ops::compileOptionsFor(spec);
  options.keepStages = true;
  options.reportFromPtxas = true;
  // As compileAndLoad does: with ptxas at hand the kernel is the one a call would run
  // (ptxas's registers let the MMA warps defer their epilogue), not another variant.
  options.assembleWithPtxas = target.kind == TargetKind::Cuda;
  return compile(*module, target, options);
}
