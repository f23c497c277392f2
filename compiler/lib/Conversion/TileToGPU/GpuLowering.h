// Pieces shared by the patterns of convert-tile-to-gpu (internal to the conversion).
#ifndef TILE_LIB_CONVERSION_TILETOGPU_GPULOWERING_H
#define TILE_LIB_CONVERSION_TILETOGPU_GPULOWERING_H

#include "tile/Dialect/Tile/IR/TileDialect.h"
#include "tile/Target/GpuArch.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tile::gpu_lowering {

/// Global memory on AMDGPU (and NVPTX): loads and stores through it are global_* / ld.global.
constexpr unsigned kGlobalAddressSpace = 1;
/// LDS (AMD) / shared memory (NVIDIA).
constexpr unsigned kSharedAddressSpace = 3;

/// How a 1-D block of `size` elements is spread over `threads` threads: thread t owns
/// runs of `vec` elements at t * vec + r * threads * vec for r < reps (modulo size when
/// the block is smaller than one element per thread, which repeats elements).
struct ThreadLayout {
  int64_t size, threads, vec, reps;
  int64_t perThread() const { return vec * reps; }
  bool wraps() const { return threads * vec > size; }
};

ThreadLayout layoutFor(int64_t size, int64_t threads, int64_t accessElements);

/// How a 2-D block of R x C elements is spread: the matrix-unit accumulator layout.
/// The block is cut into 16 x 16 tiles; waves form a warpsM x warpsN grid, each wave
/// owns repM x repN tiles, and within a tile lane l owns the elements
/// (4 * (l / 16) + j, l % 16) for j < 4: the C/D layout of v_mfma_f32_16x16x* in wave64.
/// A thread's share is the tiles in (rm, rn) order, 4 elements each.
struct MatrixLayout {
  int64_t rows = 0, cols = 0;
  int64_t warpsM = 1, warpsN = 1, repM = 0, repN = 0;
  bool fits = false; ///< whether the block divides into whole tiles per wave
  int64_t perThread() const { return fits ? repM * repN * 4 : 1; }
};

/// What every pattern needs: the thread id, the arch and the layout rules of this kernel.
struct Distribution {
  ::tile::GpuArch arch;
  int64_t numWarps = 4;
  int64_t threads = 0;
  int64_t accessElements = 1;
  Value threadId; // i32, at the top of the kernel
  ThreadLayout of(Type tensorType) const {
    return layoutFor(cast<RankedTensorType>(tensorType).getDimSize(0), threads, accessElements);
  }
  MatrixLayout matrixOf(Type tensorType) const;
};

class GpuTypeConverter : public TypeConverter {
public:
  GpuTypeConverter(MLIRContext *ctx, const Distribution &dist);
};

/// (row, col) as i32 of element `index` of this thread's share of a 2-D block.
std::pair<Value, Value> matrixCoordinates(OpBuilder &b, Location loc, const Distribution &dist,
                                          const MatrixLayout &layout, int64_t index);

/// 2-D integer, pointer and mask blocks that are affine in their indices (offsets,
/// pointers, bounds masks) are built per element from the analysis, whatever ops made
/// them; tile.dot becomes matrix-unit instructions on blocks staged through LDS.
void populateMatrixPatterns(const TypeConverter &converter, RewritePatternSet &patterns,
                            const Distribution &dist);

/// True when `load` only feeds dots that stage its memory themselves.
bool isStagedByDots(LoadOp load);

} // namespace mlir::tile::gpu_lowering

#endif
