// Pieces shared by the patterns of convert-tile-to-gpu (internal to the conversion).
#ifndef TILE_LIB_CONVERSION_TILETOGPU_GPULOWERING_H
#define TILE_LIB_CONVERSION_TILETOGPU_GPULOWERING_H

#include "tile/Analysis/AffineLanes.h"
#include "tile/Analysis/Divisibility.h"
#include "tile/Analysis/PointerRange.h"
#include "tile/Dialect/Tile/IR/TileDialect.h"
#include "tile/Target/GpuArch.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

#include <functional>
#include <optional>

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

/// Elements [first, first + count) of the vector `v`.
Value sliceOf(OpBuilder &b, Location loc, Value v, int64_t first, int64_t count);

/// i1: `ptr` is a multiple of `bytes` (a power of two) at run time.
Value isAligned(OpBuilder &b, Location loc, Value ptr, int64_t bytes);

/// Where a lane's accumulator elements sit in one tile of the arch's matrix
/// instruction (tileM x tileN): element j of lane l is at (row(l, j), col(l, j)).
/// MFMA 16x16 (wave64): (4 * (l / 16) + j, l % 16), 4 per lane; MFMA 32x32:
/// (8 * (j / 4) + 4 * (l / 32) + j % 4, l % 32), 16 per lane. WMMA gfx11 (wave32):
/// (2 * j + l / 16, l % 16), 8 per lane; gfx12: (8 * (l / 16) + j, l % 16). NVIDIA
/// mma.sync m16n8: (l / 4 + 8 * (j / 2), 2 * (l % 4) + j % 2), 4 per lane.
///
/// Where the instruction's a and b operands are symmetric (MFMA, gfx12 WMMA), the
/// lowering feeds b^T as the instruction's a and a^T as its b, so that it computes C^T:
/// each lane then holds `colRun` consecutive columns of one row (MFMA 16x16:
/// (l % 16, 4 * (l / 16) + j)), which the epilogue stores as one 8- or 16-byte access.
struct AccumulatorTile {
  int64_t tileM = 16, tileN = 16, perLane = 4;
  /// Consecutive elements of a lane that are consecutive columns of one row.
  int64_t colRun = 1;
  /// gfx11 WMMA (computing C^T): lane l holds columns 2j + l / 16 of row l % 16, which
  /// form no runs; after the lane exchanges half of them with lane l ^ 16 (permlanex16)
  /// it holds runs of this many consecutive columns (see StoreLowering).
  int64_t exchangedRun = 0;
  /// The instruction computes C^T from swapped operands.
  bool swapped = false;
  enum class Kind { Mfma16, Mfma32, WmmaGfx11, WmmaGfx12, MmaM16N8 } kind = Kind::Mfma16;
  std::pair<Value, Value> coordinates(OpBuilder &b, Location loc, Value lane, int64_t j) const;
  /// Elements j of a lane's tile with the same columnClass(j) are in the same column.
  int64_t columnClass(int64_t j) const { return kind == Kind::MmaM16N8 ? j % 2 : j; }
};

/// gfx11's accumulator exchange (AccumulatorTile::exchangedRun) as data. In slot t
/// (0-3) a lane of half-wave h sends its element kExchangeSends[h][t] to lane l ^ 16
/// (and receives that lane's). Run r (0, 1) of a lane of half h holds, position by
/// position, its own element j (an entry j >= 0) or the one received in slot -1 - v (an
/// entry v < 0): lanes 0-15 end with columns 0-3 and 8-11 of their row, lanes 16-31
/// with 4-7 and 12-15.
constexpr int64_t kExchangeSends[2][4] = {{2, 3, 6, 7}, {0, 1, 4, 5}};
constexpr int64_t kExchangeRuns[2][2][4] = {{{0, -1, 1, -2}, {4, -3, 5, -4}},
                                            {{-1, 2, -2, 3}, {-3, 6, -4, 7}}};

