// tile.dot on GPUs: each operand is copied from global memory into a swizzled
// shared-memory layout that follows its contiguous dimension, read back as fragments of
// the arch's matrix instruction with wide reads (ldmatrix on NVIDIA, 64/128-bit LDS reads
// on AMD), and multiplied on the matrix units. With num_stages = S > 1 the K loop is
// software-pipelined, the copies of tile k + S - 1 in flight while the matrix
// instructions of tile k run:
// - with asynchronous copies (NVIDIA cp.async), straight into a ring of S shared-memory
//   buffers, one commit group per tile;
// - without (AMD), tiles k + 1 .. k + S - 2 wait in a ring of S - 1 buffers and tile
//   k + S - 1 in registers.
#include "GpuLowering.h"

#include "tile/Conversion/BlockAccess.h"
#include "tile/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

namespace {

Value c64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
}

void collectFactors(const ScalarPoly &poly, SmallVectorImpl<Value> &out) {
  for (const auto &monomial : poly.monomials)
    out.append(monomial.factors.begin(), monomial.factors.end());
}

/// `value` at another iteration of `loop`: the pure scalar ops between the induction
/// variable and it are cloned at the builder's point (in the loop, or before it) with
/// the induction variable mapped by `mapping` (to iv + distance * step, or to an
/// iteration's value). Null when it depends on anything else that changes per iteration.
Value aheadOf(OpBuilder &b, scf::ForOp loop, Value value, IRMapping &mapping) {
  if (Value known = mapping.lookupOrNull(value))
    return known;
  if (!loop.getRegion().isAncestor(value.getParentRegion()))
    return value;
  Operation *op = value.getDefiningOp();
  if (!op || op->getNumRegions() != 0 || !isPure(op) || op->getNumResults() != 1)
    return {};
  for (Value operand : op->getOperands())
    if (!aheadOf(b, loop, operand, mapping))
      return {};
  Operation *clone = b.clone(*op, mapping);
  return clone->getResult(0);
}

} // namespace

PipelinePlans mlir::tile::gpu_lowering::planPipelines(Operation *kernel, int64_t numStages,
                                                     int64_t ringSize, bool producerLoops) {
  PipelinePlans plans;
  if (numStages < 2)
    return plans;
  kernel->walk([&](DotOp dot) {
    auto loop = dyn_cast<scf::ForOp>(dot->getParentOp());
    auto lhs = stagedOperandOf(dot.getA()), rhs = stagedOperandOf(dot.getB());
    if (!loop || !lhs || !rhs)
      return;
    SmallVector<Value> leaves;
    for (const StagedOperand *operand : {&*lhs, &*rhs}) {
      leaves.push_back(operand->lanes.basePtr);
      collectFactors(operand->lanes.offset, leaves);
      for (const ScalarPoly &stride : operand->lanes.strides)
        collectFactors(stride, leaves);
      for (const auto &bounds : operand->bounds.upper)
        for (const ScalarPoly &bound : bounds)
          collectFactors(bound, leaves);
    }
    OpBuilder b(dot);
    Location loc = dot.getLoc();
    Value iv = loop.getInductionVar();
    Type ivType = iv.getType();
    auto toI32 = [&](Value v) -> Value {
      if (v.getType().isIndex())
        return b.createOrFold<arith::IndexCastOp>(loc, b.getI32Type(), v);
      if (v.getType().getIntOrFloatBitWidth() > 32)
        return b.createOrFold<arith::TruncIOp>(loc, b.getI32Type(), v);
      return v;
    };
    // The leaves' values at iteration `start` + d steps, cloned at `at`, and whether that
    // iteration exists; false when a leaf cannot be recomputed there.
    auto scalarsAt = [&](OpBuilder &at, Value start, int64_t d, DenseMap<Value, Value> &shifted,
                         Value &inRange) {
      Value distance = arith::ConstantOp::create(at, loc, ivType, at.getIntegerAttr(ivType, d));
      Value ivAt = at.createOrFold<arith::AddIOp>(
          loc, start, at.createOrFold<arith::MulIOp>(loc, distance, loop.getStep()));
      IRMapping mapping;
      mapping.map(iv, ivAt);
      for (Value leaf : leaves) {
        Value value = aheadOf(at, loop, leaf, mapping);
        if (!value)
          return false;
        shifted[leaf] = value;
      }
      inRange = at.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, ivAt,
                                               loop.getUpperBound());
      return true;
    };
    PipelinedLoop plan;
    // The prologue's scalars, cloned before the loop for its first S - 1 iterations.
    OpBuilder before(loop);
    for (int64_t d = 0; d + 1 < numStages; ++d) {
      DenseMap<Value, Value> shifted;
      Value inRange;
      if (!scalarsAt(before, loop.getLowerBound(), d, shifted, inRange))
        return;
      plan.prologue.push_back(std::move(shifted));
      plan.prologueInRange.push_back(inRange);
    }
    // In the loop: d iterations ahead of this one, and the stage each goes to.
    Value iteration = b.createOrFold<arith::DivSIOp>(
        loc, b.createOrFold<arith::SubIOp>(loc, iv, loop.getLowerBound()), loop.getStep());
    for (int64_t d = 0; d < numStages; ++d) {
      DenseMap<Value, Value> shifted;
      Value inRange;
      if (!scalarsAt(b, iv, d, shifted, inRange))
        return;
      plan.shifted.push_back(std::move(shifted));
      plan.inRange.push_back(inRange);
      Value slot = b.createOrFold<arith::RemSIOp>(
          loc,
          b.createOrFold<arith::AddIOp>(
              loc, iteration,
              arith::ConstantOp::create(b, loc, ivType, b.getIntegerAttr(ivType, d))),
          arith::ConstantOp::create(b, loc, ivType, b.getIntegerAttr(ivType, ringSize)));
      plan.slot.push_back(toI32(slot));
    }
    plan.iteration = iteration;
    // The iterations of the earlier tiles of a walk over tiles (the loop around this one,
    // from the same point of which both the producer's and this loop start).
    // A loop that counts the program's steps itself (stream-K, whose tiles take unequal
    // shares) starts at the count of the steps before it.
    Value earlier;
    if (loop->hasAttr(kProgramStepsAttrName)) {
      earlier = loop.getLowerBound();
    } else if (auto walk = dyn_cast<scf::ForOp>(loop->getParentOp())) {
      OpBuilder outside(loop);
      Value walked = outside.createOrFold<arith::DivSIOp>(
          loc,
          outside.createOrFold<arith::SubIOp>(loc, walk.getInductionVar(), walk.getLowerBound()),
          walk.getStep());
      // The walk over tiles counts in 32 bits whatever the index width of the K loop.
      if (walked.getType() != ivType)
        walked = outside.createOrFold<arith::ExtSIOp>(loc, ivType, walked);
      Value span =
          outside.createOrFold<arith::SubIOp>(loc, loop.getUpperBound(), loop.getLowerBound());
      Value trips = outside.createOrFold<arith::DivSIOp>(
          loc,
          outside.createOrFold<arith::SubIOp>(
              loc, outside.createOrFold<arith::AddIOp>(loc, span, loop.getStep()),
              arith::ConstantOp::create(outside, loc, ivType, outside.getIntegerAttr(ivType, 1))),
          loop.getStep());
      earlier = outside.createOrFold<arith::MulIOp>(loc, walked, trips);
    }
    auto countedFromKernelStart = [&](OpBuilder &at, Value local) -> Value {
      return earlier ? at.createOrFold<arith::AddIOp>(loc, earlier, local) : local;
    };
    plan.kernelIteration = countedFromKernelStart(b, iteration);
    if (producerLoops) {
      // The producer's loop, before this one: the leaves at its own induction variable.
      OpBuilder outside(loop);
      auto producer = scf::ForOp::create(outside, loc, loop.getLowerBound(), loop.getUpperBound(), loop.getStep());
      producer->setAttr(kProducerLoopAttr, outside.getUnitAttr());
      OpBuilder inside = OpBuilder::atBlockTerminator(producer.getBody());
      IRMapping mapping;
      mapping.map(iv, producer.getInductionVar());
      for (Value leaf : leaves) {
        Value value = aheadOf(inside, loop, leaf, mapping);
        if (!value) {
          producer->erase();
          return;
        }
        plan.producerScalars[leaf] = value;
      }
      Value producerIteration = inside.createOrFold<arith::DivSIOp>(
          loc,
          inside.createOrFold<arith::SubIOp>(loc, producer.getInductionVar(), loop.getLowerBound()),
          loop.getStep());
      plan.producerKernelIteration = countedFromKernelStart(inside, producerIteration);
      plan.producerLoop = producer;
    }
    plans[dot] = std::move(plan);
  });
  return plans;
}

Value mlir::tile::gpu_lowering::sharedBuffer(ConversionPatternRewriter &rewriter, Operation *op, const ::tile::GpuArch &arch,
                   Type element, int64_t count, StringRef name, int64_t alignment) {
  Location loc = op->getLoc();
  auto sharedPtrType = LLVM::LLVMPointerType::get(rewriter.getContext(), kSharedAddressSpace);
  if (arch.dynamicShared) {
    Value base = dynamicSharedArray(rewriter, op, alignment);
    auto func = op->getParentOfType<gpu::GPUFuncOp>();
    int64_t used = 0;
    if (auto attr = func->getAttrOfType<IntegerAttr>(kDynamicSharedBytesAttrName))
      used = attr.getInt();
    int64_t offset = (used + alignment - 1) / alignment * alignment;
    int64_t bytes = count * elementBytes(element);
    rewriter.modifyOpInPlace(func, [&] {
      func->setAttr(kDynamicSharedBytesAttrName, rewriter.getI64IntegerAttr(offset + bytes));
    });
    return LLVM::GEPOp::create(rewriter, loc, sharedPtrType, rewriter.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{int32_t(offset)});
  }
  auto module = op->getParentOfType<gpu::GPUModuleOp>();
  auto arrayType = LLVM::LLVMArrayType::get(element, count);
  std::string symbol = name.str();
  for (int i = 0; module.lookupSymbol(symbol); ++i)
    symbol = (name + "_" + std::to_string(i)).str();
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(module.getBody());
    LLVM::GlobalOp::create(rewriter, op->getLoc(), arrayType, /*isConstant=*/false,
                           LLVM::Linkage::Internal, symbol, Attribute(), alignment,
                           kSharedAddressSpace);
  }
  return LLVM::AddressOfOp::create(
      rewriter, op->getLoc(), LLVM::LLVMPointerType::get(rewriter.getContext(), kSharedAddressSpace),
      symbol);
}

