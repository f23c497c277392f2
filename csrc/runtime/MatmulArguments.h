// The plain-data side of a matmul call, the same for every caller of the runtime (the
// torch binding, or a C++ program without LibTorch): the index width and the layout facts
// a kernel is specialized on, the program instances a config needs, the autotuning bucket
// a shape falls in, and the kernel's arguments packed in order.
#ifndef TILE_RUNTIME_MATMULARGUMENTS_H
#define TILE_RUNTIME_MATMULARGUMENTS_H

#include "runtime/CpuLauncher.h"
#include "runtime/PanelPacking.h"
#include "runtime/StridedOperand.h"
#include "runtime/TensorMap.h"
#include "tile/Compiler/Compile.h"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tile::runtime {

/// Bit 2i + d set where dimension d of the i-th operand (a, b, c) has stride 1, or size
/// 1 (its stride then never moves an offset): the kernel takes those strides as the
/// constant 1 and learns at compile time which dimension is contiguous.
int64_t unitStrideBits(std::initializer_list<const StridedOperand *> operands);

/// Bit i set where the i-th operand starts on a 16-byte boundary and each of its strides
/// other than 1 spans a multiple of 16 bytes: the kernel may then copy and store 16-byte
/// runs with no run-time alignment check (Triton's divisibility-16 specialization). Also
/// required: rows along the unit-stride dimension that do not overlap (not a broadcast's
/// stride 0), so that a tensor map describes the operand and bulk tensor copies may read it,
/// and an operand that is not empty.
int64_t divisibility16Bits(std::initializer_list<const StridedOperand *> operands);

/// Bit i set where the i-th operand starts on a `bytes` boundary and each of its strides
/// other than 1 spans a multiple of `bytes` (a power of two, at most 16): the kernel may
/// then copy it in asynchronous pieces of `bytes` with no run-time check. Empty operands
/// and overlapping rows count as for divisibility16Bits, which is this with 16.
int64_t alignedBits(std::initializer_list<const StridedOperand *> operands, int64_t bytes);

/// 32 where M, N, K and the largest offset of a, b, c, the bias and the activation (where
/// there are) are below 2^31, else 64.
int64_t matmulIndexBits(int64_t m, int64_t n, int64_t k, const StridedOperand &a,
                        const StridedOperand &b, const StridedOperand &c,
                        const StridedOperand *bias, const StridedOperand *activation = nullptr);

/// Program instances of a config: one per BLOCK_M x BLOCK_N block of c.
int64_t matmulPrograms(const std::map<std::string, int64_t> &config, int64_t m, int64_t n);

/// "matmul_leaky_relu[f16,f32] 1024x512x4096": shapes share an autotuning winner within a
/// power-of-two bucket of each of M, N and K, as Inductor buckets its autotuning.
std::string matmulTuningBucket(const std::string &op, const std::vector<std::string> &dtypes,
                               int64_t m, int64_t n, int64_t k);

/// The kernel's arguments in the order ops/matmul.cpp declares them: a, b, c, M, N, K,
/// the strides of a, b and c, negative_slope for matmul_leaky_relu and
/// matmul_leaky_relu_backward, then the bias and its stride, or the activation (the M x N
/// operand of matmul_leaky_relu_backward's epilogue) and its two strides, with indices of
/// the kernel's width. `args` points into this object, so it
/// stays where it was packed.
struct MatmulArguments {
  /// The kernel's arguments that point at a's and b's data pointers.
  static constexpr int kA = 0, kB = 1;
  const void *a = nullptr, *b = nullptr, *bias = nullptr, *activation = nullptr;
  void *c = nullptr;
  /// M, N, K, the six strides of a, b, c, the bias's stride, the activation's two
  int64_t wide[12] = {};
  int32_t narrow[12] = {};
  float slope = 0;
  void *workspace = nullptr, *flags = nullptr; ///< a stream-K kernel's
  void *args[kArgumentSlots] = {};
  int count = 0;  ///< arguments packed, before any tensor maps
  int packed = 0; ///< of which pack() packed (the rest: a stream-K kernel's workspace)
  StridedOperand operands[3]; ///< a, b and c, as packed (c's element width comes with its map)
  EncodedTensorMap maps[3];

  void pack(const StridedOperand &a, const StridedOperand &b, void *c, const int64_t cStrides[2],
            const StridedOperand *bias, std::optional<float> negativeSlope, int64_t indexBits,
            const StridedOperand *activation = nullptr);

  /// b replaced by its copy in panels (a kernel specialized with `packed_b`): its row
  /// stride becomes the panel width and its column stride the distance between panels.
  void useBPanels(const void *panels, const PanelLayout &layout);

  /// The arguments of the kernel about to be launched: what pack() packed, then a
  /// stream-K kernel's workspace and flags (null for other kernels), before any tensor
  /// maps, as the kernel declares them. Each launch of a call sets them again (autotuning
  /// launches several kernels with one call's arguments).
  void setStreamKWorkspace(void *workspaceData, void *flagData);

  /// `args` followed by the tensor maps a kernel takes (`parameters`, in its order), each
  /// found in `cache` or encoded there. Throws std::runtime_error where a map cannot
  /// describe its operand (the kernel was specialized on layout facts that promise it can).
  void **withTensorMaps(const std::vector<TensorMapParameter> &parameters, TensorMapCache &cache);
};

} // namespace tile::runtime

#endif
