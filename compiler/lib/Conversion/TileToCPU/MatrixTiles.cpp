// A dot's full blocks on x86's tile registers (AMX).
//
// Sapphire Rapids and later Xeons multiply 16x64-byte tiles: tdpbf16ps adds a 16x32 bf16
// tile times a 32x16 one (b's k in pairs, the layout of b_k_group = 2) into a 16x16 f32
// tile, and tdpbssd does the same for int8 (b's k in quads) into i32: 8192 multiply-adds
// per instruction, one instruction per 16 cycles, 8 to 16 times what vdpbf16ps does in
// that time. The block's accumulator, BLOCK_M x BLOCK_N
// in 16x16 tiles, lives in a buffer on the stack (through the program's K loop too, see
// keepAccumulatorsInTileBuffers); up to 2 x 2 of its tiles at a time are loop values in
// tile registers, which LLVM allocates to tmm0-7 beside a tile of a and of b per band
// and chunk: through the dot's whole K loop for a 32 x 32 block, for 8 k steps at a time
// for each 32 x 32 sub-block of a larger one. a's rows are loaded as tiles straight from
// a's memory, 64 bytes of k each, and b's rows of groups straight from b's.
//
// A tile reads whole 64-byte rows: where a block's masks leave lanes off (the matrix's
// edges, a K of no whole tile), the operand's kept lanes are first copied into a buffer
// of zeros on the stack, which the tiles then read; zeros add nothing. Of a block whose
// rows of a are all kept, only the last, partial step of k is copied. So every block
// takes the tiles, and the kernel holds no second, vector path.
//
// The instructions are LLVM's (`llvm.x86.*.internal`, whose tile shapes the backend
// configures with ldtilecfg). MLIR's amx dialect wraps the same intrinsics, but reads its
// tiles from memrefs, where this lowering has pointers.
#include "CpuLowering.h"

#include "tile/Target/CpuArch.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::cpu;

namespace {

/// Marks the stores of an accumulator's rows into its tile buffer and the loads of them
/// back (the row's index), for keepAccumulatorsInTileBuffers.
constexpr StringLiteral kAccumulatorRowAttr = "tile.accumulator_row";

/// Marks the loads of an accumulator's rows after its K loop, for rowWiseEpilogues.
constexpr StringLiteral kAccumulatorLoadAttr = "tile.accumulator_load";

/// Marks the loads of an accumulator's tiles from its buffer at the start of a dot (or of
/// a chunk of its k), for keepAccumulatorsInTileBuffers.
constexpr StringLiteral kAccumulatorTileLoadAttr = "tile.accumulator_tile_load";

/// Marks the loop over a block's sub-blocks: each of its iterations visits other tiles of
/// the accumulator, so a tile's first visit does not wait for its first iteration
/// (readZerosAtFirstVisits).
constexpr StringLiteral kSubBlockLoopAttr = "tile.sub_block_loop";

/// A tile's rows, and its row length in bytes.
constexpr int64_t kTileRows = 16, kTileRowBytes = 64;

/// k steps per chunk where a block has several sub-blocks: 8 (512 bytes of k, 16 KB of a
/// sub-block's rows of a and as much of b). A 64 x 64 bf16 block on a 2-core AMX Xeon
/// ran 2048^3 at 0.84x of oneDNN with 2 steps, 0.92x with 4, 0.98x with 8 and 0.93x with
/// 16.
constexpr int64_t kChunkSteps = 8;

Value i16Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI16Type(), value);
}

Value intrinsic(OpBuilder &b, Location loc, Type result, StringRef name, ValueRange operands) {
  if (!result) {
    LLVM::CallIntrinsicOp::create(b, loc, b.getStringAttr(name), operands);
    return Value();
  }
  return LLVM::CallIntrinsicOp::create(b, loc, result, b.getStringAttr(name), operands)
      .getResult(0);
}

/// A full 16x64-byte tile from `ptr`, its rows `strideBytes` apart.
Value loadTile(OpBuilder &b, Location loc, Value ptr, Value strideBytes) {
  return intrinsic(
      b, loc, LLVM::LLVMX86AMXType::get(b.getContext()), "llvm.x86.tileloadd64.internal",
      {i16Constant(b, loc, kTileRows), i16Constant(b, loc, kTileRowBytes), ptr, strideBytes});
}

/// `tile` stored as a full 16x64-byte tile at `ptr`, its rows `strideBytes` apart.
void storeTile(OpBuilder &b, Location loc, Value ptr, Value strideBytes, Value tile) {
  intrinsic(
      b, loc, Type(), "llvm.x86.tilestored64.internal",
      {i16Constant(b, loc, kTileRows), i16Constant(b, loc, kTileRowBytes), ptr, strideBytes, tile});
}

Value elementsFrom(OpBuilder &b, Location loc, Value base, Type element, Value offset) {
  return LLVM::GEPOp::create(b, loc, base.getType(), element, base, ArrayRef<LLVM::GEPArg>{offset});
}

} // namespace

namespace {

/// The sub-block, in 16x16 tiles (bands x chunks), that the tile registers hold at once:
/// up to 2 x 2 (4 accumulator tiles, 2 of a, 2 of b: all eight registers).
std::pair<int64_t, int64_t> subBlockTiles(int64_t blockM, int64_t blockN) {
  return {std::min<int64_t>(blockM / kTileRows, 2), std::min<int64_t>(blockN / kTileRows, 2)};
}

} // namespace

