// RUN: tile-opt %s --tile-to-gpu=chipset=gfx942 | FileCheck %s --check-prefix=GPU
// RUN: tile-opt %s --tile-to-gpu=chipset=gfx942 --tile-gpu-to-llvm=chipset=gfx942 | FileCheck %s --check-prefix=ROCDL
// RUN: tile-opt %s --tile-to-gpu=chipset=gfx1100 --tile-gpu-to-llvm=chipset=gfx1100 | FileCheck %s --check-prefix=WAVE32
// RUN: tile-opt %s --tile-to-gpu=chipset=sm_90 --tile-gpu-to-llvm=chipset=sm_90 | FileCheck %s --check-prefix=NVVM
// A 2048-element f16 block over 4 waves: each thread owns one run of 8 contiguous
// elements (16 bytes), loaded unmasked when the mask keeps the whole run and its
// address is 16-byte aligned (a view may start anywhere in its storage).

// GPU: gpu.module @tile_kernels
// GPU: gpu.func @vector_add(%{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: i32) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// GPU: %[[TID:.+]] = gpu.thread_id x
// GPU: gpu.block_id x
// GPU: %[[INRANGE:.+]] = arith.cmpi sle, %{{.+}}, %{{.+}} : i64
// GPU: %[[ADDRESS:.+]] = llvm.ptrtoint %{{.+}} : !llvm.ptr<1> to i64
// GPU: %[[LOW:.+]] = arith.andi %[[ADDRESS]], %{{.+}} : i64
// GPU: %[[ALIGNED:.+]] = arith.cmpi eq, %[[LOW]], %{{.+}} : i64
// GPU: %[[FULL:.+]] = arith.andi %[[INRANGE]], %[[ALIGNED]] : i1
// GPU: scf.if %[[FULL]] -> (vector<8xf16>)
// GPU:   llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf16>
// GPU: } else {
// GPU:   llvm.intr.masked.load %{{.+}} {alignment = 2 : i32} : (!llvm.ptr<1>, vector<8xi1>, vector<8xf16>) -> vector<8xf16>
// GPU: arith.addf %{{.+}}, %{{.+}} : vector<8xf32>
// GPU: llvm.store %{{.+}}, %{{.+}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<1>
// GPU: gpu.return

// ROCDL: llvm.func @vector_add({{.+}}) attributes {gpu.kernel, gpu.known_block_size = array<i32: 256, 1, 1>, rocdl.flat_work_group_size = "256,256", rocdl.kernel
// ROCDL: rocdl.workitem.id.x
// ROCDL: rocdl.workgroup.id.x
// ROCDL: llvm.load {{.+}} : !llvm.ptr<1> -> vector<8xf16>

// Wave32: the same 4 waves are 128 threads, so each owns two runs.
// WAVE32: rocdl.flat_work_group_size = "128,128"
// WAVE32-COUNT-2: llvm.load {{.+}} : !llvm.ptr<1> -> vector<8xf16>

// NVVM: llvm.func @vector_add({{.+}}) attributes {gpu.kernel, gpu.known_block_size = array<i32: 128, 1, 1>, nvvm.kernel
// NVVM: nvvm.read.ptx.sreg.tid.x
// NVVM: nvvm.read.ptx.sreg.ctaid.x
func.func @vector_add(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %out: !tile.ptr<f16>, %n: i32) attributes {tile.kernel} {
  %pid = tile.program_id 0 : i32
  %c = arith.constant 2048 : i32
  %start = arith.muli %pid, %c : i32
  %r = tile.make_range {end = 2048 : i32, start = 0 : i32} : tensor<2048xi32>
  %s = tile.splat %start : i32 -> tensor<2048xi32>
  %offs = arith.addi %s, %r : tensor<2048xi32>
  %ns = tile.splat %n : i32 -> tensor<2048xi32>
  %mask = arith.cmpi slt, %offs, %ns : tensor<2048xi32>
  %pa = tile.splat %a : !tile.ptr<f16> -> tensor<2048x!tile.ptr<f16>>
  %pa2 = tile.addptr %pa, %offs : tensor<2048x!tile.ptr<f16>>, tensor<2048xi32>
  %pb = tile.splat %b : !tile.ptr<f16> -> tensor<2048x!tile.ptr<f16>>
  %pb2 = tile.addptr %pb, %offs : tensor<2048x!tile.ptr<f16>>, tensor<2048xi32>
  %po = tile.splat %out : !tile.ptr<f16> -> tensor<2048x!tile.ptr<f16>>
  %po2 = tile.addptr %po, %offs : tensor<2048x!tile.ptr<f16>>, tensor<2048xi32>
  %x = tile.load %pa2, %mask : tensor<2048x!tile.ptr<f16>>
  %y = tile.load %pb2, %mask : tensor<2048x!tile.ptr<f16>>
  %xf = arith.extf %x : tensor<2048xf16> to tensor<2048xf32>
  %yf = arith.extf %y : tensor<2048xf16> to tensor<2048xf32>
  %z = arith.addf %xf, %yf : tensor<2048xf32>
  %zh = arith.truncf %z : tensor<2048xf32> to tensor<2048xf16>
  tile.store %po2, %zh, %mask : tensor<2048x!tile.ptr<f16>>
  return
}