/// `nonKDim` (the matrix_instr_nonkdim knob, 16 or 32) picks the MFMA shape.
AccumulatorTile accumulatorTileFor(const ::tile::GpuArch &arch, int64_t nonKDim);

/// How a 2-D block of R x C elements is spread: the arch's accumulator layout. The
/// block is cut into tiles; waves form a warpsM x warpsN grid, each wave owns
/// repM x repN tiles, a thread's share is its elements of those tiles in (rm, rn) order.
struct MatrixLayout {
  int64_t rows = 0, cols = 0;
  int64_t warpsM = 1, warpsN = 1, repM = 0, repN = 0;
  /// Waves whose rows interleave: groups of this many consecutive waves along M share
  /// instruction tiles of interleaveM * tileM rows, wave w of a group taking rows
  /// w * tileM .. of each (Hopper's warpgroup MMA: 4 warps, 64-row tiles). 1: each wave
  /// owns a contiguous band of rows.
  int64_t interleaveM = 1;
  AccumulatorTile tile;
  bool fits = false; ///< whether the block divides into whole tiles per wave
  int64_t perThread() const { return fits ? repM * repN * tile.perLane : 1; }
};

/// A dot whose operands are loaded in the body of an scf.for, prepared for software
/// pipelining before the conversion: the scalars its operands' addresses and bounds
/// depend on, recomputed d iterations ahead (d < num_stages) as plain scalar ops.
struct PipelinedLoop {
  SmallVector<DenseMap<Value, Value>> shifted; ///< per d: original scalar -> d ahead
  SmallVector<Value> inRange;                ///< per d: i1, iteration iv + d exists
  SmallVector<Value> slot;                   ///< per d: i32, its shared-memory stage
  Value iteration;                           ///< this iteration's number from 0
  /// The prologue, before the loop: per d < num_stages - 1, the scalars of the loop's
  /// iteration d and whether it exists (its stage is d).
  SmallVector<DenseMap<Value, Value>> prologue;
  SmallVector<Value> prologueInRange;
  /// With warp specialization: a loop over the same iterations before this one, holding
  /// only the scalars of its own iteration (producerScalars), into which the lowering
  /// puts the copies; splitProducerWarpgroup erases it where nothing was put there.
  scf::ForOp producerLoop;
  DenseMap<Value, Value> producerScalars;
  /// With warp specialization, the iterations' numbers counted over the whole kernel:
  /// in a persistent kernel's walk over tiles, the K loop's iterations of the earlier
  /// tiles come first (the stages' barriers keep counting phases across tiles).
  Value kernelIteration, producerKernelIteration;
};
using PipelinePlans = DenseMap<Operation *, PipelinedLoop>;

/// Marks that the asynchronous K pipeline leaves for prefetchFirstFragments: the wait
/// for a tile's copies and the barrier after it, the value holding the fragments of a
/// tile's first k step, and the point before the matrix instructions of its last one.
constexpr llvm::StringLiteral kTileWaitAttr = "tile.tile_wait";
constexpr llvm::StringLiteral kFirstFragmentsAttr = "tile.first_fragments";
constexpr llvm::StringLiteral kLastStepAttr = "tile.last_step";

/// Software-pipelines the shared-memory fragment reads of every marked K loop in `root`
/// across its back edge: the first k step's fragments of tile k + 1 are read at the end
/// of iteration k (after its wait and barrier, which move there with them), while the
/// last k step's matrix instructions of tile k run, and reach the next iteration as a
/// loop-carried value; the prologue reads tile 0's. A loop whose fragment reads cannot
/// be recomputed one iteration ahead keeps its order. Removes the marks.
void prefetchFirstFragments(Operation *root);

/// Plans every dot of `kernel` that can be pipelined over `numStages` stages (none
/// when numStages < 2), its tiles going round a ring of `ringSize` shared buffers.
/// `producerLoops`: also build each plan's producerLoop.
PipelinePlans planPipelines(Operation *kernel, int64_t numStages, int64_t ringSize, bool producerLoops = false);