bool mlir::tile::cpu::fitsMatrixTiles(int64_t blockM, int64_t blockN) {
  if (blockM % kTileRows != 0 || blockN % kTileRows != 0 || blockM == 0 || blockN == 0)
    return false;
  auto [bands, chunks] = subBlockTiles(blockM, blockN);
  return (blockM / kTileRows) % bands == 0 && (blockN / kTileRows) % chunks == 0 &&
         blockM * blockN <= ::tile::kMaxTileAccumulatorElements;
}

namespace {

/// A block's operand as the tiles read it: its first element, its rows' stride in
/// elements.
struct TileSource {
  Value base, rowStride;
};

/// The block `from` (rows of `cols` elements, of which the first `validRows` and
/// `validCols` are kept) into `buffer`, rows `bufferStride` elements apart, zeros in the
/// lanes left off; 64 bytes at a time (`cols` a multiple of them).
void stageBlock(OpBuilder &b, Location loc, const TileOperand &from, Value validRows,
                Value validCols, int64_t rows, Value cols, Value buffer, int64_t bufferStride) {
  int64_t lanes = kTileRowBytes / (from.element.getIntOrFloatBitWidth() / 8);
  Type bits = b.getIntegerType(from.element.getIntOrFloatBitWidth());
  auto chunkType = VectorType::get({lanes}, bits);
  auto laneType = VectorType::get({lanes}, b.getI64Type());
  Value iota = arith::ConstantOp::create(
      b, loc, laneType, b.getI64VectorAttr(llvm::to_vector(llvm::seq<int64_t>(0, lanes))));
  Value zeros = arith::ConstantOp::create(b, loc, chunkType, b.getZeroAttr(chunkType));
  scf::ForOp::create(
      b, loc, i64Constant(b, loc, 0), i64Constant(b, loc, rows), i64Constant(b, loc, 1),
      ValueRange{}, [&](OpBuilder &b, Location loc, Value row, ValueRange) {
        Value rowOn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, row, validRows);
        Value source = elementsFrom(b, loc, from.base, from.element,
                                    arith::MulIOp::create(b, loc, row, from.rowStride));
        Value target =
            elementsFrom(b, loc, buffer, from.element,
                         arith::MulIOp::create(b, loc, row, i64Constant(b, loc, bufferStride)));
        scf::ForOp::create(
            b, loc, i64Constant(b, loc, 0), cols, i64Constant(b, loc, lanes), ValueRange{},
            [&](OpBuilder &b, Location loc, Value col, ValueRange) {
              Value inRow = arith::CmpIOp::create(
                  b, loc, arith::CmpIPredicate::slt,
                  arith::AddIOp::create(b, loc, iota,
                                        vector::BroadcastOp::create(b, loc, laneType, col)),
                  vector::BroadcastOp::create(b, loc, laneType, validCols));
              Value on = arith::AndIOp::create(
                  b, loc, inRow,
                  vector::BroadcastOp::create(b, loc, VectorType::get({lanes}, b.getI1Type()),
                                              rowOn));
              Value chunk = LLVM::MaskedLoadOp::create(
                  b, loc, chunkType, elementsFrom(b, loc, source, from.element, col), on, zeros, 1);
              LLVM::StoreOp::create(b, loc, chunk, elementsFrom(b, loc, target, from.element, col),
                                    1);
              scf::YieldOp::create(b, loc);
            });
        scf::YieldOp::create(b, loc);
      });
}

Value roundUp(OpBuilder &b, Location loc, Value x, int64_t multiple) {
  Value m = i64Constant(b, loc, multiple);
  return arith::MulIOp::create(
      b, loc,
      arith::DivSIOp::create(
          b, loc, arith::AddIOp::create(b, loc, x, i64Constant(b, loc, multiple - 1)), m),
      m);
}

} // namespace

