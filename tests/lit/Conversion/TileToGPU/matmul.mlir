// RUN: tile-opt %s --tile-to-gpu=chipset=gfx942 | FileCheck %s --check-prefix=STAGED
// RUN: tile-opt %s --tile-to-gpu=chipset=gfx942 --tile-gpu-to-llvm=chipset=gfx942 | FileCheck %s --check-prefix=MFMA16
// RUN: tile-opt %s --tile-to-gpu="chipset=gfx942 num-stages=2" | FileCheck %s --check-prefix=PIPELINED
// RUN: tile-opt %s --tile-to-gpu="chipset=gfx90a matrix-instr-nonkdim=32 num-warps=1" --tile-gpu-to-llvm=chipset=gfx90a | FileCheck %s --check-prefix=MFMA32
// RUN: tile-opt %s --tile-to-gpu=chipset=gfx1100 --tile-gpu-to-llvm=chipset=gfx1100 | FileCheck %s --check-prefix=WMMA11
// RUN: tile-opt %s --tile-to-gpu=chipset=gfx1201 --tile-gpu-to-llvm=chipset=gfx1201 | FileCheck %s --check-prefix=WMMA12
// RUN: tile-opt %s --tile-to-gpu=chipset=sm_90 --tile-gpu-to-llvm=chipset=sm_90 | FileCheck %s --check-prefix=MMA
// RUN: tile-opt %s --tile-to-gpu="chipset=sm_90 num-stages=3" | FileCheck %s --check-prefix=ASYNC
// The matmul tile program (32x32x16 blocks, f16 in, f32 out; as ops/matmul.cpp builds
// it) on each GPU family: a and b staged through LDS between barriers, then the arch's
// matrix instruction on 64-bit fragments read from LDS. With num-stages=2 a prologue
// before the loop fills the one LDS buffer, and each iteration loads the next tile into
// registers before its MFMAs and stores it after them, between two barriers.

// On NVIDIA the stages are a ring of three shared buffers filled by cp.async: before the
// loop, the copies of tiles 0 and 1 are committed as two groups, then tile 0 is waited
// for and its first fragments read. Each iteration issues tile k + 2 and multiplies
// tile k; before its last k step's
// matrix instructions it waits until one group is left in flight, meets the other
// warps, and reads tile k + 1's first fragments, which the loop carries.
// ASYNC: llvm.call_intrinsic "llvm.nvvm.cp.async.cg.shared.global.16.s"
// ASYNC: llvm.call_intrinsic "llvm.nvvm.cp.async.commit.group"
// ASYNC: llvm.call_intrinsic "llvm.nvvm.cp.async.commit.group"
// ASYNC: llvm.call_intrinsic "llvm.nvvm.cp.async.wait.group"(%{{.+}}) : (i32) -> ()
// ASYNC-NEXT: gpu.barrier
// ASYNC: llvm.call_intrinsic "llvm.nvvm.ldmatrix
// ASYNC: scf.for {{.+}} iter_args(%{{.+}} = %{{.+}}, %[[CARRIED:.+]] = %{{.+}}) -> (vector<8xf32>, vector<16xf16>)
// ASYNC: llvm.call_intrinsic "llvm.nvvm.cp.async.cg.shared.global.16.s"
// ASYNC: llvm.call_intrinsic "llvm.nvvm.cp.async.commit.group"
// ASYNC: vector.shuffle %[[CARRIED]]
// ASYNC: llvm.call_intrinsic "llvm.nvvm.cp.async.wait.group"(%{{.+}}) : (i32) -> ()
// ASYNC-NEXT: gpu.barrier
// ASYNC: llvm.call_intrinsic "llvm.nvvm.ldmatrix
// ASYNC: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16
// ASYNC: scf.yield %{{.+}}, %{{.+}} : vector<8xf32>, vector<16xf16>

// PIPELINED: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf16>
// PIPELINED: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : vector<4xf16>, !llvm.ptr<3>
// PIPELINED: gpu.barrier
// PIPELINED-NEXT: scf.for
// PIPELINED: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf16>
// PIPELINED: llvm.load %{{.+}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<4xf16>
// PIPELINED: llvm.call_intrinsic "llvm.amdgcn.mfma
// PIPELINED: gpu.barrier
// PIPELINED: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : vector<4xf16>, !llvm.ptr<3>
// PIPELINED: gpu.barrier
// PIPELINED: scf.yield

// STAGED: llvm.mlir.global internal @__tile_lds_b() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<512 x f16>
// STAGED: llvm.mlir.global internal @__tile_lds_a() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<512 x f16>
// STAGED: gpu.func @matmul({{.+}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// STAGED: scf.for
// STAGED: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf16>
// STAGED: gpu.barrier
// STAGED: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : vector<4xf16>, !llvm.ptr<3>
// STAGED: gpu.barrier
// STAGED: llvm.load %{{.+}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<4xf16>
// STAGED-NOT: tile.