/// Threads of one Hopper warpgroup (4 warps), the unit of the warpgroup MMA and of a
/// warp-specialized kernel's producer.
constexpr int64_t kWarpgroupThreads = 128;

/// Marks the loop of a warp-specialized kernel's producer warpgroup (see
/// splitProducerWarpgroup).
constexpr llvm::StringLiteral kProducerLoopAttr = "tile.producer_loop";

/// Where the lowering gave a kernel a producer loop: threads from `consumerThreads` on
/// run only it and leave, the others run the rest of the kernel, whose block barriers
/// become named barriers of the consumer threads. Returns whether it did.
bool splitProducerWarpgroup(Operation *func, Value threadId, int64_t consumerThreads,
                            const ::tile::GpuArch &arch);

/// Marks one box of a persistent kernel's epilogue staging (an scf.execute_region; the
/// value is the box's index) that deferEpilogueStaging may move into the next tile.
constexpr llvm::StringLiteral kDeferrableEpilogueAttr = "tile.deferrable_epilogue";

/// Moves each tile's marked epilogue staging into the next tile's first K steps, where
/// the tensor cores run that tile's MMAs meanwhile, and the last tile's after the walk
/// over tiles. Where it cannot (`deferrable` false: no producer warpgroup keeps the next
/// tile's stages coming; a store not in every tile), the staging stays where it is.
void deferEpilogueStaging(Operation *func, bool deferrable);

/// What every pattern needs: the thread id, the arch and the layout rules of this kernel.
struct Distribution {
  ::tile::GpuArch arch;
  int64_t numWarps = 4;
  int64_t nonKDim = 16;
  int64_t kpack = 1;
  int64_t numStages = 1;
  bool allowTf32 = false;
  /// sm_90a bulk-copy K loops get a producer warpgroup (threads from `threads` on).
  bool warpSpecialize = false;
  /// The kernel walks its tiles (kPersistentAttrName): what the K loop sets up once goes
  /// before the walk, and the epilogue keeps its own shared memory.
  bool persistent = false;
  /// Blocks per cluster (kClusterCtasAttrName): with a producer warpgroup, each block
  /// copies its share of the B tiles to every block of its cluster (multicast).
  int64_t clusterCtas = 1;
  int64_t threads = 0;
  int64_t accessElements = 1;
  /// Every dot of the kernel runs on Hopper's warpgroup MMA (wgmma), which sets the
  /// accumulator layout of all its 2-D blocks (see warpgroupMmaFits).
  bool warpgroupMma = false;
  Value threadId; // i32, at the top of the kernel
  const PipelinePlans *pipelines = nullptr;
  /// Where the kernel may take tensor maps for its dot's operands (a, b) and for the
  /// block it stores (c): the parameters the pass appended, for bulk tensor copies; null
  /// elsewhere. Those that no lowering records (recordTensorMap) go again.
  Value tensorMaps[3];
  Divisibility divisibility; ///< what the kernel's arguments promise
  PointerRanges pointerRanges; ///< how far past its pointers the kernel reaches
  ThreadLayout of(Type tensorType) const {
    return layoutFor(cast<RankedTensorType>(tensorType).getDimSize(0), threads, accessElements);
  }
  MatrixLayout matrixOf(Type tensorType) const;
};

class GpuTypeConverter : public TypeConverter {
public:
  GpuTypeConverter(MLIRContext *ctx, const Distribution &dist);
};

