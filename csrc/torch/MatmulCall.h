// What every device's matmul binding does before its launch: checks with named
// errors, the output, the kernel spec for the target and the packed kernel arguments.
#ifndef TILE_TORCH_MATMULCALL_H
#define TILE_TORCH_MATMULCALL_H

#include "ops/KernelSpec.h"
#include "runtime/CpuLauncher.h"
#include "runtime/LaunchPlans.h"
#include "runtime/MatmulArguments.h"
#include "runtime/PanelPacking.h"
#include "tile/Compiler/Target.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>

namespace tile::binding {

/// One prepared call: `args` points into this object, so it stays where it was made.
struct MatmulCall {
  at::Tensor a, b, c;
  int64_t rows = 0; ///< the call's rows of a and c (the kernel may run more)
  /// Where `a` is a copy that prepareMatmul set up but did not write: what writes its rows
  /// [first, last) into `copy` (a's memory, or a thread's own copy of `aCopyBytes`), the
  /// rows past the call's as zeros. The launch's threads call it (see matmulCpu).
  std::function<void(char *copy, int64_t first, int64_t last)> writeRowsOfA;
  int64_t aCopyBytes = 0;
  /// The copy is small enough for each of the launch's threads to write its own and read
  /// it from its own cache (launchCpuInColumnBands).
  bool aCopyPerThread = false;
  /// The launch should give each thread the band of a's rows it wrote (a transposed a of
  /// 32 KB or more; see launchCpuInRowBands).
  bool aInRowBands = false;
  at::Tensor bias; ///< undefined without one
  /// matmul_leaky_relu_backward's activation (M x N); undefined for the other ops
  at::Tensor activation;
  const Target *target = nullptr;
  const char *op = nullptr;
  /// What chooses the kernel and the grid, as plain numbers (see specify()).
  runtime::CallSignature signature{};
  ops::KernelSpec spec; ///< made by specify()
  int64_t programs = 0; ///< program instances, one per BLOCK_M x BLOCK_N block of c
  runtime::MatmulArguments arguments; ///< the kernel's, packed
  void **args() { return arguments.args; }

  /// c has no elements: nothing to launch.
  bool empty() const { return c.numel() == 0; }
  /// The op's result: c, but for rows the kernel ran past the call's (a copy of a padded
  /// to whole blocks, see prepareMatmul).
  at::Tensor result() const { return c.size(0) == rows ? c : c.narrow(0, 0, rows); }

  /// Builds `spec` (the target family's default config for the shape, specialized on the
  /// layout the signature records) and `programs`: what a call whose signature has no
  /// launch plan yet needs.
  void specify();

