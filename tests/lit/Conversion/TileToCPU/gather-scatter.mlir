// RUN: tile-opt %s --convert-tile-to-cpu | FileCheck %s
// Lanes that are not provably contiguous (here a stride of 2) take a gather / scatter
// through a vector of pointers; a mask-less contiguous load is one plain vector load.

// CHECK-LABEL: func.func @strided
// CHECK: %[[PTRS:.+]] = llvm.getelementptr %{{.+}}[%{{.+}}] : (vector<64x!llvm.ptr>, vector<64xi32>) -> vector<64x!llvm.ptr>, f32
// CHECK: %[[X:.+]] = llvm.intr.masked.gather %[[PTRS]], %{{.+}}, %{{.+}} {alignment = 4 : i32}
// CHECK: llvm.intr.masked.scatter %[[X]], %[[PTRS]], %{{.+}} {alignment = 4 : i32}
func.func @strided(%p: !tile.ptr<f32>) attributes {tile.kernel} {
  %lanes = tile.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %two = arith.constant dense<2> : tensor<64xi32>
  %offsets = arith.muli %lanes, %two : tensor<64xi32>
  %base = tile.splat %p : !tile.ptr<f32> -> tensor<64x!tile.ptr<f32>>
  %ptrs = tile.addptr %base, %offsets : tensor<64x!tile.ptr<f32>>, tensor<64xi32>
  %x = tile.load %ptrs : tensor<64x!tile.ptr<f32>>
  tile.store %ptrs, %x : tensor<64x!tile.ptr<f32>>
  return
}

// 16-bit lanes have no gather or scatter instruction on x86, where LLVM would expand each
// into a branch per lane: they go lane by lane in a loop.
// CHECK-LABEL: func.func @strided_f16
// CHECK-NOT: llvm.intr.masked.gather
// CHECK: scf.for %[[L:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[ACC:.+]] = %{{.+}}) -> (vector<64xf16>)
// CHECK: scf.if %{{.+}} -> (vector<64xf16>)
// CHECK: llvm.load %{{.+}} {alignment = 2 : i64} : !llvm.ptr -> f16
// CHECK: scf.for
// CHECK: scf.if
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 2 : i64} : f16, !llvm.ptr
// CHECK-NOT: llvm.intr.masked.scatter
// CHECK: return
func.func @strided_f16(%p: !tile.ptr<f16>) attributes {tile.kernel} {
  %lanes = tile.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %two = arith.constant dense<2> : tensor<64xi32>
  %offsets = arith.muli %lanes, %two : tensor<64xi32>
  %base = tile.splat %p : !tile.ptr<f16> -> tensor<64x!tile.ptr<f16>>
  %ptrs = tile.addptr %base, %offsets : tensor<64x!tile.ptr<f16>>, tensor<64xi32>
  %x = tile.load %ptrs : tensor<64x!tile.ptr<f16>>
  tile.store %ptrs, %x : tensor<64x!tile.ptr<f16>>
  return
}

// A masked 2-D block whose rows are at unit stride: whole rows where every lane is on,
// one masked load or store per row at the edges, and no gather or scatter.
// CHECK-LABEL: func.func @partial_rows
// CHECK-NOT: llvm.intr.masked.gather
// CHECK-COUNT-4: llvm.intr.masked.load %{{.+}}, %{{.+}}, %{{.+}} {alignment = 2 : i32} : (!llvm.ptr, vector<32xi1>, vector<32xbf16>) -> vector<32xbf16>
// CHECK-COUNT-4: llvm.store %{{.+}}, %{{.+}} {alignment = 2 : i64} : vector<32xbf16>, !llvm.ptr
// CHECK-COUNT-4: llvm.intr.masked.store %{{.+}}, %{{.+}}, %{{.+}} {alignment = 2 : i32} : vector<32xbf16>, vector<32xi1> into !llvm.ptr
// CHECK-NOT: llvm.intr.masked.scatter
// CHECK: return
func.func @partial_rows(%p: !tile.ptr<bf16>, %ld: i32, %n: i32) attributes {tile.kernel} {
  %rows = tile.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32>
  %cols = tile.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %ldS = tile.splat %ld : i32 -> tensor<4xi32>
  %rowOff = arith.muli %rows, %ldS : tensor<4xi32>
  %r2 = tile.expand_dims %rowOff {axis = 1 : i32} : tensor<4xi32> -> tensor<4x1xi32>
  %rB = tile.broadcast %r2 : tensor<4x1xi32> -> tensor<4x32xi32>
  %c2 = tile.expand_dims %cols {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %cB = tile.broadcast %c2 : tensor<1x32xi32> -> tensor<4x32xi32>
  %off = arith.addi %rB, %cB : tensor<4x32xi32>
  %base = tile.splat %p : !tile.ptr<bf16> -> tensor<4x32x!tile.ptr<bf16>>
  %ptrs = tile.addptr %base, %off : tensor<4x32x!tile.ptr<bf16>>, tensor<4x32xi32>
  %nS = tile.splat %n : i32 -> tensor<32xi32>
  %colsIn = arith.cmpi slt, %cols, %nS : tensor<32xi32>
  %m2 = tile.expand_dims %colsIn {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
  %mask = tile.broadcast %m2 : tensor<1x32xi1> -> tensor<4x32xi1>
  %x = tile.load %ptrs, %mask : tensor<4x32x!tile.ptr<bf16>>
  %y = arith.addf %x, %x : tensor<4x32xbf16>
  tile.store %ptrs, %y, %mask : tensor<4x32x!tile.ptr<bf16>>
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