SmallVector<Value> mlir::tile::cpu::matrixTileMicrokernel(OpBuilder &b, Location loc,
                                                          const TileBlock &a,
                                                          const TileBlock &bGroups,
                                                          ValueRange accRows, int64_t k) {
  auto rowType = cast<VectorType>(accRows.front().getType());
  int64_t m = accRows.size(), n = rowType.getDimSize(0);
  int64_t bands = m / kTileRows, chunks = n / kTileRows;
  auto [subBands, subChunks] = subBlockTiles(m, n);
  Type element = a.operand.element;
  int64_t elementBytes = element.getIntOrFloatBitWidth() / 8;
  int64_t group = 4 / elementBytes, kStep = kTileRowBytes / elementBytes;
  int64_t kPadded = (k + kStep - 1) / kStep * kStep;
  bool integer = element.isInteger(8);
  Type amx = LLVM::LLVMX86AMXType::get(b.getContext());
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  auto bytes = [&](Value elements) -> Value {
    return arith::MulIOp::create(b, loc, elements, i64Constant(b, loc, elementBytes));
  };
  auto cmp = [&](arith::CmpIPredicate predicate, Value x, Value y) -> Value {
    return arith::CmpIOp::create(b, loc, predicate, x, y);
  };
  using Pred = arith::CmpIPredicate;

  // The k that a and b both keep, in whole tiles: past it every product is zero.
  Value kKept = arith::MinSIOp::create(
      b, loc, a.validCols,
      arith::MulIOp::create(b, loc, bGroups.validRows, i64Constant(b, loc, group)));
  Value kEnd =
      roundUp(b, loc, arith::MaxSIOp::create(b, loc, kKept, i64Constant(b, loc, 0)), kStep);

  // The accumulator through a buffer on the stack into its tiles. The buffers are the
  // kernel's own, made once at its entry: the same accumulator buffer at every dot of
  // the K loop lets LLVM drop the store of rows it has just loaded from it.
  int64_t rowBytes = n * 4;
  Value buffer = kernelStackBuffer(b, loc, m * rowBytes);
  // One address per row, shared by its store and its load (keepAccumulatorsInTileBuffers
  // matches them by it).
  SmallVector<Value> rowAddresses;
  for (int64_t i = 0; i < m; ++i)
    rowAddresses.push_back(LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), buffer,
                                               ArrayRef<LLVM::GEPArg>{int32_t(i * rowBytes)}));
  auto rowAt = [&](int64_t i) { return rowAddresses[i]; };
  for (auto [i, row] : llvm::enumerate(accRows))
    LLVM::StoreOp::create(b, loc, row, rowAt(i), 64)
        ->setAttr(kAccumulatorRowAttr, b.getI64IntegerAttr(i));
  Value bufferStride = i64Constant(b, loc, rowBytes);
  // The corner of the accumulator's tile (band, chunk) in the buffer.
  auto cornerOf = [&](OpBuilder &b, Location loc, Value band, Value chunk) -> Value {
    Value offset = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, band, i64Constant(b, loc, kTileRows * rowBytes)),
        arith::MulIOp::create(b, loc, chunk, i64Constant(b, loc, kTileRowBytes)));
    return LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), buffer,
                               ArrayRef<LLVM::GEPArg>{offset});
  };
  auto plus = [](OpBuilder &b, Location loc, Value x, int64_t y) -> Value {
    return y == 0 ? x : arith::AddIOp::create(b, loc, x, i64Constant(b, loc, y)).getResult();
  };

  // Each operand from its own memory where every lane a tile reads is kept, else from
  // a staged copy.
  auto source = [&](const TileBlock &block, Value whole, int64_t rows, Value cols,
                    int64_t stagedStride) {
    Value copy = kernelStackBuffer(b, loc, rows * stagedStride * elementBytes);
    auto staged = [&](OpBuilder &b, Location loc) {
      stageBlock(b, loc, block.operand, block.validRows, block.validCols, rows, cols, copy,
                 stagedStride);
      scf::YieldOp::create(b, loc, ValueRange{copy, i64Constant(b, loc, stagedStride)});
    };
    auto own = [&](OpBuilder &b, Location loc) {
      scf::YieldOp::create(b, loc, ValueRange{block.operand.base, block.operand.rowStride});
    };
    auto chosen = scf::IfOp::create(b, loc, whole, own, staged);
    return TileSource{chosen.getResult(0), chosen.getResult(1)};
  };
  // Where all of a's rows are kept, its whole tile steps of k come from its own memory
  // and only a last, partial one (a K that the 64-byte step does not divide) from a
  // staged copy of that step: staging every program's last block of a whole had cost a
  // 1024x1024x1000 int8 matmul 44% of its speed. A block at M's edge stages all of its k.
  Value aRowsWhole = cmp(Pred::eq, a.validRows, i64Constant(b, loc, m));
  Value kWholeSteps = arith::MinSIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc,
                            arith::DivSIOp::create(
                                b, loc,
                                arith::MaxSIOp::create(b, loc, a.validCols, i64Constant(b, loc, 0)),
                                i64Constant(b, loc, kStep)),
                            i64Constant(b, loc, kStep)),
      kEnd);
  Value kInPlace = arith::SelectOp::create(b, loc, aRowsWhole, kWholeSteps, i64Constant(b, loc, 0));
  TileBlock aTail = a;
  aTail.operand.base = elementsFrom(b, loc, a.operand.base, element, kInPlace);
  aTail.validCols = arith::SubIOp::create(b, loc, a.validCols, kInPlace);
  Value aTailWhole = arith::AndIOp::create(
      b, loc, aRowsWhole,
      cmp(Pred::sge, aTail.validCols, arith::SubIOp::create(b, loc, kEnd, kInPlace)));
  Value bWhole = arith::AndIOp::create(
      b, loc, cmp(Pred::eq, bGroups.validCols, i64Constant(b, loc, n * group)),
      cmp(Pred::sge, arith::MulIOp::create(b, loc, bGroups.validRows, i64Constant(b, loc, group)),
          kEnd));
  TileSource aOwn{a.operand.base, a.operand.rowStride};
  TileSource aTailSource =
      source(aTail, aTailWhole, m, arith::SubIOp::create(b, loc, kEnd, kInPlace), kPadded);
  TileSource bSource =
      source(bGroups, bWhole, kPadded / group, i64Constant(b, loc, n * group), n * group);

  Value bStride = bytes(bSource.rowStride);
  // The tiles of the sub-block of `bandCount` bands from `firstBand` and `chunkCount`
  // chunks from `firstChunk`, from k0 to k1: a's and b's tiles loaded once per k step,
  // a's from its own memory before kInPlace and from the staged copy after (chosen per
  // step: one loop, where a second for the staged step had cost 10-14 ms of compile).
  auto multiply = [&](OpBuilder &b, Location loc, Value firstBand, Value firstChunk, Value k0,
                      Value k1, SmallVector<Value> tiles) {
    auto loop = scf::ForOp::create(
        b, loc, k0, k1, i64Constant(b, loc, kStep), tiles,
        [&](OpBuilder &b, Location loc, Value kk, ValueRange state) {
          SmallVector<Value> aTiles, bTiles;
          Value own = cmp(Pred::slt, kk, kInPlace);
          TileSource aSource{
              LLVM::SelectOp::create(b, loc, own, aOwn.base, aTailSource.base),
              arith::SelectOp::create(b, loc, own, aOwn.rowStride, aTailSource.rowStride)};
          Value aFirstK = arith::SelectOp::create(b, loc, own, i64Constant(b, loc, 0), kInPlace);
          Value aStride = bytes(aSource.rowStride);
          for (int64_t band = 0; band < subBands; ++band) {
            Value firstRow = arith::MulIOp::create(b, loc, plus(b, loc, firstBand, band),
                                                   i64Constant(b, loc, kTileRows));
            Value offset = arith::AddIOp::create(
                b, loc, arith::MulIOp::create(b, loc, firstRow, aSource.rowStride),
                arith::SubIOp::create(b, loc, kk, aFirstK));
            aTiles.push_back(
                loadTile(b, loc, elementsFrom(b, loc, aSource.base, element, offset), aStride));
          }
          // b's row of groups kk / group, chunk c's 16 columns of `group` k each.
          Value groupRow = arith::DivUIOp::create(b, loc, kk, i64Constant(b, loc, group));
          Value rowStart = arith::MulIOp::create(b, loc, groupRow, bSource.rowStride);
          for (int64_t chunk = 0; chunk < subChunks; ++chunk) {
            Value offset = arith::AddIOp::create(
                b, loc, rowStart,
                arith::MulIOp::create(b, loc, plus(b, loc, firstChunk, chunk),
                                      i64Constant(b, loc, kTileRows * group)));
            bTiles.push_back(
                loadTile(b, loc, elementsFrom(b, loc, bSource.base, element, offset), bStride));
          }
          SmallVector<Value> next;
          for (int64_t band = 0; band < subBands; ++band)
            for (int64_t chunk = 0; chunk < subChunks; ++chunk)
              next.push_back(
                  intrinsic(b, loc, amx,
                            integer ? "llvm.x86.tdpbssd.internal" : "llvm.x86.tdpbf16ps.internal",
                            {i16Constant(b, loc, kTileRows), i16Constant(b, loc, kTileRowBytes),
                             i16Constant(b, loc, kTileRowBytes), state[band * subChunks + chunk],
                             aTiles[band], bTiles[chunk]}));
          scf::YieldOp::create(b, loc, next);
        });
    return SmallVector<Value>(loop.getResults());
  };
  auto loadSubBlock = [&](OpBuilder &b, Location loc, Value firstBand, Value firstChunk) {
    SmallVector<Value> tiles;
    for (int64_t band = 0; band < subBands; ++band)
      for (int64_t chunk = 0; chunk < subChunks; ++chunk) {
        tiles.push_back(loadTile(
            b, loc,
            cornerOf(b, loc, plus(b, loc, firstBand, band), plus(b, loc, firstChunk, chunk)),
            bufferStride));
        tiles.back().getDefiningOp()->setAttr(kAccumulatorTileLoadAttr, b.getUnitAttr());
      }
    return tiles;
  };
  auto storeSubBlock = [&](OpBuilder &b, Location loc, Value firstBand, Value firstChunk,
                           ValueRange tiles) {
    for (int64_t band = 0; band < subBands; ++band)
      for (int64_t chunk = 0; chunk < subChunks; ++chunk)
        storeTile(b, loc,
                  cornerOf(b, loc, plus(b, loc, firstBand, band), plus(b, loc, firstChunk, chunk)),
                  bufferStride, tiles[band * subChunks + chunk]);
  };
  Value zero = i64Constant(b, loc, 0);
  if (subBands == bands && subChunks == chunks) {
    // One sub-block: its tiles stay in registers through the whole K loop.
    storeSubBlock(b, loc, zero, zero,
                  multiply(b, loc, zero, zero, zero, kEnd, loadSubBlock(b, loc, zero, zero)));
  } else {
    // Several: a few k steps at a time, over which each sub-block's tiles go in and out of
    // the buffer while the others' a and b rows wait in L1, so that each row comes
    // from L2 once per chunk of k rather than once per sub-block.
    // At least one chunk, of no k where the block keeps none: every tile is then loaded
    // and stored back at every dot (see readZerosAtFirstVisits).
    int64_t chunkK = kChunkSteps * kStep;
    Value chunksEnd = arith::MaxSIOp::create(b, loc, kEnd, i64Constant(b, loc, 1));
    scf::ForOp::create(b, loc, zero, chunksEnd, i64Constant(b, loc, chunkK), ValueRange{},
                       [&](OpBuilder &b, Location loc, Value k0, ValueRange) {
                         Value k1 = arith::MinSIOp::create(
                             b, loc, arith::AddIOp::create(b, loc, k0, i64Constant(b, loc, chunkK)),
                             kEnd);
                         // The sub-blocks as a loop, not unrolled: each is a K loop of
                         // its own, and four of them had been a fifth of a 64 x 64
                         // kernel's compile.
                         int64_t perRow = chunks / subChunks;
                         auto subBlocks = scf::ForOp::create(
                             b, loc, zero, i64Constant(b, loc, (bands / subBands) * perRow),
                             i64Constant(b, loc, 1), ValueRange{},
                             [&](OpBuilder &b, Location loc, Value sub, ValueRange) {
                               Value band = arith::MulIOp::create(
                                   b, loc,
                                   arith::DivUIOp::create(b, loc, sub, i64Constant(b, loc, perRow)),
                                   i64Constant(b, loc, subBands));
                               Value chunk = arith::MulIOp::create(
                                   b, loc,
                                   arith::RemUIOp::create(b, loc, sub, i64Constant(b, loc, perRow)),
                                   i64Constant(b, loc, subChunks));
                               storeSubBlock(b, loc, band, chunk,
                                             multiply(b, loc, band, chunk, k0, k1,
                                                      loadSubBlock(b, loc, band, chunk)));
                               scf::YieldOp::create(b, loc);
                             });
                         subBlocks->setAttr(kSubBlockLoopAttr, b.getUnitAttr());
                         // LLVM would unroll it again (four trips).
                         subBlocks->setAttr("llvm.loop_annotation",
                                            parseAttribute("#llvm.loop_annotation<unroll = "
                                                           "<disable = true>>",
                                                           b.getContext()));
                         scf::YieldOp::create(b, loc);
                       });
  }

  SmallVector<Value> rows;
  for (int64_t i = 0; i < m; ++i) {
    auto load = LLVM::LoadOp::create(b, loc, rowType, rowAt(i), 64);
    load->setAttr(kAccumulatorRowAttr, b.getI64IntegerAttr(i));
    rows.push_back(load);
  }
  return rows;
}