// MFMA16-COUNT-1: llvm.call_intrinsic "llvm.amdgcn.mfma.f32.16x16x16f16"({{.+}}) : (vector<4xf16>, vector<4xf16>, vector<4xf32>, i32, i32, i32) -> vector<4xf32>
// MFMA16-NOT: llvm.amdgcn.mfma
// MFMA32-COUNT-2: llvm.call_intrinsic "llvm.amdgcn.mfma.f32.32x32x8f16"({{.+}}) : (vector<4xf16>, vector<4xf16>, vector<16xf32>, i32, i32, i32) -> vector<16xf32>
// WMMA11: llvm.call_intrinsic "llvm.amdgcn.wmma.f32.16x16x16.f16"({{.+}}) : (vector<16xf16>, vector<16xf16>, vector<8xf32>) -> vector<8xf32>
// WMMA12: llvm.call_intrinsic "llvm.amdgcn.wmma.f32.16x16x16.f16"({{.+}}) : (vector<8xf16>, vector<8xf16>, vector<8xf32>) -> vector<8xf32>
// MMA: nvvm.barrier0
// MMA: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"({{.+}}) : (vector<2xf16>, vector<2xf16>, vector<2xf16>, vector<2xf16>, vector<2xf16>, vector<2xf16>, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>

module {
  func.func @matmul(%arg0: !tile.ptr<f16>, %arg1: !tile.ptr<f16>, %arg2: !tile.ptr<f32>, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32, %arg10: i32, %arg11: i32) attributes {tile.kernel} {
    %0 = tile.program_id 0 : i32
    %c32_i32 = arith.constant 32 : i32
    %c31_i32 = arith.constant 31 : i32
    %1 = arith.addi %arg3, %c31_i32 : i32
    %2 = arith.divsi %1, %c32_i32 : i32
    %c32_i32_0 = arith.constant 32 : i32
    %c31_i32_1 = arith.constant 31 : i32
    %3 = arith.addi %arg4, %c31_i32_1 : i32
    %4 = arith.divsi %3, %c32_i32_0 : i32
    %c8_i32 = arith.constant 8 : i32
    %5 = arith.muli %c8_i32, %4 : i32
    %6 = arith.divsi %0, %5 : i32
    %c8_i32_2 = arith.constant 8 : i32
    %7 = arith.muli %6, %c8_i32_2 : i32
    %c8_i32_3 = arith.constant 8 : i32
    %8 = arith.subi %2, %7 : i32
    %9 = arith.minsi %8, %c8_i32_3 : i32
    %10 = arith.remsi %0, %5 : i32
    %11 = arith.remsi %10, %9 : i32
    %12 = arith.addi %7, %11 : i32
    %13 = arith.divsi %10, %9 : i32
    %c32_i32_4 = arith.constant 32 : i32
    %14 = arith.muli %12, %c32_i32_4 : i32
    %15 = tile.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
    %16 = tile.splat %14 : i32 -> tensor<32xi32>
    %17 = arith.addi %16, %15 : tensor<32xi32>
    %c32_i32_5 = arith.constant 32 : i32
    %18 = arith.muli %13, %c32_i32_5 : i32
    %19 = tile.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
    %20 = tile.splat %18 : i32 -> tensor<32xi32>
    %21 = arith.addi %20, %19 : tensor<32xi32>
    %cst = arith.constant dense<0.000000e+00> : tensor<32x32xf32>
    %c16_i32 = arith.constant 16 : i32
    %c15_i32 = arith.constant 15 : i32
    %22 = arith.addi %arg5, %c15_i32 : i32
    %23 = arith.divsi %22, %c16_i32 : i32
    %c1_i32 = arith.constant 1 : i32
    %c0_i32 = arith.constant 0 : i32
    %24 = scf.for %arg12 = %c0_i32 to %23 step %c1_i32 iter_args(%arg13 = %cst) -> (tensor<32x32xf32>)  : i32 {
      %c16_i32_6 = arith.constant 16 : i32
      %45 = arith.muli %arg12, %c16_i32_6 : i32
      %46 = tile.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
      %47 = tile.splat %45 : i32 -> tensor<16xi32>
      %48 = arith.addi %47, %46 : tensor<16xi32>
      %49 = tile.splat %arg6 : i32 -> tensor<32xi32>
      %50 = arith.muli %17, %49 : tensor<32xi32>
      %51 = tile.splat %arg7 : i32 -> tensor<16xi32>
      %52 = arith.muli %48, %51 : tensor<16xi32>
      %53 = tile.expand_dims %52 {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
      %54 = tile.broadcast %53 : tensor<1x16xi32> -> tensor<32x16xi32>
      %55 = tile.expand_dims %50 {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
      %56 = tile.broadcast %55 : tensor<32x1xi32> -> tensor<32x16xi32>
      %57 = arith.addi %56, %54 : tensor<32x16xi32>
      %58 = tile.splat %arg0 : !tile.ptr<f16> -> tensor<32x16x!tile.ptr<f16>>
      %59 = tile.addptr %58, %57 : tensor<32x16x!tile.ptr<f16>>, tensor<32x16xi32>
      %60 = tile.splat %arg3 : i32 -> tensor<32xi32>
      %61 = arith.cmpi slt, %17, %60 : tensor<32xi32>
      %62 = tile.splat %arg5 : i32 -> tensor<16xi32>
      %63 = arith.cmpi slt, %48, %62 : tensor<16xi32>
      %64 = tile.expand_dims %63 {axis = 0 : i32} : tensor<16xi1> -> tensor<1x16xi1>
      %65 = tile.broadcast %64 : tensor<1x16xi1> -> tensor<32x16xi1>
      %66 = tile.expand_dims %61 {axis = 1 : i32} : tensor<32xi1> -> tensor<32x1xi1>
      %67 = tile.broadcast %66 : tensor<32x1xi1> -> tensor<32x16xi1>
      %68 = arith.andi %67, %65 : tensor<32x16xi1>
      %69 = tile.splat %arg8 : i32 -> tensor<16xi32>
      %70 = arith.muli %48, %69 : tensor<16xi32>
      %71 = tile.splat %arg9 : i32 -> tensor<32xi32>
      %72 = arith.muli %21, %71 : tensor<32xi32>
      %73 = tile.expand_dims %72 {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
      %74 = tile.broadcast %73 : tensor<1x32xi32> -> tensor<16x32xi32>
      %75 = tile.expand_dims %70 {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
      %76 = tile.broadcast %75 : tensor<16x1xi32> -> tensor<16x32xi32>
      %77 = arith.addi %76, %74 : tensor<16x32xi32>
      %78 = tile.splat %arg1 : !tile.ptr<f16> -> tensor<16x32x!tile.ptr<f16>>
      %79 = tile.addptr %78, %77 : tensor<16x32x!tile.ptr<f16>>, tensor<16x32xi32>
      %80 = tile.splat %arg5 : i32 -> tensor<16xi32>
      %81 = arith.cmpi slt, %48, %80 : tensor<16xi32>
      %82 = tile.splat %arg4 : i32 -> tensor<32xi32>
      %83 = arith.cmpi slt, %21, %82 : tensor<32xi32>
      %84 = tile.expand_dims %83 {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
      %85 = tile.broadcast %84 : tensor<1x32xi1> -> tensor<16x32xi1>
      %86 = tile.expand_dims %81 {axis = 1 : i32} : tensor<16xi1> -> tensor<16x1xi1>
      %87 = tile.broadcast %86 : tensor<16x1xi1> -> tensor<16x32xi1>
      %88 = arith.andi %87, %85 : tensor<16x32xi1>
      %89 = tile.load %59, %68 : tensor<32x16x!tile.ptr<f16>>
      %90 = tile.load %79, %88 : tensor<16x32x!tile.ptr<f16>>
      %91 = tile.dot %89, %90, %arg13 : tensor<32x16xf16>, tensor<16x32xf16> -> tensor<32x32xf32>
      scf.yield %91 : tensor<32x32xf32>
    }
    %25 = tile.splat %arg10 : i32 -> tensor<32xi32>
    %26 = arith.muli %17, %25 : tensor<32xi32>
    %27 = tile.splat %arg11 : i32 -> tensor<32xi32>
    %28 = arith.muli %21, %27 : tensor<32xi32>
    %29 = tile.expand_dims %28 {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %30 = tile.broadcast %29 : tensor<1x32xi32> -> tensor<32x32xi32>
    %31 = tile.expand_dims %26 {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
    %32 = tile.broadcast %31 : tensor<32x1xi32> -> tensor<32x32xi32>
    %33 = arith.addi %32, %30 : tensor<32x32xi32>
    %34 = tile.splat %arg2 : !tile.ptr<f32> -> tensor<32x32x!tile.ptr<f32>>
    %35 = tile.addptr %34, %33 : tensor<32x32x!tile.ptr<f32>>, tensor<32x32xi32>
    %36 = tile.splat %arg3 : i32 -> tensor<32xi32>
    %37 = arith.cmpi slt, %17, %36 : tensor<32xi32>
    %38 = tile.splat %arg4 : i32 -> tensor<32xi32>
    %39 = arith.cmpi slt, %21, %38 : tensor<32xi32>
    %40 = tile.expand_dims %39 {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
    %41 = tile.broadcast %40 : tensor<1x32xi1> -> tensor<32x32xi1>
    %42 = tile.expand_dims %37 {axis = 1 : i32} : tensor<32xi1> -> tensor<32x1xi1>
    %43 = tile.broadcast %42 : tensor<32x1xi1> -> tensor<32x32xi1>
    %44 = arith.andi %43, %41 : tensor<32x32xi1>
    tile.store %35, %24, %44 : tensor<32x32x!tile.ptr<f32>>
    return
  }
}
