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
  let options = [
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "the host has AVX512-BF16: bf16 dots whose a rows are unit-stride multiply pairs "
           "of k with vdpbf16ps (two products per f32 lane) instead of widening to f32 FMAs">,
    Option<"int8Dot", "int8-dot", "bool", /*default=*/"false",
           "the host has AVX512-VNNI: int8 dots whose a rows are unit-stride multiply quads "
           "of k with vpdpbusd (four products per i32 lane)">,
    Option<"amxBf16", "amx-bf16", "bool", /*default=*/"false",
           "the host has AMX-BF16 tile registers (and the OS grants them): bf16 dots whose b "
           "holds its k in pairs (b_k_group = 2) multiply whole blocks by tdpbf16ps">,
    Option<"amxInt8", "amx-int8", "bool", /*default=*/"false",
           "the host has AMX-INT8: int8 dots whose b holds its k in quads multiply whole "
           "blocks by tdpbssd">,
    Option<"maskedStores", "masked-stores", "bool", /*default=*/"false",
           "the host has AVX512-BW: a masked store of any element width costs a plain one, "
           "so masked blocks take no second, unmasked path for when every lane is on">,
  ];
}

def AttachLoopAnnotations : Pass<"tile-attach-loop-annotations", "::mlir::ModuleOp"> {
  let summary = "Give each loop's annotation to its latch branch (after the lowering to LLVM)";
  let description = [{
    A scf.for's `llvm.loop_annotation` (for example `unroll = disable` on a loop that
    LLVM would unroll again) is carried by the lowering to branches as a discardable
    attribute of the loop's latch. The translation to LLVM IR emits `!llvm.loop` only
    from an `llvm.br`'s own `loop_annotation`, so this pass moves it there.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def ConvertTileToGPU : Pass<"convert-tile-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Distribute tile kernels over the threads of one workgroup (the tile-gpu stage)";
  let description = [{
    Each kernel becomes a `gpu.func` in the `gpu.module @tile_kernels`, one program per
    workgroup of `num-warps` waves. A block of N elements is spread over the threads in
    runs of as many elements as 16 bytes of the kernel's narrowest memory type hold:
    thread t owns elements [t * vec, t * vec + vec) of each of the N / (threads * vec)
    repetitions, so a stride-1 load or store of a run is one 16-byte access
    (`global_load_dwordx4`, `ld.global.v4`). The run is taken unmasked when the mask
    keeps all of it, masked otherwise.

    The chipset (`gfx942`, `sm_90`) selects the wave size from the arch table. So far
    only 1-D blocks are distributed; a kernel with 2-D blocks is rejected with an error.
  }];
  let options = [
    Option<"chipset", "chipset", "std::string", /*default=*/"\"gfx942\"",
           "GPU arch the kernel is compiled for (gfx90a, gfx942, gfx950, gfx1100, gfx1201, sm_80, sm_90, sm_90a)">,
    Option<"numWarps", "num-warps", "int64_t", /*default=*/"4",
           "waves (warps) per workgroup">,
    Option<"matrixInstrNonKDim", "matrix-instr-nonkdim", "int64_t", /*default=*/"16",
           "MFMA tile edge, 16 (v_mfma_*_16x16x*) or 32 (v_mfma_*_32x32x*)">,
    Option<"kpack", "kpack", "int64_t", /*default=*/"1",
           "MFMA instructions that share one fragment read (1 or 2)">,
    Option<"numStages", "num-stages", "int64_t", /*default=*/"1",
           "software-pipelining depth of a dot's K loop: shared-memory stages, with the "
           "global loads of tile k + num-stages - 1 in flight during tile k's matrix "
           "instructions">,
    Option<"allowTf32", "allow-tf32", "bool", /*default=*/"false",
           "f32 dots on NVIDIA may round their inputs to TF32 for mma.sync (as torch's "
           "float32 matmul precision 'high' allows cuBLAS to); off: exact f32 FMAs">,
    Option<"warpSpecialize", "warp-specialize", "int64_t", /*default=*/"0",
           "sm_90a: 1 adds a producer warpgroup that issues a pipelined K loop's bulk "
           "tensor copies, guarded by full and empty mbarriers per stage, while the "
           "num-warps warps only run the warpgroup MMAs; 0: every warp does both">,
    Option<"deferEpilogue", "defer-epilogue", "bool", /*default=*/"false",
           "sm_90a persistent, warp-specialized kernels: stage each tile's results for "
           "its bulk stores during the next tile's first K steps, while their MMAs run. "
           "The MMA warps then hold 64 more registers across the walk over tiles: "
           "for code that ptxas assembles (the CUDA 13.0 driver's PTX compiler spills "
           "them)">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::vector::VectorDialect",
                           "::mlir::scf::SCFDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // TILE_CONVERSION_PASSES_TD