namespace {

/// Compile-time facts of one operand's trip through shared memory.
struct OperandPlan {
  int64_t rows = 0, cols = 0;
  unsigned kDim = 0;     ///< 1 for a (m x k), 0 for b (k x n)
  unsigned innerDim = 0; ///< the contiguous dimension in global memory
  /// The contiguous dimension in shared memory: innerDim, or k where the copy transposes
  /// an m- or n-contiguous operand in registers so that fragments are read along k with
  /// wide reads (AMD, where no LDS read transposes).
  unsigned sharedInnerDim = 0;
  /// Runs one thread copies from consecutive outer rows at the same inner position (the
  /// k values one transposed write packs); 1 without the transpose.
  int64_t group = 1;
  bool innerUnit = false; ///< its stride is the constant 1
  /// Every 16-byte run of a tile starts 16-byte aligned, proven at compile time.
  bool aligned16 = false;
  /// The widest of 16, 8 and 4 bytes that every run, and every piece of one that size,
  /// is proven aligned to (0: none): where it is under 16 the runs are copied in pieces
  /// (cp.async of 8 or 4 bytes), wider ones where a run-time check finds them aligned.
  int64_t alignment = 0;
  /// The matrix ends on a whole run along the inner dimension (its bounds there are
  /// multiples of `run`, proven at compile time): a run is all in or all out.
  bool wholeRuns = false;
  SharedLayout shared;   ///< [outer][inner]
  int64_t run = 1;       ///< elements one thread copies at a time along inner (16 bytes)
  int64_t runs = 0, runsPerThread = 0;
  int64_t extent(unsigned dim) const { return dim == 0 ? rows : cols; }
  /// k is contiguous in shared memory (fragments read along k).
  bool kContiguous() const { return sharedInnerDim == kDim; }
  bool transposed() const { return sharedInnerDim != innerDim; }
};

/// Where and how much of an operand one iteration reads (all i64).
struct OperandView {
  Value matrix; ///< the operand's first element, always readable when K > 0
  Value base, outerStride, innerStride, validOuter, validInner, innerUnit;
  Value offset; ///< elements from `matrix` to `base`
  /// The byte offset from `matrix` of every element inside the matrix fits in 32
  /// unsigned bits (the kernel's pointer range promise, for elements of at most 2 bytes).
  bool offsets32 = false;
};

OperandPlan planOperand(const StagedOperand &operand, RankedTensorType type, unsigned kDim,
                        const Distribution &dist, const MatrixInstruction *mi, int64_t bytes) {
  OperandPlan plan;
  plan.rows = type.getDimSize(0);
  plan.cols = type.getDimSize(1);
  plan.kDim = kDim;
  auto unit = [&](unsigned d) { return operand.lanes.strides[d].getConstant() == 1; };
  plan.innerDim = unit(1) ? 1 : unit(0) ? 0 : kDim;
  plan.innerUnit = unit(plan.innerDim);
  // The widest of 16, 8 and 4 bytes that the tile's first element and each step along the
  // outer dimension are multiples of (the offsets d iterations ahead differ by multiples
  // of the loop step, which the analysis already counts in).
  const Divisibility &known = dist.divisibility;
  for (int64_t alignment : {16, 8, 4}) {
    int64_t elements = alignment / bytes;
    if (plan.innerUnit && elements >= 1 && known.of(operand.lanes.basePtr) >= alignment &&
        known.divides(operand.lanes.offset, elements) &&
        known.divides(operand.lanes.strides[1 - plan.innerDim], elements)) {
      plan.alignment = alignment;
      break;
    }
  }
  plan.aligned16 = plan.alignment == 16;
  int64_t outer = plan.extent(1 - plan.innerDim), inner = plan.extent(plan.innerDim);
  plan.run = std::min<int64_t>(16 / bytes, inner);
  plan.runs = outer * inner / plan.run;
  plan.sharedInnerDim = plan.innerDim;
  // Without a transposing shared-memory read (ldmatrix.trans), an operand whose k is not
  // contiguous is transposed on its way into shared memory, as Triton's AMD backend does:
  // a thread copies `group` runs at consecutive k and writes each of their run's columns
  // as `group` consecutive k (the widest write the runs per thread allow, up to the
  // fragment's run along k).
  if (mi && !mi->ldmatrix && mi->kRun > 1 && plan.innerDim != kDim && plan.innerUnit) {
    int64_t group = 1;
    while (group * 2 <= mi->kRun && plan.runs / (group * 2) >= dist.threads && outer % (group * 2) == 0)
      group *= 2;
    plan.group = group;
    plan.sharedInnerDim = kDim;
  }
  int64_t sharedOuter = plan.extent(1 - plan.sharedInnerDim);
  int64_t sharedInner = plan.extent(plan.sharedInnerDim);
  // Reads are as wide as a fragment's run along k where k is contiguous; ldmatrix and the
  // copies themselves move 16 bytes, and so do asynchronous copies into whole units.
  int64_t accessBytes = 16;
  if (mi && !mi->ldmatrix && plan.kContiguous() && !dist.arch.asyncCopy)
    accessBytes = std::clamp<int64_t>(mi->kRun * bytes, 8, 16);
  plan.shared = swizzledLayout(sharedOuter, sharedInner, bytes, accessBytes);
  plan.wholeRuns = plan.innerUnit;
  for (const ScalarPoly &bound : operand.bounds.upper[plan.innerDim])
    plan.wholeRuns = plan.wholeRuns && known.divides(bound, plan.run);
  int64_t groups = plan.runs / plan.group;
  plan.runsPerThread = (groups + dist.threads - 1) / dist.threads * plan.group;
  return plan;
}

Value elementPtr(OpBuilder &b, Location loc, Value base, Type element, Value index) {
  return LLVM::GEPOp::create(b, loc, base.getType(), element, base, ArrayRef<LLVM::GEPArg>{index});
}

/// The address of element `offset` (i32) of stage `slotBase` of a shared buffer.
Value sharedPtr(OpBuilder &b, Location loc, Value buffer, Value slotBase, Type element, Value offset) {
  offset = b.createOrFold<arith::AddIOp>(loc, slotBase, offset);
  return elementPtr(b, loc, buffer, element,
                    b.createOrFold<arith::ExtUIOp>(loc, b.getI64Type(), offset));
}

/// The address of (outer, inner) (i32) of stage `slotBase` of a shared buffer.
Value sharedPtr(OpBuilder &b, Location loc, const SharedLayout &layout, Value buffer, Value slotBase,
                Type element, Value outer, Value inner) {
  return sharedPtr(b, loc, buffer, slotBase, element, layout.offset(b, loc, outer, inner));
}

/// Concatenates equally typed vectors.
Value concat(OpBuilder &b, Location loc, ArrayRef<Value> parts) {
  Value all = parts.front();
  for (Value part : parts.drop_front()) {
    int64_t n = cast<VectorType>(all.getType()).getDimSize(0);
    int64_t m = cast<VectorType>(part.getType()).getDimSize(0);
    if (n == m) {
      all = vector::ShuffleOp::create(b, loc, all, part, llvm::to_vector(llvm::seq<int64_t>(0, n + m)));
      continue;
    }
    // Widen the shorter one first: shuffle operands must have the same type.
    SmallVector<int64_t> widen = llvm::to_vector(llvm::seq<int64_t>(0, m));
    widen.resize(n, -1);
    Value wide = vector::ShuffleOp::create(b, loc, part, part, widen);
    SmallVector<int64_t> mask = llvm::to_vector(llvm::seq<int64_t>(0, n));
    for (int64_t i = 0; i < m; ++i)
      mask.push_back(n + i);
    all = vector::ShuffleOp::create(b, loc, all, wide, mask);
  }
  return all;
}

/// A thread's runs of an operand tile in registers, and per run the bit that keeps it
/// (null: already final); zeroed() applies them.
struct LoadedRuns {
  Value data;
  SmallVector<Value> keep;
  int64_t run = 1;
  Value zeroed(OpBuilder &b, Location loc) const {
    if (llvm::all_of(keep, [](Value bit) { return !bit; }))
      return data;
    Type element = cast<VectorType>(data.getType()).getElementType();
    auto runType = VectorType::get({run}, element);
    Value zeros = arith::ConstantOp::create(b, loc, runType, b.getZeroAttr(runType));
    SmallVector<Value> runs;
    for (size_t r = 0; r < keep.size(); ++r) {
      Value part = sliceOf(b, loc, data, int64_t(r) * run, run);
      runs.push_back(keep[r] ? b.createOrFold<arith::SelectOp>(loc, keep[r], part, zeros) : part);
    }
    return concat(b, loc, runs);
  }
};

struct DotOnGpu : OpConversionPattern<DotOp> {
  DotOnGpu(const TypeConverter &converter, MLIRContext *ctx, const Distribution &dist)
      : OpConversionPattern(converter, ctx), dist(dist) {}

  const Distribution &dist;

  /// Run r of this thread: its (outer, inner start) in the block (in global memory's
  /// orientation), as i32. Runs go in groups of plan.group at consecutive outer rows.
  std::pair<Value, Value> runPosition(OpBuilder &b, Location loc, const OperandPlan &plan,
                                      int64_t r) const {
    int64_t runsPerRow = plan.extent(plan.innerDim) / plan.run;
    Value group = b.createOrFold<arith::AddIOp>(loc, dist.threadId,
                                                i32Constant(b, loc, r / plan.group * dist.threads));
    Value outer = b.createOrFold<arith::AddIOp>(
        loc,
        b.createOrFold<arith::MulIOp>(
            loc, b.createOrFold<arith::DivUIOp>(loc, group, i32Constant(b, loc, runsPerRow)),
            i32Constant(b, loc, plan.group)),
        i32Constant(b, loc, r % plan.group));
    Value inner = b.createOrFold<arith::MulIOp>(
        loc, b.createOrFold<arith::RemUIOp>(loc, group, i32Constant(b, loc, runsPerRow)),
        i32Constant(b, loc, plan.run));
    return {outer, inner};
  }

