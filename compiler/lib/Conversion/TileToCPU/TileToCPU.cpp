#include "tile/Conversion/TileToCPU/TileToCPU.h"

#include "tile/Conversion/Passes.h"
#include "tile/Conversion/TileToCPU/AffineLanes.h"
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

namespace {

/// Block tensors become host vectors of the same shape; pointers become !llvm.ptr.
class CpuTypeConverter : public TypeConverter {
public:
  explicit CpuTypeConverter(MLIRContext *ctx) {
    addConversion([](Type type) { return type; });
    addConversion([ctx](PointerType) -> Type { return LLVM::LLVMPointerType::get(ctx); });
    addConversion([this](RankedTensorType type) -> Type {
      Type element = convertType(type.getElementType());
      if (!element)
        return {};
      return VectorType::get(type.getShape(), element);
    });
  }
};

unsigned elementBytes(Type type) {
  if (isa<LLVM::LLVMPointerType>(type))
    return 8;
  return std::max(1u, type.getIntOrFloatBitWidth() / 8);
}

/// lanes.basePtr advanced by the scalar part of `lanes`, as one i64 element offset.
Value contiguousBase(ConversionPatternRewriter &rewriter, Location loc, const AffineLanes &lanes,
                     Type elementType) {
  Type i64 = rewriter.getI64Type();
  Value offset = arith::ConstantIntOp::create(rewriter, loc, i64, lanes.constant);
  for (auto [term, coefficient] : lanes.terms) {
    Value value = rewriter.getRemappedValue(term);
    if (value.getType() != i64)
      value = arith::ExtSIOp::create(rewriter, loc, i64, value);
    if (coefficient != 1)
      value = arith::MulIOp::create(
          rewriter, loc, value, arith::ConstantIntOp::create(rewriter, loc, i64, coefficient));
    offset = arith::AddIOp::create(rewriter, loc, offset, value);
  }
  Value base = rewriter.getRemappedValue(lanes.basePtr);
  return LLVM::GEPOp::create(rewriter, loc, base.getType(), elementType, base,
                             ArrayRef<LLVM::GEPArg>{offset});
}

std::optional<AffineLanes> contiguousLanes(Value ptrTensor) {
  auto lanes = analyzeAffineLanes(ptrTensor);
  auto type = cast<RankedTensorType>(ptrTensor.getType());
  if (type.getRank() != 1 || !lanes || !lanes->basePtr || lanes->stride != 1)
    return std::nullopt;
  return lanes;
}

/// Emits `fullAccess` when every lane of `mask` is on and `maskedAccess` otherwise: whole
/// blocks then take plain vector loads and stores, which the backend can emit for any
/// element type, where a masked access of 16-bit lanes has no AVX2 instruction and is
/// scalarized.
Value branchOnFullMask(ConversionPatternRewriter &rewriter, Location loc, Value mask,
                       TypeRange resultTypes,
                       function_ref<Value(OpBuilder &, Location)> fullAccess,
                       function_ref<Value(OpBuilder &, Location)> maskedAccess) {
  Value allOn = vector::ReductionOp::create(rewriter, loc, vector::CombiningKind::AND, mask);
  auto yieldOf = [&](function_ref<Value(OpBuilder &, Location)> access) {
    return [access, &resultTypes](OpBuilder &b, Location l) {
      Value result = access(b, l);
      scf::YieldOp::create(b, l, resultTypes.empty() ? ValueRange{} : ValueRange{result});
    };
  };
  auto branch = scf::IfOp::create(rewriter, loc, allOn, yieldOf(fullAccess), yieldOf(maskedAccess));
  return resultTypes.empty() ? Value() : branch.getResult(0);
}

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
    Type type = getTypeConverter()->convertType(op.getType());
    Type element = getTypeConverter()->convertType(getPointeeType(op.getType()));
    rewriter.replaceOpWithNewOp<LLVM::GEPOp>(op, type, element, adaptor.getPtr(),
                                             ArrayRef<LLVM::GEPArg>{adaptor.getOffset()});
    return success();
  }
};