namespace {

/// The rows of loop `loop`'s iter arg `index` as the tile dots store them (row i's store
/// at position i), where that is all the loop does with them; else empty.
SmallVector<LLVM::StoreOp> rowStoresOf(scf::ForOp loop, unsigned index) {
  Value carried = loop.getRegionIterArg(index);
  auto rows = cast<VectorType>(carried.getType()).getDimSize(0);
  SmallVector<LLVM::StoreOp> stores(rows);
  for (Operation *user : carried.getUsers()) {
    auto extract = dyn_cast<vector::ExtractOp>(user);
    if (!extract || extract->getBlock() != loop.getBody() || !extract->hasOneUse() ||
        extract.getStaticPosition().size() != 1)
      return {};
    auto store = dyn_cast<LLVM::StoreOp>(*extract->getUsers().begin());
    auto row = store ? store->getAttrOfType<IntegerAttr>(kAccumulatorRowAttr) : IntegerAttr();
    int64_t i = extract.getStaticPosition()[0];
    if (!row || row.getInt() != i || store.getValue() != extract.getResult() || stores[i])
      return {};
    stores[i] = store;
  }
  if (llvm::any_of(stores, [](LLVM::StoreOp store) { return !store; }))
    return {};
  return stores;
}

/// The loads that make up what `loop` yields for iter arg `index` (row i's at position
/// i, joined by vector.insert into a constant), where that is all it yields; else empty.
SmallVector<LLVM::LoadOp> rowLoadsOf(scf::ForOp loop, unsigned index, int64_t rows) {
  SmallVector<LLVM::LoadOp> loads(rows);
  Value joined = loop.getBody()->getTerminator()->getOperand(index);
  while (auto insert = joined.getDefiningOp<vector::InsertOp>()) {
    auto load = insert.getValueToStore().getDefiningOp<LLVM::LoadOp>();
    auto row = load ? load->getAttrOfType<IntegerAttr>(kAccumulatorRowAttr) : IntegerAttr();
    if (!row || !insert->hasOneUse() || insert.getStaticPosition().size() != 1 ||
        insert.getStaticPosition()[0] != row.getInt() || loads[row.getInt()])
      return {};
    loads[row.getInt()] = load;
    joined = insert.getDest();
  }
  if (!joined.getDefiningOp<arith::ConstantOp>() ||
      llvm::any_of(loads, [](LLVM::LoadOp load) { return !load; }))
    return {};
  return loads;
}

/// The bytes of a row of the accumulator where `init` is zeros and its row stores fill a
/// buffer of whole tiles (row i at i row lengths from row 0's address, 16 rows and 64
/// bytes at a time); else nothing.
std::optional<int64_t> zeroedRowBytes(Value init, MutableArrayRef<LLVM::StoreOp> stores) {
  if ((!matchPattern(init, m_Zero()) && !matchPattern(init, m_PosZeroFloat())) || stores.empty() ||
      stores.size() % kTileRows != 0)
    return std::nullopt;
  auto rowType = cast<VectorType>(stores.front().getValue().getType());
  int64_t rowBytes = rowType.getNumElements() * rowType.getElementTypeBitWidth() / 8;
  auto first = stores.front().getAddr().getDefiningOp<LLVM::GEPOp>();
  if (!first || rowBytes % kTileRowBytes != 0)
    return std::nullopt;
  for (auto [i, store] : llvm::enumerate(stores)) {
    auto gep = store.getAddr().getDefiningOp<LLVM::GEPOp>();
    if (!gep || gep.getBase() != first.getBase() || !gep.getElemType().isInteger(8) ||
        gep.getDynamicIndices().size() != 0 || gep.getRawConstantIndices().size() != 1 ||
        gep.getRawConstantIndices()[0] != int64_t(i) * rowBytes + first.getRawConstantIndices()[0])
      return std::nullopt;
  }
  return rowBytes;
}

/// `value` at `b`'s insertion point outside `loop`: its defining op cloned there, with the
/// operands it takes from inside the loop cloned first (address arithmetic on the
/// kernel's buffers, invariant in the loop).
Value cloneOutOf(OpBuilder &b, scf::ForOp loop, Value value) {
  Operation *def = value.getDefiningOp();
  if (!def || !loop->isAncestor(def))
    return value;
  IRMapping mapping;
  for (Value operand : def->getOperands())
    mapping.map(operand, cloneOutOf(b, loop, operand));
  return b.clone(*def, mapping)->getResult(0);
}

/// The address of 64 bytes of zeros, a constant of the kernel's module.
Value zeroRow(OpBuilder &b, Location loc, Operation *kernel) {
  constexpr StringLiteral kSymbol = "tile_zero_row";
  auto module = kernel->getParentOfType<ModuleOp>();
  if (!module.lookupSymbol(kSymbol)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto bytes = RankedTensorType::get({kTileRowBytes}, b.getI8Type());
    LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), kTileRowBytes),
                           /*isConstant=*/true, LLVM::Linkage::Internal, kSymbol,
                           DenseElementsAttr::get(bytes, b.getI8IntegerAttr(0)), kTileRowBytes);
  }
  return LLVM::AddressOfOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()), kSymbol);
}

