// RUN: tile-opt %s -split-input-file -verify-diagnostics
// Ill-typed dots, expand_dims and broadcasts are rejected with a message naming the fault.

func.func @dot_inner_mismatch(%a: tensor<16x8xf16>, %b: tensor<4x32xf16>, %c: tensor<16x32xf32>) {
  // expected-error @+1 {{inner dimensions differ: a is 16x8, b is 4x32}}
  %d = tile.dot %a, %b, %c : tensor<16x8xf16>, tensor<4x32xf16> -> tensor<16x32xf32>
  return
}

// -----

func.func @dot_acc_shape(%a: tensor<16x8xf32>, %b: tensor<8x32xf32>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{accumulator shape 16x16 is not 16x32}}
  %d = tile.dot %a, %b, %c : tensor<16x8xf32>, tensor<8x32xf32> -> tensor<16x16xf32>
  return
}

// -----

func.func @dot_half_accumulator(%a: tensor<16x8xf16>, %b: tensor<8x32xf16>, %c: tensor<16x32xi32>) {
  // expected-error @+1 {{a dot of 'f16' accumulates in 'f32', got 'i32'}}
  %d = tile.dot %a, %b, %c : tensor<16x8xf16>, tensor<8x32xf16> -> tensor<16x32xi32>
  return
}

// -----

func.func @dot_int8_float_acc(%a: tensor<16x8xi8>, %b: tensor<8x32xi8>, %c: tensor<16x32xf32>) {
  // expected-error @+1 {{a dot of 'i8' accumulates in 'i32', got 'f32'}}
  %d = tile.dot %a, %b, %c : tensor<16x8xi8>, tensor<8x32xi8> -> tensor<16x32xf32>
  return
}

// -----

func.func @dot_mixed_inputs(%a: tensor<16x8xf16>, %b: tensor<8x32xbf16>, %c: tensor<16x32xf32>) {
  // expected-error @+1 {{a and b have different element types: 'f16' and 'bf16'}}
  %d = "tile.dot"(%a, %b, %c) : (tensor<16x8xf16>, tensor<8x32xbf16>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @dot_rank(%a: tensor<16xf32>, %b: tensor<16x8xf32>, %c: tensor<1x8xf32>) {
  // expected-error @+1 {{operands must be 2-D}}
  %d = "tile.dot"(%a, %b, %c) : (tensor<16xf32>, tensor<16x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @dot_f64(%a: tensor<16x8xf64>, %b: tensor<8x32xf64>, %c: tensor<16x32xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 8-bit signless integer values}}
  %d = "tile.dot"(%a, %b, %c) : (tensor<16x8xf64>, tensor<8x32xf64>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @expand_dims_axis(%x: tensor<16xi32>) {
  // expected-error @+1 {{axis 2 is out of range for a rank-1 tensor (expected 0..1)}}
  %y = tile.expand_dims %x {axis = 2 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  return
}

// -----

func.func @expand_dims_shape(%x: tensor<16xi32>) {
  // expected-error @+1 {{is not 'tensor<16xi32>' with a size-1 axis 0 (expected 'tensor<1x16xi32>')}}
  %y = tile.expand_dims %x {axis = 0 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  return
}

// -----

func.func @broadcast_stretch(%x: tensor<16x2xi32>) {
  // expected-error @+1 {{dimension 1 of size 2 cannot broadcast to 8 (only size-1 dimensions stretch)}}
  %y = tile.broadcast %x : tensor<16x2xi32> -> tensor<16x8xi32>
  return
}

// -----

func.func @broadcast_rank(%x: tensor<16xi32>) {
  // expected-error @+1 {{source rank 1 differs from result rank 2; use tile.expand_dims first}}
  %y = tile.broadcast %x : tensor<16xi32> -> tensor<16x8xi32>
  return
}

// -----

func.func @broadcast_element(%x: tensor<16x1xi32>) {
  // expected-error @+1 {{element type changes from 'i32' to 'i64'}}
  %y = tile.broadcast %x : tensor<16x1xi32> -> tensor<16x8xi64>
  return
}

// -----

func.func @grouped_b_shape(%a: tensor<8x32xbf16>, %b: tensor<32x16xbf16>, %c: tensor<8x16xf32>) {
  // expected-error @+1 {{inner dimensions differ: a is 8x32, b is 32x16 in groups of 2 k}}
  %d = tile.dot %a, %b, %c {b_k_group = 2 : i64} : tensor<8x32xbf16>, tensor<32x16xbf16> -> tensor<8x16xf32>
  return
}

// -----

func.func @grouped_b_accumulator(%a: tensor<8x32xbf16>, %b: tensor<16x32xbf16>, %c: tensor<8x32xf32>) {
  // expected-error @+1 {{accumulator shape 8x32 is not 8x16}}
  %d = tile.dot %a, %b, %c {b_k_group = 2 : i64} : tensor<8x32xbf16>, tensor<16x32xbf16> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_b_nonpositive(%a: tensor<8x32xbf16>, %b: tensor<16x32xbf16>, %c: tensor<8x16xf32>) {
  // expected-error @+1 {{b_k_group must be positive, got 0}}
  %d = tile.dot %a, %b, %c {b_k_group = 0 : i64} : tensor<8x32xbf16>, tensor<16x32xbf16> -> tensor<8x16xf32>
  return
}
