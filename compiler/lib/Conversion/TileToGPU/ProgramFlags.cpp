// Flags between the programs of one launch (stream-K's partial sums): a program signals
// once every thread's stores are done, another waits for the signal before it reads
// them. As CUTLASS's grid barriers: the block meets, then one thread releases (or
// acquires) at device scope; the block barrier carries the order to the other threads.
#include "GpuLowering.h"

#include "tile/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

namespace {

/// PTX's acquire and release orders at device scope; other archs would need their own.
LogicalResult requireNvidia(Operation *op, const Distribution &dist) {
  if (dist.arch.amd)
    return op->emitOpError("program flags are lowered for NVIDIA GPUs only (got ") << dist.arch.name << ")";
  return success();
}

void onThreadZero(OpBuilder &b, Location loc, const Distribution &dist, function_ref<void(OpBuilder &, Location)> body) {
  Value first = b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, dist.threadId,
                                              i32Constant(b, loc, 0));
  scf::IfOp::create(b, loc, first, [&](OpBuilder &b, Location loc) {
    body(b, loc);
    scf::YieldOp::create(b, loc);
  });
}

/// A flag op's lowering: NVIDIA's, with the kernel's thread id.
template <typename FlagOp>
struct FlagLowering : OpConversionPattern<FlagOp> {
  FlagLowering(const TypeConverter &converter, MLIRContext *ctx, const Distribution &dist)
      : OpConversionPattern<FlagOp>(converter, ctx), dist(dist) {}
  const Distribution &dist;
};

struct SignalFlagLowering : FlagLowering<SignalFlagOp> {
  using FlagLowering::FlagLowering;
  LogicalResult matchAndRewrite(SignalFlagOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    if (failed(requireNvidia(op, dist)))
      return failure();
    Location loc = op.getLoc();
    // Every thread's stores are done before the one release publishes them.
    gpu::BarrierOp::create(rewriter, loc);
    onThreadZero(rewriter, loc, dist, [&](OpBuilder &b, Location loc) {
      inlinePtx(b, loc, "st.release.gpu.global.b32 [$0], 1;", 0, "l", ValueRange{adaptor.getFlag()}, {});
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct WaitFlagLowering : FlagLowering<WaitFlagOp> {
  using FlagLowering::FlagLowering;
  LogicalResult matchAndRewrite(WaitFlagOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    if (failed(requireNvidia(op, dist)))
      return failure();
    Location loc = op.getLoc();
    onThreadZero(rewriter, loc, dist, [&](OpBuilder &b, Location loc) {
      // Braces scope the label and registers: the wait may appear more than once.
      inlinePtx(b, loc,
                "{\n.reg .pred unset;\n.reg .b32 value;\nflag_wait:\n"
                "ld.acquire.gpu.global.b32 value, [$0];\nsetp.eq.b32 unset, value, 0;\n"
                "@unset bra.uni flag_wait;\nst.relaxed.gpu.global.b32 [$0], 0;\n}",
                0, "l", ValueRange{adaptor.getFlag()}, {});
    });
    // The other threads read what the signalling program stored only after the wait.
    gpu::BarrierOp::create(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::tile::gpu_lowering::populateProgramFlagPatterns(const TypeConverter &converter, RewritePatternSet &patterns,
                                                           const Distribution &dist) {
  patterns.add<SignalFlagLowering, WaitFlagLowering>(converter, patterns.getContext(), dist);
}
