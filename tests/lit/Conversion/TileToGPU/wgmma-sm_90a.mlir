// RUN: tile-opt %s --tile-to-gpu="chipset=sm_90a num-stages=3" | FileCheck %s
// RUN: tile-opt %s --tile-to-gpu="chipset=sm_90 num-stages=3" | FileCheck %s --check-prefix=MMASYNC
// RUN: tile-opt %s --tile-to-gpu="chipset=sm_90a num-stages=3 warp-specialize=1" | FileCheck %s --check-prefix=WS
// The matmul tile program (64x64x16 blocks, f16 in, f32 out, row-major and 16-byte
// aligned operands with 32-bit offsets; as ops/matmul.cpp builds it) on Hopper's warpgroup
// MMA: the four warps are one warpgroup, whose m64n64k16 instruction reads a (K-major) and
// b (N-major, the transpose bit) from a ring of three 1024-byte aligned stages through
// descriptors. The tiles arrive by bulk tensor copies from two tensor maps that the kernel
// takes after its other parameters: a's rows of 16 elements (32-byte swizzle), b's of 64
// (128-byte swizzle), recorded for the host. Thread 0 initializes a barrier per stage and
// issues the copies of tiles 0 and 1 before the loop; each iteration waits for its tile's
// barrier and meets the other warps, issues the MMA, waits until only it is in flight, and
// then has thread 0 announce the 4096 bytes of the tile two ahead and copy it. After the
// loop the last group is waited for, the accumulator passing through the wait, and the
// barriers are invalidated before the epilogue reuses the memory. sm_90 keeps mma.sync.

// CHECK: llvm.mlir.global external @__tile_dynamic_shared() {addr_space = 3 : i32, alignment = 1024 : i64}
// CHECK: gpu.func @matmul({{.+}}, %[[MAPA:.+]]: !llvm.ptr, %[[MAPB:.+]]: !llvm.ptr) kernel
// CHECK-SAME: tile.dynamic_shared_bytes = 12312 : i64
// CHECK-SAME: tile.tensor_maps = [{box_inner = 16 : i64, box_outer = 64 : i64, contiguous_dim = 1 : i64, data_type = 6 : i64, operand = 0 : i64, swizzle_bytes = 32 : i64}, {box_inner = 64 : i64, box_outer = 16 : i64, contiguous_dim = 1 : i64, data_type = 6 : i64, operand = 1 : i64, swizzle_bytes = 128 : i64}]
// CHECK-COUNT-3: "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r" %{{.+}}, %c1_i32
// CHECK: gpu.barrier
// CHECK-COUNT-2: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
// CHECK: scf.for {{.+}} -> (vector<32xf32>)
// CHECK-NOT: cp.async.cg
// CHECK: mbarrier.try_wait.parity.shared::cta.b64
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: fence.proxy.async
// CHECK: "wgmma.fence.sync.aligned;"
// CHECK: "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.+}}, $31}, $32, $33, 1, 1, 1, 0, 1;", "=f,{{.+}},l,l,0,{{.+}},31"
// CHECK-NOT: wgmma.mma_async
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 1;"
// CHECK: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r" %{{.+}}, %c4096_i32
// CHECK: "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r" %{{.+}}, %[[MAPA]],
// CHECK: "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r" %{{.+}}, %[[MAPB]],
// CHECK: scf.yield %{{.+}} : vector<32xf32>
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: gpu.barrier
// CHECK-COUNT-3: "mbarrier.inval.shared::cta.b64 [$0];"

// With warp_specialize=1 a second warpgroup (threads 128-255) issues the
// copies: thread 0 also initializes an "empty" barrier per stage, counting the 4 consumer
// warps. Threads from 128 on run the producer's loop with 40 registers, handing the
// rest to the consumers (240 each): its first thread waits for the
// stage's release and copies the tile into it. The others run the K loop, which waits
// for its tile, multiplies and, once the previous tile's MMAs are done, has each warp's
// first lane release that tile's stage; no block barrier is left in it. After the loop
// the consumers meet on barrier 1 (128 threads) before the 6 barriers are invalidated.
// WS: gpu.func @matmul({{.+}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>
// WS-COUNT-3: "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r" %{{.+}}, %c1_i32
// WS-COUNT-3: "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r" %{{.+}}, %c4_i32
// WS: gpu.barrier
// WS: %[[PRODUCER:.+]] = arith.cmpi uge, %{{.+}}, %c128_i32
// WS-NEXT: scf.if %[[PRODUCER]] {
// WS-NEXT: "setmaxnreg.dec.sync.aligned.u32 40;"
// WS-NEXT: scf.for
// WS: arith.cmpi eq, %{{.+}}, %c128_i32
// WS: mbarrier.try_wait.parity.shared::cta.b64
// WS: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r" %{{.+}}, %c4096_i32
// WS-COUNT-2: cp.async.bulk.tensor.2d
// WS: } else {
// WS-NEXT: "setmaxnreg.inc.sync.aligned.u32 240;"
// WS: scf.for {{.+}} -> (vector<32xf32>)
// WS-NOT: gpu.barrier
// WS-NOT: cp.async.bulk
// WS: mbarrier.try_wait.parity.shared::cta.b64
// WS-NOT: gpu.barrier
// WS: "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// WS-NOT: gpu.barrier
// WS: "wgmma.wait_group.sync.aligned 1;"
// WS-NOT: gpu.barrier
// WS: "mbarrier.arrive.shared::cta.b64 _, [$0];"
// WS-NOT: gpu.barrier
// WS: scf.yield %{{.+}} : vector<32xf32>
// WS: "wgmma.wait_group.sync.aligned 0;"
// WS: "bar.sync 1, 128;"
// WS-COUNT-6: "mbarrier.inval.shared::cta.b64 [$0];"

