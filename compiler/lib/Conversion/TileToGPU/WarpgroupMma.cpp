// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a). Four consecutive warps issue one
// m64nNk16 instruction together; it reads both operands straight from shared memory
// through 64-bit matrix descriptors and accumulates into registers in the background,
// so a warp does no fragment reads at all and the tensor cores run while it issues the
// next tile's copies. The operands sit in shared memory as the instruction's swizzle
// atoms (rows of 32, 64 or 128 bytes, 16-byte units XORed with the row's phase, 8 rows
// a group), K-major or, for 16-bit types, M- or N-major through the transpose bits.
//
// The instructions are written as inline PTX, as Triton writes them, rather than MLIR 22's
// nvvm.wgmma.* ops: its wait (nvvm.wgmma.wait.group.sync.aligned) takes no operands, and
// here the accumulator passes through the wait as tied operands, so that LLVM cannot
// schedule a read of it (the epilogue's arithmetic) before the MMAs that write it are done.
#include "GpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <string>

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

namespace {

constexpr int64_t kInstructionRows = 64, kInstructionK = 16, kWarpgroupWarps = 4;

/// The descriptor's swizzle mode field for atom rows of `rowBytes`.
int64_t swizzleMode(int64_t rowBytes) {
  switch (rowBytes) {
  case 128:
    return 1;
  case 64:
    return 2;
  case 32:
    return 3;
  }
  return -1;
}

SmallVector<Value> elementsOf(OpBuilder &b, Location loc, Value vector, int64_t first, int64_t count) {
  SmallVector<Value> elements;
  for (int64_t i = 0; i < count; ++i)
    elements.push_back(vector::ExtractOp::create(b, loc, vector, ArrayRef<int64_t>{first + i}));
  return elements;
}

/// Overwrites elements [first, first + count) with the fields of `structValue`.
void takeFields(OpBuilder &b, Location loc, SmallVector<Value> &elements, int64_t first,
                Value structValue, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    elements[first + i] = LLVM::ExtractValueOp::create(b, loc, structValue, i);
}

/// The accumulator rebuilt in one op, not as a chain of one insert per element: the
/// canonicalizer folds each extract from a chain by walking it, which for 128
/// accumulators per thread took a good share of a kernel's compile.
Value asVector(OpBuilder &b, Location loc, Type type, ArrayRef<Value> elements) {
  return vector::FromElementsOp::create(b, loc, cast<VectorType>(type), elements);
}

std::string registerList(int64_t first, int64_t count) {
  std::string list = "{";
  for (int64_t i = 0; i < count; ++i)
    list += (i ? ", $" : "$") + std::to_string(first + i);
  return list + "}";
}

} // namespace

bool mlir::tile::gpu_lowering::warpgroupMmaFits(DotOp dot, const ::tile::GpuArch &arch, int64_t numWarps) {
  if (arch.matrixUnit != ::tile::MatrixUnit::Wgmma)
    return false;
  auto aType = dot.getA().getType(), bType = dot.getB().getType();
  Type input = aType.getElementType();
  if (!(input.isF16() || input.isBF16()) || !dot.getType().getElementType().isF32())
    return false;
  int64_t m = aType.getDimSize(0), k = aType.getDimSize(1), n = bType.getDimSize(1);
  int64_t warpgroups = numWarps / kWarpgroupWarps;
  if (numWarps % kWarpgroupWarps != 0 || m % (kInstructionRows * warpgroups) != 0)
    return false;
  if (n % 8 != 0 || n > 256 || k % kInstructionK != 0)
    return false;
  auto staged = [](Value operand) { return stagedOperandOf(operand).has_value(); };
  if (!staged(dot.getA()) || !staged(dot.getB()))
    return false;
  // Either dimension of an operand may be the one contiguous in shared memory; each
  // must cut into whole atom rows of 32 bytes or more.
  for (int64_t extent : {m, n, k}) {
    int64_t chunk = std::min<int64_t>(extent, 64);
    if (extent % chunk != 0 || swizzleMode(chunk * 2) < 0)
      return false;
  }
  return true;
}

void mlir::tile::gpu_lowering::fenceSharedForAsyncReads(OpBuilder &b, Location loc) {
  inlinePtx(b, loc, "fence.proxy.async.shared::cta;", 0, "", {}, {});
}

