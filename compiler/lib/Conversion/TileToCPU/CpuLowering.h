// Pieces shared by the patterns of convert-tile-to-cpu (internal to the conversion).
#ifndef TILE_LIB_CONVERSION_TILETOCPU_CPULOWERING_H
#define TILE_LIB_CONVERSION_TILETOCPU_CPULOWERING_H

#include "tile/Analysis/AffineLanes.h"
#include "tile/Conversion/BlockAccess.h"
#include "tile/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tile::cpu {

/// An i64 constant: the lowering's sizes, strides and offsets.
inline Value i64Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value);
}

/// Block tensors become host vectors of the same shape; pointers become !llvm.ptr.
class CpuTypeConverter : public TypeConverter {
public:
  explicit CpuTypeConverter(MLIRContext *ctx);
};

/// `v` as a 1-D vector (LLVM's gathers, scatters and GEPs take no N-D vectors), and back.
Value flatten(OpBuilder &builder, Location loc, Value v);

/// The lanes of the 1-D `ptrs` whose `mask` lane is on, the others from `other`: LLVM's
/// gather, or lane by lane in a loop for elements it would expand into a branch per lane
/// (narrower than 32 bits on x86).
Value gatherLanes(OpBuilder &b, Location loc, Value ptrs, Value mask, Value other, unsigned align);
Value reshapeTo(OpBuilder &builder, Location loc, Value v, VectorType type);

/// i1 that is true when every lane of `mask` is on; `originalMask` is the tile-IR value,
/// whose per-dimension bounds (when it has them) cost a few scalar compares instead of a
/// reduction over the whole mask. Null (known true) when there is no mask.
Value allLanesOn(ConversionPatternRewriter &rewriter, Location loc, Value originalMask,
                 Value mask, ArrayRef<int64_t> shape);

/// True when `load` only feeds dots that read its memory directly (see DotLowering.cpp),
/// so the load itself needs no code.
bool isFusedIntoDots(LoadOp load);

/// `maskedStores`: masked stores cost a plain one (AVX512-BW), so a masked block's store
/// takes no second, unmasked path for when every lane is on.
void populateMemoryAccessPatterns(const TypeConverter &converter, RewritePatternSet &patterns,
                                  bool maskedStores = false);
/// Each masked store of a row of a block runs only where its mask keeps a lane: a row past
/// the matrix's last (the rows of an edge block past M) may lie past c's allocation, and a
/// masked store whose address is in an unmapped page takes a microcode assist however few
/// lanes it keeps (znver5: float32 34x1024x5 ran in 30-43 us against 8 in processes where
/// the page after c was not mapped). Runs after the epilogues' rows are rolled, so that
/// each row's chain still ends in its store there.
void storeOnlyRowsWithLanesOn(Operation *kernel);
/// The pointer `ptr` is an offset of: its chain of getelementptr stripped.
Value pointerRoot(Value ptr);
/// A buffer of `bytes` on the stack, 64-byte aligned, made once at the entry of the kernel
/// that `b`'s insertion point is in (an alloca in a loop would take more stack at every
/// iteration).
Value kernelStackBuffer(OpBuilder &b, Location loc, int64_t bytes);
/// Whether `op` or an op nested in it may write (or free) memory.
bool writesMemory(Operation *op);

/// Each rank-2 load whose rows all read the same lanes (a row spread over the block, as a
/// matmul's bias) loads one row and spreads it: one vector load instead of one per row,
/// and the same value in every row of the epilogue (see rollRowChains).
void loadRepeatedRowsOnce(Operation *kernel);

/// The dot-product instructions the host has.
struct CpuDotFeatures {
  bool bf16 = false;    ///< AVX512-BF16: vdpbf16ps
  bool int8 = false;    ///< AVX512-VNNI: vpdpbusd
  bool amxBf16 = false; ///< AMX-BF16 (with AMX-TILE): tdpbf16ps on tile registers
  bool amxInt8 = false; ///< AMX-INT8: tdpbssd
};

/// One operand of the tile-register microkernel: element (0, 0), its rows' stride in
/// elements (contiguous along them), its element type.
struct TileOperand {
  Value base, rowStride;
  Type element;
};