struct LoadLowering : OpConversionPattern<LoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LoadOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type type = getTypeConverter()->convertType(op.getType());
    auto vectorType = dyn_cast<VectorType>(type);
    Type element = vectorType ? vectorType.getElementType() : type;
    unsigned align = elementBytes(element);
    if (!vectorType) {
      rewriter.replaceOpWithNewOp<LLVM::LoadOp>(op, type, adaptor.getPtr(), align);
      return success();
    }
    Value mask = adaptor.getMask();
    Value other = adaptor.getOther();
    if (!other)
      other = arith::ConstantOp::create(rewriter, loc, type, rewriter.getZeroAttr(type));
    if (auto lanes = contiguousLanes(op.getPtr())) {
      Value base = contiguousBase(rewriter, loc, *lanes, element);
      auto fullLoad = [&](OpBuilder &b, Location l) -> Value {
        return LLVM::LoadOp::create(b, l, type, base, align);
      };
      if (!mask) {
        rewriter.replaceOp(op, fullLoad(rewriter, loc));
        return success();
      }
      auto maskedLoad = [&](OpBuilder &b, Location l) -> Value {
        return LLVM::MaskedLoadOp::create(b, l, type, base, mask, other, align);
      };
      rewriter.replaceOp(op, branchOnFullMask(rewriter, loc, mask, type, fullLoad, maskedLoad));
      return success();
    }
    if (!mask)
      mask = arith::ConstantOp::create(
          rewriter, loc, DenseElementsAttr::get(VectorType::get(vectorType.getShape(), rewriter.getI1Type()), true));
    rewriter.replaceOpWithNewOp<LLVM::masked_gather>(op, type, adaptor.getPtr(), mask, other, align);
    return success();
  }
};

struct StoreLowering : OpConversionPattern<StoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(StoreOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value value = adaptor.getValue();
    auto vectorType = dyn_cast<VectorType>(value.getType());
    Type element = vectorType ? vectorType.getElementType() : value.getType();
    unsigned align = elementBytes(element);
    Value mask = adaptor.getMask();
    if (!vectorType) {
      LLVM::StoreOp::create(rewriter, loc, value, adaptor.getPtr(), align);
      rewriter.eraseOp(op);
      return success();
    }
    if (auto lanes = contiguousLanes(op.getPtr())) {
      Value base = contiguousBase(rewriter, loc, *lanes, element);
      auto fullStore = [&](OpBuilder &b, Location l) -> Value {
        LLVM::StoreOp::create(b, l, value, base, align);
        return {};
      };
      if (!mask) {
        fullStore(rewriter, loc);
      } else {
        auto maskedStore = [&](OpBuilder &b, Location l) -> Value {
          LLVM::MaskedStoreOp::create(b, l, value, base, mask, align);
          return {};
        };
        branchOnFullMask(rewriter, loc, mask, {}, fullStore, maskedStore);
      }
      rewriter.eraseOp(op);
      return success();
    }
    if (!mask)
      mask = arith::ConstantOp::create(
          rewriter, loc, DenseElementsAttr::get(VectorType::get(vectorType.getShape(), rewriter.getI1Type()), true));
    LLVM::masked_scatter::create(rewriter, loc, value, adaptor.getPtr(), mask, align);
    rewriter.eraseOp(op);
    return success();
  }
};

/// arith and math ops are already target-neutral; only their tensor types change.
struct ElementwiseTypeLowering : ConversionPattern {
  ElementwiseTypeLowering(const TypeConverter &converter, MLIRContext *ctx)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()))
      return failure();
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      auto type = dyn_cast_or_null<VectorType>(getTypeConverter()->convertType(constant.getType()));
      if (!dense || !type)
        return failure();
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, dense.reshape(type));
      return success();
    }
    FailureOr<Operation *> converted = convertOpResultTypes(op, operands, *getTypeConverter(), rewriter);
    if (failed(converted))
      return failure();
    rewriter.replaceOp(op, (*converted)->getResults());
    return success();
  }
};

/// Program ids become trailing kernel arguments, which the CPU entry point fills in.
void appendGridArguments(func::FuncOp kernel) {
  OpBuilder builder(kernel.getContext());
  Block &entry = kernel.getBody().front();
  SmallVector<Value> gridArgs;
  for (unsigned i = 0; i < kCpuGridArgCount; ++i)
    gridArgs.push_back(entry.addArgument(builder.getI32Type(), kernel.getLoc()));
  kernel.setFunctionType(builder.getFunctionType(entry.getArgumentTypes(), {}));
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
      appendGridArguments(kernel);
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
    patterns.add<MakeRangeLowering, SplatLowering, AddPtrLowering, LoadLowering, StoreLowering>(
        converter, ctx);
    patterns.add<ElementwiseTypeLowering>(converter, ctx);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns, converter);
    populateReturnOpTypeConversionPattern(patterns, converter);
    populateCallOpTypeConversionPattern(patterns, converter);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, target);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    OpBuilder builder(ctx);
    for (auto kernel : kernels) {
      buildCpuEntryPoint(builder, kernel);
      kernel->removeAttr(kKernelAttrName);
      // Internal linkage lets LLVM inline the kernel into the entry point's loop.
      kernel->setAttr("llvm.linkage", LLVM::LinkageAttr::get(ctx, LLVM::Linkage::Internal));
    }
  }
};

} // namespace
