// The epilogue store of NVIDIA's m16n8 accumulator layout through shared memory. A lane
// of mma.sync or wgmma holds two consecutive columns of a row per 8-column tile: 4 bytes
// of a 16-bit result, so a direct store writes 4-byte pieces and a warp's stores touch
// eight rows at once. Staged through shared memory (over the K loop's buffers, which are
// free once it ends), each lane stores whole 16-byte pieces of a row, and a warp writes
// 512 contiguous bytes per instruction, as Triton's and CUTLASS's epilogues do.
#include "GpuLowering.h"

#include "tile/Conversion/BlockAccess.h"
#include "tile/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

bool mlir::tile::gpu_lowering::wholeRunsProven(const AffineLanes &lanes, Value mask, const Distribution &dist,
                                               int64_t alignElements, int64_t run,
                                               std::optional<LaneBounds> *bounds) {
  const Divisibility &known = dist.divisibility;
  int64_t bytes = elementBytes(getPointeeType(lanes.basePtr.getType()));
  if (lanes.strides[1].getConstant() != 1 || known.of(lanes.basePtr) < alignElements * bytes ||
      !known.divides(lanes.offset, alignElements) || !known.divides(lanes.strides[0], alignElements))
    return false;
  if (!mask)
    return true;
  std::optional<LaneBounds> analyzed = analyzeLaneBounds(mask);
  if (!analyzed || analyzed->upper.size() != 2)
    return false;
  for (const ScalarPoly &bound : analyzed->upper[1])
    if (!known.divides(bound, run))
      return false;
  if (bounds)
    *bounds = std::move(analyzed);
  return true;
}

namespace {

/// Element `offset` (i32) of the staging area `scratch` of `element`s.
Value stagedElement(OpBuilder &b, Location loc, Value scratch, Type element, Value offset) {
  return LLVM::GEPOp::create(
             b, loc, scratch.getType(), element, scratch,
             ArrayRef<LLVM::GEPArg>{b.createOrFold<arith::ExtUIOp>(loc, b.getI64Type(), offset)})
      .getResult();
}

/// One bulk tensor store of the box at `source` (shared) to C's tensor map at (inner,
/// outer), in this thread's current bulk group.
void storeBox(OpBuilder &b, Location loc, Value map, Value inner, Value outer, Value source) {
  inlinePtx(b, loc, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];", 0, "l,r,r,r",
            ValueRange{map, inner, outer, source}, {});
}

/// Buffers each warpgroup stages its results in: while the copy engine reads one, the
/// warpgroup writes the next.
constexpr int64_t kWarpgroupStoreBuffers = 2;

