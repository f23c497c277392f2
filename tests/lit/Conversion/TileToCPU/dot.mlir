// RUN: tile-opt %s --convert-tile-to-cpu | FileCheck %s
// RUN: tile-opt %s --tile-to-cpu --tile-cpu-to-llvm | FileCheck %s --check-prefix=LLVM
// A dot whose operands are loads from strided blocks reads them from memory: for each
// k, one b row (a vector load when the block is full, a masked load at the edges: the row
// is at unit stride) and
// one broadcast element of a per accumulator row, FMA'd into rows kept as loop values.
// The loops stop at the k both operands keep. At the edges (masked-off lanes are zeros)
// a's rows past the kept ones read its first row, branch-free, and their sums are
// dropped for the accumulator they came in with.

// CHECK-LABEL: func.func @fused_dot
// CHECK-NOT: vector.contract
// CHECK: scf.if %{{.+}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: scf.for %[[K:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args({{.+}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) : i64
// CHECK: %[[BROW:.+]] = llvm.load %{{.+}} {alignment = 2 : i64} : !llvm.ptr -> vector<8xf16>
// CHECK: %[[WIDE:.+]] = arith.extf %[[BROW]] : vector<8xf16> to vector<8xf32>
// CHECK: %[[A0:.+]] = llvm.load %{{.+}} {alignment = 2 : i64} : !llvm.ptr -> f16
// CHECK: %[[SPLAT:.+]] = vector.broadcast %[[A0]] : f16 to vector<8xf16>
// CHECK: %[[SPLATW:.+]] = arith.extf %[[SPLAT]] : vector<8xf16> to vector<8xf32>
// CHECK: vector.fma %[[SPLATW]], %[[WIDE]], %{{.+}} : vector<8xf32>
// CHECK: } else {
// CHECK-NOT: llvm.intr.masked.gather
// CHECK: llvm.select %{{.+}}, %{{.+}}, %{{.+}} : i1, !llvm.ptr
// CHECK: scf.for
// CHECK: llvm.intr.masked.load %{{.+}}, %{{.+}}, %{{.+}} {alignment = 2 : i32} : (!llvm.ptr, vector<8xi1>, vector<8xf16>) -> vector<8xf16>
// CHECK-NOT: scf.if %{{.+}} -> (f16)
// CHECK: vector.fma
// CHECK: arith.select %{{.+}}, %{{.+}}, %{{.+}} : vector<8xf32>
// CHECK-NOT: vector.contract
// CHECK: return
func.func @fused_dot(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f32>, %lda: i32, %m: i32) attributes {tile.kernel} {
  %rows = tile.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32>
  %ks = tile.make_range {end = 2 : i32, start = 0 : i32} : tensor<2xi32>
  %cols = tile.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32>
  %ldaS = tile.splat %lda : i32 -> tensor<4xi32>
  %rowOff = arith.muli %rows, %ldaS : tensor<4xi32>
  %rowOff2 = tile.expand_dims %rowOff {axis = 1 : i32} : tensor<4xi32> -> tensor<4x1xi32>
  %rowOffB = tile.broadcast %rowOff2 : tensor<4x1xi32> -> tensor<4x2xi32>
  %ks2 = tile.expand_dims %ks {axis = 0 : i32} : tensor<2xi32> -> tensor<1x2xi32>
  %ksB = tile.broadcast %ks2 : tensor<1x2xi32> -> tensor<4x2xi32>
  %aOff = arith.addi %rowOffB, %ksB : tensor<4x2xi32>
  %aBase = tile.splat %a : !tile.ptr<f16> -> tensor<4x2x!tile.ptr<f16>>
  %aPtrs = tile.addptr %aBase, %aOff : tensor<4x2x!tile.ptr<f16>>, tensor<4x2xi32>
  %mS = tile.splat %m : i32 -> tensor<4xi32>
  %rowsIn = arith.cmpi slt, %rows, %mS : tensor<4xi32>
  %rowsIn2 = tile.expand_dims %rowsIn {axis = 1 : i32} : tensor<4xi1> -> tensor<4x1xi1>
  %aMask = tile.broadcast %rowsIn2 : tensor<4x1xi1> -> tensor<4x2xi1>
  %aBlock = tile.load %aPtrs, %aMask : tensor<4x2x!tile.ptr<f16>>

  %eight = arith.constant dense<8> : tensor<2xi32>
  %kOff = arith.muli %ks, %eight : tensor<2xi32>
  %kOff2 = tile.expand_dims %kOff {axis = 1 : i32} : tensor<2xi32> -> tensor<2x1xi32>
  %kOffB = tile.broadcast %kOff2 : tensor<2x1xi32> -> tensor<2x8xi32>
  %cols2 = tile.expand_dims %cols {axis = 0 : i32} : tensor<8xi32> -> tensor<1x8xi32>
  %colsB = tile.broadcast %cols2 : tensor<1x8xi32> -> tensor<2x8xi32>
  %bOff = arith.addi %kOffB, %colsB : tensor<2x8xi32>
  %bBase = tile.splat %b : !tile.ptr<f16> -> tensor<2x8x!tile.ptr<f16>>
  %bPtrs = tile.addptr %bBase, %bOff : tensor<2x8x!tile.ptr<f16>>, tensor<2x8xi32>
  %bBlock = tile.load %bPtrs : tensor<2x8x!tile.ptr<f16>>

  %zero = arith.constant dense<0.0> : tensor<4x8xf32>
  %d = tile.dot %aBlock, %bBlock, %zero : tensor<4x2xf16>, tensor<2x8xf16> -> tensor<4x8xf32>

  %rowsC = arith.muli %rows, %ldaS : tensor<4xi32>
  %rowsC2 = tile.expand_dims %rowsC {axis = 1 : i32} : tensor<4xi32> -> tensor<4x1xi32>
  %rowsCB = tile.broadcast %rowsC2 : tensor<4x1xi32> -> tensor<4x8xi32>
  %colsC2 = tile.expand_dims %cols {axis = 0 : i32} : tensor<8xi32> -> tensor<1x8xi32>
  %colsCB = tile.broadcast %colsC2 : tensor<1x8xi32> -> tensor<4x8xi32>
  %cOff = arith.addi %rowsCB, %colsCB : tensor<4x8xi32>
  %cBase = tile.splat %c : !tile.ptr<f32> -> tensor<4x8x!tile.ptr<f32>>
  %cPtrs = tile.addptr %cBase, %cOff : tensor<4x8x!tile.ptr<f32>>, tensor<4x8xi32>
  tile.store %cPtrs, %d : tensor<4x8x!tile.ptr<f32>>
  return
}

// LLVM-LABEL: @fused_dot(
// LLVM: llvm.intr.fmuladd
// LLVM: llvm.intr.masked.load
// LLVM-NOT: vector.contract

// Operands that are not loads (here int8 function arguments) take vector.contract,
// widened to the i32 accumulator first.
// CHECK-LABEL: func.func @register_dot
// CHECK: %[[A:.+]] = arith.extsi %{{.+}} : vector<2x4xi8> to vector<2x4xi32>
// CHECK: %[[B:.+]] = arith.extsi %{{.+}} : vector<4x8xi8> to vector<4x8xi32>
// CHECK: vector.contract {{.+}} %[[A]], %[[B]], %{{.+}} : vector<2x4xi32>, vector<4x8xi32> into vector<2x8xi32>
// LLVM-LABEL: @register_dot(
// LLVM-NOT: vector.contract
// LLVM: llvm.mul
// LLVM: llvm.add
func.func @register_dot(%a: tensor<2x4xi8>, %b: tensor<4x8xi8>, %c: tensor<2x8xi32>) -> tensor<2x8xi32> {
  %d = tile.dot %a, %b, %c : tensor<2x4xi8>, tensor<4x8xi8> -> tensor<2x8xi32>
  return %d : tensor<2x8xi32>
}
