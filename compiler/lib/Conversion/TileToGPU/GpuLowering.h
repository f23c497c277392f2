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

/// i1: `ptr` is a multiple of `bytes` (a power of two) at run time.
Value isAligned(OpBuilder &b, Location loc, Value ptr, int64_t bytes);

/// Where a lane's accumulator elements sit in one tile of the arch's matrix
/// instruction (tileM x tileN): element j of lane l is at (row(l, j), col(l, j)).
/// MFMA 16x16 (wave64): (4 * (l / 16) + j, l % 16), 4 per lane; MFMA 32x32:
/// (8 * (j / 4) + 4 * (l / 32) + j % 4, l % 32), 16 per lane. WMMA gfx11 (wave32):
/// (2 * j + l / 16, l % 16), 8 per lane; gfx12: (8 * (l / 16) + j, l % 16). NVIDIA
/// mma.sync m16n8: (l / 4 + 8 * (j / 2), 2 * (l % 4) + j % 2), 4 per lane.
struct AccumulatorTile {
  int64_t tileM = 16, tileN = 16, perLane = 4;
  enum class Kind { Mfma16, Mfma32, WmmaGfx11, WmmaGfx12, MmaM16N8 } kind = Kind::Mfma16;
  std::pair<Value, Value> coordinates(OpBuilder &b, Location loc, Value lane, int64_t j) const;
};

/// `nonKDim` (the matrix_instr_nonkdim knob, 16 or 32) picks the MFMA shape.
AccumulatorTile accumulatorTileFor(const ::tile::GpuArch &arch, int64_t nonKDim);

/// How a 2-D block of R x C elements is spread: the arch's accumulator layout. The
/// block is cut into tiles; waves form a warpsM x warpsN grid, each wave owns
/// repM x repN tiles, a thread's share is its elements of those tiles in (rm, rn) order.
struct MatrixLayout {
  int64_t rows = 0, cols = 0;
  int64_t warpsM = 1, warpsN = 1, repM = 0, repN = 0;
  AccumulatorTile tile;
  bool fits = false; ///< whether the block divides into whole tiles per wave
  int64_t perThread() const { return fits ? repM * repN * tile.perLane : 1; }
};

/// What every pattern needs: the thread id, the arch and the layout rules of this kernel.
struct Distribution {
  ::tile::GpuArch arch;
  int64_t numWarps = 4;
  int64_t nonKDim = 16;
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