/// Each load of an accumulator tile in `loop` that is the first visit of its tile (every
/// enclosing loop up to `loop` at its first iteration) reads the constant row of zeros,
/// 16 times (row stride 0), instead of zeros stored over the buffer: a tile load waits for
/// the tile stores to the same lines to complete, and that wait had taken a fifth of a
/// 256x256x64 int8 kernel's time (one k step per block). Returns whether every iteration
/// of `loop` loads (and so stores back) every tile: only loops enclose the loads (a dot
/// loads all its tiles, in at least one chunk of k), so that the first iteration writes
/// the whole buffer and no later one reads what it did not.
bool readZerosAtFirstVisits(scf::ForOp loop, Value buffer, Operation *kernel) {
  SmallVector<LLVM::CallIntrinsicOp> loads;
  loop.getBody()->walk([&](LLVM::CallIntrinsicOp call) {
    if (call->hasAttr(kAccumulatorTileLoadAttr) &&
        pointerRoot(call->getOperand(2)) == pointerRoot(buffer))
      loads.push_back(call);
  });
  bool everyIteration = !loads.empty();
  for (LLVM::CallIntrinsicOp load : loads) {
    OpBuilder b(load);
    Location loc = load.getLoc();
    Value first;
    for (Operation *parent = load->getParentOp();; parent = parent->getParentOp()) {
      everyIteration &= isa<scf::ForOp>(parent);
      auto enclosing = dyn_cast<scf::ForOp>(parent);
      if (enclosing && !enclosing->hasAttr(kSubBlockLoopAttr)) {
        Value atStart =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, enclosing.getInductionVar(),
                                  enclosing.getLowerBound());
        first = first ? arith::AndIOp::create(b, loc, first, atStart) : atStart;
      }
      if (parent == loop.getOperation())
        break;
    }
    // tileloadd64's operands: rows, row bytes, address, stride.
    load->removeAttr(kAccumulatorTileLoadAttr);
    load->setOperand(
        2, LLVM::SelectOp::create(b, loc, first, zeroRow(b, loc, kernel), load->getOperand(2)));
    load->setOperand(
        3, arith::SelectOp::create(b, loc, first, i64Constant(b, loc, 0), load->getOperand(3)));
  }
  return everyIteration;
}

} // namespace

