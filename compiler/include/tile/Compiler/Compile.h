#ifndef TILE_COMPILER_COMPILE_H
#define TILE_COMPILER_COMPILE_H

#include "tile/Compiler/ResourceReport.h"
#include "tile/Compiler/Target.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mlir {
class MLIRContext;
class ModuleOp;
} // namespace mlir

namespace tile {

/// A compile failure, with the diagnostics of the stage that failed.
class CompileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct CompileOptions {
  /// Keep the text of every stage (tile, tile-cpu, llvm, asm) in Binary::stages.
  bool keepStages = false;
  /// GPU targets: waves (warps) per workgroup, the `num_warps` knob.
  int64_t numWarps = 4;
  /// MFMA targets: the matrix_instr_nonkdim knob, 16 or 32.
  int64_t matrixInstrNonKDim = 16;
  /// MFMA targets: kpack, the MFMA instructions that share one fragment read.
  int64_t kpack = 1;
  /// GPU targets: software-pipelining depth of a dot's K loop (1: none).
  int64_t numStages = 1;
  /// NVIDIA f32 dots: TF32 mma.sync instead of exact FMAs (torch's float32 matmul
  /// precision 'high' or 'medium').
  bool allowTf32 = false;
  /// sm_90a bulk-copy K loops: 1 adds a producer warpgroup that only issues the copies,
  /// while the num_warps warps only multiply (Triton's warp_specialize); 0: every warp
  /// does both.
  int64_t warpSpecialize = 0;
  /// AMD targets: the occupancy LLVM must leave room for (`amdgpu-waves-per-eu`); 0: none.
  int64_t wavesPerEu = 0;
  /// NVIDIA: assemble the PTX with ptxas, where it is on PATH, for the resource report's
  /// registers, spills and blocks per SM. Off on the first-call path (the driver
  /// assembles the PTX at load; ptxas would add its time to every first call).
  bool reportFromPtxas = false;
  /// NVIDIA: assemble the PTX with ptxas, where it is on PATH, into Binary::cubin, which
  /// the runtime loads in place of the driver's own compile of the PTX. The lowering may
  /// then use what ptxas allocates registers for and the CUDA 13.0 driver's PTX compiler
  /// spills: the persistent kernel's epilogue staging deferred into the next tile.
  bool assembleWithPtxas = false;
  /// CPU targets: run every pass of O3, also those a kernel's optimizer leaves out for
  /// changing nothing in its machine code (for tests that check they still change nothing).
  bool allOptimizerPasses = false;
};

/// The product of compile(): one kernel, ready for a launcher.
/// A tensor map that a CUDA kernel takes as a parameter (after its others, in the order
/// of Binary::tensorMaps), for the bulk tensor copies of one operand of its dot. The host
/// encodes it from the operand at each launch.
struct TensorMapParameter {
  int64_t operand = 0;       ///< 0: the dot's a, 1: its b (the kernel's 1st or 2nd argument)
  int64_t contiguousDim = 1; ///< the operand's dimension of stride 1
  int64_t boxInner = 0;      ///< elements one copy moves along that dimension
  int64_t boxOuter = 0;      ///< and along the other one
  int64_t swizzleBytes = 128;
  int64_t dataType = 6; ///< the map's element type as CUtensorMapDataType (6: f16, 9: bf16)
};

struct Binary {
  Target target;
  std::string kernelName;
  /// The symbol a launcher calls: the packed CPU entry point, or the GPU kernel.
  std::string entrySymbol;
  /// bin stage: an ELF relocatable object for the CPU, a HSACO (shared ELF for
  /// amdgcn-amd-amdhsa) for HIP, PTX text (for the driver's JIT) for CUDA.
  std::string object;
  /// CUDA, compiled with CompileOptions::assembleWithPtxas where ptxas was found: the
  /// object's cubin for the target's arch (empty otherwise).
  std::string cubin;
  /// GPU targets: threads per workgroup the kernel was compiled for.
  int64_t blockThreads = 0;
  /// The kernel walks its tiles (any grid is correct): the launcher starts no more
  /// programs than the device has multiprocessors.
  bool persistent = false;
  /// NVIDIA: blocks per cluster the kernel was compiled for (its launch grid is a
  /// multiple of it; the cluster shape is part of the kernel, so a plain launch forms it).
  int64_t clusterCtas = 1;
  /// Stream-K (a persistent kernel that splits K steps over its programs): the f32
  /// elements of the workspace each program needs (one BLOCK_M x BLOCK_N tile; 0: not
  /// stream-K). The launcher passes a workspace of that many elements per program and as
  /// many zeroed i32 flags after the other parameters, and starts one program per
  /// multiprocessor, all resident.
  int64_t streamKTileElements = 0;
  /// NVIDIA: bytes of dynamic shared memory each launch provides (the kernel's one
  /// dynamically sized shared array).
  int64_t dynamicSharedBytes = 0;
  /// NVIDIA: the tensor maps the kernel takes after its other parameters.
  std::vector<TensorMapParameter> tensorMaps;
  /// GPU targets: registers, LDS, scratch and occupancy.
  ResourceReport resources;
  /// (stage name, text) in pipeline order, when CompileOptions::keepStages.
  std::vector<std::pair<std::string, std::string>> stages;
};

/// The names of the stages, in pipeline order, for a target.
std::vector<std::string> stageNames(const Target &target);

/// A context with every dialect the tile compiler uses registered. Threading is off:
/// compiles run concurrently on their own contexts, so a per-context thread pool would
/// only cost. Every registered dialect is loaded, unless `cpuOnly`: then only those the
/// kernel builders and the CPU lowering create ops of, the rest loaded when a pass asks
/// (the GPU dialects, NVVM's and ROCDL's hundreds of ops, took half of a cold context's
/// 6 ms, on the first call of every CPU kernel).
std::unique_ptr<mlir::MLIRContext> createContext(bool cpuOnly = false);

/// Compiles the module's single `tile.kernel` function for `target`.
/// Throws CompileError with the diagnostics on failure.
Binary compile(mlir::ModuleOp module, const Target &target, const CompileOptions &options = {});

/// The name of the module's kernel and its entry symbol in a binary for `target`, as
/// compile() sets them: what a cached binary of this module must carry.
std::pair<std::string, std::string> kernelSymbols(mlir::ModuleOp module, const Target &target);

/// "torch-tile <version>", the compiler part of the cache key.
const char *compilerVersion();

} // namespace tile

#endif
