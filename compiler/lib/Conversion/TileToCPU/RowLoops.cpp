// A block's epilogue, one chain of ops per row, as one loop over its rows.
//
// After rowWiseEpilogues a block kept in a tile buffer leaves its K loop as one chain per
// row: the row's load from the buffer, its conversion and epilogue, its mask and its store
// into c. The chains are the same ops; they differ only in the row's index, which shows
// as constants (the row's offset in c), the positions of extracts (the row of a mask) and
// the offsets of getelementptrs (the row's place in the buffer). Unrolled, a 64 x 64
// block's 64 chains were a third of the kernel's LLVM IR and about half of its compile
// time (the optimizer and the instruction selector over one basic block of 64 rows): the
// first call of a 1024^3 bf16 matmul went from 131 to 83 ms, int8 from 145 to 83.
// Here they become an scf.for over the rows whose body is row 0's chain, with each such
// constant, position and offset computed from the row's index: row r's value must be row
// 0's plus r times a fixed step, checked for every row. Anything else that differs
// between the rows keeps them unrolled.
#include "CpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::tile;

namespace {

bool isStore(Operation *op) { return isa<LLVM::StoreOp, LLVM::MaskedStoreOp>(op); }

/// Whether `load` reads a stack buffer (llvm.alloca) that `written` is no address of.
bool inAllocaApartFrom(Operation *load, Value written) {
  Value read = cpu::pointerRoot(cast<LLVM::LoadOp>(load).getAddr());
  return read.getDefiningOp<LLVM::AllocaOp>() && cpu::pointerRoot(written) != read;
}

/// The ops of `block` that `root` depends on through its operands, `root` included,
/// constants left out (they are compared by value, see RowChains).
llvm::SetVector<Operation *> sliceInBlock(Operation *root, Block &block) {
  llvm::SetVector<Operation *> slice;
  SmallVector<Operation *> work = {root};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!slice.insert(op))
      continue;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && def->getBlock() == &block && !def->hasTrait<OpTrait::ConstantLike>())
        work.push_back(def);
    }
  }
  return slice;
}

/// A value that steps by a fixed amount from row to row: row r's is first + r * step.
struct Stepped {
  int64_t first = 0, step = 0;
};

/// `values` (one per row) as first + r * step, where they are.
std::optional<Stepped> steppedOf(ArrayRef<int64_t> values) {
  Stepped stepped{values.front(), values.size() > 1 ? values[1] - values[0] : 0};
  for (auto [r, value] : llvm::enumerate(values))
    if (value != stepped.first + int64_t(r) * stepped.step)
      return std::nullopt;
  return stepped;
}

/// Per row, its chain: the ops of the block that only that row's stores use, in block
/// order. Op j of each row's chain is op j of row 0's but for the stepped constants and
/// attributes, recorded by row 0's op.
struct RowChains {
  SmallVector<SmallVector<Operation *>> rows;
  /// (op of row 0's chain, operand index) -> the constant operand's steps.
  DenseMap<std::pair<Operation *, unsigned>, Stepped> steppedOperands;
  /// Op of row 0's chain -> the steps of each element of its stepped position or indices
  /// (vector.extract's static position, llvm.getelementptr's constant indices).
  DenseMap<Operation *, SmallVector<std::optional<Stepped>>> steppedPositions;
  /// The ops of the block that several rows use (they stay where they are).
  llvm::DenseSet<Operation *> shared;
};

/// The attribute of `op` whose elements may step from row to row, and its elements.
std::optional<std::pair<StringRef, SmallVector<int64_t>>> positionsOf(Operation *op) {
  if (auto extract = dyn_cast<vector::ExtractOp>(op))
    return std::make_pair(extract.getStaticPositionAttrName().getValue(),
                          SmallVector<int64_t>(extract.getStaticPosition()));
  if (auto gep = dyn_cast<LLVM::GEPOp>(op))
    return std::make_pair(gep.getRawConstantIndicesAttrName().getValue(),
                          SmallVector<int64_t>(gep.getRawConstantIndices()));
  return std::nullopt;
}

/// Whether `a` and `b`, ops of one name, carry the same attributes but for `skipped`
/// (none where empty). Compared in place: an op's whole attribute dictionary, inherent
/// attributes included, is built and uniqued in the context each time it is asked for,
/// and the rows' chains compared thousands of ops.
bool sameAttributesBut(Operation *a, Operation *b, StringRef skipped) {
  if (!a->getPropertiesStorageSize()) {
    auto others = [&](Operation *op) {
      return llvm::make_filter_range(
          op->getAttrs(), [&](NamedAttribute attr) { return attr.getName() != skipped; });
    };
    return llvm::equal(others(a), others(b));
  }
  if (a->getDiscardableAttrDictionary() != b->getDiscardableAttrDictionary())
    return false;
  if (skipped.empty())
    return a->getName().compareOpProperties(a->getPropertiesStorage(), b->getPropertiesStorage());
  return llvm::all_of(a->getName().getAttributeNames(), [&](StringAttr name) {
    return name.getValue() == skipped || a->getInherentAttr(name) == b->getInherentAttr(name);
  });
}