void mlir::tile::cpu::keepAccumulatorsInTileBuffers(Operation *kernel) {
  SmallVector<scf::ForOp> loops;
  kernel->walk([&](scf::ForOp loop) { loops.push_back(loop); });
  for (scf::ForOp loop : loops) {
    for (unsigned index = 0; index < loop.getNumRegionIterArgs(); ++index) {
      auto type = dyn_cast<VectorType>(loop.getRegionIterArg(index).getType());
      if (!type || type.getRank() != 2)
        continue;
      SmallVector<LLVM::StoreOp> stores = rowStoresOf(loop, index);
      SmallVector<LLVM::LoadOp> loads = stores.empty()
                                            ? SmallVector<LLVM::LoadOp>()
                                            : rowLoadsOf(loop, index, type.getDimSize(0));
      if (loads.empty() || !llvm::all_of(llvm::zip(stores, loads), [](auto pair) {
            return std::get<0>(pair).getAddr() == std::get<1>(pair).getAddr();
          }))
        continue;
      // The accumulator lives in the buffer through the loop: its first value is
      // stored before the loop, its last loaded after it, and the loop carries nothing.
      OpBuilder b(loop);
      Location loc = loop.getLoc();
      Value init = loop.getInitArgs()[index];
      if (std::optional<int64_t> rowBytes = zeroedRowBytes(init, stores)) {
        // Zeros by one tile of zeros stored over the buffer: the row stores of zeros
        // became a call to memset, after which each program instance loaded the tile
        // configuration again (ldtilecfg, about 180 cycles on a Xeon); an inline memset
        // took 512 stores for a 64 x 64 block. Where the loop's first iteration writes
        // the whole buffer, only a loop of no iteration needs them (256x256x64 int8, one
        // thread: 15.2 -> 13.0 us without them).
        Value corner = cloneOutOf(b, loop, stores.front().getAddr());
        auto zeroFill = [&](OpBuilder &b, Location loc) {
          Value zeros = intrinsic(
              b, loc, LLVM::LLVMX86AMXType::get(b.getContext()), "llvm.x86.tilezero.internal",
              {i16Constant(b, loc, kTileRows), i16Constant(b, loc, kTileRowBytes)});
          for (int64_t row = 0; row < int64_t(stores.size()); row += kTileRows)
            for (int64_t column = 0; column < *rowBytes; column += kTileRowBytes)
              storeTile(
                  b, loc,
                  LLVM::GEPOp::create(b, loc, corner.getType(), b.getI8Type(), corner,
                                      ArrayRef<LLVM::GEPArg>{int32_t(row * *rowBytes + column)}),
                  i64Constant(b, loc, *rowBytes), zeros);
        };
        if (readZerosAtFirstVisits(loop, corner, kernel)) {
          Value noIteration = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                                    loop.getLowerBound(), loop.getUpperBound());
          scf::IfOp::create(b, loc, noIteration, [&](OpBuilder &b, Location loc) {
            zeroFill(b, loc);
            scf::YieldOp::create(b, loc);
          });
        } else {
          zeroFill(b, loc);
        }
      } else {
        for (auto [i, store] : llvm::enumerate(stores)) {
          Value row = vector::ExtractOp::create(b, loc, init, ArrayRef<int64_t>{int64_t(i)});
          LLVM::StoreOp::create(b, loc, row, cloneOutOf(b, loop, store.getAddr()),
                                store.getAlignment().value_or(0));
        }
      }
      b.setInsertionPointAfter(loop);
      Value last = arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
      for (auto [i, load] : llvm::enumerate(loads)) {
        auto rowLoad =
            LLVM::LoadOp::create(b, loc, load.getType(), cloneOutOf(b, loop, load.getAddr()),
                                 load.getAlignment().value_or(0));
        rowLoad->setAttr(kAccumulatorLoadAttr, b.getUnitAttr());
        Value row = rowLoad;
        last = vector::InsertOp::create(b, loc, row, last, ArrayRef<int64_t>{int64_t(i)});
      }
      loop.getResult(index).replaceAllUsesWith(last);
      for (LLVM::StoreOp store : stores) {
        Operation *extract = store.getValue().getDefiningOp();
        store.erase();
        extract->erase();
      }
      loop.getBody()->getTerminator()->setOperand(index, loop.getRegionIterArg(index));
    }
  }
  kernel->walk([](Operation *op) {
    op->removeAttr(kAccumulatorRowAttr);
    op->removeAttr(kAccumulatorTileLoadAttr);
    op->removeAttr(kSubBlockLoopAttr);
  });
}