/// A persistent kernel's epilogue where bulk tensor stores write C and each consumer
/// warpgroup holds a band of whole rows (the warpgroup MMA's layout). The consumers of a
/// block then need not meet: each warpgroup stages its band one box (64 rows of 128 bytes)
/// at a time in two buffers of its own, and one of its threads hands each box to a bulk
/// store as soon as it is written, waiting only for the store before the last to have
/// read its buffer. With one staging area for the block (below), every piece waited for
/// the whole block and for the previous piece's store: the tensor cores stood idle for
/// about as long as the stores took.
bool storeByWarpgroups(StoreOp op, Value value, ConversionPatternRewriter &rewriter, const Distribution &dist,
                       const MatrixLayout &layout, const BulkCopyOperand &bulkStore, int64_t used) {
  if (!dist.persistent || layout.interleaveM != kWarpgroupThreads / 32 || layout.warpsN != 1 ||
      layout.warpsM % layout.interleaveM != 0)
    return false;
  int64_t groups = layout.warpsM / layout.interleaveM;
  int64_t bandRows = layout.rows / groups, boxCols = bulkStore.boxInner;
  // A box takes the rows of one of the band's instruction tiles (64: the warpgroup's
  // MMA rows), so that a band of several (256-row blocks) needs no larger buffers.
  int64_t boxRows = layout.tile.tileM * layout.interleaveM;
  auto vectorType = cast<VectorType>(value.getType());
  Type element = vectorType.getElementType();
  int64_t bytes = elementBytes(element), run = layout.tile.colRun;
  int64_t boxElements = boxRows * boxCols, alignment = 1024;
  int64_t offset = (used + alignment - 1) / alignment * alignment;
  // A box starts at a multiple of the swizzle's 8-row period and is whole pairs of column
  // tiles of the accumulator (stmatrix writes two at a time, below); bulk stores take
  // 16-bit results only.
  if (bandRows != layout.repM * boxRows || boxRows % 8 != 0 || layout.cols % boxCols != 0 ||
      boxCols % (2 * layout.tile.tileN) != 0 || bytes != 2 || run != 2 || layout.tile.perLane != 2 * run ||
      offset + groups * kWarpgroupStoreBuffers * boxElements * bytes > int64_t(dist.arch.ldsBytes))
    return false;

  Location loc = op.getLoc();
  auto c = [&](int64_t v) { return i32Constant(rewriter, loc, v); };
  Type i32 = rewriter.getI32Type();
  BulkCopyOperand store = bulkStore;
  store.parts = layout.rows / boxRows; // the tensor map's box is one instruction tile's rows
  recordTensorMap(rewriter, op, 2, store, element);
  Value scratch = sharedBuffer(rewriter, op, dist.arch, element, groups * kWarpgroupStoreBuffers * boxElements,
                               "__tile_epilogue", alignment);
  SharedLayout swizzled = warpgroupSharedLayout(boxRows, boxCols, bytes);
  auto remap = [&](Value v) { return rewriter.getRemappedValue(v); };
  auto elementAt = [&](OpBuilder &b, Location l, Value offset) {
    return stagedElement(b, l, scratch, element, offset);
  };
  Value group = rewriter.createOrFold<arith::DivUIOp>(loc, dist.threadId, c(kWarpgroupThreads));
  // Named barriers 0 and 1 are the block's and the consumers' (warp specialization).
  Value barrier = rewriter.createOrFold<arith::AddIOp>(loc, group, c(2));
  auto syncWarpgroup = [&] { inlinePtx(rewriter, loc, "bar.sync $0, 128;", 0, "r", ValueRange{barrier}, {}); };
  // The first thread of each warpgroup issues and waits for its stores.
  auto onLead = [&](OpBuilder &b, Location l,
                    llvm::function_ref<void(OpBuilder &, Location)> body) {
    Value leads = b.createOrFold<arith::CmpIOp>(
        l, arith::CmpIPredicate::eq,
        b.createOrFold<arith::RemUIOp>(l, dist.threadId, i32Constant(b, l, kWarpgroupThreads)),
        i32Constant(b, l, 0));
    scf::IfOp::create(b, l, leads, [&](OpBuilder &then, Location at) {
      body(then, at);
      scf::YieldOp::create(then, at);
    });
  };
  Value inner = rewriter.createOrFold<arith::TruncIOp>(
      loc, i32, store.inner.materialize(rewriter, loc, remap));
  Value outer = rewriter.createOrFold<arith::AddIOp>(
      loc,
      rewriter.createOrFold<arith::TruncIOp>(loc, i32,
                                             store.outer.materialize(rewriter, loc, remap)),
      rewriter.createOrFold<arith::MulIOp>(loc, group, c(bandRows)));
  Value groupBuffers =
      rewriter.createOrFold<arith::MulIOp>(loc, group, c(kWarpgroupStoreBuffers * boxElements));
  int64_t colBoxes = layout.cols / boxCols;
  // The results leave the registers by stmatrix, four 8x8 matrices (two column tiles of
  // the accumulator, rows 0-7 and 8-15 of each) per instruction where st.shared writes
  // one lane's pair: a quarter of the instructions. Lanes 8k .. 8k + 7 give the addresses
  // of matrix k's rows; a lane's own pair of a tile sits at row lane / 4 and column
  // 2 * (lane % 4), so its address is its pair's, shifted by these.
  Value lane = rewriter.createOrFold<arith::RemUIOp>(loc, dist.threadId, c(32));
  auto divC = [&](Value v, int64_t d) {
    return rewriter.createOrFold<arith::DivUIOp>(loc, v, c(d));
  };
  auto remC = [&](Value v, int64_t d) {
    return rewriter.createOrFold<arith::RemUIOp>(loc, v, c(d));
  };
  auto mulC = [&](Value v, int64_t m) {
    return rewriter.createOrFold<arith::MulIOp>(loc, v, c(m));
  };
  Value rowShift = rewriter.createOrFold<arith::SubIOp>(
      loc,
      rewriter.createOrFold<arith::AddIOp>(loc, remC(lane, 8), mulC(remC(divC(lane, 8), 2), 8)),
      divC(lane, 4));
  Value colShift = rewriter.createOrFold<arith::SubIOp>(
      loc, mulC(divC(lane, 16), layout.tile.tileN), mulC(remC(lane, 4), 2));
  // The results as the 32-bit pairs stmatrix takes: what a deferred staging carries to
  // the next tile (deferEpilogueStaging).
  Value pairs = vector::BitCastOp::create(
      rewriter, loc, VectorType::get({vectorType.getNumElements() / run}, i32), value);
  for (int64_t box = 0; box < layout.repM * colBoxes; ++box) {
    int64_t rowBox = box / colBoxes, firstCol = box % colBoxes * boxCols;
    auto staging = scf::ExecuteRegionOp::create(rewriter, loc, TypeRange{});
    staging->setAttr(kDeferrableEpilogueAttr, rewriter.getI64IntegerAttr(box));
    OpBuilder::InsertionGuard boxGuard(rewriter);
    rewriter.setInsertionPointToStart(rewriter.createBlock(&staging.getRegion()));
    Value buffer = rewriter.createOrFold<arith::AddIOp>(
        loc, groupBuffers, c(box % kWarpgroupStoreBuffers * boxElements));
    // The store that last read this buffer (the one before the newest) is done with it.
    onLead(rewriter, loc, [&](OpBuilder &b, Location l) {
      inlinePtx(b, l, "cp.async.bulk.wait_group.read " + std::to_string(kWarpgroupStoreBuffers - 1) + ";", 0, "",
                {}, {});
    });
    syncWarpgroup();
    int64_t firstTile = rowBox * layout.repN + firstCol / layout.tile.tileN;
    int64_t boxTiles = boxCols / layout.tile.tileN;
    MatrixPlaces places(rewriter, loc, dist, layout);
    for (int64_t tile = firstTile; tile < firstTile + boxTiles; tile += 2) {
      int64_t e = tile * layout.tile.perLane;
      auto [row, col] = places.at(rewriter, loc, e);
      Value boxRow = rewriter.createOrFold<arith::RemUIOp>(
          loc, rewriter.createOrFold<arith::AddIOp>(loc, row, rowShift), c(boxRows));
      Value boxCol = rewriter.createOrFold<arith::SubIOp>(
          loc, rewriter.createOrFold<arith::AddIOp>(loc, col, colShift), c(firstCol));
      Value at = rewriter.createOrFold<arith::AddIOp>(
          loc, buffer, swizzled.offset(rewriter, loc, boxRow, boxCol));
      // Matrix k of the four: rows 0-7 (k even) or 8-15 of column tile k / 2, the
      // lane's pair of row lane / 4 (or lane / 4 + 8) in the accumulator's order.
      SmallVector<Value> operands{elementAt(rewriter, loc, at)};
      for (int64_t pair = 0; pair < 4; ++pair)
        operands.push_back(vector::ExtractOp::create(rewriter, loc, pairs, (e + pair * run) / run));
      LLVM::CallIntrinsicOp::create(rewriter, loc,
                                    rewriter.getStringAttr("llvm.nvvm.stmatrix.sync.aligned.m8n8.x4.b16"),
                                    ValueRange(operands));
    }
    // The threads' stores become visible to the copy engine's reads.
    inlinePtx(rewriter, loc, "fence.proxy.async.shared::cta;", 0, "", {}, {});
    syncWarpgroup();
    onLead(rewriter, loc, [&](OpBuilder &b, Location l) {
      Value boxInner = b.createOrFold<arith::AddIOp>(l, inner, i32Constant(b, l, firstCol));
      Value boxOuter = b.createOrFold<arith::AddIOp>(l, outer, i32Constant(b, l, rowBox * boxRows));
      storeBox(b, l, store.map, boxInner, boxOuter, elementAt(b, l, buffer));
      inlinePtx(b, l, "cp.async.bulk.commit_group;", 0, "", {}, {});
    });
    scf::YieldOp::create(rewriter, loc);
  }
  // The block leaves only once the copy engine has read what it stores: each lead
  // thread waits for its own stores, once, after the walk over tiles.
  OpBuilder::InsertionGuard guard(rewriter);
  if (auto walk = op->getParentOfType<scf::ForOp>())
    rewriter.setInsertionPointAfter(walk);
  onLead(rewriter, loc, [&](OpBuilder &b, Location l) {
    inlinePtx(b, l, "cp.async.bulk.wait_group.read 0;", 0, "", {}, {});
  });
  return true;
}

} // namespace

