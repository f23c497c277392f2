#include "tile/Conversion/TileToCPU/TileToCPU.h"

#include "CpuLowering.h"
#include "tile/Conversion/ElementwiseTypeLowering.h"
#include "tile/Conversion/Passes.h"
#include "tile/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tile {
#define GEN_PASS_DEF_CONVERTTILETOCPU
#include "tile/Conversion/Passes.h.inc"
} // namespace mlir::tile

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::cpu;

CpuTypeConverter::CpuTypeConverter(MLIRContext *ctx) {
  addConversion([](Type type) { return type; });
  addConversion([ctx](PointerType) -> Type { return LLVM::LLVMPointerType::get(ctx); });
  addConversion([this](RankedTensorType type) -> Type {
    Type element = convertType(type.getElementType());
    if (!element)
      return {};
    return VectorType::get(type.getShape(), element);
  });
}

namespace {

struct MakeRangeLowering : OpConversionPattern<MakeRangeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MakeRangeOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    auto type = cast<VectorType>(getTypeConverter()->convertType(op.getType()));
    SmallVector<int32_t> values;
    for (int64_t i = op.getStart(), end = op.getEnd(); i < end; ++i)
      values.push_back(i);
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, type, DenseElementsAttr::get(type, ArrayRef<int32_t>(values)));
    return success();
  }
};

struct SplatLowering : OpConversionPattern<SplatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SplatOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Type type = getTypeConverter()->convertType(op.getType());
    rewriter.replaceOpWithNewOp<vector::BroadcastOp>(op, type, adaptor.getSrc());
    return success();
  }
};

struct AddPtrLowering : OpConversionPattern<AddPtrOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AddPtrOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type type = getTypeConverter()->convertType(op.getType());
    Type element = getTypeConverter()->convertType(getPointeeType(op.getType()));
    auto vectorType = dyn_cast<VectorType>(type);
    if (!vectorType) {
      rewriter.replaceOpWithNewOp<LLVM::GEPOp>(op, type, element, adaptor.getPtr(),
                                               ArrayRef<LLVM::GEPArg>{adaptor.getOffset()});
      return success();
    }
    Value ptrs = flatten(rewriter, loc, adaptor.getPtr());
    Value gep = LLVM::GEPOp::create(rewriter, loc, ptrs.getType(), element, ptrs,
                                    ArrayRef<LLVM::GEPArg>{flatten(rewriter, loc, adaptor.getOffset())});
    rewriter.replaceOp(op, reshapeTo(rewriter, loc, gep, vectorType));
    return success();
  }
};

struct ExpandDimsLowering : OpConversionPattern<ExpandDimsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ExpandDimsOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    auto type = cast<VectorType>(getTypeConverter()->convertType(op.getType()));
    rewriter.replaceOp(op, reshapeTo(rewriter, op.getLoc(), adaptor.getSrc(), type));
    return success();
  }
};

struct BroadcastLowering : OpConversionPattern<BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BroadcastOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Type type = getTypeConverter()->convertType(op.getType());
    // vector.broadcast stretches size-1 dimensions as tile.broadcast does.
    rewriter.replaceOpWithNewOp<vector::BroadcastOp>(op, type, adaptor.getSrc());
    return success();
  }
};

/// Program ids become trailing kernel arguments, which the CPU entry point fills in.
void appendGridArguments(func::FuncOp kernel) {
  OpBuilder builder(kernel.getContext());
  Block &entry = kernel.getBody().front();
  unsigned first = entry.getNumArguments();
  SmallVector<unsigned> positions(kCpuGridArgCount, first);
  SmallVector<Type> types(kCpuGridArgCount, builder.getI32Type());
  SmallVector<DictionaryAttr> attrs(kCpuGridArgCount, builder.getDictionaryAttr({}));
  SmallVector<Location> locs(kCpuGridArgCount, kernel.getLoc());
  // insertArguments keeps the argument attributes (the caller's promises) in step.
  if (failed(kernel.insertArguments(positions, types, attrs, locs)))
    llvm_unreachable("appending arguments to a kernel cannot fail");
  SmallVector<Value> gridArgs;
  for (unsigned i = 0; i < kCpuGridArgCount; ++i)
    gridArgs.push_back(entry.getArgument(first + i));
  kernel.walk([&](Operation *op) {
    if (auto pid = dyn_cast<ProgramIdOp>(op)) {
      pid.replaceAllUsesWith(gridArgs[pid.getAxis()]);
      pid.erase();
    } else if (auto count = dyn_cast<NumProgramsOp>(op)) {
      count.replaceAllUsesWith(gridArgs[3 + count.getAxis()]);
      count.erase();
    }
  });
}

struct ConvertTileToCPUPass : mlir::tile::impl::ConvertTileToCPUBase<ConvertTileToCPUPass> {
  using ConvertTileToCPUBase::ConvertTileToCPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<func::FuncOp> kernels;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(kKernelAttrName) && !func.isExternal())
        kernels.push_back(func);
    for (auto kernel : kernels) {
      if (kernel.getFunctionType().getNumResults() != 0) {
        kernel.emitError("a tile kernel returns nothing; it writes its results through pointers");
        return signalPassFailure();
      }
      // Its programs wait on each other: only a launch that keeps them all resident, as
      // the persistent GPU kernels' is, runs it.
      if (kernel->hasAttr(kStreamKAttrName)) {
        kernel.emitError("stream_k=1 or 2 splits K steps over programs that wait on each other's partial sums; "
                         "it needs the persistent, warp-specialized kernel of sm_90a (persistent=1), not the CPU");
        return signalPassFailure();
      }
      appendGridArguments(kernel);
      loadRepeatedRowsOnce(kernel);
    }

    CpuTypeConverter converter(ctx);
    ConversionTarget target(*ctx);
    target.addLegalDialect<LLVM::LLVMDialect, vector::VectorDialect>();
    target.addIllegalDialect<TileDialect>();
    target.addDynamicallyLegalDialect<arith::ArithDialect, math::MathDialect>(
        [&](Operation *op) { return converter.isLegal(op); });
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
      return converter.isSignatureLegal(op.getFunctionType()) && converter.isLegal(&op.getBody());
    });
    target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(
        [&](Operation *op) { return converter.isLegal(op); });

    RewritePatternSet patterns(ctx);
    patterns.add<MakeRangeLowering, SplatLowering, AddPtrLowering, ExpandDimsLowering,
                 BroadcastLowering>(converter, ctx);
    cpu::populateMemoryAccessPatterns(converter, patterns, maskedStores);
    cpu::populateDotPatterns(converter, patterns,
                             cpu::CpuDotFeatures{bf16Dot, int8Dot, amxBf16, amxInt8});
    populateElementwiseTypeLowering(converter, patterns);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns, converter);
    populateReturnOpTypeConversionPattern(patterns, converter);
    populateCallOpTypeConversionPattern(patterns, converter);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, target);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    OpBuilder builder(ctx);
    for (auto kernel : kernels) {
      cpu::keepAccumulatorsInTileBuffers(kernel);
      cpu::rowWiseEpilogues(kernel);
      cpu::storeOnlyRowsWithLanesOn(kernel);
      buildCpuEntryPoint(builder, kernel);
      kernel->removeAttr(kKernelAttrName);
      // Internal linkage lets LLVM inline the kernel into the entry point's loop.
      kernel->setAttr("llvm.linkage", LLVM::LinkageAttr::get(ctx, LLVM::Linkage::Internal));
    }
  }
};

} // namespace