namespace {

/// vector.extract %e[i] of an elementwise op on rank-2 vectors -> the op on row i of each
/// vector operand: the epilogue of a block then computes each row where it is stored.
struct ExtractRowOfElementwise : OpRewritePattern<vector::ExtractOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::ExtractOp extract,
                                PatternRewriter &rewriter) const override {
    Operation *def = extract.getSource().getDefiningOp();
    auto sourceType = dyn_cast<VectorType>(extract.getSource().getType());
    if (!def || !sourceType || sourceType.getRank() != 2 || def->getNumResults() != 1 ||
        !OpTrait::hasElementwiseMappableTraits(def) || def->getNumRegions() != 0 ||
        extract.getStaticPosition().size() != 1 || !extract.getDynamicPosition().empty())
      return failure();
    int64_t row = extract.getStaticPosition()[0];
    if (row == ShapedType::kDynamic)
      return failure();
    SmallVector<Value> operands;
    for (Value operand : def->getOperands()) {
      auto type = dyn_cast<VectorType>(operand.getType());
      if (!type || type.getShape() != sourceType.getShape())
        return failure();
      operands.push_back(
          vector::ExtractOp::create(rewriter, extract.getLoc(), operand, ArrayRef<int64_t>{row}));
    }
    auto resultType = cast<VectorType>(def->getResult(0).getType());
    OperationState state(
        extract.getLoc(), def->getName(), operands,
        {VectorType::get(resultType.getShape().drop_front(), resultType.getElementType())},
        def->getAttrs());
    rewriter.replaceOp(extract, rewriter.create(state)->getResults());
    return success();
  }
};