  /// The spec with `knobs` laid over this call's config (index_bits stays; num_stages,
  /// when left out, lowered to what fits the tile sizes), and the program instances it
  /// needs; throws std::invalid_argument for an unknown knob.
  std::pair<ops::KernelSpec, int64_t> withConfig(const std::map<std::string, int64_t> &knobs) const;
};

/// Checks a matmul call's operands, output dtype and bias, raising errors that name the
/// problem; returns the output dtype.
at::ScalarType checkMatmulCall(const char *op, const at::Tensor &a, const at::Tensor &b,
                               bool epilogue, std::optional<at::ScalarType> outDtype,
                               const std::optional<at::Tensor> &bias);

/// Checks matmul_leaky_relu_backward's activation: the result's shape (M x N), on the
/// operands' device, in the input or the output dtype.
void checkActivation(const char *op, const at::Tensor &activation, const at::Tensor &a,
                     const at::Tensor &b, at::ScalarType out);

/// Checks the operands (checkMatmulCall), allocates c, and fills
/// `call` with the arguments and the signature; no spec yet (specify()). `target` must
/// outlive the call. `contiguousRowsOfB` copies a b whose rows are not contiguous (the
/// CPU microkernel loads b by rows), or whose rows are a multiple of 4 KB apart (they
/// would share cache sets) in a call large enough to repay the copy. A bias (1-D, length
/// N, in the input or the output dtype) is added to the accumulator before the epilogue.
/// `termsOfHalves`: a and b are the bfloat16 terms of a float16 call whose output dtype
/// (float16 or float32) and bias the caller checked on its own operands. `cScratch`: c in
/// the calling thread's scratch for that use (see runtime::threadScratch), for a result the
/// caller consumes before its next call for the same use. `activation`: the M x N operand
/// of matmul_leaky_relu_backward's epilogue (checkActivation), whose sign gates
/// negativeSlope.
void prepareMatmul(MatmulCall &call, const char *op, const at::Tensor &a, const at::Tensor &b,
                   std::optional<double> negativeSlope, std::optional<at::ScalarType> outDtype,
                   const std::optional<at::Tensor> &bias, const Target &target,
                   bool contiguousRowsOfB, bool termsOfHalves = false,
                   std::optional<runtime::ScratchUse> cScratch = std::nullopt,
                   const std::optional<at::Tensor> &activation = std::nullopt);

/// Whether the CPU kernel of a call reads b from a copy in panels (see PanelPacking.h):
/// where the call is large enough to repay the copy, whatever b's layout. `groupsOfK`: the
/// host's dot-product instruction takes b's k in groups for this dtype (dotGroupOfK).
/// `fewRowsInPlace`: the call's blocks take its few rows whole and read b in place
/// (ops::readsFewRowsInPlace).
bool packsBIntoPanels(int64_t m, int64_t n, int64_t k, int64_t elementBytes, bool groupsOfK,
                      bool fewRowsInPlace);

/// The k per group that the host's vector dot-product instruction takes from b for this
/// dtype: 2 for bfloat16 with AVX512-BF16 (vdpbf16ps), 4 for int8 with AVX512-VNNI
/// (vpdpbusd), 1 otherwise.
int64_t dotGroupOfK(const Target &target, const std::string &inputDtype);

/// The most rows of a the CPU kernel takes against a transposed b as dots along k for
/// this input dtype on `target` (float32, bf16 and int8 with their dot-product
/// instructions, float16 any number with F16C), 0 where it takes none.
int64_t rowDotRows(const Target &target, const std::string &inputDtype);

/// Whether a CPU call takes dots along k (see RowDots.cpp in the compiler): up to
/// rowDotRows rows of a (any number against 16 columns or fewer in bf16 and int8), its k
/// contiguous, against a transposed b (k contiguous: a Linear's weight), read once in
/// place. The caller checks that the matrix tiles do not take it.
bool takesDotsAlongK(const Target &target, const at::Tensor &a, const at::Tensor &b);

/// The shortest k at which m rows of a `dtype` take dots along k.
int64_t fewestKForDots(at::ScalarType dtype, int64_t m);

/// A contiguous CPU tensor of `sizes` and `dtype` in the calling thread's scratch buffer
/// for `use` (see runtime::threadScratch): valid until the thread's next call for it.
at::Tensor scratchTensor(runtime::ScratchUse use, at::IntArrayRef sizes, at::ScalarType dtype);

/// The rows a call on the matrix tiles runs: M up to a whole number of 64-row blocks (the
/// largest BLOCK_M there), so that no block row stages its rows of a. The copy of a that
/// prepareMatmul makes, and float16's terms, hold zeros past M.
inline int64_t rowsOfWholeTileBlocks(int64_t m) {
  constexpr int64_t kBlockRows = 64;
  return (m + kBlockRows - 1) / kBlockRows * kBlockRows;
}

/// Whether a CPU call multiplies on AMX tile registers (see MatrixTiles.cpp in the
/// compiler): the host has them for the dtype (int8 or bf16), a's k is unit-stride, M fills
/// a block and an int8 K a tile's step (64 bytes).
bool usesMatrixTiles(const Target &target, const std::string &inputDtype, bool unitKOfA, int64_t m,
                     int64_t k);

/// Whether a CPU call of a few rows of a (up to a few hundred) against a transposed b
/// (x @ W^T for a batch of tokens through a Linear's weight) runs as c^T = b^T a^T: b^T
/// (the weight's rows, k contiguous) is then the kernel's a, read in place, and a's rows
/// the b that is copied into panels, where b itself would be transposed into panels
/// whole. On the host's matrix tiles from 8 rows (int8 9); on the vector kernel past the
/// rows that take dots along k (rowDotRows), where the host has them. The caller writes c
/// from c^T (and adds a bias and leaky_relu there).
bool multipliesTransposedProduct(const Target &target, const at::Tensor &a, const at::Tensor &b);

/// The `packed_b` knob of a CPU call whose b is read from panels: the k per group of the
/// panels (PanelLayout::group) where the host's dot-product instruction takes b's k in
/// groups for this dtype (vdpbf16ps: bf16 pairs; vpdpbusd: int8 quads), the blocks suit it
/// and a's k is unit-stride (the kernel reads a's group as one word); otherwise 1.
int64_t panelGroupFor(const Target &target, const std::string &inputDtype, bool unitKOfA,
                      const std::map<std::string, int64_t> &config);

/// The panels of the call's b, `width` columns wide with `group` rows side by side.
runtime::PanelLayout bPanelLayout(const MatmulCall &call, int64_t width, int64_t group);

/// b copied into `panels` (layout.bytes() of them, usually the calling thread's
/// panelScratch()) in at least `tasks` tasks (the launch's: see packPanels), and the
/// call's arguments pointed at them.
void packBIntoPanels(MatmulCall &call, const runtime::PanelLayout &layout, void *panels,
                     const runtime::ParallelFor &parallelFor, int64_t tasks);

/// The panels [first, last) of b's copy, on the calling thread (a task of a launch that
/// splits the copy itself); the caller points the call's arguments at them (useBPanels).
void packBPanelRange(const MatmulCall &call, const runtime::PanelLayout &layout, void *panels,
                     int64_t first, int64_t last);

/// The same panels of b written by `write` (which the caller makes from b's source, b
/// itself not yet written), and the call's arguments pointed at them.
void writeBPanels(MatmulCall &call, const runtime::PanelLayout &layout, void *panels,
                  const std::function<void(const runtime::PanelLayout &, void *)> &write);

} // namespace tile::binding

#endif