  /// Guards the runs past the block's end (when the threads outnumber the run groups).
  Value runExists(OpBuilder &b, Location loc, const OperandPlan &plan, int64_t r) const {
    int64_t groups = plan.runs / plan.group, q = r / plan.group;
    if ((q + 1) * dist.threads <= groups)
      return {};
    Value group =
        b.createOrFold<arith::AddIOp>(loc, dist.threadId, i32Constant(b, loc, q * dist.threads));
    return b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, group,
                                         i32Constant(b, loc, groups));
  }

  /// The global address of (outer, inner) (i64) of an operand's tile.
  Value globalPtr(OpBuilder &b, Location loc, const OperandView &view, Type element, Value outer,
                  Value inner) const {
    return elementPtr(b, loc, view.base, element,
                      b.createOrFold<arith::AddIOp>(
                          loc, b.createOrFold<arith::MulIOp>(loc, outer, view.outerStride),
                          b.createOrFold<arith::MulIOp>(loc, inner, view.innerStride)));
  }

  /// `body` for run r, under a guard where the run may not exist.
  void whereRunExists(OpBuilder &b, Location loc, const OperandPlan &plan, int64_t r,
                      function_ref<void(OpBuilder &, Location)> body) const {
    Value exists = runExists(b, loc, plan, r);
    if (!exists)
      return body(b, loc);
    scf::IfOp::create(b, loc, exists, [&](OpBuilder &b, Location loc) {
      body(b, loc);
      scf::YieldOp::create(b, loc);
    });
  }