/// The places (row, col) of a thread's elements of a 2-D block: the wave's and the
/// lane's terms are built once, and each element adds its constants. Building every
/// element's place from the thread id made tens of thousands of ops per kernel, which the
/// first call's compile then spent most of its time folding.
class MatrixPlaces {
public:
  MatrixPlaces(OpBuilder &b, Location loc, const Distribution &dist, const MatrixLayout &layout);
  /// (row, col) as i32 of element `index` of the thread's share, at the builder's insertion point
  /// (which the constructor's must dominate).
  std::pair<Value, Value> at(OpBuilder &b, Location loc, int64_t index) const;

private:
  const MatrixLayout &layout;
  Value waveRow, waveCol;
  SmallVector<std::pair<Value, Value>> inTile; ///< per element of a lane's instruction tile
};

/// The matrix instruction of an arch for one input type. Each lane holds a fragment of
/// aPerLane elements of a and bPerLane of b: element j at (row, k) of a and (k, col) of
/// b. A fragment is made of runs of `kRun` elements that are consecutive along k (the
/// width of one shared-memory read where k is contiguous there). One fragment covers
/// `tileK` of K; with kpack > 1 (MFMA) it feeds kpack instructions, each taking its
/// slice of aPerLane / kpack elements.
struct MatrixInstruction {
  int64_t tileK = 0, aPerLane = 0, bPerLane = 0, kRun = 1;
  /// NVIDIA: fragments come from ldmatrix (8 x 16-byte rows per matrix).
  bool ldmatrix = false;
  std::function<std::pair<Value, Value>(OpBuilder &, Location, Value lane, int64_t j)> a, b;
  std::function<Value(OpBuilder &, Location, Value a, Value b, Value acc)> multiply;
};

/// `allowTf32`: f32 inputs may be rounded to TF32 where the arch's instruction takes them
/// (NVIDIA mma.sync m16n8k8); otherwise f32 has a matrix instruction only where it is
/// exact (MFMA).
std::optional<MatrixInstruction> matrixInstructionFor(const AccumulatorTile &tile, Type input,
                                                      const ::tile::GpuArch &arch, int64_t kpack,
                                                      bool allowTf32 = false);

/// A row-major [outer][inner] array in shared memory whose rows are permuted in units
/// of `vec` elements by an XOR swizzle, Triton's swizzled shared layout: unit u of row r
/// is stored at unit u ^ ((r / perPhase) % maxPhase). Chosen so that the rows that one
/// wide read touches at once fall in distinct banks.
struct SharedLayout {
  int64_t outer = 0, inner = 0;
  int64_t vec = 1, perPhase = 1, maxPhase = 1;
  /// Where set (and below inner), the inner dimension is cut into chunks of this many
  /// elements, each stored as an [outer][chunk] array of its own, one after another:
  /// the swizzle atoms of Hopper's warpgroup MMA are rows of at most 128 bytes.
  int64_t chunk = 0;
  bool chunked() const { return chunk > 0 && chunk < inner; }
  /// The element offset (i32) of (outerIndex, innerIndex), both i32.
  Value offset(OpBuilder &b, Location loc, Value outerIndex, Value innerIndex) const;
  /// offset(outerBase + step, innerIndex) for an outerBase known to be a multiple of
  /// `multiple` (a power of two) and 0 <= step < multiple. Where perPhase divides
  /// `multiple`, the step's share of the swizzle is a constant XOR, so the rows
  /// outerBase .. outerBase + multiple - 1 need only multiple / perPhase distinct
  /// per-lane terms, the rest being immediate offsets (LLVM cannot prove that the
  /// swizzle phases of consecutive rows share their terms).
  Value offsetFrom(OpBuilder &b, Location loc, Value outerBase, int64_t multiple, int64_t step,
                   Value innerIndex) const;
  /// rowStart + the element of innerIndex within its (swizzled) `unit`.
  Value place(OpBuilder &b, Location loc, Value rowStart, Value unit, Value innerIndex) const;
};

/// The swizzle for reads of `accessBytes` (8 or 16) per lane: banks are 4 bytes wide and
/// 32 of them (128 bytes) serve 128 / accessBytes lanes at a time.
SharedLayout swizzledLayout(int64_t outer, int64_t inner, int64_t elementBytes,
                            int64_t accessBytes);