Value mlir::tile::gpu_lowering::waitForWarpgroups(OpBuilder &b, Location loc, int64_t pending, Value acc) {
  std::string ptx = "wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";";
  if (!acc) {
    inlinePtx(b, loc, ptx, 0, "", {}, {});
    return {};
  }
  int64_t count = cast<VectorType>(acc.getType()).getNumElements();
  Value passed = inlinePtx(b, loc, ptx, count, "", {}, elementsOf(b, loc, acc, 0, count));
  SmallVector<Value> elements(count);
  takeFields(b, loc, elements, 0, passed, count);
  return asVector(b, loc, acc.getType(), elements);
}

Value mlir::tile::gpu_lowering::warpgroupMultiply(OpBuilder &b, Location loc, const Distribution &dist,
                                                  const MatrixLayout &layout, const WarpgroupOperand &a,
                                                  const WarpgroupOperand &bOperand, int64_t k, Type input,
                                                  Value acc) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto c32 = [&](int64_t v) { return i32Constant(b, loc, v); };
  auto c64 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i64, v).getResult(); };
  // The descriptor of an operand's stage: its start address, leading and stride byte
  // offsets (all >> 4) and the swizzle mode. An instruction's descriptor adds its
  // offset in the stage (>> 4) to the start address field.
  auto descriptorBase = [&](const WarpgroupOperand &operand) {
    const SharedLayout &shared = operand.shared;
    int64_t rowBytes = shared.chunk * operand.elementBytes;
    Value start = LLVM::PtrToIntOp::create(b, loc, i32, operand.buffer);
    start = b.createOrFold<arith::AddIOp>(
        loc, start,
        b.createOrFold<arith::MulIOp>(loc, operand.slotBase, c32(operand.elementBytes)));
    Value field = b.createOrFold<arith::ExtUIOp>(
        loc, i64,
        b.createOrFold<arith::AndIOp>(loc, b.createOrFold<arith::ShRUIOp>(loc, start, c32(4)),
                                      c32(0x3FFF)));
    // K-major: the leading offset is unused with swizzling (1 by convention), the
    // stride is that of 8-row groups. M/N-major: the leading offset steps from one
    // chunk of rows to the next along M or N, the stride from 8 k rows to the next.
    int64_t leading = operand.kInner ? 16 : shared.outer * rowBytes;
    int64_t stride = 8 * rowBytes;
    uint64_t fixed = (uint64_t(leading >> 4) << 16) | (uint64_t(stride >> 4) << 32) |
                     (uint64_t(swizzleMode(rowBytes)) << 62);
    return b.createOrFold<arith::OrIOp>(loc, field, c64(int64_t(fixed)));
  };
  // The byte offset in a stage of the instruction's (rows or columns `nonK`, k `kk`):
  // the chunk that holds k (K-major) or the rows (M/N-major), then the row in it.
  auto offsetOf = [&](const WarpgroupOperand &operand, int64_t nonK, int64_t kk) {
    const SharedLayout &shared = operand.shared;
    int64_t chunk = shared.chunk;
    int64_t elements = operand.kInner ? (kk / chunk) * shared.outer * chunk + nonK * chunk + kk % chunk
                                      : (nonK / chunk) * shared.outer * chunk + kk * chunk;
    return elements * operand.elementBytes;
  };
  Value aBase = descriptorBase(a), bBase = descriptorBase(bOperand);
  // The warpgroup's first row, in the rows of the a tile: its band of the layout.
  Value warpgroup =
      b.createOrFold<arith::DivUIOp>(loc, dist.threadId, c32(kWarpgroupWarps * dist.arch.waveSize));
  int64_t bandRows = layout.rows / (layout.warpsM / kWarpgroupWarps);
  int64_t rowBytes = a.shared.chunk * a.elementBytes;
  // Rows of a band start at whole atom groups: (band * rows) is the same offset in
  // every chunk, K-major, or whole chunks of rows, M-major.
  Value bandOffset =
      a.kInner ? b.createOrFold<arith::MulIOp>(loc, warpgroup, c32(bandRows * rowBytes))
               : b.createOrFold<arith::MulIOp>(
                     loc, warpgroup, c32(bandRows / a.shared.chunk * a.shared.outer * rowBytes));
  aBase = b.createOrFold<arith::AddIOp>(
      loc, aBase,
      b.createOrFold<arith::ExtUIOp>(loc, i64,
                                     b.createOrFold<arith::ShRUIOp>(loc, bandOffset, c32(4))));

  int64_t n = layout.cols, perInstruction = layout.repN * layout.tile.perLane;
  std::string types = input.isBF16() ? ".f32.bf16.bf16" : ".f32.f16.f16";
  std::string ptx = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16" + types + " " +
                    registerList(0, perInstruction) + ", $" + std::to_string(perInstruction) + ", $" +
                    std::to_string(perInstruction + 1) + ", 1, 1, 1, " + (a.kInner ? "0" : "1") + ", " +
                    (bOperand.kInner ? "0" : "1") + ";";
  inlinePtx(b, loc, "wgmma.fence.sync.aligned;", 0, "", {}, {});
  SmallVector<Value> elements =
      elementsOf(b, loc, acc, 0, cast<VectorType>(acc.getType()).getNumElements());
  for (int64_t step = 0; step < k / kInstructionK; ++step) {
    int64_t kk = step * kInstructionK;
    Value bDesc = b.createOrFold<arith::AddIOp>(loc, bBase, c64(offsetOf(bOperand, 0, kk) >> 4));
    for (int64_t rm = 0; rm < layout.repM; ++rm) {
      Value aDesc = b.createOrFold<arith::AddIOp>(loc, aBase,
                                                  c64(offsetOf(a, rm * kInstructionRows, kk) >> 4));
      int64_t first = rm * perInstruction;
      Value d = inlinePtx(b, loc, ptx, perInstruction, "l,l", ValueRange{aDesc, bDesc},
                          ArrayRef<Value>(elements).slice(first, perInstruction));
      takeFields(b, loc, elements, first, d, perInstruction);
    }
  }
  Value result = asVector(b, loc, acc.getType(), elements);
  inlinePtx(b, loc, "wgmma.commit_group.sync.aligned;", 0, "", {}, {});
  return result;
}