bool mlir::tile::gpu_lowering::storeThroughShared(StoreOp op, Value value, ConversionPatternRewriter &rewriter,
                                                  const Distribution &dist) {
  auto type = cast<RankedTensorType>(op.getPtr().getType());
  if (type.getRank() != 2 || !dist.arch.dynamicShared)
    return false;
  MatrixLayout layout = dist.matrixOf(type);
  auto vectorType = dyn_cast<VectorType>(value.getType());
  if (!layout.fits || !vectorType || layout.tile.kind != AccumulatorTile::Kind::MmaM16N8)
    return false;
  Type element = vectorType.getElementType();
  int64_t bytes = elementBytes(element), run = layout.tile.colRun;
  // 8-byte pairs (f32, i32) are stored as they are.
  int64_t per16 = 16 / bytes;
  if (run * bytes >= 8 || layout.cols % per16 != 0)
    return false;
  auto lanes = analyzeAffineLanes(op.getPtr());
  std::optional<LaneBounds> bounds;
  if (!lanes || !wholeRunsProven(*lanes, op.getMask(), dist, per16, per16, &bounds))
    return false;

  Location loc = op.getLoc();
  auto c = [&](int64_t v) { return i32Constant(rewriter, loc, v); };
  Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
  // Every copy into the K loop's buffers has landed (tiles past the loop's end still
  // write zeros), and every warp is done reading them.
  LLVM::CallIntrinsicOp::create(rewriter, loc, rewriter.getStringAttr("llvm.nvvm.cp.async.wait.all"),
                                ValueRange{});
  auto func = op->getParentOfType<gpu::GPUFuncOp>();
  int64_t used = 0;
  if (auto recorded = func->getAttrOfType<IntegerAttr>(kDynamicSharedBytesAttrName))
    used = recorded.getInt();
  // Where a tensor map can describe C (the kernel takes one, the block's corner and
  // bounds are the matrix's coordinates and sizes), one thread hands each staged piece
  // to a bulk tensor store: the other threads go on (a persistent kernel to its next
  // tile's MMAs) while the copy engine writes global memory. The staging area then has
  // the copy's 128-byte swizzle (its rows unpadded, conflict-free all the same) and
  // starts on a 1024-byte boundary, where the swizzle's period starts.
  // (One block per kernel: a second would find the parameter taken.)
  auto recordedMaps = func->getAttrOfType<ArrayAttr>(kTensorMapsAttrName);
  bool mapTaken = recordedMaps && llvm::any_of(recordedMaps, [](Attribute map) {
                    return cast<IntegerAttr>(cast<DictionaryAttr>(map).get("operand")).getInt() == 2;
                  });
  std::optional<BulkCopyOperand> bulkStore;
  // (Tiles of whole 128-byte rows: the swizzle the GPU runs have covered.)
  if (dist.tensorMaps[2] && !mapTaken && bytes == 2 && bounds && layout.cols % 64 == 0 &&
      dist.pointerRanges.bitsOf(lanes->basePtr) <= 32)
    bulkStore = bulkCopyOperand(StagedOperand{*lanes, *bounds}, warpgroupSharedLayout(layout.rows, layout.cols, bytes),
                                1, bytes, dist.tensorMaps[2]);
  if (bulkStore && storeByWarpgroups(op, value, rewriter, dist, layout, *bulkStore, used))
    return true;
  int64_t alignment = bulkStore ? 1024 : 16;
  int64_t offset = dist.persistent ? (used + alignment - 1) / alignment * alignment : 0;
  // A persistent kernel's producer already copies the next tile into the K loop's
  // buffers: the staging area follows them, and where the whole tile does not fit
  // beside them it goes through in column chunks (each wave holding whole columns of
  // its rows, so which of its elements a chunk takes is known here; a bulk store's
  // chunks are whole boxes).
  int64_t chunks = 1;
  int64_t pad = bulkStore ? 0 : per16;
  int64_t unit = bulkStore ? bulkStore->boxInner : std::max(per16, layout.tile.tileN);
  auto stagedBytes = [&](int64_t parts) { return layout.rows * (layout.cols / parts + pad) * bytes; };
  while (dist.persistent && offset + stagedBytes(chunks) > int64_t(dist.arch.ldsBytes) && layout.warpsN == 1 &&
         (layout.cols / (2 * chunks)) % unit == 0 && (layout.cols / (2 * chunks)) % layout.tile.tileN == 0)
    chunks *= 2;
  int64_t chunkCols = layout.cols / chunks;
  SharedLayout swizzled = warpgroupSharedLayout(layout.rows, chunkCols, bytes);
  if (bulkStore) {
    bulkStore->boxes /= chunks; // per chunk
    recordTensorMap(rewriter, op, 2, *bulkStore, element);
  }
  // Padded rows (the thread-store path): the 8 rows a warp writes at once start 4 banks
  // apart.
  int64_t pitch = chunkCols + pad;
  int64_t staged = layout.rows * pitch * bytes;
  Value scratch;
  if (dist.persistent) {
    scratch = sharedBuffer(rewriter, op, dist.arch, element, layout.rows * pitch, "__tile_epilogue", alignment);
  } else {
    scratch = dynamicSharedArray(rewriter, op, alignment);
    if (auto recorded = func->getAttrOfType<IntegerAttr>(kEpilogueSharedBytesAttr))
      staged = std::max(staged, recorded.getInt());
    rewriter.modifyOpInPlace(func,
                             [&] { func->setAttr(kEpilogueSharedBytesAttr, rewriter.getI64IntegerAttr(staged)); });
  }
  auto elementAt = [&](OpBuilder &b, Location l, Value offset) {
    return stagedElement(b, l, scratch, element, offset);
  };
  auto at = [&](OpBuilder &b, Location l, Value row, Value col) {
    if (bulkStore)
      return elementAt(b, l, swizzled.offset(b, l, row, col));
    return elementAt(b, l,
                     b.createOrFold<arith::AddIOp>(
                         l, b.createOrFold<arith::MulIOp>(l, row, i32Constant(b, l, pitch)), col));
  };
  auto remap = [&](Value v) { return rewriter.getRemappedValue(v); };
  auto isFirstThread = [&] {
    return rewriter.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, dist.threadId, c(0));
  };
  auto onFirstThread = [&](StringRef ptx) {
    scf::IfOp::create(rewriter, loc, isFirstThread(), [&](OpBuilder &b, Location l) {
      inlinePtx(b, l, ptx, 0, "", {}, {});
      scf::YieldOp::create(b, l);
    });
  };
  MatrixPlaces places(rewriter, loc, dist, layout);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    // The previous chunk's reads (or the K loop's, or a bulk store's of the previous
    // tile) are done before its space is written.
    if (bulkStore)
      onFirstThread("cp.async.bulk.wait_group.read 0;");
    gpu::BarrierOp::create(rewriter, loc);
    int64_t firstCol = chunk * chunkCols;
    for (int64_t e = 0; e < layout.perThread(); e += run) {
      int64_t rn = (e / layout.tile.perLane) % layout.repN;
      if (chunks > 1 && (rn * layout.tile.tileN < firstCol || rn * layout.tile.tileN >= firstCol + chunkCols))
        continue;
      auto [row, col] = places.at(rewriter, loc, e);
      if (firstCol)
        col = rewriter.createOrFold<arith::SubIOp>(loc, col, c(firstCol));
      LLVM::StoreOp::create(rewriter, loc, sliceOf(rewriter, loc, value, e, run), at(rewriter, loc, row, col),
                            run * bytes);
    }
    if (bulkStore) {
      // The threads' stores become visible to the copy engine's reads.
      inlinePtx(rewriter, loc, "fence.proxy.async.shared::cta;", 0, "", {}, {});
      gpu::BarrierOp::create(rewriter, loc);
      const BulkCopyOperand &store = *bulkStore;
      Value inner = rewriter.createOrFold<arith::TruncIOp>(
          loc, i32, store.inner.materialize(rewriter, loc, remap));
      Value outer = rewriter.createOrFold<arith::TruncIOp>(
          loc, i32, store.outer.materialize(rewriter, loc, remap));
      scf::IfOp::create(rewriter, loc, isFirstThread(), [&](OpBuilder &b, Location l) {
        for (int64_t box = 0; box < store.boxes; ++box) {
          Value boxInner = b.createOrFold<arith::AddIOp>(
              l, inner, i32Constant(b, l, firstCol + box * store.boxInner));
          storeBox(b, l, store.map, boxInner, outer,
                   elementAt(b, l, i32Constant(b, l, box * store.boxInner * store.boxOuter)));
        }
        inlinePtx(b, l, "cp.async.bulk.commit_group;", 0, "", {}, {});
        scf::YieldOp::create(b, l);
      });
      continue;
    }
    gpu::BarrierOp::create(rewriter, loc);
    Value validRows = c(layout.rows), validCols = c(layout.cols);
    if (bounds) {
      validRows = rewriter.createOrFold<arith::TruncIOp>(
          loc, i32, validLanes(rewriter, loc, *bounds, 0, layout.rows));
      validCols = rewriter.createOrFold<arith::TruncIOp>(
          loc, i32, validLanes(rewriter, loc, *bounds, 1, layout.cols));
    }
    Value base = offsetBase(rewriter, loc, *lanes, element);
    Value rowStride = lanes->strides[0].materialize(rewriter, loc, remap);
    int64_t piecesPerRow = chunkCols / per16, pieces = layout.rows * piecesPerRow;
    auto pieceType = VectorType::get({per16}, element);
    for (int64_t first = 0; first < pieces; first += dist.threads) {
      Value piece = rewriter.createOrFold<arith::AddIOp>(loc, dist.threadId, c(first));
      Value row = rewriter.createOrFold<arith::DivUIOp>(loc, piece, c(piecesPerRow));
      Value col = rewriter.createOrFold<arith::MulIOp>(
          loc, rewriter.createOrFold<arith::RemUIOp>(loc, piece, c(piecesPerRow)), c(per16));
      Value matrixCol = rewriter.createOrFold<arith::AddIOp>(loc, col, c(firstCol));
      Value on = rewriter.createOrFold<arith::AndIOp>(
          loc, rewriter.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, row, validRows),
          rewriter.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, matrixCol,
                                               validCols));
      if (first + dist.threads > pieces)
        on = rewriter.createOrFold<arith::AndIOp>(
            loc, on,
            rewriter.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, piece, c(pieces)));
      scf::IfOp::create(rewriter, loc, on, [&](OpBuilder &b, Location l) {
        Value data = LLVM::LoadOp::create(b, l, pieceType, at(b, l, row, col), 16);
        Value offset = b.createOrFold<arith::AddIOp>(
            l,
            b.createOrFold<arith::MulIOp>(l, b.createOrFold<arith::ExtUIOp>(l, i64, row),
                                          rowStride),
            b.createOrFold<arith::ExtUIOp>(l, i64, matrixCol));
        Value ptr = LLVM::GEPOp::create(b, l, base.getType(), element, base, ArrayRef<LLVM::GEPArg>{offset});
        LLVM::StoreOp::create(b, l, data, ptr, 16);
        scf::YieldOp::create(b, l);
      });
    }
  }
  if (bulkStore) {
    // The block may leave (or its last tile's staging area be reused) only once the copy
    // engine has read what it stores; a persistent kernel waits once, after its walk.
    OpBuilder::InsertionGuard guard(rewriter);
    if (dist.persistent)
      if (auto walk = op->getParentOfType<scf::ForOp>())
        rewriter.setInsertionPointAfter(walk);
    onFirstThread("cp.async.bulk.wait_group.read 0;");
  }
  return true;
}