/// The start of the kernel's one dynamically sized shared array (NVIDIA), aligned to at
/// least `alignment` bytes.
Value dynamicSharedArray(OpBuilder &b, Operation *op, int64_t alignment);

/// A shared array of `count` elements: a module-level global in address space 3, or,
/// where shared memory is sized at launch, the next `alignment`-byte aligned piece of the
/// one dynamic shared array, whose size the function's kDynamicSharedBytesAttrName
/// records.
Value sharedBuffer(ConversionPatternRewriter &rewriter, Operation *op, const ::tile::GpuArch &arch,
                   Type element, int64_t count, StringRef name, int64_t alignment);

/// Records on the function the bytes that a 2-D store stages at the start of the dynamic
/// shared array (after the K loop, over the buffers it used); the pass folds it into
/// kDynamicSharedBytesAttrName.
constexpr llvm::StringLiteral kEpilogueSharedBytesAttr = "tile.epilogue_shared_bytes";

/// Proven at compile time from the kernel's divisibility promises, for a 2-D store at
/// `lanes` under `mask` (null: none): unit column stride, every row starting at a
/// multiple of `alignElements`, and column bounds that are multiples of `run`, so that
/// each run of `run` columns is all in or all out. `bounds` receives the mask's bounds.
bool wholeRunsProven(const AffineLanes &lanes, Value mask, const Distribution &dist, int64_t alignElements,
                     int64_t run, std::optional<LaneBounds> *bounds = nullptr);

/// The store of a 2-D block in the m16n8 accumulator layout (mma.sync, wgmma), whose
/// lanes hold pairs of columns: through shared memory, so that each lane stores
/// 16-byte pieces of rows. Only where the destination is proven 16-byte aligned with unit
/// column stride and whole 16-byte pieces in or out of bounds; false otherwise.
bool storeThroughShared(StoreOp op, Value value, ConversionPatternRewriter &rewriter, const Distribution &dist);

/// A side-effecting PTX statement: `results` f32 outputs, then `operands` (with
/// `operandConstraints`), then `tied` inputs that share the outputs' registers.
Value inlinePtx(OpBuilder &b, Location loc, StringRef ptx, int64_t results, StringRef operandConstraints,
                ValueRange operands, ValueRange tied);

/// The i32 constant `value`.
Value i32Constant(OpBuilder &b, Location loc, int64_t value);

/// lane and the wave's (m, n) position in the wave grid of `layout`, as i32.
struct WaveCoordinates {
  Value lane, waveM, waveN;
};
WaveCoordinates waveCoordinates(OpBuilder &b, Location loc, const Distribution &dist,
                                const MatrixLayout &layout);

/// The first row of wave row waveM's share of `layout` (i32): its band, plus its slice
/// of each instruction tile where waves interleave.
Value waveRowBase(OpBuilder &b, Location loc, const MatrixLayout &layout, Value waveM);

/// A 2-D block a dot reads from memory (the load that made it is not lowered itself).
struct StagedOperand {
  AffineLanes lanes;
  LaneBounds bounds;
};
std::optional<StagedOperand> stagedOperandOf(Value operand);

/// An operand tile that bulk tensor copies bring in: its first element's coordinates in
/// the tensor map's order (the contiguous dimension first), as polynomials of the tile
/// IR's scalars, and the boxes (swizzle atom columns) one stage takes.
struct BulkCopyOperand {
  Value map; ///< the kernel's tensor-map parameter
  unsigned innerDim = 0;
  int64_t elementBytes = 2;
  ScalarPoly inner, outer;
  int64_t boxInner = 0, boxOuter = 0, boxes = 0, swizzleBytes = 0;
  /// Each box is copied in `parts` pieces along the outer dimension (the tensor map's
  /// box is boxOuter / parts rows), so that the blocks of a cluster can split a tile
  /// whose copy is a single box.
  int64_t parts = 1;
  int64_t mapBoxOuter() const { return boxOuter / parts; }
};

