#ifndef TILE_CONVERSION_PASSES_TD
#define TILE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertTileToCPU : Pass<"convert-tile-to-cpu", "::mlir::ModuleOp"> {
  let summary = "Lower tile kernels to host vector code (the tile-cpu stage)";
  let description = [{
    Maps each block tensor onto one host vector (`tensor<1024xf32>` becomes
    `vector<1024xf32>`, split into machine registers by the LLVM backend), pointers onto
    `!llvm.ptr`, and memory ops onto LLVM vector memory intrinsics. Loads and stores whose
    lanes are provably contiguous become one vector access, taken unmasked when every
    lane of the mask is on (the whole blocks) and masked otherwise (the ragged last
    block); other addresses become gathers and scatters.

    Program ids become trailing i32 arguments of the kernel, and a packed entry point
    `<kernel>_cpu_entry(void **args, i64 begin, i64 end, i32 gx, i32 gy, i32 gz)` runs the
    program instances [begin, end) of the grid, so the runtime can split a grid across
    host threads.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::vector::VectorDialect",
                           "::mlir::scf::SCFDialect", "::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // TILE_CONVERSION_PASSES_TD