/// Whether `op` may move later in its block to just before `user`: it has no memory
/// effects, or it reads an accumulator buffer (which nothing between writes: after the K
/// loop only c is written).
bool sinkable(Operation *op) {
  if (isPure(op))
    return true;
  return op->hasAttr(kAccumulatorLoadAttr) && isa<LLVM::LoadOp>(op);
}

/// The order of a block's ops while ops move in it, for many queries between moves.
/// Operation::isBeforeInBlock renumbers the whole block at the first query after a move
/// that found no free number between its neighbours (MLIR leaves gaps of 5), which made
/// sinking the rows of a 64 x 64 block quadratic. Here the gaps are 2^32, and a move takes
/// the middle of its gap.
class OrderInBlock {
public:
  explicit OrderInBlock(Block &block) : block_(block) { renumber(); }

  bool before(Operation *a, Operation *b) const { return place_.lookup(a) < place_.lookup(b); }

  /// Moves `op` just before `next`, another op of the block.
  void moveBefore(Operation *op, Operation *next) {
    Operation *previous = next->getPrevNode();
    op->moveBefore(next);
    uint64_t low = previous ? place_.lookup(previous) : 0, high = place_.lookup(next);
    if (high - low < 2)
      return renumber();
    place_[op] = low + (high - low) / 2;
  }

private:
  void renumber() {
    uint64_t place = 0;
    for (Operation &op : block_)
      place_[&op] = place += uint64_t(1) << 32;
  }

  Block &block_;
  DenseMap<Operation *, uint64_t> place_;
};

} // namespace

void mlir::tile::cpu::rowWiseEpilogues(Operation *kernel) {
  // Only kernels with accumulators kept in tile buffers (the vector kernels keep theirs in
  // registers, a few rows at most). Their other blocks are sunk too: the staging of edges
  // and the K loops' address arithmetic then hold fewer values at once (a 64 x 64 bf16
  // kernel compiled in 168 ms against 180 with only its epilogue sunk).
  bool keptInBuffers = false;
  kernel->walk([&](LLVM::LoadOp load) { keptInBuffers |= load->hasAttr(kAccumulatorLoadAttr); });
  if (!keptInBuffers)
    return;
  RewritePatternSet patterns(kernel->getContext());
  patterns.add<ExtractRowOfElementwise>(kernel->getContext());
  vector::ExtractOp::getCanonicalizationPatterns(patterns, kernel->getContext());
  vector::BroadcastOp::getCanonicalizationPatterns(patterns, kernel->getContext());
  vector::ShapeCastOp::getCanonicalizationPatterns(patterns, kernel->getContext());
  // Rows out of elementwise ops only: the blocks and regions are left as they are (the
  // canonicalizer at the end of the lowering to LLVM simplifies them).
  (void)applyPatternsGreedily(
      kernel, std::move(patterns),
      GreedyRewriteConfig().setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled));
  // Each value just before its first user in its block, latest ops first, so that a
  // row's chain (load, convert, mask, store) stays together and few rows are live at once.
  kernel->walk([&](Block *block) {
    SmallVector<Operation *> ops;
    for (Operation &op : *block)
      ops.push_back(&op);
    OrderInBlock order(*block);
    for (Operation *op : llvm::reverse(ops)) {
      if (op->hasTrait<OpTrait::IsTerminator>() || !sinkable(op) || op->getNumResults() == 0)
        continue;
      Operation *first = nullptr;
      for (Operation *user : op->getUsers()) {
        Operation *inBlock = block->findAncestorOpInBlock(*user);
        if (!inBlock) {
          first = nullptr;
          break;
        }
        if (!first || order.before(inBlock, first))
          first = inBlock;
      }
      if (!first || first == op->getNextNode() || order.before(first, op))
        continue;
      if (auto load = dyn_cast<LLVM::LoadOp>(op)) {
        // A load moves past no op that may write memory but stores outside its buffer.
        // Ops that only read may hold regions: a bias row's load is an scf.if of its
        // contiguous, masked and gathered forms, which the rows' loads must pass to join
        // their chains (else all 64 rows stay loaded above it and the rows never roll).
        Value buffer = pointerRoot(load.getAddr());
        bool clear = true;
        for (Operation *it = op->getNextNode(); it != first && clear; it = it->getNextNode()) {
          if (auto store = dyn_cast<LLVM::StoreOp>(it))
            clear = pointerRoot(store.getAddr()) != buffer;
          else if (auto store = dyn_cast<LLVM::MaskedStoreOp>(it))
            clear = pointerRoot(store.getData()) != buffer;
          else
            clear = !writesMemory(it);
        }
        if (!clear)
          continue;
      }
      order.moveBefore(op, first);
    }
  });
  // The rows' chains, now side by side, as one loop over the rows.
  SetVector<Block *> epilogues;
  kernel->walk([&](LLVM::LoadOp load) {
    if (load->hasAttr(kAccumulatorLoadAttr))
      epilogues.insert(load->getBlock());
  });
  for (Block *block : epilogues)
    rollRowChains(*block, [](Operation *op) { return op->hasAttr(kAccumulatorLoadAttr); });
  kernel->walk([](Operation *op) { op->removeAttr(kAccumulatorLoadAttr); });
}