  /// This thread's runs of one operand tile, loaded from global memory into registers:
  /// one 16-byte load per run where it is whole, contiguous and aligned, else element
  /// by element with zeros outside the matrix. Runs that a masked 16-byte load read are
  /// zeroed where their `keep` bit is false by LoadedRuns::zeroed(), where the registers
  /// are used, so that nothing waits for the loads here.
  LoadedRuns loadRuns(OpBuilder &b, Location loc, const OperandPlan &plan, const OperandView &view,
                      Type element, Value inRange) const {
    int64_t bytes = elementBytes(element);
    auto runType = VectorType::get({plan.run}, element);
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    // The bounds are compared in 32 bits: a tile's valid lanes never exceed its extent.
    Value validOuter = b.createOrFold<arith::TruncIOp>(loc, i32, view.validOuter);
    Value validInner = b.createOrFold<arith::TruncIOp>(loc, i32, view.validInner);
    SmallVector<Value> loaded, keep;
    for (int64_t r = 0; r < plan.runsPerThread; ++r) {
      auto [outer32, inner32] = runPosition(b, loc, plan, r);
      Value outer = b.createOrFold<arith::ExtUIOp>(loc, i64, outer32);
      Value inner = b.createOrFold<arith::ExtUIOp>(loc, i64, inner32);
      Value outerOn =
          b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, outer32, validOuter);
      if (Value exists = runExists(b, loc, plan, r))
        outerOn = b.createOrFold<arith::AndIOp>(loc, outerOn, exists);
      if (inRange)
        outerOn = b.createOrFold<arith::AndIOp>(loc, outerOn, inRange);
      Value runEnd = b.createOrFold<arith::AddIOp>(loc, inner32, i32Constant(b, loc, plan.run));
      Value whole = b.createOrFold<arith::AndIOp>(
          loc, outerOn,
          b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::sle, runEnd, validInner));
      if (!plan.innerUnit)
        whole = b.createOrFold<arith::AndIOp>(loc, whole, view.innerUnit);
      if (plan.aligned16 && plan.wholeRuns) {
        // Every run is aligned and all in or all out: a masked load, as Triton's, with
        // runs outside reading the operand's first run (readable: the inner extent is a
        // positive multiple of the run whenever the loop runs) and keeping zeros.
        Value ptr;
        if (view.offsets32) {
          // The offset from the operand's first element, in 32 bits: the address is a
          // uniform base plus one register (AMD's global_load with an SGPR base), where a
          // 64-bit address per lane takes two.
          Value lane = b.createOrFold<arith::AddIOp>(
              loc,
              b.createOrFold<arith::MulIOp>(
                  loc, outer32, b.createOrFold<arith::TruncIOp>(loc, i32, view.outerStride)),
              inner32);
          Value at = b.createOrFold<arith::AddIOp>(
              loc, b.createOrFold<arith::TruncIOp>(loc, i32, view.offset), lane);
          at = b.createOrFold<arith::SelectOp>(loc, whole, at, i32Constant(b, loc, 0));
          // The freeze keeps LLVM from moving the select past the widening (to a select
          // of 64-bit offsets), which would hide the 32-bit offset from the backend.
          Value byteAt = b.createOrFold<arith::ExtUIOp>(
              loc, i64,
              LLVM::FreezeOp::create(
                  b, loc, b.createOrFold<arith::MulIOp>(loc, at, i32Constant(b, loc, bytes))));
          ptr = elementPtr(b, loc, view.matrix, b.getI8Type(), byteAt);
        } else {
          ptr = b.createOrFold<arith::SelectOp>(
              loc, whole, globalPtr(b, loc, view, element, outer, inner), view.matrix);
        }
        loaded.push_back(LLVM::LoadOp::create(b, loc, runType, ptr, plan.run * bytes));
        keep.push_back(whole);
        continue;
      }
      Value src = globalPtr(b, loc, view, element, outer, inner);
      if (!plan.aligned16)
        whole = b.createOrFold<arith::AndIOp>(loc, whole, isAligned(b, loc, src, plan.run * bytes));
      auto data = scf::IfOp::create(
          b, loc, whole,
          [&](OpBuilder &b, Location loc) {
            scf::YieldOp::create(b, loc, Value(LLVM::LoadOp::create(b, loc, runType, src, plan.run * bytes)));
          },
          [&](OpBuilder &b, Location loc) {
            // An edge of the matrix, a strided view or a misaligned one: `count` elements
            // from the run's `first`, one by one, without branches (lanes outside read the
            // operand's first element and keep zero).
            auto elements = [&](OpBuilder &b, Location loc, int64_t first, int64_t count) {
              auto type = VectorType::get({count}, element);
              Value values = arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
              Value zero = arith::ConstantOp::create(b, loc, element, b.getZeroAttr(element));
              for (int64_t j = 0; j < count; ++j) {
                Value at =
                    b.createOrFold<arith::AddIOp>(loc, inner32, i32Constant(b, loc, first + j));
                Value on = b.createOrFold<arith::AndIOp>(
                    loc, outerOn,
                    b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, at, validInner));
                Value ptr = globalPtr(b, loc, view, element, outer,
                                      b.createOrFold<arith::ExtUIOp>(loc, i64, at));
                ptr = b.createOrFold<arith::SelectOp>(loc, on, ptr, view.matrix);
                Value one = b.createOrFold<arith::SelectOp>(
                    loc, on, LLVM::LoadOp::create(b, loc, element, ptr, bytes), zero);
                values = vector::InsertOp::create(b, loc, one, values, ArrayRef<int64_t>{j});
              }
              return values;
            };
            int64_t pieceElements = plan.alignment / bytes;
            if (plan.alignment < 4 || pieceElements >= plan.run) {
              scf::YieldOp::create(b, loc, elements(b, loc, 0, plan.run));
              return;
            }
            // A view the call promised 4 or 8 bytes of alignment: the run as loads of
            // that size (AMD's global_load_dword / _dwordx2, where 16-bit elements one at
            // a time had taken a load each), a piece at the matrix's edge element by
            // element.
            auto pieceType = VectorType::get({pieceElements}, element);
            SmallVector<Value> pieces;
            for (int64_t first = 0; first < plan.run; first += pieceElements) {
              Value start = b.createOrFold<arith::AddIOp>(loc, inner32, i32Constant(b, loc, first));
              Value inside = b.createOrFold<arith::AndIOp>(
                  loc, outerOn,
                  b.createOrFold<arith::CmpIOp>(
                      loc, arith::CmpIPredicate::sle,
                      b.createOrFold<arith::AddIOp>(loc, start, i32Constant(b, loc, pieceElements)),
                      validInner));
              auto piece = scf::IfOp::create(
                  b, loc, inside,
                  [&](OpBuilder &b, Location loc) {
                    Value ptr = globalPtr(b, loc, view, element, outer,
                                          b.createOrFold<arith::ExtUIOp>(loc, i64, start));
                    scf::YieldOp::create(
                        b, loc,
                        Value(LLVM::LoadOp::create(b, loc, pieceType, ptr, plan.alignment)));
                  },
                  [&](OpBuilder &b, Location loc) {
                    scf::YieldOp::create(b, loc, elements(b, loc, first, pieceElements));
                  });
              pieces.push_back(piece.getResult(0));
            }
            scf::YieldOp::create(b, loc, concat(b, loc, pieces));
          });
      loaded.push_back(data.getResult(0));
      keep.push_back(Value());
    }
    return {concat(b, loc, loaded), std::move(keep), plan.run};
  }

  /// Copies this thread's runs of one operand tile into stage `slot` of its shared
  /// buffer with asynchronous 16-byte copies (cp.async): a run that reaches past the
  /// matrix copies fewer source bytes and the rest of its 16 is zero-filled. Where the
  /// view's first element and row stride are only 8- or 4-byte aligned (a row of K = 1500
  /// or N = 1030 half-precision elements), each run is two or four asynchronous copies of
  /// that size, which the pipeline keeps in flight as it does the 16-byte ones: through
  /// registers, element by element, such an operand had run at a tenth of cuBLAS's speed.
  /// A view whose runs are not contiguous or not 4-byte aligned (a strided one, a row of
  /// an odd number of half-precision elements) goes through registers, with the same
  /// result.
  ///
  /// The copies sit among the matrix instructions of the main loop, so their bookkeeping
  /// is kept to what the hardware needs: the bounds are compared in 32 bits (a tile's
  /// valid lanes never exceed its extent), and where runs are whole, a run is all 16
  /// bytes or none through the copy's own ignore-src predicate. (A byte count of
  /// select(on, 16, 0) is folded by LLVM into a chain of selects that ptxas turns back
  /// into a predicate, two instructions per condition.) A copy that ignores its source,
  /// or copies 0 bytes of it, reads no memory, so its address needs no clamping.
  void copyRuns(OpBuilder &b, Location loc, const OperandPlan &plan, const OperandView &view,
                Type element, Value buffer, Value slot, Value inRange) const {
    int64_t bytes = elementBytes(element);
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    Value slotBase = b.createOrFold<arith::MulIOp>(
        loc, slot, i32Constant(b, loc, plan.shared.outer * plan.shared.inner));
    // pieceBytes: the size of each asynchronous copy, 16 (a whole run), 8 or 4 (a run in
    // pieces, cp.async.ca: .cg takes only 16).
    auto copies = [&](OpBuilder &b, Location loc, int64_t pieceBytes) {
      Value validOuter = b.createOrFold<arith::TruncIOp>(loc, i32, view.validOuter);
      Value validInner = b.createOrFold<arith::TruncIOp>(loc, i32, view.validInner);
      Value zero = i32Constant(b, loc, 0);
      for (int64_t r = 0; r < plan.runsPerThread; ++r) {
        auto copy = [&](OpBuilder &b, Location loc) {
          auto [outer32, inner32] = runPosition(b, loc, plan, r);
          Value on = b.createOrFold<arith::AndIOp>(
              loc, inRange,
              b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, outer32, validOuter));
          Value src =
              globalPtr(b, loc, view, element, b.createOrFold<arith::ExtUIOp>(loc, i64, outer32),
                        b.createOrFold<arith::ExtUIOp>(loc, i64, inner32));
          Value dst = sharedPtr(b, loc, plan.shared, buffer, slotBase, element, outer32, inner32);
          if (pieceBytes == 16 && plan.wholeRuns) {
            on = b.createOrFold<arith::AndIOp>(
                loc, on,
                b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, inner32, validInner));
            Value ignore =
                b.createOrFold<arith::XOrIOp>(loc, on, arith::ConstantIntOp::create(b, loc, 1, 1));
            inlinePtx(b, loc, "cp.async.cg.shared.global [$0], [$1], 16, $2;", 0, "r,l,b",
                      ValueRange{dst, src, ignore}, {});
            return;
          }
          // The run's elements inside the matrix are copied and the rest of its bytes
          // zero-filled (a copy of no source bytes reads nothing): as one copy, or in
          // pieces of 8 or 4 bytes. A run's 16 bytes are contiguous in shared memory (the
          // swizzle moves whole runs), so piece p lies p * pieceBytes past the run's start
          // there, and in global memory too (the pieces are taken only where the inner
          // stride is 1).
          int64_t pieceElements = pieceBytes == 16 ? plan.run : pieceBytes / bytes;
          std::string ptx =
              "cp.async.ca.shared.global [$0], [$1], " + std::to_string(pieceBytes) + ", $2;";
          for (int64_t first = 0; first < plan.run; first += pieceElements) {
            Value left = b.createOrFold<arith::MaxSIOp>(
                loc,
                b.createOrFold<arith::MinSIOp>(
                    loc,
                    b.createOrFold<arith::SubIOp>(
                        loc, validInner,
                        b.createOrFold<arith::AddIOp>(loc, inner32, i32Constant(b, loc, first))),
                    i32Constant(b, loc, pieceElements)),
                zero);
            Value size = b.createOrFold<arith::SelectOp>(
                loc, on, b.createOrFold<arith::MulIOp>(loc, left, i32Constant(b, loc, bytes)),
                zero);
            if (pieceBytes == 16) {
              LLVM::CallIntrinsicOp::create(
                  b, loc, b.getStringAttr("llvm.nvvm.cp.async.cg.shared.global.16.s"),
                  ValueRange{dst, src, size});
              continue;
            }
            Value pieceSrc = elementPtr(b, loc, src, b.getI8Type(), c64(b, loc, first * bytes));
            Value pieceDst = elementPtr(b, loc, dst, b.getI8Type(), c64(b, loc, first * bytes));
            inlinePtx(b, loc, ptx, 0, "r,l,r", ValueRange{pieceDst, pieceSrc, size}, {});
          }
        };
        whereRunExists(b, loc, plan, r, copy);
      }
    };
    if (plan.aligned16) {
      // Proven at compile time: no run-time check, and no register path to keep
      // registers for. A tile past the loop's end copies no bytes, without a branch, so
      // that the copies can be scheduled among the matrix instructions.
      copies(b, loc, 16);
      return;
    }
    // Every run (or piece of one) starts `bytes`-aligned when the tile's first element
    // and the outer stride in bytes are; the inner stride must be 1.
    Value strideBytes = b.createOrFold<arith::MulIOp>(loc, view.outerStride, c64(b, loc, bytes));
    auto alignedTo = [&](OpBuilder &b, Location loc, int64_t alignment) {
      Value aligned = b.createOrFold<arith::AndIOp>(
          loc, isAligned(b, loc, view.base, alignment),
          b.createOrFold<arith::CmpIOp>(
              loc, arith::CmpIPredicate::eq,
              b.createOrFold<arith::AndIOp>(loc, strideBytes, c64(b, loc, alignment - 1)),
              c64(b, loc, 0)));
      if (!plan.innerUnit)
        aligned = b.createOrFold<arith::AndIOp>(loc, aligned, view.innerUnit);
      return aligned;
    };
    // The widest copies the view takes, from 16 bytes down, each size behind a run-time
    // check but the proven one (the last, none). An operand proven nothing (its caller
    // could not promise 4 bytes: a row of an odd number of 16-bit elements, a base one
    // element off) keeps the 16-byte copies and the register path alone, whose kernel the
    // pieces' branches would only make larger.
    int64_t proven = plan.alignment >= 4 && !plan.transposed() ? plan.alignment : 0;
    std::function<void(OpBuilder &, Location, int64_t)> widest = [&](OpBuilder &b, Location loc,
                                                                     int64_t size) {
      if (size == proven)
        return copies(b, loc, size);
      if (proven == 0 && size < 16)
        return storeRuns(b, loc, plan,
                         loadRuns(b, loc, plan, view, element, Value()).zeroed(b, loc), buffer,
                         slot, element);
      scf::IfOp::create(
          b, loc, alignedTo(b, loc, size),
          [&](OpBuilder &b, Location loc) {
            copies(b, loc, size);
            scf::YieldOp::create(b, loc);
          },
          [&](OpBuilder &b, Location loc) {
            widest(b, loc, size / 2);
            scf::YieldOp::create(b, loc);
          });
    };
    scf::IfOp::create(b, loc, inRange, [&](OpBuilder &b, Location loc) {
      widest(b, loc, 16);
      scf::YieldOp::create(b, loc);
    });
  }

  /// Writes this thread's runs into stage `slot` of the shared buffer, in units of the
  /// layout's vec (one ds_write_b64/b128 or st.shared.v2/v4 each).
  void storeRuns(OpBuilder &b, Location loc, const OperandPlan &plan, Value registers, Value buffer,
                 Value slot, Type element) const {
    int64_t bytes = elementBytes(element);
    int64_t stage = plan.shared.outer * plan.shared.inner;
    Value slotBase = b.createOrFold<arith::MulIOp>(loc, slot, i32Constant(b, loc, stage));
    if (plan.transposed()) {
      storeTransposed(b, loc, plan, registers, buffer, slotBase, element);
      return;
    }
    int64_t vec = std::min(plan.shared.vec, plan.run);
    for (int64_t r = 0; r < plan.runsPerThread; ++r) {
      auto [outer, inner] = runPosition(b, loc, plan, r);
      auto write = [&](OpBuilder &b, Location loc) {
        for (int64_t p = 0; p < plan.run; p += vec) {
          Value at = b.createOrFold<arith::AddIOp>(loc, inner, i32Constant(b, loc, p));
          Value ptr = sharedPtr(b, loc, plan.shared, buffer, slotBase, element, outer, at);
          LLVM::StoreOp::create(b, loc, sliceOf(b, loc, registers, r * plan.run + p, vec), ptr, vec * bytes);
        }
      };
      whereRunExists(b, loc, plan, r, write);
    }
  }

  /// The transposing write: each group of runs (consecutive k, the same inner
  /// positions) is written column by column, each column's `group` k values as one
  /// access along shared memory's k-contiguous rows.
  void storeTransposed(OpBuilder &b, Location loc, const OperandPlan &plan, Value registers,
                       Value buffer, Value slotBase, Type element) const {
    int64_t bytes = elementBytes(element);
    for (int64_t r = 0; r < plan.runsPerThread; r += plan.group) {
      auto write = [&](OpBuilder &b, Location loc) {
        auto [k, inner] = runPosition(b, loc, plan, r); // the group's first k
        for (int64_t i = 0; i < plan.run; ++i) {
          SmallVector<int64_t> column;
          for (int64_t j = 0; j < plan.group; ++j)
            column.push_back((r + j) * plan.run + i);
          Value values = vector::ShuffleOp::create(b, loc, registers, registers, column);
          // The run starts at a multiple of its length.
          Value ptr = sharedPtr(b, loc, buffer, slotBase, element,
                                plan.shared.offsetFrom(b, loc, inner, plan.run, i, k));
          LLVM::StoreOp::create(b, loc, values, ptr, plan.group * bytes);
        }
      };
      whereRunExists(b, loc, plan, r, write);
    }
  }

  /// A vector of `count` elements of stage `slot` starting at (outer, inner), read in
  /// pieces that stay inside one swizzle unit.
  Value readShared(OpBuilder &b, Location loc, const OperandPlan &plan, Value buffer, Value slotBase,
                   Type element, Value outer, Value inner, int64_t count) const {
    int64_t bytes = elementBytes(element);
    int64_t piece = std::min(count, plan.shared.vec);
    SmallVector<Value> pieces;
    for (int64_t p = 0; p < count; p += piece) {
      Value at = b.createOrFold<arith::AddIOp>(loc, inner, i32Constant(b, loc, p));
      Value ptr = sharedPtr(b, loc, plan.shared, buffer, slotBase, element, outer, at);
      pieces.push_back(LLVM::LoadOp::create(b, loc, VectorType::get({piece}, element), ptr, piece * bytes));
    }
    return concat(b, loc, pieces);
  }

  /// One element (row, col) of the operand's block from shared memory.
  Value readElement(OpBuilder &b, Location loc, const OperandPlan &plan, Value buffer, Value slotBase,
                    Type element, Value row, Value col) const {
    Value outer = plan.sharedInnerDim == 1 ? row : col, inner = plan.sharedInnerDim == 1 ? col : row;
    Value ptr = sharedPtr(b, loc, plan.shared, buffer, slotBase, element, outer, inner);
    return LLVM::LoadOp::create(b, loc, element, ptr, elementBytes(element));
  }

  /// ldmatrix x4 (or x2): 8x8 matrices of 16-bit elements, each lane giving the address
  /// of one 16-byte row; the result as a vector of `element`.
  Value ldmatrix(OpBuilder &b, Location loc, const OperandPlan &plan, Value buffer, Value slotBase,
                 Type element, Value outer, Value inner, int64_t matrices, bool transpose) const {
    Value ptr = sharedPtr(b, loc, plan.shared, buffer, slotBase, element, outer, inner);
    Type i32 = b.getI32Type();
    SmallVector<Type> fields(matrices, i32);
    auto structType = LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
    std::string name = "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x" + std::to_string(matrices) +
                       (transpose ? ".trans.b16" : ".b16");
    Value result = LLVM::CallIntrinsicOp::create(b, loc, structType, b.getStringAttr(name), ValueRange{ptr})
                       .getResult(0);
    auto words = VectorType::get({matrices}, i32);
    Value packed = arith::ConstantOp::create(b, loc, words, b.getZeroAttr(words));
    for (int64_t i = 0; i < matrices; ++i)
      packed = vector::InsertOp::create(b, loc, LLVM::ExtractValueOp::create(b, loc, result, i), packed,
                                        ArrayRef<int64_t>{i});
    int64_t perWord = 4 / elementBytes(element);
    return LLVM::BitcastOp::create(b, loc, VectorType::get({matrices * perWord}, element), packed);
  }

  LogicalResult matchAndRewrite(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override;

  /// Issues `copies`, then closes their commit group: tiles past the loop's end copy
  /// nothing but still commit, so that the count of groups in flight stays S - 1.
  void copyAndCommit(OpBuilder &b, Location loc, function_ref<void(OpBuilder &, Location)> copies) const {
    copies(b, loc);
    LLVM::CallIntrinsicOp::create(b, loc, b.getStringAttr("llvm.nvvm.cp.async.commit.group"), ValueRange{});
  }

  /// The K loop over a ring of `numStages` buffers filled by asynchronous copies, as
  /// Triton's NVIDIA pipeliner orders it: the prologue (before the loop) issues tiles
  /// 0 .. S - 2, one commit group each; every iteration waits for its own tile's group,
  /// meets the other warps at a barrier (after which tile k is visible to all and the
  /// buffer of tile k - 1 is free), issues tile k + S - 1 into that buffer and
  /// multiplies tile k. The wait and the barrier are marked, and so are the fragments of
  /// the tile's first k step: prefetchFirstFragments then moves both to the end of the
  /// iteration, so that the next tile's first fragments are read while this tile's last
  /// matrix instructions run.
  LogicalResult pipelineAsync(ConversionPatternRewriter &rewriter, DotOp op, const PipelinedLoop &plan,
                              function_ref<Value(Value slot)> compute,
                              function_ref<void(OpBuilder &, Location, int64_t distance)> copyTiles) const {
    Location loc = op.getLoc();
    int64_t stages = dist.numStages;
    auto wait = LLVM::CallIntrinsicOp::create(rewriter, loc, rewriter.getStringAttr("llvm.nvvm.cp.async.wait.group"),
                                              ValueRange{i32Constant(rewriter, loc, stages - 2)});
    auto barrier = gpu::BarrierOp::create(rewriter, loc);
    for (Operation *marked : {wait.getOperation(), barrier.getOperation()})
      marked->setAttr(kTileWaitAttr, rewriter.getUnitAttr());
    copyAndCommit(rewriter, loc, [&](OpBuilder &b, Location loc) { copyTiles(b, loc, stages - 1); });
    rewriter.replaceOp(op, compute(plan.slot[0]));
    return success();
  }

  /// The K loop of warpgroup MMAs over the same ring: every iteration waits for its own
  /// tile's copies (`waitForTile`) and meets the other warps at a barrier, issues tile
  /// k's MMAs, then waits until only those are in flight, which frees the buffer that
  /// tile k - 1 was read from for the copies of tile k + S - 1 (`copyNext`, after a
  /// second barrier where several warpgroups share the buffers). The last group is
  /// waited for after the loop (waitAfterWarpgroupLoops). Without `blockBarriers` (a
  /// producer warpgroup copies, the stages' mbarriers order it with the MMA warps), no
  /// barrier is met and `copyNext` releases tile k - 1's buffer instead.
  ///
  /// Tiles that only asynchronous copies write need no proxy fence (as in Triton's
  /// pipeliner): the fence (MEMBAR.ALL.CTA) would also wait for the copies of the tiles
  /// still in flight, undoing the pipeline. A view that may take the register path
  /// writes with ordinary stores, which the fence orders.
  LogicalResult pipelineWarpgroups(ConversionPatternRewriter &rewriter, DotOp op,
                                   function_ref<Value(Value slot)> compute, Value slot,
                                   function_ref<void(OpBuilder &, Location)> waitForTile,
                                   function_ref<void(OpBuilder &, Location)> copyNext,
                                   bool blockBarriers = true) const {
    Location loc = op.getLoc();
    waitForTile(rewriter, loc);
    if (blockBarriers)
      gpu::BarrierOp::create(rewriter, loc);
    Value result = compute(slot);
    waitForWarpgroups(rewriter, loc, 1, Value());
    op->getPrevNode()->setAttr(kWarpgroupPendingAttr, rewriter.getUnitAttr());
    if (blockBarriers && dist.numWarps > 4)
      gpu::BarrierOp::create(rewriter, loc);
    copyNext(rewriter, loc);
    result.getDefiningOp()->setAttr(kWarpgroupAccumulatorAttr, rewriter.getUnitAttr());
    rewriter.replaceOp(op, result);
    return success();
  }

  Value fragmentsAndMultiply(ConversionPatternRewriter &rewriter, Location loc, const MatrixLayout &layout,
                             const MatrixInstruction &mi, Value acc, const OperandPlan &pa, const OperandPlan &pb,
                             Value bufA, Value bufB, Value slotA, Value slotB, Type input,
                             bool markFirstFragments) const;

  Value onFmas(ConversionPatternRewriter &rewriter, Location loc, const MatrixLayout &layout, Value acc,
               const OperandPlan &pa, const OperandPlan &pb, Value bufA, Value bufB, Value slotA,
               Value slotB, Type input) const;
};

