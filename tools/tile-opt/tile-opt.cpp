// tile-opt: runs tile passes and pipelines over textual IR, for lit / FileCheck tests,
// as mlir-opt does upstream.
#include "tile/Compiler/Pipeline.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  tile::registerTileDialects(registry);
  tile::registerTilePassesAndPipelines();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "tile optimizer driver\n", registry));
}