/// Whether row `r`'s op `op` is row 0's `first` but for stepped constants and positions,
/// whose row-`r` values are appended to `constants` and `positions`.
bool sameButForRow(Operation *first, Operation *op, const DenseMap<Operation *, size_t> &indexOf0,
                   const DenseMap<Operation *, size_t> &indexOfR,
                   SmallVector<std::optional<int64_t>> &constants,
                   SmallVector<int64_t> &positions) {
  if (first->getName() != op->getName() || first->getNumOperands() != op->getNumOperands() ||
      first->getResultTypes() != op->getResultTypes() || first->getNumRegions() != 0 ||
      op->getNumRegions() != 0)
    return false;
  for (auto [a, b] : llvm::zip(first->getOperands(), op->getOperands())) {
    Operation *defA = a.getDefiningOp(), *defB = b.getDefiningOp();
    auto inA = defA ? indexOf0.find(defA) : indexOf0.end();
    auto inB = defB ? indexOfR.find(defB) : indexOfR.end();
    if (inA != indexOf0.end() || inB != indexOfR.end()) {
      if (inA == indexOf0.end() || inB == indexOfR.end() || inA->second != inB->second ||
          cast<OpResult>(a).getResultNumber() != cast<OpResult>(b).getResultNumber())
        return false;
      constants.push_back(std::nullopt);
      continue;
    }
    APInt valueA, valueB;
    if (matchPattern(a, m_ConstantInt(&valueA)) && matchPattern(b, m_ConstantInt(&valueB)) &&
        a.getType() == b.getType() && a.getType().isSignlessInteger() &&
        valueA.getBitWidth() <= 64) {
      constants.push_back(valueB.getSExtValue());
      continue;
    }
    if (a != b)
      return false;
    constants.push_back(std::nullopt);
  }
  auto positionsFirst = positionsOf(first), positionsOp = positionsOf(op);
  if (positionsFirst) {
    if (positionsFirst->second.size() != positionsOp->second.size())
      return false;
    positions.append(positionsOp->second);
  }
  return sameAttributesBut(first, op, positionsFirst ? positionsFirst->first : StringRef());
}