/// Records on the kernel that it reads its tensor-map parameter for `operand` (0: a,
/// 1: b, 2: c) as `copy` describes it, with `element` the matrix's element type, for the
/// host that encodes the maps (kTensorMapsAttrName, in parameter order once the pass
/// has dropped the unread ones).
void recordTensorMap(RewriterBase &rewriter, Operation *op, int64_t operand, const BulkCopyOperand &copy,
                     Type element);

/// Splits `copy` so that each of `ctas` blocks copies an equal share of its pieces (whole
/// boxes, or halves of a single box's rows at a swizzle period); false where it cannot.
bool splitAcrossCluster(BulkCopyOperand &copy, int64_t ctas);

/// The bulk copies of `operand` into `shared` (the warpgroup MMA's layout), where its
/// address is `outer * stride + inner` with an inner stride of 1 and its masks bound
/// both coordinates by sizes the kernel takes; nothing otherwise.
std::optional<BulkCopyOperand> bulkCopyOperand(const StagedOperand &operand, const SharedLayout &shared,
                                               unsigned innerDim, int64_t elementBytes, Value map);

/// One operand's copies for one stage: the stage's first element and the coordinates.
struct BulkCopyPlacement {
  const BulkCopyOperand *operand;
  Value stage;  ///< shared pointer to the stage's buffer
  Type element; ///< its element type
  Value inner, outer; ///< i32
  /// Multicast: this block (`rank`, i32) copies its share of the pieces to the same
  /// place in every block of its cluster of `ctas`; null rank: the whole tile, here only.
  Value rank;
  int64_t ctas = 1;
};

/// Thread 0 initializes the `count` mbarriers at `barriers` (one per stage, 8 bytes each)
/// for one arrival each; a block barrier must follow before any use.
void initTensorMapBarriers(OpBuilder &b, Location loc, Value barriers, int64_t count, Value threadId,
                           int64_t arrivals = 1, int64_t first = 0);
/// Thread 0 invalidates them, so that their memory may serve other data (the epilogue
/// reuses the dynamic shared array); every thread must be done with them (a block barrier
/// before).
void invalidateTensorMapBarriers(OpBuilder &b, Location loc, Value barriers, int64_t count, Value threadId);
/// The barrier of stage `slot` (i32).
Value tensorMapBarrier(OpBuilder &b, Location loc, Value barriers, Value slot);
/// Where `issue` (i1: one thread, and a tile that exists), announces the stage's bytes
/// on `barrier` and issues the copies.
void issueBulkCopies(OpBuilder &b, Location loc, ArrayRef<BulkCopyPlacement> copies, Value barrier,
                     Value issue);
/// One arrival on `barrier` (a consumer releasing the stage it guards).
void arriveOnBarrier(OpBuilder &b, Location loc, Value barrier);
/// One arrival on the barrier at `barrier`'s place in each of the `ctas` blocks of this
/// block's cluster (a consumer releasing a stage that every block's copies fill).
void arriveOnClusterBarriers(OpBuilder &b, Location loc, Value barrier, int64_t ctas);
/// This block's rank in its cluster (i32).
Value clusterRank(OpBuilder &b, Location loc);
/// Every (non-exited) thread of the cluster waits for the others: what each did to
/// shared memory before (barrier initialization, arrivals on the others' barriers) is
/// seen by all after.
void clusterBarrier(OpBuilder &b, Location loc);
/// Waits until `barrier` completes its phase of parity `phase` (i32).
void waitForBulkCopies(OpBuilder &b, Location loc, Value barrier, Value phase);

/// tile.dot on matrix units (or FMAs) over operands staged through shared memory, with
/// the K loop software-pipelined by `numStages`.
void populateDotPatterns(const TypeConverter &converter, RewritePatternSet &patterns,
                         const Distribution &dist);

