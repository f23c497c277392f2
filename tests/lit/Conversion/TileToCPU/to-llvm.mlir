// RUN: tile-opt %s --tile-to-cpu --tile-cpu-to-llvm \
// RUN:   | FileCheck %s --implicit-check-not=tile. --implicit-check-not=arith. --implicit-check-not=scf.
// The whole CPU pipeline ends in the LLVM dialect only, bf16 conversions expanded to
// integer operations (no __truncsfbf2 libcall on hosts without AVX512-BF16).

// CHECK-LABEL: llvm.func internal @scale
// CHECK-NOT: fptrunc {{.*}} to vector<32xbf16>
// CHECK: llvm.bitcast %{{.+}} : vector<32xi16> to vector<32xbf16>
// CHECK-LABEL: llvm.func @scale_cpu_entry
// CHECK: llvm.call @scale
func.func @scale(%p: !tile.ptr<bf16>, %n: i32) attributes {tile.kernel} {
  %pid = tile.program_id 0 : i32
  %lanes = tile.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %c32 = arith.constant 32 : i32
  %start = arith.muli %pid, %c32 : i32
  %starts = tile.splat %start : i32 -> tensor<32xi32>
  %offsets = arith.addi %starts, %lanes : tensor<32xi32>
  %ns = tile.splat %n : i32 -> tensor<32xi32>
  %mask = arith.cmpi slt, %offsets, %ns : tensor<32xi32>
  %base = tile.splat %p : !tile.ptr<bf16> -> tensor<32x!tile.ptr<bf16>>
  %ptrs = tile.addptr %base, %offsets : tensor<32x!tile.ptr<bf16>>, tensor<32xi32>
  %x = tile.load %ptrs, %mask : tensor<32x!tile.ptr<bf16>>
  %wide = arith.extf %x : tensor<32xbf16> to tensor<32xf32>
  %twice = arith.addf %wide, %wide : tensor<32xf32>
  %y = arith.truncf %twice : tensor<32xf32> to tensor<32xbf16>
  tile.store %ptrs, %y, %mask : tensor<32x!tile.ptr<bf16>>
  return
}
