// Fragment prefetch across the K loop's back edge. An iteration of the asynchronous
// pipeline waits for its tile, meets the other warps at a barrier, and only then reads
// its first fragments from shared memory: the matrix units idle through the barrier and
// the read latency. Moving the wait, the barrier and the first k step's fragment reads
// of tile k + 1 to just before tile k's last k step (as CUTLASS's multistage main loop
// and Triton's pipeliner order it) lets those reads overlap the last matrix instructions.
//
// The move keeps the ring safe. After the barrier at the end of iteration k every warp
// has read all of tile k (its last step's fragments are read before it), so the copy
// that iteration k + 1 issues first, into the buffer of tile k, finds it free. And the
// wait before that barrier still leaves S - 2 groups in flight: by then tiles up to
// k + S - 1 are issued, and tile k + 1, the one read next, is complete.
#include "GpuLowering.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::tile::gpu_lowering;

namespace {

/// A read that may move to the previous iteration's end: a pure op, or a read of shared
/// memory (the ring's reads are ordered by the barrier that moves with them).
bool movable(Operation *op) {
  if (op->getNumRegions() != 0)
    return false;
  if (isPure(op))
    return true;
  if (auto call = dyn_cast<LLVM::CallIntrinsicOp>(op))
    return call.getIntrin().starts_with("llvm.nvvm.ldmatrix.");
  if (auto load = dyn_cast<LLVM::LoadOp>(op))
    return cast<LLVM::LLVMPointerType>(load.getAddr().getType()).getAddressSpace() == kSharedAddressSpace;
  return false;
}

/// The ops of `loop`'s body that `fragments` is computed from, in order, or nothing when
/// one of them cannot be recomputed for another iteration.
std::optional<SetVector<Operation *>> readsOf(scf::ForOp loop, Operation *fragments) {
  Block *body = loop.getBody();
  BackwardSliceOptions options;
  options.inclusive = true;
  options.filter = [&](Operation *op) { return op->getBlock() == body; };
  SetVector<Operation *> slice;
  if (failed(getBackwardSlice(fragments, &slice, options)))
    return std::nullopt;
  for (Operation *op : slice) {
    if (!movable(op))
      return std::nullopt;
    for (Value operand : op->getOperands()) {
      // Loop-carried values other than the induction variable differ between iterations
      // in ways the clone one iteration ahead cannot know.
      auto arg = dyn_cast<BlockArgument>(operand);
      if (arg && arg.getOwner() == body && arg != loop.getInductionVar())
        return std::nullopt;
    }
  }
  return slice;
}

/// Clones `reads` at `b`'s point for the iteration whose induction variable is `iv`.
Value cloneReadsAt(OpBuilder &b, scf::ForOp loop, const SetVector<Operation *> &reads, Value iv,
                   Operation *fragments) {
  IRMapping mapping;
  mapping.map(loop.getInductionVar(), iv);
  for (Operation *op : reads)
    b.clone(*op, mapping);
  return mapping.lookup(fragments->getResult(0));
}

void prefetchIn(scf::ForOp loop, Operation *fragments) {
  Block *body = loop.getBody();
  SmallVector<Operation *> waits;
  Operation *lastStep = nullptr;
  for (Operation &op : *body) {
    if (op.hasAttr(kTileWaitAttr))
      waits.push_back(&op);
    if (op.hasAttr(kLastStepAttr))
      lastStep = &op;
  }
  std::optional<SetVector<Operation *>> reads = readsOf(loop, fragments);
  // The waits' operands (the count of groups left in flight) are constants of the body.
  auto constantOfBody = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return !def || def->getBlock() != body || def->hasTrait<OpTrait::ConstantLike>();
  };
  bool waitsMove = llvm::all_of(waits, [&](Operation *wait) {
    return llvm::all_of(wait->getOperands(), constantOfBody);
  });
  if (!reads || !lastStep || waits.empty() || !waitsMove)
    return; // the wait stays at the top of the iteration, before every read

  // The prologue: wait for tile 0, then read its first fragments.
  IRRewriter rewriter(loop->getContext());
  rewriter.setInsertionPoint(loop);
  IRMapping beforeLoop;
  for (Operation *wait : waits) {
    for (Value operand : wait->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && def->getBlock() == body)
        rewriter.clone(*def, beforeLoop);
    rewriter.clone(*wait, beforeLoop);
  }
  Value first = cloneReadsAt(rewriter, loop, *reads, loop.getLowerBound(), fragments);

  // The loop carries them; each iteration reads the next tile's after its wait, which
  // moves to just before the last k step. The new loop replaces (and erases) `loop`.
  auto newLoop = cast<scf::ForOp>(*loop.replaceWithAdditionalYields(
      rewriter, ValueRange{first}, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location, ArrayRef<BlockArgument>) { return SmallVector<Value>{first}; }));
  for (Operation *wait : waits)
    wait->moveBefore(lastStep);
  rewriter.setInsertionPoint(lastStep);
  Value iv = newLoop.getInductionVar();
  Value nextIv = arith::AddIOp::create(rewriter, newLoop.getLoc(), iv, newLoop.getStep());
  Value next = cloneReadsAt(rewriter, newLoop, *reads, nextIv, fragments);
  auto yield = cast<scf::YieldOp>(newLoop.getBody()->getTerminator());
  rewriter.modifyOpInPlace(yield, [&] { yield->setOperand(yield->getNumOperands() - 1, next); });
  fragments->getResult(0).replaceAllUsesWith(newLoop.getRegionIterArgs().back());
  // The original reads are dead now (the shared-memory reads have no other users).
  for (Operation *op : llvm::reverse(*reads))
    if (op->use_empty())
      rewriter.eraseOp(op);
}

} // namespace

void mlir::tile::gpu_lowering::prefetchFirstFragments(Operation *root) {
  SmallVector<Operation *> marked;
  root->walk([&](Operation *op) {
    if (op->hasAttr(kFirstFragmentsAttr))
      marked.push_back(op);
  });
  for (Operation *fragments : marked)
    if (auto loop = dyn_cast<scf::ForOp>(fragments->getParentOp()))
      prefetchIn(loop, fragments);
  root->walk([&](Operation *op) {
    op->removeAttr(kTileWaitAttr);
    op->removeAttr(kFirstFragmentsAttr);
    if (op->hasAttr(kLastStepAttr))
      op->erase();
  });
}