/// The chains of `rows` (each row's stores, rows in order), where every row's chain is
/// row 0's but for stepped constants and positions, and nothing outside a chain uses it.
std::optional<RowChains> rowChainsOf(Block &block, ArrayRef<SmallVector<Operation *>> rowStores) {
  int64_t rows = rowStores.size();
  SmallVector<llvm::SetVector<Operation *>> slices(rows);
  DenseMap<Operation *, int> rowsUsing;
  for (auto [r, stores] : llvm::enumerate(rowStores)) {
    for (Operation *store : stores)
      for (Operation *op : sliceInBlock(store, block))
        slices[r].insert(op);
    for (Operation *op : slices[r])
      ++rowsUsing[op];
  }
  RowChains chains;
  SmallVector<DenseMap<Operation *, size_t>> indexOf(rows);
  for (int64_t r = 0; r < rows; ++r) {
    SmallVector<Operation *> chain;
    for (Operation *op : slices[r]) {
      if (rowsUsing[op] == 1) {
        chain.push_back(op);
      } else if (cpu::writesMemory(op)) {
        return std::nullopt; // shared by several rows, and it writes memory
      } else {
        chains.shared.insert(op);
      }
    }
    llvm::sort(chain, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    for (auto [j, op] : llvm::enumerate(chain))
      indexOf[r][op] = j;
    // Nothing outside the row's chain may use it: the chain is erased.
    for (Operation *op : chain)
      for (Operation *user : op->getUsers())
        if (!indexOf[r].count(block.findAncestorOpInBlock(*user)))
          return std::nullopt;
    chains.rows.push_back(std::move(chain));
  }
  ArrayRef<Operation *> first = chains.rows.front();
  for (int64_t r = 1; r < rows; ++r)
    if (chains.rows[r].size() != first.size())
      return std::nullopt;
  // Row by row, op by op: the operands and positions of each op of row 0's chain in every
  // row, checked to step by a fixed amount where they differ.
  for (auto [j, op] : llvm::enumerate(first)) {
    SmallVector<SmallVector<std::optional<int64_t>>> constants(rows);
    SmallVector<SmallVector<int64_t>> positions(rows);
    for (int64_t r = 0; r < rows; ++r)
      if (!sameButForRow(op, chains.rows[r][j], indexOf[0], indexOf[r], constants[r], positions[r]))
        return std::nullopt;
    for (unsigned k = 0; k < op->getNumOperands(); ++k) {
      if (!constants[0][k])
        continue;
      SmallVector<int64_t> values;
      for (int64_t r = 0; r < rows; ++r) {
        if (!constants[r][k])
          return std::nullopt;
        values.push_back(*constants[r][k]);
      }
      std::optional<Stepped> stepped = steppedOf(values);
      if (!stepped)
        return std::nullopt;
      if (stepped->step != 0)
        chains.steppedOperands[{op, k}] = *stepped;
    }
    SmallVector<std::optional<Stepped>> steps;
    bool anyStep = false;
    for (size_t e = 0; e < positions[0].size(); ++e) {
      SmallVector<int64_t> values;
      for (int64_t r = 0; r < rows; ++r)
        values.push_back(positions[r][e]);
      std::optional<Stepped> stepped = steppedOf(values);
      if (!stepped)
        return std::nullopt;
      steps.push_back(stepped->step != 0 ? stepped : std::nullopt);
      anyStep |= stepped->step != 0;
    }
    if (anyStep)
      chains.steppedPositions[op] = std::move(steps);
  }
  return chains;
}

/// `stepped` at row `row` (an index), as an integer of `type`.
Value steppedValue(OpBuilder &b, Location loc, Stepped stepped, Value row, Type type) {
  Value index = arith::AddIOp::create(
      b, loc, arith::ConstantIndexOp::create(b, loc, stepped.first),
      arith::MulIOp::create(b, loc, row, arith::ConstantIndexOp::create(b, loc, stepped.step)));
  return type.isIndex() ? index : arith::IndexCastOp::create(b, loc, type, index).getResult();
}

/// Lane `lane` (an index) of the 1-D `vector` computed as a scalar, where `vector` is made
/// lane by lane from splats and arithmetic progressions (the rows' mask: row_start +
/// [0, 1, ...] < M gives row_start + lane < M). x86 has no instruction that takes a
/// lane at a run-time position, and LLVM's way through memory (the vector stored at every
/// row, one byte of it loaded back) had cost about 20 cycles a row. Null where `vector` is
/// built otherwise; `b` null only asks whether it is.
Value laneOf(OpBuilder *b, Location loc, Value vector, Value lane) {
  auto type = dyn_cast<VectorType>(vector.getType());
  if (!type || type.getRank() != 1)
    return Value();
  Type element = type.getElementType();
  if (auto broadcast = vector.getDefiningOp<vector::BroadcastOp>())
    return isa<VectorType>(broadcast.getSource().getType()) ? Value() : broadcast.getSource();
  DenseIntElementsAttr constant;
  if (matchPattern(vector, m_Constant(&constant)) && element.isSignlessInteger() &&
      element.getIntOrFloatBitWidth() <= 64) {
    SmallVector<int64_t> values;
    for (const APInt &value : constant.getValues<APInt>())
      values.push_back(value.getSExtValue());
    std::optional<Stepped> stepped = steppedOf(values);
    if (!stepped)
      return Value();
    return b ? steppedValue(*b, loc, *stepped, lane, element) : vector;
  }
  Operation *def = vector.getDefiningOp();
  if (!def || def->getNumResults() != 1 || def->getNumRegions() != 0 ||
      !OpTrait::hasElementwiseMappableTraits(def) || !isMemoryEffectFree(def) ||
      def->getDialect()->getNamespace() != arith::ArithDialect::getDialectNamespace())
    return Value();
  SmallVector<Value> operands;
  for (Value operand : def->getOperands()) {
    Value scalar = laneOf(b, loc, operand, lane);
    if (!scalar)
      return Value();
    operands.push_back(scalar);
  }
  if (!b)
    return vector;
  OperationState state(loc, def->getName(), operands, {element}, def->getAttrs());
  return b->create(state)->getResult(0);
}

/// Row `row` (an index) of the rank-2 `matrix`, without extracting a row at a run-time
/// position from an n-D vector (LLVM's arrays of vectors take constant positions only):
/// a broadcast of a row, of a column or of a scalar gives its row from its source.
/// Null where `matrix` is built otherwise; `b` null only asks whether it is.
Value rowOfMatrix(OpBuilder *b, Location loc, Value matrix, Value row) {
  auto type = cast<VectorType>(matrix.getType());
  auto rowType = VectorType::get(type.getShape().drop_front(), type.getElementType());
  auto broadcast = matrix.getDefiningOp<vector::BroadcastOp>();
  if (type.getRank() != 2 || type.isScalable() || !broadcast)
    return Value();
  Value source = broadcast.getSource();
  auto sourceType = dyn_cast<VectorType>(source.getType());
  if (!sourceType) // a scalar
    return b ? vector::BroadcastOp::create(*b, loc, rowType, source).getResult() : matrix;
  if (sourceType == rowType) // a row
    return b ? source : matrix;
  // A column (vector<R x 1>): its element `row`, from the 1-D vector it was shaped from.
  auto column = source.getDefiningOp<vector::ShapeCastOp>();
  if (sourceType.getRank() != 2 || sourceType.getDimSize(1) != 1 || !column ||
      cast<VectorType>(column.getSource().getType()).getRank() != 1)
    return Value();
  if (!b)
    return matrix;
  Value element = laneOf(b, loc, column.getSource(), row);
  if (!element)
    element = vector::ExtractOp::create(*b, loc, column.getSource(), ArrayRef<OpFoldResult>{row});
  return vector::BroadcastOp::create(*b, loc, rowType, element);
}

/// Whether row 0's op `op` can be built at a run-time row: its stepped positions, if any,
/// are those of a getelementptr or of an extract from a vector whose rows rowOfMatrix
/// gives, or of an extract of a scalar.
bool buildableAtAnyRow(Operation *op, const RowChains &chains) {
  auto stepped = chains.steppedPositions.find(op);
  if (stepped == chains.steppedPositions.end() || isa<LLVM::GEPOp>(op))
    return true;
  auto extract = dyn_cast<vector::ExtractOp>(op);
  if (!extract)
    return false;
  auto sourceType = cast<VectorType>(extract.getSource().getType());
  if (sourceType.getRank() == 1)
    return true;
  // Only the leading position may step, into a rank-2 vector, taking a whole row.
  return sourceType.getRank() == 2 && extract.getStaticPosition().size() == 1 &&
         rowOfMatrix(nullptr, op->getLoc(), extract.getSource(), Value());
}

/// Row 0's op `op` built in the loop at row `row`, its operands mapped by `mapping`; its
/// results there.
SmallVector<Value> buildAtRow(OpBuilder &b, Operation *op, const RowChains &chains,
                              IRMapping &mapping, Value row) {
  Location loc = op->getLoc();
  SmallVector<Value> operands;
  for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
    auto stepped = chains.steppedOperands.find({op, unsigned(k)});
    operands.push_back(stepped != chains.steppedOperands.end()
                           ? steppedValue(b, loc, stepped->second, row, operand.getType())
                           : mapping.lookupOrDefault(operand));
  }
  auto positions = chains.steppedPositions.find(op);
  if (positions == chains.steppedPositions.end()) {
    Operation *clone = b.clone(*op, mapping);
    clone->setOperands(operands);
    return clone->getResults();
  }
  if (auto gep = dyn_cast<LLVM::GEPOp>(op)) {
    // Raw constant indices interleave with the dynamic ones (kDynamicIndex marks where).
    SmallVector<LLVM::GEPArg> indices;
    auto dynamic = ValueRange(operands).drop_front();
    for (auto [e, raw] : llvm::enumerate(gep.getRawConstantIndices())) {
      if (raw == LLVM::GEPOp::kDynamicIndex) {
        indices.push_back(dynamic.front());
        dynamic = dynamic.drop_front();
      } else if (std::optional<Stepped> step = positions->second[e]) {
        indices.push_back(steppedValue(b, loc, *step, row, b.getI64Type()));
      } else {
        indices.push_back(int32_t(raw));
      }
    }
    return {LLVM::GEPOp::create(b, loc, gep.getType(), gep.getElemType(), operands.front(), indices,
                                gep.getNoWrapFlags())};
  }
  auto extract = cast<vector::ExtractOp>(op);
  Value at = steppedValue(b, loc, *positions->second.front(), row, b.getIndexType());
  auto sourceType = cast<VectorType>(extract.getSource().getType());
  if (sourceType.getRank() == 2)
    return {rowOfMatrix(&b, loc, operands.front(), at)};
  if (Value lane = laneOf(&b, loc, operands.front(), at))
    return {lane};
  return {vector::ExtractOp::create(b, loc, operands.front(), ArrayRef<OpFoldResult>{at})};
}

} // namespace

