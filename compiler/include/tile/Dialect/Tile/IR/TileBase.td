#ifndef TILE_BASE_TD
#define TILE_BASE_TD

include "mlir/IR/OpBase.td"

def Tile_Dialect : Dialect {
  let name = "tile";
  let cppNamespace = "::mlir::tile";
  let summary = "Block-level tensor programs compiled for CPUs and GPUs";
  let description = [{
    A tile program is a function run once per program instance of a grid, in the style
    of Triton. Values are scalars or block-level tensors (builtin `tensor` types, whose
    encoding slot is left for the target-specific layouts of the GPU stages). Memory is
    reached through `!tile.ptr` values and tensors of them; arithmetic and casts on
    scalars and tensors are the upstream `arith` and `math` ops, so only what upstream
    cannot say lives here.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let useDefaultTypePrinterParser = 1;
}

class Tile_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tile_Dialect, mnemonic, traits>;

#endif // TILE_BASE_TD