/// Whether a BLOCK_M x BLOCK_N accumulator fits the tile-register kernel: whole 16x16
/// tiles, in sub-blocks of up to 2 x 2 tiles (with a tile of a and of b per band and
/// chunk beside them), and no more than its buffer holds (kMaxTileAccumulatorElements).
bool fitsMatrixTiles(int64_t blockM, int64_t blockN);

/// Where a K loop carries an accumulator only into and out of its tile dots' buffer, the
/// buffer carries it instead: its first value stored before the loop and its last loaded
/// after it. The rows' round trip through vector registers at every dot goes, and with it
/// the spills of a 32x32 accumulator (64 vector registers) across the loop.
void keepAccumulatorsInTileBuffers(Operation *kernel);

/// In a kernel whose accumulators keepAccumulatorsInTileBuffers left in buffers, each row
/// of a block's epilogue computed where it is stored: extracts of a row from elementwise
/// ops on whole blocks become the ops on the row, and every value moves to just before
/// its first user in its block, so a row's chain (its load from the accumulator buffer,
/// conversion, mask) meets its store. Built whole, a 64 x 64 block's epilogue loaded every
/// row first and spilled most of them (117 vector stores to the stack for bf16).
void rowWiseEpilogues(Operation *kernel);

/// The rows of an epilogue in `block` (each row's chain of ops from its load from an
/// accumulator buffer, which `isRowLoad` tells, to its stores) as one scf.for over the
/// rows, where every row's chain is row 0's but for constants, extract positions and
/// getelementptr offsets that step by a fixed amount from row to row. Returns whether it
/// rolled them; otherwise `block` is unchanged.
bool rollRowChains(Block &block, function_ref<bool(Operation *)> isRowLoad);

/// A block that the tile registers read: its operand, and the leading rows and columns
/// of it that its mask keeps (i64).
struct TileBlock {
  TileOperand operand;
  Value validRows, validCols;
};

/// `accRows` (the accumulator's rows, BLOCK_M of BLOCK_N 32-bit lanes) plus a @ b, a
/// BLOCK_M x k block and b its k x BLOCK_N in groups of k (b_k_group: pairs for bf16,
/// quads for int8), on the tile registers (see MatrixTiles.cpp): bf16 by tdpbf16ps, int8
/// by tdpbssd. Lanes the masks leave off count as zeros.
SmallVector<Value> matrixTileMicrokernel(OpBuilder &b, Location loc, const TileBlock &a,
                                         const TileBlock &bGroups, ValueRange accRows, int64_t k);
/// Rows of a against the columns of b, both with unit-stride k (b transposed): a's and
/// b's element (0, 0), a's row stride and kept rows, b's column stride and kept columns
/// (in elements, i64), the k both keep, the element type.
struct RowDotOperands {
  Value aBase, aRowStride, aValidRows, bBase, bColStride, bValidCols, kCount;
  Type element;
  /// The most k the block takes (kCount at most): BLOCK_K.
  int64_t kBound = 0;
  /// b's element where it differs from a's (float16 columns widened ahead to float32).
  Type bElement = {};
};

/// Whether an m x n block takes rowDotMicrokernel for these types on this host: float32,
/// bf16 with AVX512-BF16, int8 into int32 with AVX512-VNNI; up to 16 columns, and up to
/// 64 rows in sub-blocks of 16 sums (m * n up to 16, or m a whole number of them).
bool takesRowDots(Type element, Type accElement, int64_t m, int64_t n,
                  const CpuDotFeatures &features);

/// `accRows` plus the dot of each of a's rows with each column of b along their
/// unit-stride k (see RowDots.cpp). Rows and columns past the kept ones read the first,
/// k past kCount reads zeros.
SmallVector<Value> rowDotMicrokernel(OpBuilder &b, Location loc, const RowDotOperands &operands,
                                     ValueRange accRows, const CpuDotFeatures &features);

void populateDotPatterns(const TypeConverter &converter, RewritePatternSet &patterns, CpuDotFeatures features);

} // namespace mlir::tile::cpu

#endif