/// 2-D integer, pointer and mask blocks that are affine in their indices (offsets,
/// pointers, bounds masks) are built per element from the analysis, whatever ops made
/// them; tile.dot becomes matrix-unit instructions on blocks staged through LDS.
void populateMatrixPatterns(const TypeConverter &converter, RewritePatternSet &patterns,
                            const Distribution &dist);

/// tile.signal_flag and tile.wait_flag (NVIDIA): one thread releases or acquires at
/// device scope, a block barrier before the release and after the acquire.
void populateProgramFlagPatterns(const TypeConverter &converter, RewritePatternSet &patterns,
                                 const Distribution &dist);

/// True when `load` only feeds dots that stage its memory themselves.
bool isStagedByDots(LoadOp load);

/// Whether `dot` can run on the warpgroup MMA of `arch` with `numWarps` warps: 16-bit
/// float inputs and an f32 accumulator, whole warpgroups each taking a multiple of 64
/// rows, N a multiple of 8 up to 256 (one instruction spans the block's columns), K a
/// multiple of 16, and shared-memory rows that form the instruction's swizzle atoms.
bool warpgroupMmaFits(DotOp dot, const ::tile::GpuArch &arch, int64_t numWarps);

/// The shared layout a warpgroup MMA reads an [outer][inner] operand tile in: rows cut
/// into chunks of up to 128 bytes, each chunk swizzled as the instruction's 128-, 64- or
/// 32-byte swizzle mode expects (16-byte units XORed with the row's phase).
SharedLayout warpgroupSharedLayout(int64_t outer, int64_t inner, int64_t elementBytes);

/// The operand of a warpgroup MMA in shared memory: one stage of a ring of buffers,
/// [outer][inner] in warpgroupSharedLayout, with k along `kInner` (K-major) or along
/// the outer dimension (M- or N-major, the instruction's transposed form).
struct WarpgroupOperand {
  Value buffer;  ///< the ring's first element (shared address space)
  Value slotBase; ///< i32 element offset of this stage
  SharedLayout shared;
  bool kInner = true;
  int64_t elementBytes = 2;
};

/// wgmma.mma_async over one staged tile: for each 16-deep k step and each 64-row tile
/// of the warpgroup, one m64nNk16 instruction reading a and b through shared-memory
/// descriptors, accumulating into its slice of `acc` (the interleaved MmaM16N8
/// layout). Fenced before, committed after; the caller waits.
Value warpgroupMultiply(OpBuilder &b, Location loc, const Distribution &dist, const MatrixLayout &layout,
                        const WarpgroupOperand &a, const WarpgroupOperand &bOperand, int64_t k,
                        Type input, Value acc);

/// wgmma.wait_group `pending`: the accumulator `acc` passes through it, so that nothing
/// reads the registers of an MMA in flight (null `acc`: no values tied).
Value waitForWarpgroups(OpBuilder &b, Location loc, int64_t pending, Value acc);

/// fence.proxy.async.shared::cta: this thread's ordinary writes to shared memory (stores
/// and cp.async) become visible to the MMA's asynchronous reads after the next barrier.
void fenceSharedForAsyncReads(OpBuilder &b, Location loc);

/// Marks the in-loop wait that leaves the last MMA group in flight, and the accumulator
/// the loop carries, for waitAfterWarpgroupLoops.
constexpr llvm::StringLiteral kWarpgroupPendingAttr = "tile.wgmma_pending";
constexpr llvm::StringLiteral kWarpgroupAccumulatorAttr = "tile.wgmma_accumulator";

/// After every K loop whose MMAs stay in flight across iterations, waits for the last
/// group before the accumulator is read (the loop's result passes through the wait).
/// Removes the marks.
void waitAfterWarpgroupLoops(Operation *root);

} // namespace mlir::tile::gpu_lowering

#endif
