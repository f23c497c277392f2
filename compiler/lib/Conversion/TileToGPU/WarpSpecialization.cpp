// Warp specialization of a Hopper bulk-copy K loop: the dot's lowering filled a loop of
// its own with the copies (the producer's), before the K loop of warpgroup MMAs. Here
// the kernel is split by thread: the producer warpgroup (the threads after the
// consumers) runs only its loop and leaves; the consumers run the rest. The two sides
// meet only at the stages' full and empty mbarriers, so no block barrier remains in the
// K loop; the consumers' later block barriers become a named barrier of theirs alone.
#include "GpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

namespace {

/// Barrier 0 is the block's (bar.sync 0 / gpu.barrier); the consumers take the next.
constexpr int64_t kConsumerBarrier = 1;

bool hasSideEffects(scf::ForOp loop) {
  WalkResult walk = loop.getBody()->walk([](Operation *op) {
    return isPure(op) || isa<scf::YieldOp, scf::ForOp>(op) ? WalkResult::advance() : WalkResult::interrupt();
  });
  return walk.wasInterrupted();
}

} // namespace

bool mlir::tile::gpu_lowering::splitProducerWarpgroup(Operation *func, Value threadId, int64_t consumerThreads,
                                                      const ::tile::GpuArch &arch) {
  SmallVector<scf::ForOp> loops;
  func->walk([&](scf::ForOp loop) {
    if (loop->hasAttr(kProducerLoopAttr))
      loops.push_back(loop);
  });
  scf::ForOp producer;
  for (scf::ForOp loop : loops) {
    loop->removeAttr(kProducerLoopAttr);
    // A dot that copies otherwise (its operands took the cp.async fallback) left its
    // producer loop empty of work.
    if (!hasSideEffects(loop))
      loop->erase();
    else
      producer = loop;
  }
  if (!producer)
    return false;
  // A persistent kernel's walk over tiles holds the producer's loop: each side walks
  // the tiles in a copy of its own, so that each sets its registers once.
  auto walk = dyn_cast<scf::ForOp>(producer->getParentOp());
  Operation *unit = walk ? walk.getOperation() : producer.getOperation();
  Location loc = producer.getLoc();
  OpBuilder b(unit);
  Value isProducer = b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::uge, threadId,
                                                   i32Constant(b, loc, consumerThreads));
  auto split = scf::IfOp::create(b, loc, isProducer, /*withElseRegion=*/true);
  Block *then = split.thenBlock(), *otherwise = split.elseBlock();
  // The producer hands registers to the consumers (setmaxnreg, as CUTLASS's Hopper
  // kernels do): the SM's registers (one block holds them all), less the producer's 40
  // per thread, shared by the consumers, at most 240 each.
  int64_t producerRegisters = 40;
  int64_t consumerRegisters = std::min<int64_t>(
      240, (int64_t(arch.registersPerSm) - producerRegisters * kWarpgroupThreads) / consumerThreads / 8 * 8);
  auto setRegisters = [&](Block *block, const char *action, int64_t count) {
    OpBuilder at = OpBuilder::atBlockBegin(block);
    inlinePtx(at, loc, std::string("setmaxnreg.") + action + ".sync.aligned.u32 " + std::to_string(count) + ";", 0,
              "", {}, {});
  };
  setRegisters(then, "dec", producerRegisters);
  setRegisters(otherwise, "inc", consumerRegisters);
  if (walk) {
    IRMapping mapping;
    auto producerWalk = cast<scf::ForOp>(OpBuilder::atBlockTerminator(then).clone(*walk, mapping));
    Operation *copied = mapping.lookup(producer.getOperation());
    SmallVector<Operation *> consumerSide;
    for (Operation *op = copied->getNextNode(); op != producerWalk.getBody()->getTerminator(); op = op->getNextNode())
      consumerSide.push_back(op);
    for (Operation *op : llvm::reverse(consumerSide))
      op->erase();
    walk->moveBefore(otherwise->getTerminator());
    producer->erase();
  } else {
    Block *block = producer->getBlock();
    producer->moveBefore(then->getTerminator());
    // Everything after the producer's loop, up to the kernel's return, is the consumers'.
    SmallVector<Operation *> rest;
    for (Operation *op = split->getNextNode(); op && op != block->getTerminator(); op = op->getNextNode())
      rest.push_back(op);
    for (Operation *op : rest)
      op->moveBefore(otherwise->getTerminator());
  }
  otherwise->walk([&](gpu::BarrierOp barrier) {
    OpBuilder at(barrier);
    std::string sync = "bar.sync " + std::to_string(kConsumerBarrier) + ", " + std::to_string(consumerThreads) + ";";
    inlinePtx(at, barrier.getLoc(), sync, 0, "", {}, {});
    barrier.erase();
  });
  return true;
}
