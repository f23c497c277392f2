// The persistent, warp-specialized kernel's epilogue, hidden behind the next tile's MMAs.
// Its MMA warps stage each tile's results in shared memory for the bulk stores, and while
// they do, the tensor cores have nothing to compute: a few percent of every tile. Here
// the staging moves into the next tile. The walk over tiles carries the results (as
// 16-bit pairs) and the tile's corner; the next tile's first K steps are split off its K
// loop, and after each, while its MMAs run, the warps stage a share of the boxes. The last
// tile's staging runs after the walk.
//
// The carried results cost the MMA warps 64 registers across the walk: ptxas allocates
// them, the CUDA 13.0 driver's PTX compiler spills them (a tenth slower than no deferral
// on an H100), so only kernels that ptxas assembles are deferred (the pass's
// defer-epilogue option).
//
// The store's lowering marks each box's staging as a region (kDeferrableEpilogueAttr).
// Splitting a loop's iteration range keeps its meaning whatever the body does, so the
// K loop's barriers, phases and MMA groups are untouched.
#include "GpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

namespace {

/// The next tile's K steps that each take a share of the previous tile's boxes: each
/// step's MMAs cover one box of a 64 x 256 band (128 x 256 blocks, four boxes). In halves
/// over two steps the staging still showed: ncu's cycles of the busiest SM (H100, fixed
/// clocks) at 4096x16384x4096 fell 1.114 M -> 1.100 M with a box per step (cuBLAS 1.123 M),
/// with leaky_relu and a bias 1.132 M -> 1.119 M, and at 4096x4096x16384 1.087 M -> 1.083 M.
constexpr int64_t kDeferredStagingSteps = 4;

bool issuesWarpgroupMma(scf::ForOp loop) {
  WalkResult found = loop.getBody()->walk([](LLVM::InlineAsmOp op) {
    return op.getAsmString().contains("wgmma.mma_async") ? WalkResult::interrupt() : WalkResult::advance();
  });
  return found.wasInterrupted();
}

void inlineInPlace(RewriterBase &rewriter, scf::ExecuteRegionOp region) {
  Block *body = &region.getRegion().front();
  rewriter.eraseOp(body->getTerminator());
  rewriter.inlineBlockBefore(body, region);
  rewriter.eraseOp(region);
}

/// Whether `value` is fixed for the whole `walk` (defined outside it) or computed from
/// such values by pure operations alone (thread indices, buffer addresses): then the
/// staging computes it again where it runs instead of the walk carrying it.
bool recomputable(Region &walk, Value value) {
  if (!walk.isAncestor(value.getParentRegion()))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || def->getNumRegions() != 0 || !isPure(def))
    return false;
  return llvm::all_of(def->getOperands(), [&](Value operand) { return recomputable(walk, operand); });
}

/// Clones the boxes' staging at the builder, with the values the walk carries mapped to
/// `carriedHere` and the recomputable ones computed again.
class StagingCloner {
public:
  StagingCloner(scf::ForOp walk, ArrayRef<Value> carried) : walk(walk.getRegion()), carried(carried) {}

  void clone(OpBuilder &b, ArrayRef<scf::ExecuteRegionOp> boxes, ValueRange carriedHere) const {
    IRMapping mapping;
    mapping.map(carried, carriedHere);
    for (scf::ExecuteRegionOp box : boxes) {
      SetVector<Value> used;
      getUsedValuesDefinedAbove(box.getRegion(), used);
      for (Value value : used)
        recompute(b, mapping, value);
      for (Operation &op : box.getRegion().front().without_terminator())
        b.clone(op, mapping);
    }
  }

private:
  void recompute(OpBuilder &b, IRMapping &mapping, Value value) const {
    if (mapping.contains(value) || !walk.isAncestor(value.getParentRegion()))
      return;
    Operation *def = value.getDefiningOp();
    for (Value operand : def->getOperands())
      recompute(b, mapping, operand);
    b.clone(*def, mapping);
  }

  Region &walk;
  ArrayRef<Value> carried;
};

Value placeholder(OpBuilder &b, Location loc, Type type) {
  if (auto typed = dyn_cast<TypedAttr>(b.getZeroAttr(type)))
    return arith::ConstantOp::create(b, loc, typed);
  return LLVM::ZeroOp::create(b, loc, type);
}