namespace {

/// Whether `op`, which follows a K loop, may run before the wait for the loop's last MMA
/// group: it reads none of the loop's results, and nothing but memory reads, such as the
/// epilogue's bias and its addresses. Those loads then overlap the last MMAs rather than
/// follow them: each tile of a persistent kernel had waited out their latency on top of
/// the drain. Barriers, stores and the other side effects keep their place after the
/// wait.
bool runsBeforeTheDrain(Operation *op, scf::ForOp loop) {
  if (op->hasTrait<OpTrait::IsTerminator>())
    return false;
  WalkResult readsResults = op->walk([&](Operation *nested) {
    bool reads =
        llvm::any_of(nested->getOperands(), [&](Value v) { return v.getDefiningOp() == loop; });
    return reads ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (readsResults.wasInterrupted())
    return false;
  std::optional<SmallVector<MemoryEffects::EffectInstance>> effects = getEffectsRecursively(op);
  return effects && llvm::all_of(*effects, [](const MemoryEffects::EffectInstance &effect) {
           return isa<MemoryEffects::Read>(effect.getEffect());
         });
}

} // namespace

void mlir::tile::gpu_lowering::waitAfterWarpgroupLoops(Operation *root) {
  SmallVector<Operation *> pending;
  root->walk([&](Operation *op) {
    if (op->hasAttr(kWarpgroupPendingAttr))
      pending.push_back(op);
  });
  for (Operation *wait : pending) {
    wait->removeAttr(kWarpgroupPendingAttr);
    auto loop = wait->getParentOfType<scf::ForOp>();
    if (!loop)
      continue;
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    for (auto [index, yielded] : llvm::enumerate(yield.getOperands())) {
      Operation *producer = yielded.getDefiningOp();
      if (!producer || !producer->hasAttr(kWarpgroupAccumulatorAttr))
        continue;
      Value result = loop.getResult(index);
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : result.getUses())
        uses.push_back(&use);
      Operation *wait = loop->getNextNode();
      while (runsBeforeTheDrain(wait, loop))
        wait = wait->getNextNode();
      OpBuilder b(wait);
      Value ready = waitForWarpgroups(b, loop.getLoc(), 0, result);
      for (OpOperand *use : uses)
        use->set(ready);
    }
  }
  root->walk([](Operation *op) { op->removeAttr(kWarpgroupAccumulatorAttr); });
}
