#include "tile/Compiler/Pipeline.h"

#include "tile/Conversion/Passes.h"
#include "tile/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void ::tile::registerTileDialects(DialectRegistry &registry) {
  registry.insert<mlir::tile::TileDialect, arith::ArithDialect, math::MathDialect, func::FuncDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, vector::VectorDialect,
                  LLVM::LLVMDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

void ::tile::buildTileToCpuPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(mlir::tile::createConvertTileToCPU());
}

void ::tile::buildCpuToLLVMPipeline(OpPassManager &pm) {
  // bf16 <-> f32 become integer bit operations: x86 without AVX512-BF16 would otherwise
  // call __truncsfbf2, which the host's libgcc may not have.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createSCFToControlFlowPass());
  // Dots that were not fused with their loads become vector.contract; outer products
  // keep them as a sequence of FMAs over k, like the fused microkernel.
  ConvertVectorToLLVMPassOptions vectorOptions;
  vectorOptions.vectorContractLowering = vector::VectorContractLowering::OuterProduct;
  pm.addPass(createConvertVectorToLLVMPass(vectorOptions));
  pm.addPass(createConvertMathToLLVMPass());
  // Vector unrolling starts N-D vectors from ub.poison.
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void ::tile::registerTilePassesAndPipelines() {
  mlir::tile::registerTileConversionPasses();
  PassPipelineRegistration<>("tile-to-cpu", "tile -> tile-cpu stage", buildTileToCpuPipeline);
  PassPipelineRegistration<>("tile-cpu-to-llvm", "tile-cpu -> llvm stage",
                             buildCpuToLLVMPipeline);
}