// MMASYNC-NOT: wgmma
// MMASYNC: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"

module {
  func.func @matmul(%arg0: !tile.ptr<f16> {tile.divisibility = 16 : i64, tile.pointer_range = 32 : i64}, %arg1: !tile.ptr<f16> {tile.divisibility = 16 : i64, tile.pointer_range = 32 : i64}, %arg2: !tile.ptr<f32> {tile.divisibility = 16 : i64, tile.pointer_range = 32 : i64}, %arg3: i32 {tile.divisibility = 16 : i64}, %arg4: i32 {tile.divisibility = 16 : i64}, %arg5: i32 {tile.divisibility = 16 : i64}, %arg6: i32 {tile.divisibility = 8 : i64}, %arg7: i32, %arg8: i32 {tile.divisibility = 8 : i64}, %arg9: i32, %arg10: i32 {tile.divisibility = 4 : i64}, %arg11: i32) attributes {tile.kernel} {
    %c1_i32 = arith.constant 1 : i32
    %c1_i32_0 = arith.constant 1 : i32
    %c1_i32_1 = arith.constant 1 : i32
    %0 = tile.program_id 0 : i32
    %c64_i32 = arith.constant 64 : i32
    %c63_i32 = arith.constant 63 : i32
    %1 = arith.addi %arg3, %c63_i32 : i32
    %2 = arith.divsi %1, %c64_i32 : i32
    %c64_i32_2 = arith.constant 64 : i32
    %c63_i32_3 = arith.constant 63 : i32
    %3 = arith.addi %arg4, %c63_i32_3 : i32
    %4 = arith.divsi %3, %c64_i32_2 : i32
    %c8_i32 = arith.constant 8 : i32
    %5 = arith.muli %c8_i32, %4 : i32
    %6 = arith.divsi %0, %5 : i32
    %c8_i32_4 = arith.constant 8 : i32
    %7 = arith.muli %6, %c8_i32_4 : i32
    %c8_i32_5 = arith.constant 8 : i32
    %8 = arith.subi %2, %7 : i32
    %9 = arith.minsi %8, %c8_i32_5 : i32
    %10 = arith.remsi %0, %5 : i32
    %11 = arith.remsi %10, %9 : i32
    %12 = arith.addi %7, %11 : i32
    %13 = arith.divsi %10, %9 : i32
    %c64_i32_6 = arith.constant 64 : i32
    %14 = arith.muli %12, %c64_i32_6 : i32
    %15 = tile.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %16 = tile.splat %14 : i32 -> tensor<64xi32>
    %17 = arith.addi %16, %15 : tensor<64xi32>
    %c64_i32_7 = arith.constant 64 : i32
    %18 = arith.muli %13, %c64_i32_7 : i32
    %19 = tile.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %20 = tile.splat %18 : i32 -> tensor<64xi32>
    %21 = arith.addi %20, %19 : tensor<64xi32>
    %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
    %c16_i32 = arith.constant 16 : i32
    %c15_i32 = arith.constant 15 : i32
    %22 = arith.addi %arg5, %c15_i32 : i32
    %23 = arith.divsi %22, %c16_i32 : i32
    %c1_i32_8 = arith.constant 1 : i32
    %c0_i32 = arith.constant 0 : i32
    %24 = scf.for %arg12 = %c0_i32 to %23 step %c1_i32_8 iter_args(%arg13 = %cst) -> (tensor<64x64xf32>)  : i32 {
      %c16_i32_9 = arith.constant 16 : i32
      %45 = arith.muli %arg12, %c16_i32_9 : i32
      %46 = tile.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
      %47 = tile.splat %45 : i32 -> tensor<16xi32>
      %48 = arith.addi %47, %46 : tensor<16xi32>
      %49 = tile.splat %arg6 : i32 -> tensor<64xi32>
      %50 = arith.muli %17, %49 : tensor<64xi32>
      %51 = tile.splat %c1_i32 : i32 -> tensor<16xi32>
      %52 = arith.muli %48, %51 : tensor<16xi32>
      %53 = tile.expand_dims %52 {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
      %54 = tile.broadcast %53 : tensor<1x16xi32> -> tensor<64x16xi32>
      %55 = tile.expand_dims %50 {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
      %56 = tile.broadcast %55 : tensor<64x1xi32> -> tensor<64x16xi32>
      %57 = arith.addi %56, %54 : tensor<64x16xi32>
      %58 = tile.splat %arg0 : !tile.ptr<f16> -> tensor<64x16x!tile.ptr<f16>>
      %59 = tile.addptr %58, %57 : tensor<64x16x!tile.ptr<f16>>, tensor<64x16xi32>
      %60 = tile.splat %arg3 : i32 -> tensor<64xi32>
      %61 = arith.cmpi slt, %17, %60 : tensor<64xi32>
      %62 = tile.splat %arg5 : i32 -> tensor<16xi32>
      %63 = arith.cmpi slt, %48, %62 : tensor<16xi32>
      %64 = tile.expand_dims %63 {axis = 0 : i32} : tensor<16xi1> -> tensor<1x16xi1>
      %65 = tile.broadcast %64 : tensor<1x16xi1> -> tensor<64x16xi1>
      %66 = tile.expand_dims %61 {axis = 1 : i32} : tensor<64xi1> -> tensor<64x1xi1>
      %67 = tile.broadcast %66 : tensor<64x1xi1> -> tensor<64x16xi1>
      %68 = arith.andi %67, %65 : tensor<64x16xi1>
      %69 = tile.splat %arg8 : i32 -> tensor<16xi32>
      %70 = arith.muli %48, %69 : tensor<16xi32>
      %71 = tile.splat %c1_i32_0 : i32 -> tensor<64xi32>
      %72 = arith.muli %21, %71 : tensor<64xi32>
      %73 = tile.expand_dims %72 {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
      %74 = tile.broadcast %73 : tensor<1x64xi32> -> tensor<16x64xi32>
      %75 = tile.expand_dims %70 {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
      %76 = tile.broadcast %75 : tensor<16x1xi32> -> tensor<16x64xi32>
      %77 = arith.addi %76, %74 : tensor<16x64xi32>
      %78 = tile.splat %arg1 : !tile.ptr<f16> -> tensor<16x64x!tile.ptr<f16>>
      %79 = tile.addptr %78, %77 : tensor<16x64x!tile.ptr<f16>>, tensor<16x64xi32>
      %80 = tile.splat %arg5 : i32 -> tensor<16xi32>
      %81 = arith.cmpi slt, %48, %80 : tensor<16xi32>
      %82 = tile.splat %arg4 : i32 -> tensor<64xi32>
      %83 = arith.cmpi slt, %21, %82 : tensor<64xi32>
      %84 = tile.expand_dims %83 {axis = 0 : i32} : tensor<64xi1> -> tensor<1x64xi1>
      %85 = tile.broadcast %84 : tensor<1x64xi1> -> tensor<16x64xi1>
      %86 = tile.expand_dims %81 {axis = 1 : i32} : tensor<16xi1> -> tensor<16x1xi1>
      %87 = tile.broadcast %86 : tensor<16x1xi1> -> tensor<16x64xi1>
      %88 = arith.andi %87, %85 : tensor<16x64xi1>
      %89 = tile.load %59, %68 : tensor<64x16x!tile.ptr<f16>>
      %90 = tile.load %79, %88 : tensor<16x64x!tile.ptr<f16>>
      %91 = tile.dot %89, %90, %arg13 : tensor<64x16xf16>, tensor<16x64xf16> -> tensor<64x64xf32>
      scf.yield %91 : tensor<64x64xf32>
    }
    %25 = tile.splat %arg10 : i32 -> tensor<64xi32>
    %26 = arith.muli %17, %25 : tensor<64xi32>
    %27 = tile.splat %c1_i32_1 : i32 -> tensor<64xi32>
    %28 = arith.muli %21, %27 : tensor<64xi32>
    %29 = tile.expand_dims %28 {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %30 = tile.broadcast %29 : tensor<1x64xi32> -> tensor<64x64xi32>
    %31 = tile.expand_dims %26 {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    %32 = tile.broadcast %31 : tensor<64x1xi32> -> tensor<64x64xi32>
    %33 = arith.addi %32, %30 : tensor<64x64xi32>
    %34 = tile.splat %arg2 : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
    %35 = tile.addptr %34, %33 : tensor<64x64x!tile.ptr<f32>>, tensor<64x64xi32>
    %36 = tile.splat %arg3 : i32 -> tensor<64xi32>
    %37 = arith.cmpi slt, %17, %36 : tensor<64xi32>
    %38 = tile.splat %arg4 : i32 -> tensor<64xi32>
    %39 = arith.cmpi slt, %21, %38 : tensor<64xi32>
    %40 = tile.expand_dims %39 {axis = 0 : i32} : tensor<64xi1> -> tensor<1x64xi1>
    %41 = tile.broadcast %40 : tensor<1x64xi1> -> tensor<64x64xi1>
    %42 = tile.expand_dims %37 {axis = 1 : i32} : tensor<64xi1> -> tensor<64x1xi1>
    %43 = tile.broadcast %42 : tensor<64x1xi1> -> tensor<64x64xi1>
    %44 = arith.andi %43, %41 : tensor<64x64xi1>
    tile.store %35, %24, %44 : tensor<64x64x!tile.ptr<f32>>
    return
  }
}
