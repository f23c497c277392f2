// RUN: tile-opt %s | tile-opt | FileCheck %s
// The ops of a blocked matmul round-trip: expand_dims, broadcast and dot, with the
// upstream ops a program uses beside them (constants, select, casts, a K loop).

// CHECK-LABEL: func.func @blocked_matmul_step
func.func @blocked_matmul_step(%a: tensor<16x8xf16>, %b: tensor<8x32xf16>, %k: i32)
    -> tensor<16x32xf16> attributes {tile.kernel} {
  // CHECK: %[[R:.+]] = tile.make_range
  %r = tile.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
  // CHECK: %[[COL:.+]] = tile.expand_dims %[[R]] {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %col = tile.expand_dims %r {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  // CHECK: tile.expand_dims %[[R]] {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
  %row = tile.expand_dims %r {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
  // CHECK: tile.broadcast %[[COL]] : tensor<16x1xi32> -> tensor<16x32xi32>
  %wide = tile.broadcast %col : tensor<16x1xi32> -> tensor<16x32xi32>
  %zero = arith.constant dense<0.000000e+00> : tensor<16x32xf32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  // CHECK: scf.for
  %acc = scf.for %i = %c0 to %k step %c1 iter_args(%sum = %zero) -> (tensor<16x32xf32>) : i32 {
    // CHECK: tile.dot %{{.+}}, %{{.+}}, %{{.+}} : tensor<16x8xf16>, tensor<8x32xf16> -> tensor<16x32xf32>
    %d = tile.dot %a, %b, %sum : tensor<16x8xf16>, tensor<8x32xf16> -> tensor<16x32xf32>
    scf.yield %d : tensor<16x32xf32>
  }
  %positive = arith.cmpf ogt, %acc, %zero : tensor<16x32xf32>
  %scaled = arith.mulf %acc, %acc : tensor<16x32xf32>
  // CHECK: arith.select
  %act = arith.select %positive, %acc, %scaled : tensor<16x32xi1>, tensor<16x32xf32>
  // CHECK: arith.truncf
  %out = arith.truncf %act : tensor<16x32xf32> to tensor<16x32xf16>
  return %out : tensor<16x32xf16>
}

// CHECK-LABEL: func.func @int8_dot
func.func @int8_dot(%a: tensor<4x16xi8>, %b: tensor<16x8xi8>, %c: tensor<4x8xi32>) -> tensor<4x8xi32> {
  // CHECK: tile.dot {{.+}} : tensor<4x16xi8>, tensor<16x8xi8> -> tensor<4x8xi32>
  %d = tile.dot %a, %b, %c : tensor<4x16xi8>, tensor<16x8xi8> -> tensor<4x8xi32>
  return %d : tensor<4x8xi32>
}

// b in groups of k: a 32x16 bf16 b as 16 rows of pairs, 32 lanes each.
// CHECK-LABEL: func.func @grouped_b_dot
// CHECK: tile.dot %{{.+}}, %{{.+}}, %{{.+}} {b_k_group = 2 : i64} : tensor<8x32xbf16>, tensor<16x32xbf16> -> tensor<8x16xf32>
func.func @grouped_b_dot(%a: tensor<8x32xbf16>, %b: tensor<16x32xbf16>, %c: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %d = tile.dot %a, %b, %c {b_k_group = 2 : i64} : tensor<8x32xbf16>, tensor<16x32xbf16> -> tensor<8x16xf32>
  return %d : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @pointer_tiles
func.func @pointer_tiles(%p: !tile.ptr<f32>) -> tensor<4x8x!tile.ptr<f32>> {
  %s = tile.splat %p : !tile.ptr<f32> -> tensor<4x1x!tile.ptr<f32>>
  // CHECK: tile.broadcast %{{.+}} : tensor<4x1x!tile.ptr<f32>> -> tensor<4x8x!tile.ptr<f32>>
  %b = tile.broadcast %s : tensor<4x1x!tile.ptr<f32>> -> tensor<4x8x!tile.ptr<f32>>
  return %b : tensor<4x8x!tile.ptr<f32>>
}
