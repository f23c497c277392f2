#ifndef TILE_LIB_COMPILER_MACHINECODE_H
#define TILE_LIB_COMPILER_MACHINECODE_H

#include "tile/Compiler/Target.h"

#include <memory>
#include <string>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace tile {

/// A TargetMachine for a CPU target: the process triple with the target's CPU and
/// features, position-independent so the object links into the JIT anywhere.
std::unique_ptr<llvm::TargetMachine> createCpuTargetMachine(const Target &target);

/// A TargetMachine for a GPU target: amdgcn-amd-amdhsa or nvptx64-nvidia-cuda with the
/// arch as CPU and the target's features (sramecc/xnack, the PTX version).
std::unique_ptr<llvm::TargetMachine> createGpuTargetMachine(const Target &target);

struct GpuArch;

/// Links the ROCm device libraries (ocml, ockl) into an AMDGPU module when, and only
/// when, it calls them, with the oclc control constants of `arch`.
void linkDeviceLibraries(llvm::Module &module, const GpuArch &arch);

/// Links an AMDGPU relocatable object into a HSACO (a shared ELF) with lld, in process.
std::string linkHsaco(const std::string &object);

/// Inlines every call of a function the module defines with local linkage (a CPU
/// kernel's entry point calls the kernel once) and drops the functions left unused.
/// O3's inliner walks the call graph bottom-up: it simplifies a callee, inlines it and
/// simplifies the caller with the callee's body again, twice the work for one function.
void inlineLocalCalls(llvm::Module &module);

/// Loads, stores, phis, selects and shuffles of bfloat16 and float16 vectors rewritten to
/// move i16 vectors, with bitcasts at the arithmetic: x86 code generation scalarizes
/// these moves where the CPU has no instructions for the float type.
void moveSixteenBitFloatVectorsAsIntegers(llvm::Module &module);

/// Masked loads and stores of 32 or more 8- or 16-bit lanes as a loop over the lanes, for
/// CPUs without AVX512-BW, where x86 code generation gives each lane a branch of its own.
void loopNarrowMaskedMoves(llvm::Module &module);

/// Which of O3's passes run.
enum class OptimizerPasses {
  /// All of them.
  All,
  /// For a CPU kernel inlined into its entry point: those that change its machine code.
  CpuKernel,
};

/// The O3 pipeline, without the loop and SLP vectorizers, for the target machine.
void optimizeModule(llvm::Module &module, llvm::TargetMachine &machine,
                    OptimizerPasses passes = OptimizerPasses::All);

/// Machine code of the module: an ELF object, or assembly text when `assembly`.
std::string emitMachineCode(llvm::Module &module, llvm::TargetMachine &machine, bool assembly);

} // namespace tile

#endif