Value widenTo(OpBuilder &b, Location loc, Value v, Type accElement) {
  if (v.getType() == accElement)
    return v;
  if (isa<FloatType>(accElement))
    return b.createOrFold<arith::ExtFOp>(loc, accElement, v);
  return b.createOrFold<arith::ExtSIOp>(loc, accElement, v);
}

LogicalResult DotOnGpu::matchAndRewrite(DotOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const {
  Location loc = op.getLoc();
  auto aType = op.getA().getType(), bType = op.getB().getType();
  Type input = aType.getElementType();
  if (op.kGroup() != 1 || op.getUnsignedA())
    return op.emitError("b_k_group and unsigned_a are the CPU's operand layouts; a GPU dot "
                        "takes neither");
  auto a = stagedOperandOf(op.getA()), b = stagedOperandOf(op.getB());
  if (!a || !b)
    return op.emitError("a GPU dot needs both operands loaded from affine addresses with "
                        "bounds masks (as blocked matmuls load them)");
  MatrixLayout layout = dist.matrixOf(op.getType());
  int64_t m = aType.getDimSize(0), k = aType.getDimSize(1), n = bType.getDimSize(1);
  if (!layout.fits)
    return op.emitError("a ") << m << "x" << n << " accumulator does not fit " << dist.numWarps
                              << " waves of " << layout.tile.tileM << "x" << layout.tile.tileN
                              << " tiles on " << dist.arch.name
                              << "; use BLOCK_M, BLOCK_N that give each wave whole tiles";
  bool warpgroup = dist.warpgroupMma;
  auto instruction = warpgroup ? std::nullopt
                               : matrixInstructionFor(layout.tile, input, dist.arch, dist.kpack, dist.allowTf32);
  if (dist.kpack != 1 && (!instruction || dist.arch.matrixUnit != ::tile::MatrixUnit::Mfma))
    return op.emitError("kpack=") << dist.kpack << " packs the k of several MFMA instructions; "
                                  << dist.arch.name << " with " << input << " inputs takes kpack=1";
  if (instruction && k % instruction->tileK != 0) {
    if (dist.kpack != 1)
      return op.emitError("kpack=") << dist.kpack << " needs BLOCK_K to be a multiple of "
                                    << instruction->tileK << ", got " << k;
    instruction.reset();
  }
  int64_t bytes = elementBytes(input);
  const MatrixInstruction *mi = instruction ? &*instruction : nullptr;
  OperandPlan pa = planOperand(*a, aType, 1, dist, mi, bytes);
  OperandPlan pb = planOperand(*b, bType, 0, dist, mi, bytes);
  if (warpgroup)
    for (OperandPlan *p : {&pa, &pb})
      p->shared = warpgroupSharedLayout(p->shared.outer, p->shared.inner, bytes);

  const PipelinedLoop *plan = nullptr;
  if (dist.pipelines)
    if (auto it = dist.pipelines->find(op); it != dist.pipelines->end())
      plan = &it->second;
  int64_t stages = plan ? dist.numStages : 1;
  int64_t buffers = ::tile::pipelineBuffers(dist.arch, stages);
  // Asynchronous copies move whole 16-byte runs into whole swizzle units.
  bool async = stages > 1 && dist.arch.asyncCopy;
  for (const OperandPlan *p : {&pa, &pb})
    async = async && p->run * bytes == 16 && p->shared.vec >= p->run;
  if (stages > 1 && dist.arch.asyncCopy && !async)
    return op.emitError("num_stages=") << stages << " copies 16-byte runs of each operand tile; a "
                                       << m << "x" << k << " by " << k << "x" << n << " " << input
                                       << " dot has shorter rows; use num_stages=1";
  // Bulk tensor copies where the kernel takes tensor maps for both operands and both
  // are tiles of a matrix the maps can describe: 16-byte aligned with strides of whole
  // 16 bytes (what a map's address and strides must be), coordinates below 2^31.
  std::optional<BulkCopyOperand> bulkA, bulkB;
  if (async && warpgroup && pa.aligned16 && pb.aligned16 && dist.pointerRanges.bitsOf(a->lanes.basePtr) <= 32 &&
      dist.pointerRanges.bitsOf(b->lanes.basePtr) <= 32) {
    bulkA = bulkCopyOperand(*a, pa.shared, pa.innerDim, bytes, dist.tensorMaps[0]);
    bulkB = bulkCopyOperand(*b, pb.shared, pb.innerDim, bytes, dist.tensorMaps[1]);
  }
  // Warp specialization: a producer warpgroup issues the bulk copies in a loop of its
  // own, before this one (which the pass then gives to the other warps).
  scf::ForOp producerLoop;
  if (bulkA && bulkB && plan && plan->producerLoop && dist.warpSpecialize)
    producerLoop = plan->producerLoop;
  // A cluster's blocks read the same b tiles (the kernel promises it): each block's
  // producer copies its share of every b tile to all of them, and a stage is free again
  // once the MMA warps of every block are done with it.
  int64_t multicastCtas = producerLoop && dist.clusterCtas > 1 && splitAcrossCluster(*bulkB, dist.clusterCtas)
                              ? dist.clusterCtas
                              : 1;
  // A pipelined loop's buffers and prologue come before the loop (and before the
  // producer's, which uses them too); a persistent kernel sets its warp-specialized
  // pipeline up once, before its walk over tiles.
  Operation *loopOp = op->getParentOp();
  Operation *walk = producerLoop && dist.persistent ? dyn_cast<scf::ForOp>(loopOp->getParentOp()) : nullptr;
  Operation *setupPoint = walk ? walk : producerLoop ? producerLoop.getOperation() : loopOp;
  if (plan)
    rewriter.setInsertionPoint(setupPoint);
  // The warpgroup MMA's swizzle repeats every 8 rows of 128 bytes, which it applies to
  // the absolute shared address: its tiles start at multiples of 1024 bytes.
  int64_t alignment = warpgroup ? 1024 : 16;
  Value bufA = sharedBuffer(rewriter, op, dist.arch, input, buffers * m * k, "__tile_lds_a", alignment);
  Value bufB = sharedBuffer(rewriter, op, dist.arch, input, buffers * k * n, "__tile_lds_b", alignment);

  // A scalar of the tile IR as converted, where `shift` maps it (null: this iteration).
  auto remapThrough = [&](const DenseMap<Value, Value> *shift, Value v) {
    if (shift)
      if (auto it = shift->find(v); it != shift->end())
        v = it->second;
    return rewriter.getRemappedValue(v);
  };
  // The operand views where `shift` maps the scalars (null: this iteration).
  auto viewOf = [&](const StagedOperand &operand, const OperandPlan &p,
                    const DenseMap<Value, Value> *shift) {
    auto remap = [&](Value v) { return remapThrough(shift, v); };
    OperandView view;
    Value offset = operand.lanes.offset.materialize(rewriter, loc, remap);
    view.matrix = remap(operand.lanes.basePtr);
    view.base = elementPtr(rewriter, loc, view.matrix, input, offset);
    view.offset = offset;
    view.offsets32 = bytes <= 2 && dist.pointerRanges.bitsOf(operand.lanes.basePtr) <= 32;
    unsigned innerDim = p.innerDim, outerDim = 1 - p.innerDim;
    view.outerStride = operand.lanes.strides[outerDim].materialize(rewriter, loc, remap);
    view.innerStride = operand.lanes.strides[innerDim].materialize(rewriter, loc, remap);
    view.validOuter = validLanes(rewriter, loc, operand.bounds, outerDim, p.extent(outerDim), remap);
    view.validInner = validLanes(rewriter, loc, operand.bounds, innerDim, p.extent(innerDim), remap);
    view.innerUnit = rewriter.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                                          view.innerStride, c64(rewriter, loc, 1));
    return view;
  };
  auto viewAt = [&](const StagedOperand &operand, const OperandPlan &p, int64_t distance) {
    return viewOf(operand, p, plan ? &plan->shifted[distance] : nullptr);
  };
  // This thread's runs of the a and b tiles where `shift` maps the scalars, in registers.
  auto loadTiles = [&](OpBuilder &builder, Location loc, const DenseMap<Value, Value> *shift,
                       Value inRange) {
    LoadedRuns ra = loadRuns(builder, loc, pa, viewOf(*a, pa, shift), input, inRange);
    LoadedRuns rb = loadRuns(builder, loc, pb, viewOf(*b, pb, shift), input, inRange);
    return std::pair{ra, rb};
  };
  auto compute = [&](Value slot) {
    Value slotA =
        rewriter.createOrFold<arith::MulIOp>(loc, slot, i32Constant(rewriter, loc, m * k));
    Value slotB =
        rewriter.createOrFold<arith::MulIOp>(loc, slot, i32Constant(rewriter, loc, k * n));
    Value acc = adaptor.getAcc();
    if (warpgroup)
      return warpgroupMultiply(rewriter, loc, dist, layout, WarpgroupOperand{bufA, slotA, pa.shared, pa.kContiguous(), bytes},
                               WarpgroupOperand{bufB, slotB, pb.shared, pb.kContiguous(), bytes}, k, input, acc);
    return mi ? fragmentsAndMultiply(rewriter, loc, layout, *mi, acc, pa, pb, bufA, bufB, slotA, slotB, input,
                                     async)
              : onFmas(rewriter, loc, layout, acc, pa, pb, bufA, bufB, slotA, slotB, input);
  };

  if (stages == 1) {
    Value zero = i32Constant(rewriter, loc, 0);
    auto [ra, rb] = loadTiles(rewriter, loc, nullptr, Value());
    // The previous K step may still read the buffers.
    gpu::BarrierOp::create(rewriter, loc);
    storeRuns(rewriter, loc, pa, ra.zeroed(rewriter, loc), bufA, zero, input);
    storeRuns(rewriter, loc, pb, rb.zeroed(rewriter, loc), bufB, zero, input);
    if (warpgroup)
      fenceSharedForAsyncReads(rewriter, loc);
    gpu::BarrierOp::create(rewriter, loc);
    Value result = compute(zero);
    if (warpgroup)
      result = waitForWarpgroups(rewriter, loc, 0, result);
    rewriter.replaceOp(op, result);
    return success();
  }

  if (bulkA && bulkB) {
    recordTensorMap(rewriter, op, 0, *bulkA, input);
    recordTensorMap(rewriter, op, 1, *bulkB, input);
    // The stages' barriers follow the ring in the dynamic shared array: static shared
    // memory before it would move the ring off its 1024-byte alignment. Per stage, a
    // "full" barrier counts the copies' bytes; with a producer warpgroup, stage s's
    // "empty" barrier (at stages + s) counts the consumer warps done reading it.
    int64_t barrierCount = producerLoop ? 2 * stages : stages;
    Value barriers =
        sharedBuffer(rewriter, op, dist.arch, rewriter.getI64Type(), barrierCount, "__tile_copy_barriers", 8);
    initTensorMapBarriers(rewriter, loc, barriers, stages, dist.threadId);
    if (producerLoop)
      initTensorMapBarriers(rewriter, loc, barriers, stages, dist.threadId, dist.numWarps * multicastCtas, stages);
    // With multicast, the other blocks' copies and arrivals reach this block's
    // barriers: none may start before every block has initialized its own.
    if (multicastCtas > 1)
      clusterBarrier(rewriter, loc);
    else
      gpu::BarrierOp::create(rewriter, loc);
    {
      // After the loop every issued tile has been waited for; the epilogue may reuse
      // the memory once all threads are past their last wait. With multicast, the other
      // blocks' MMA warps may still arrive on this block's barriers: the cluster's
      // threads meet first (the producers have left, which counts as arriving).
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointAfter(walk ? walk : loopOp);
      if (multicastCtas > 1)
        clusterBarrier(rewriter, loc);
      gpu::BarrierOp::create(rewriter, loc);
      invalidateTensorMapBarriers(rewriter, loc, barriers, barrierCount, dist.threadId);
    }
    Value rank = multicastCtas > 1 ? clusterRank(rewriter, loc) : Value();
    // Where `issue` (one thread, and a tile that exists), the copies of the tile `shift`
    // maps the scalars to, into stage `slot`.
    auto copyTiles = [&](OpBuilder &builder, Location loc, const DenseMap<Value, Value> *shift, Value slot,
                         Value issue) {
      auto remap = [&](Value v) { return remapThrough(shift, v); };
      auto i32Of = [&](const ScalarPoly &poly) -> Value {
        return builder.createOrFold<arith::TruncIOp>(loc, builder.getI32Type(),
                                                     poly.materialize(builder, loc, remap));
      };
      SmallVector<BulkCopyPlacement> copies;
      for (auto [operand, buffer, stageElements] :
           {std::tuple{&*bulkA, bufA, m * k}, std::tuple{&*bulkB, bufB, k * n}}) {
        Value first = builder.createOrFold<arith::MulIOp>(loc, slot,
                                                          i32Constant(builder, loc, stageElements));
        BulkCopyPlacement copy{operand, elementPtr(builder, loc, buffer, input, first), input,
                               i32Of(operand->inner), i32Of(operand->outer)};
        if (operand == &*bulkB && multicastCtas > 1) {
          copy.rank = rank;
          copy.ctas = multicastCtas;
        }
        copies.push_back(copy);
      }
      issueBulkCopies(builder, loc, copies, tensorMapBarrier(builder, loc, barriers, slot), issue);
    };
    auto threadIs = [&](OpBuilder &builder, Location loc, int64_t thread) -> Value {
      return builder.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, dist.threadId,
                                                 i32Constant(builder, loc, thread));
    };
    // Stage s is filled for the (k / S)-th time at iteration k: that phase's parity.
    auto phaseOf = [&](OpBuilder &builder, Location loc, Value iteration, bool flipped) {
      Type type = iteration.getType();
      auto constant = [&](int64_t v) {
        return arith::ConstantOp::create(builder, loc, type, builder.getIntegerAttr(type, v));
      };
      Value round = builder.createOrFold<arith::DivSIOp>(loc, iteration, constant(stages));
      if (flipped)
        round = builder.createOrFold<arith::AddIOp>(loc, round, constant(1));
      Value phase = builder.createOrFold<arith::AndIOp>(loc, round, constant(1));
      if (type.getIntOrFloatBitWidth() != 32)
        phase = builder.createOrFold<arith::TruncIOp>(loc, builder.getI32Type(), phase);
      return phase;
    };
    auto slotOf = [&](OpBuilder &builder, Location loc, Value iteration, int64_t ahead) -> Value {
      Type type = iteration.getType();
      Value shifted = builder.createOrFold<arith::AddIOp>(
          loc, iteration,
          arith::ConstantOp::create(builder, loc, type, builder.getIntegerAttr(type, ahead)));
      Value slot = builder.createOrFold<arith::RemSIOp>(
          loc, shifted,
          arith::ConstantOp::create(builder, loc, type, builder.getIntegerAttr(type, stages)));
      if (type.getIntOrFloatBitWidth() != 32)
        slot = builder.createOrFold<arith::TruncIOp>(loc, builder.getI32Type(), slot);
      return slot;
    };
    if (producerLoop) {
      // The producer: for tile k, its first thread waits until the consumers released
      // stage k % S (its (k / S - 1)-th release; the parity of the phase before the
      // first passes at once), then copies tile k into it.
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(producerLoop.getBody()->getTerminator());
      Value iteration = rewriter.getRemappedValue(plan->producerKernelIteration);
      Value slot = slotOf(rewriter, loc, iteration, 0);
      Value issuer = threadIs(rewriter, loc, dist.threads);
      scf::IfOp::create(rewriter, loc, issuer, [&](OpBuilder &builder, Location loc) {
        Value empty = tensorMapBarrier(
            builder, loc, barriers,
            builder.createOrFold<arith::AddIOp>(loc, slot, i32Constant(builder, loc, stages)));
        waitForBulkCopies(builder, loc, empty, phaseOf(builder, loc, iteration, /*flipped=*/true));
        copyTiles(builder, loc, &plan->producerScalars, slot, arith::ConstantIntOp::create(builder, loc, 1, 1));
        scf::YieldOp::create(builder, loc);
      });
      // The consumers: wait for tile k, multiply, and once tile k - 1's MMAs are done
      // (one group left in flight), each warp's first lane releases its stage.
      rewriter.setInsertionPoint(op);
      Value consumerIteration = rewriter.getRemappedValue(plan->kernelIteration);
      Value consumerSlot = slotOf(rewriter, loc, consumerIteration, 0);
      return pipelineWarpgroups(
          rewriter, op, compute, consumerSlot,
          [&](OpBuilder &builder, Location loc) {
            waitForBulkCopies(builder, loc, tensorMapBarrier(builder, loc, barriers, consumerSlot),
                              phaseOf(builder, loc, consumerIteration, /*flipped=*/false));
          },
          [&](OpBuilder &builder, Location loc) {
            Type type = consumerIteration.getType();
            Value notFirst = builder.createOrFold<arith::CmpIOp>(
                loc, arith::CmpIPredicate::sgt, consumerIteration,
                arith::ConstantOp::create(builder, loc, type, builder.getIntegerAttr(type, 0)));
            Value firstLane = builder.createOrFold<arith::CmpIOp>(
                loc, arith::CmpIPredicate::eq,
                builder.createOrFold<arith::RemUIOp>(loc, dist.threadId,
                                                     i32Constant(builder, loc, dist.arch.waveSize)),
                i32Constant(builder, loc, 0));
            Value previous = slotOf(builder, loc, consumerIteration, stages - 1);
            scf::IfOp::create(
                builder, loc, builder.createOrFold<arith::AndIOp>(loc, notFirst, firstLane),
                [&](OpBuilder &builder, Location loc) {
                  Value empty =
                      tensorMapBarrier(builder, loc, barriers,
                                       builder.createOrFold<arith::AddIOp>(
                                           loc, previous, i32Constant(builder, loc, stages)));
                  if (multicastCtas > 1)
                    arriveOnClusterBarriers(builder, loc, empty, multicastCtas);
                  else
                    arriveOnBarrier(builder, loc, empty);
                  scf::YieldOp::create(builder, loc);
                });
          },
          /*blockBarriers=*/false);
    }
    // Without a producer, thread 0 copies; a tile past the loop's end is not copied: no
    // iteration waits for it.
    auto firstThreadAnd = [&](OpBuilder &builder, Location loc, Value inRange) -> Value {
      return builder.createOrFold<arith::AndIOp>(loc, threadIs(builder, loc, 0), inRange);
    };
    for (int64_t d = 0; d + 1 < stages; ++d)
      copyTiles(rewriter, loc, &plan->prologue[d], i32Constant(rewriter, loc, d),
                firstThreadAnd(rewriter, loc, rewriter.getRemappedValue(plan->prologueInRange[d])));
    rewriter.setInsertionPoint(op);
    return pipelineWarpgroups(
        rewriter, op, compute, plan->slot[0],
        [&](OpBuilder &builder, Location loc) {
          waitForBulkCopies(builder, loc, tensorMapBarrier(builder, loc, barriers, plan->slot[0]),
                            phaseOf(builder, loc, rewriter.getRemappedValue(plan->iteration), /*flipped=*/false));
        },
        [&](OpBuilder &builder, Location loc) {
          copyTiles(builder, loc, &plan->shifted[stages - 1], plan->slot[stages - 1],
                    firstThreadAnd(builder, loc, rewriter.getRemappedValue(plan->inRange[stages - 1])));
        });
  }

  if (async) {
    // Before the loop: tiles 0 .. S - 2 copied into stages 0 .. S - 2, a commit group each.
    for (int64_t d = 0; d + 1 < stages; ++d) {
      Value slot = i32Constant(rewriter, loc, d);
      Value inRange = rewriter.getRemappedValue(plan->prologueInRange[d]);
      copyAndCommit(rewriter, loc, [&](OpBuilder &builder, Location loc) {
        copyRuns(builder, loc, pa, viewOf(*a, pa, &plan->prologue[d]), input, bufA, slot, inRange);
        copyRuns(builder, loc, pb, viewOf(*b, pb, &plan->prologue[d]), input, bufB, slot, inRange);
      });
    }
    rewriter.setInsertionPoint(op);
    auto copyTiles = [&](OpBuilder &builder, Location loc, int64_t distance) {
      Value inRange = rewriter.getRemappedValue(plan->inRange[distance]);
      copyRuns(builder, loc, pa, viewAt(*a, pa, distance), input, bufA, plan->slot[distance], inRange);
      copyRuns(builder, loc, pb, viewAt(*b, pb, distance), input, bufB, plan->slot[distance], inRange);
    };
    if (warpgroup)
      return pipelineWarpgroups(
          rewriter, op, compute, plan->slot[0],
          [&](OpBuilder &builder, Location loc) {
            LLVM::CallIntrinsicOp::create(builder, loc, builder.getStringAttr("llvm.nvvm.cp.async.wait.group"),
                                          ValueRange{i32Constant(builder, loc, stages - 2)});
            if (!pa.aligned16 || !pb.aligned16)
              fenceSharedForAsyncReads(builder, loc);
          },
          [&](OpBuilder &builder, Location loc) {
            copyAndCommit(builder, loc, [&](OpBuilder &builder, Location loc) { copyTiles(builder, loc, stages - 1); });
          });
    return pipelineAsync(rewriter, op, *plan, compute, copyTiles);
  }

  // Before the loop: tiles 0 .. S - 2 into the stages they go to (zeros for iterations
  // the loop does not have).
  for (int64_t d = 0; d + 1 < stages; ++d) {
    Value slot = i32Constant(rewriter, loc, d % buffers);
    auto [ra, rb] = loadTiles(rewriter, loc, &plan->prologue[d],
                              rewriter.getRemappedValue(plan->prologueInRange[d]));
    storeRuns(rewriter, loc, pa, ra.zeroed(rewriter, loc), bufA, slot, input);
    storeRuns(rewriter, loc, pb, rb.zeroed(rewriter, loc), bufB, slot, input);
  }
  gpu::BarrierOp::create(rewriter, loc);
  rewriter.setInsertionPoint(op);
  // Tile k + S - 1 is loaded into registers before tile k's matrix instructions run, and
  // written after them into the buffer tile k leaves, once every wave is done reading
  // it. With one buffer, a second barrier keeps the next iteration's reads after the
  // writes; with more, the next iteration reads a buffer written one barrier earlier.
  int64_t ahead = stages - 1;
  auto [ra, rb] = loadTiles(rewriter, loc, &plan->shifted[ahead], plan->inRange[ahead]);
  // Keep the loads before the matrix instructions and their first use after them:
  // AMDGPU's scheduler otherwise moves the loads down to where their registers are used,
  // or the use (the masking select) up to the loads, and waits for the loads at once, so
  // no load overlaps the matrix work. A scheduling barrier with mask 0 lets nothing cross.
  // Holding the loaded tile across the matrix work costs its registers, so this is done
  // where the accumulator and the tile take at most 5/8 of a wave's VGPRs: beyond that
  // (RDNA's wave32 at 128x128x64 tiles) the barriers turn into scratch.
  int64_t accumulatorRegisters = layout.perThread();
  int64_t tileRegisters = (pa.runsPerThread * pa.run + pb.runsPerThread * pb.run) * bytes / 4;
  bool keepOrder = dist.arch.amd &&
                   accumulatorRegisters + tileRegisters <= int64_t(dist.arch.maxVgprsPerWave) * 5 / 8;
  auto schedulingBarrier = [&] {
    if (keepOrder)
      LLVM::CallIntrinsicOp::create(rewriter, loc, rewriter.getStringAttr("llvm.amdgcn.sched.barrier"),
                                    ValueRange{i32Constant(rewriter, loc, 0)});
  };
  schedulingBarrier();
  Value slot = plan->slot[ahead];
  Value result = compute(plan->slot[0]);
  schedulingBarrier();
  gpu::BarrierOp::create(rewriter, loc);
  storeRuns(rewriter, loc, pa, ra.zeroed(rewriter, loc), bufA, slot, input);
  storeRuns(rewriter, loc, pb, rb.zeroed(rewriter, loc), bufB, slot, input);
  if (buffers == 1)
    gpu::BarrierOp::create(rewriter, loc);
  rewriter.replaceOp(op, result);
  return success();
}

