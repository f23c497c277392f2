// RUN: tile-opt %s --convert-tile-to-cpu | FileCheck %s
// Lanes that are not provably contiguous (here a stride of 2) take a gather / scatter
// through a vector of pointers; a mask-less contiguous load is one plain vector load.

// CHECK-LABEL: func.func @strided
// CHECK: %[[PTRS:.+]] = llvm.getelementptr %{{.+}}[%{{.+}}] : (vector<64x!llvm.ptr>, vector<64xi32>) -> vector<64x!llvm.ptr>, f16
// CHECK: %[[X:.+]] = llvm.intr.masked.gather %[[PTRS]], %{{.+}}, %{{.+}} {alignment = 2 : i32}
// CHECK: llvm.intr.masked.scatter %[[X]], %[[PTRS]], %{{.+}} {alignment = 2 : i32}
func.func @strided(%p: !tile.ptr<f16>) attributes {tile.kernel} {
  %lanes = tile.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %two = arith.constant dense<2> : tensor<64xi32>
  %offsets = arith.muli %lanes, %two : tensor<64xi32>
  %base = tile.splat %p : !tile.ptr<f16> -> tensor<64x!tile.ptr<f16>>
  %ptrs = tile.addptr %base, %offsets : tensor<64x!tile.ptr<f16>>, tensor<64xi32>
  %x = tile.load %ptrs : tensor<64x!tile.ptr<f16>>
  tile.store %ptrs, %x : tensor<64x!tile.ptr<f16>>
  return
}

// CHECK-LABEL: func.func @contiguous_unmasked
// CHECK-NOT: scf.if
// CHECK: llvm.load %{{.+}} {alignment = 2 : i64} : !llvm.ptr -> vector<64xbf16>
func.func @contiguous_unmasked(%p: !tile.ptr<bf16>, %off: i64) attributes {tile.kernel} {
  %lanes = tile.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %wide = arith.extsi %lanes : tensor<64xi32> to tensor<64xi64>
  %starts = tile.splat %off : i64 -> tensor<64xi64>
  %offsets = arith.addi %wide, %starts : tensor<64xi64>
  %base = tile.splat %p : !tile.ptr<bf16> -> tensor<64x!tile.ptr<bf16>>
  %ptrs = tile.addptr %base, %offsets : tensor<64x!tile.ptr<bf16>>, tensor<64xi64>
  %x = tile.load %ptrs : tensor<64x!tile.ptr<bf16>>
  %y = arith.addf %x, %x : tensor<64xbf16>
  tile.store %ptrs, %y : tensor<64x!tile.ptr<bf16>>
  return
}