bool mlir::tile::cpu::rollRowChains(Block &block, function_ref<bool(Operation *)> isRowLoad) {
  // The stores that take a row loaded from an accumulator buffer, grouped by that load:
  // one row each, in the order the rows are stored.
  SmallVector<SmallVector<Operation *>> rowStores;
  DenseMap<Operation *, size_t> rowOfLoad;
  for (Operation &op : block) {
    if (!isStore(&op))
      continue;
    SmallVector<Operation *> loads;
    for (Operation *inSlice : sliceInBlock(&op, block))
      if (isRowLoad(inSlice))
        loads.push_back(inSlice);
    if (loads.empty())
      continue;
    if (loads.size() != 1)
      return false;
    auto [it, isNew] = rowOfLoad.try_emplace(loads.front(), rowStores.size());
    if (isNew)
      rowStores.emplace_back();
    else if (it->second + 1 != rowStores.size())
      return false; // rows interleaved: the loop would reorder their stores
    rowStores[it->second].push_back(&op);
  }
  if (rowStores.size() < 3)
    return false;
  // The first rows' chains are often shorter: their offsets fold where the row's index
  // is 0 (no multiply, no getelementptr) or 1 (no multiply). Then the rows after them are
  // rolled, and they stay as they are.
  constexpr size_t kLeadingRowsKept = 2;
  ArrayRef<SmallVector<Operation *>> rolled = rowStores;
  std::optional<RowChains> chains = rowChainsOf(block, rolled);
  for (size_t kept = 1; !chains && kept <= kLeadingRowsKept && rolled.size() > 3; ++kept) {
    rolled = rolled.drop_front();
    chains = rowChainsOf(block, rolled);
  }
  if (!chains || !llvm::all_of(chains->rows.front(),
                               [&](Operation *op) { return buildableAtAnyRow(op, *chains); }))
    return false;
  // The chains read their accumulator buffer and write c. The loop moves the rolled
  // chains' ops to after the last store: past the stores of the rows kept as they are,
  // which write c and not the buffer, and past nothing else that may write memory.
  llvm::DenseSet<Operation *> inChains, keptStores;
  for (auto &stores : ArrayRef(rowStores).drop_back(rolled.size()))
    keptStores.insert(stores.begin(), stores.end());
  Operation *firstOp = chains->rows.front().front(), *lastStore = rolled.back().back();
  for (auto &chain : chains->rows) {
    inChains.insert(chain.begin(), chain.end());
    if (chain.front()->isBeforeInBlock(firstOp))
      firstOp = chain.front();
  }
  // Nor past a read of what they write: other ops in between may read only accumulator
  // rows from a stack buffer, which no rolled store writes.
  auto storedTo = [](Operation *store) {
    return isa<LLVM::StoreOp>(store) ? cast<LLVM::StoreOp>(store).getAddr()
                                     : cast<LLVM::MaskedStoreOp>(store).getData();
  };
  for (ArrayRef<Operation *> stores : rolled)
    for (Operation *store : stores)
      if (cpu::pointerRoot(storedTo(store)).getDefiningOp<LLVM::AllocaOp>())
        return false;
  for (Operation *op = firstOp; op != lastStore; op = op->getNextNode()) {
    if (inChains.contains(op) || chains->shared.contains(op) || isMemoryEffectFree(op))
      continue;
    if (!writesMemory(op)) {
      if (!isRowLoad(op) ||
          !cpu::pointerRoot(cast<LLVM::LoadOp>(op).getAddr()).getDefiningOp<LLVM::AllocaOp>())
        return false;
      continue;
    }
    if (!keptStores.contains(op))
      return false;
    for (Operation *read : inChains)
      if (!isMemoryEffectFree(read) && !(isRowLoad(read) && inAllocaApartFrom(read, storedTo(op))))
        return false;
  }

  OpBuilder b(lastStore->getContext());
  b.setInsertionPointAfter(lastStore);
  Location loc = firstOp->getLoc();
  auto loop = scf::ForOp::create(b, loc, arith::ConstantIndexOp::create(b, loc, 0),
                                 arith::ConstantIndexOp::create(b, loc, rolled.size()),
                                 arith::ConstantIndexOp::create(b, loc, 1));
  b.setInsertionPoint(loop.getBody()->getTerminator());
  IRMapping mapping;
  for (Operation *op : chains->rows.front()) {
    mapping.map(op->getResults(), buildAtRow(b, op, *chains, mapping, loop.getInductionVar()));
  }
  for (auto &chain : llvm::reverse(chains->rows))
    for (Operation *op : llvm::reverse(chain))
      op->erase();
  return true;
}