Value DotOnGpu::fragmentsAndMultiply(ConversionPatternRewriter &rewriter, Location loc,
                                     const MatrixLayout &layout, const MatrixInstruction &mi, Value acc,
                                     const OperandPlan &pa, const OperandPlan &pb, Value bufA, Value bufB,
                                     Value slotA, Value slotB, Type input, bool markFirstFragments) const {
  WaveCoordinates w = waveCoordinates(rewriter, loc, dist, layout);
  auto c = [&](int64_t v) { return i32Constant(rewriter, loc, v); };
  auto add = [&](Value x, Value y) { return rewriter.createOrFold<arith::AddIOp>(loc, x, y); };
  auto addc = [&](Value x, int64_t y) { return add(x, c(y)); };
  auto div = [&](Value x, int64_t y) {
    return rewriter.createOrFold<arith::DivUIOp>(loc, x, c(y));
  };
  auto rem = [&](Value x, int64_t y) {
    return rewriter.createOrFold<arith::RemUIOp>(loc, x, c(y));
  };
  auto mul = [&](Value x, int64_t y) { return rewriter.createOrFold<arith::MulIOp>(loc, x, c(y)); };
  int64_t k = pa.cols, n = pb.cols;
  Value waveRow = waveRowBase(rewriter, loc, layout, w.waveM);
  Value waveCol = mul(w.waveN, n / layout.warpsN);
  int64_t perLane = layout.tile.perLane;
  int64_t bytes = elementBytes(input);
  int64_t per16 = 16 / bytes; // elements in one ldmatrix row
  // ldmatrix.trans moves 16-bit elements; 8-bit operands laid out along m or n are read
  // element by element.
  bool ldmatrixA = mi.ldmatrix && (pa.kContiguous() || bytes == 2);
  bool ldmatrixB = mi.ldmatrix && (pb.kContiguous() || bytes == 2);
  SmallVector<Value> tiles;
  for (int64_t t = 0; t < layout.repM * layout.repN; ++t)
    tiles.push_back(sliceOf(rewriter, loc, acc, t * perLane, perLane));

  // A fragment of aPerLane (bPerLane) elements from its runs along k, or element by
  // element where k is not the contiguous dimension.
  auto fragment = [&](const OperandPlan &p, Value buffer, Value slot, Value nonK, int64_t kBase,
                      bool isA) -> Value {
    int64_t count = isA ? mi.aPerLane : mi.bPerLane;
    auto coordinates = isA ? mi.a : mi.b;
    SmallVector<Value> runs;
    for (int64_t j = 0; j < count; j += mi.kRun) {
      auto [x, y] = coordinates(rewriter, loc, w.lane, j);
      Value kk = addc(isA ? y : x, kBase);
      Value at = add(nonK, isA ? x : y);
      if (p.kContiguous()) {
        runs.push_back(readShared(rewriter, loc, p, buffer, slot, input, at, kk, mi.kRun));
        continue;
      }
      SmallVector<Value> elements;
      for (int64_t i = 0; i < mi.kRun; ++i) {
        Value ki = addc(kk, i);
        Value e = isA ? readElement(rewriter, loc, p, buffer, slot, input, at, ki)
                      : readElement(rewriter, loc, p, buffer, slot, input, ki, at);
        elements.push_back(vector::BroadcastOp::create(rewriter, loc, VectorType::get({1}, input), e));
      }
      runs.push_back(concat(rewriter, loc, elements));
    }
    return concat(rewriter, loc, runs);
  };

  for (int64_t step = 0; step < k / mi.tileK; ++step) {
    int64_t kBase = step * mi.tileK;
    SmallVector<Value> aFrags, bFrags;
    for (int64_t rm = 0; rm < layout.repM; ++rm) {
      Value rowBase = addc(waveRow, rm * layout.tile.tileM);
      if (!ldmatrixA) {
        aFrags.push_back(fragment(pa, bufA, slotA, rowBase, kBase, true));
        continue;
      }
      // Matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15): a0..a3.
      Value q = div(w.lane, 8), r = rem(w.lane, 8);
      Value row = add(rowBase, add(r, mul(rem(q, 2), 8)));
      Value kk = addc(mul(div(q, 2), per16), kBase);
      if (pa.kContiguous()) {
        aFrags.push_back(ldmatrix(rewriter, loc, pa, bufA, slotA, input, row, kk, 4, false));
      } else {
        Value kRow = addc(add(r, mul(div(q, 2), 8)), kBase);
        Value mCol = add(rowBase, mul(rem(q, 2), 8));
        aFrags.push_back(ldmatrix(rewriter, loc, pa, bufA, slotA, input, kRow, mCol, 4, true));
      }
    }
    for (int64_t rn = 0; rn < layout.repN; ++rn) {
      Value colBase = addc(waveCol, rn * layout.tile.tileN);
      if (!ldmatrixB) {
        bFrags.push_back(fragment(pb, bufB, slotB, colBase, kBase, false));
        continue;
      }
      // Two n tiles per ldmatrix x4: (n 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15).
      int64_t matrices = rn + 1 < layout.repN ? 4 : 2;
      Value q = div(w.lane, 8), r = rem(w.lane, 8);
      if (matrices == 2)
        q = rem(q, 2);
      Value words;
      if (pb.kContiguous()) {
        Value col = add(colBase, add(r, mul(div(q, 2), 8)));
        Value kk = addc(mul(rem(q, 2), per16), kBase);
        words = ldmatrix(rewriter, loc, pb, bufB, slotB, input, col, kk, matrices, false);
      } else {
        Value kRow = addc(add(r, mul(rem(q, 2), 8)), kBase);
        Value col = add(colBase, mul(div(q, 2), 8));
        words = ldmatrix(rewriter, loc, pb, bufB, slotB, input, kRow, col, matrices, true);
      }
      int64_t half = mi.bPerLane;
      bFrags.push_back(sliceOf(rewriter, loc, words, 0, half));
      if (matrices == 4) {
        bFrags.push_back(sliceOf(rewriter, loc, words, half, half));
        ++rn;
      }
    }
    if (markFirstFragments && step == 0) {
      // One value for all of the first step's fragments, which prefetchFirstFragments
      // carries across the loop's back edge.
      SmallVector<Value> all(aFrags);
      all.append(bFrags);
      Value packed = concat(rewriter, loc, all);
      packed.getDefiningOp()->setAttr(kFirstFragmentsAttr, rewriter.getUnitAttr());
      int64_t at = 0;
      for (Value &frag : llvm::concat<Value>(aFrags, bFrags)) {
        int64_t size = cast<VectorType>(frag.getType()).getNumElements();
        frag = sliceOf(rewriter, loc, packed, at, size);
        at += size;
      }
    }
    if (markFirstFragments && step + 1 == k / mi.tileK) {
      // Where the wait for the next tile goes once the first fragments are prefetched.
      auto point = LLVM::UndefOp::create(rewriter, loc, rewriter.getI1Type());
      point->setAttr(kLastStepAttr, rewriter.getUnitAttr());
    }
    for (int64_t rm = 0; rm < layout.repM; ++rm)
      for (int64_t rn = 0; rn < layout.repN; ++rn) {
        Value &tile = tiles[rm * layout.repN + rn];
        tile = mi.multiply(rewriter, loc, aFrags[rm], bFrags[rn], tile);
      }
  }
  return concat(rewriter, loc, tiles);
}