/// Runs `body` where `condition` holds.
void onCondition(OpBuilder &b, Location loc, Value condition, llvm::function_ref<void(OpBuilder &)> body) {
  scf::IfOp::create(b, loc, condition, [&](OpBuilder &then, Location at) {
    body(then);
    scf::YieldOp::create(then, at);
  });
}

} // namespace

void mlir::tile::gpu_lowering::deferEpilogueStaging(Operation *func, bool deferrable) {
  SmallVector<scf::ExecuteRegionOp> boxes;
  func->walk([&](scf::ExecuteRegionOp region) {
    if (region->hasAttr(kDeferrableEpilogueAttr))
      boxes.push_back(region);
  });
  if (boxes.empty())
    return;
  IRRewriter rewriter(func->getContext());
  auto stageInPlace = [&] {
    for (scf::ExecuteRegionOp box : boxes)
      inlineInPlace(rewriter, box);
  };
  // Only a walk whose tiles' stores are the last thing in each step (not one that stores
  // some tiles only, as stream-K's finishing programs do) hands its staging on whole.
  auto walk = dyn_cast<scf::ForOp>(boxes.front()->getParentOp());
  if (!deferrable || !walk ||
      llvm::any_of(boxes, [&](scf::ExecuteRegionOp box) { return box->getParentOp() != walk; }))
    return stageInPlace();
  scf::ForOp kLoop;
  for (Operation &op : walk.getBody()->without_terminator()) {
    if (&op == boxes.front().getOperation())
      break;
    if (auto loop = dyn_cast<scf::ForOp>(op); loop && issuesWarpgroupMma(loop))
      kLoop = loop;
  }
  if (!kLoop)
    return stageInPlace();

  // What the staging reads from the tile's own step (its results, its corner) is carried
  // to the next step.
  SetVector<Value> used;
  for (scf::ExecuteRegionOp box : boxes)
    getUsedValuesDefinedAbove(box.getRegion(), used);
  SmallVector<Value> carried;
  for (Value value : used)
    if (!recomputable(walk.getRegion(), value))
      carried.push_back(value);

  Location loc = walk.getLoc();
  rewriter.setInsertionPoint(walk);
  SmallVector<Value> inits;
  for (Value value : carried)
    inits.push_back(placeholder(rewriter, loc, value.getType()));
  inits.push_back(arith::ConstantIntOp::create(rewriter, loc, 0, 1)); // nothing staged yet
  auto extended = walk.replaceWithAdditionalYields(
      rewriter, inits, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &b, Location at, ArrayRef<BlockArgument>) {
        SmallVector<Value> yielded(carried);
        yielded.push_back(arith::ConstantIntOp::create(b, at, 1, 1));
        return yielded;
      });
  if (failed(extended))
    return stageInPlace();
  walk = cast<scf::ForOp>(extended->getOperation());
  StagingCloner cloner(walk, carried);
  ValueRange previous = walk.getRegionIterArgs().take_back(carried.size() + 1);
  Value pending = previous.back();

  // The next tile's first K steps, one loop each, with a share of the boxes after each.
  int64_t steps = kDeferredStagingSteps, count = int64_t(boxes.size());
  scf::ForOp rest = kLoop;
  for (int64_t step = 0; step < steps; ++step) {
    rewriter.setInsertionPoint(rest);
    Value next = rewriter.createOrFold<arith::AddIOp>(loc, rest.getLowerBound(), rest.getStep());
    Value end = rewriter.createOrFold<arith::MinSIOp>(loc, next, rest.getUpperBound());
    auto head = cast<scf::ForOp>(rewriter.clone(*rest));
    head.getUpperBoundMutable().assign(end);
    rest.getLowerBoundMutable().assign(end);
    rest.getInitArgsMutable().assign(head.getResults());
    rewriter.setInsertionPointAfter(head);
    ArrayRef<scf::ExecuteRegionOp> share =
        ArrayRef(boxes).slice(step * count / steps, (step + 1) * count / steps - step * count / steps);
    onCondition(rewriter, loc, pending, [&](OpBuilder &b) { cloner.clone(b, share, previous.drop_back()); });
  }
  // The last tile's boxes, after the walk.
  rewriter.setInsertionPointAfter(walk);
  ValueRange last = walk.getResults().take_back(carried.size() + 1);
  onCondition(rewriter, loc, last.back(), [&](OpBuilder &b) { cloner.clone(b, boxes, last.drop_back()); });
  for (scf::ExecuteRegionOp box : boxes)
    rewriter.eraseOp(box);
}