/// Archs or types with no matrix instruction: each thread forms its accumulator
/// elements with FMAs (multiply-adds for integers) over the staged blocks.
Value DotOnGpu::onFmas(ConversionPatternRewriter &rewriter, Location loc, const MatrixLayout &layout,
                       Value acc, const OperandPlan &pa, const OperandPlan &pb, Value bufA, Value bufB,
                       Value slotA, Value slotB, Type input) const {
  int64_t perThread = layout.perThread();
  SmallVector<std::pair<Value, Value>> coordinates;
  MatrixPlaces places(rewriter, loc, dist, layout);
  for (int64_t e = 0; e < perThread; ++e)
    coordinates.push_back(places.at(rewriter, loc, e));
  Type accElement = cast<VectorType>(acc.getType()).getElementType();
  auto loop = scf::ForOp::create(
      rewriter, loc, i32Constant(rewriter, loc, 0), i32Constant(rewriter, loc, pa.cols),
      i32Constant(rewriter, loc, 1), ValueRange{acc}, [&](OpBuilder &b, Location loc, Value kk, ValueRange iter) {
        Value sums = iter[0];
        for (int64_t e = 0; e < perThread; ++e) {
          auto [row, col] = coordinates[e];
          Value x = widenTo(b, loc, readElement(b, loc, pa, bufA, slotA, input, row, kk), accElement);
          Value y = widenTo(b, loc, readElement(b, loc, pb, bufB, slotB, input, kk, col), accElement);
          Value sum = vector::ExtractOp::create(b, loc, sums, ArrayRef<int64_t>{e});
          // llvm.fma, not math.fma: the GPU conversions turn math.fma into calls of
          // __nv_fmaf / __ocml_fma_f32 from device libraries.
          sum = isa<FloatType>(accElement)
                    ? Value(LLVM::FMAOp::create(b, loc, x, y, sum))
                    : Value(b.createOrFold<arith::AddIOp>(
                          loc, b.createOrFold<arith::MulIOp>(loc, x, y), sum));
          sums = vector::InsertOp::create(b, loc, sum, sums, ArrayRef<int64_t>{e});
        }
        scf::YieldOp::create(b, loc, sums);
      });
  return loop.getResult(0);
}

} // namespace

void mlir::tile::gpu_lowering::populateDotPatterns(const TypeConverter &converter,
                                                   RewritePatternSet &patterns,
                                                   const Distribution &dist) {
  patterns.add<DotOnGpu>(converter, patterns.getContext(), dist);
}
