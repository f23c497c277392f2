// RUN: tile-opt %s -split-input-file -verify-diagnostics
// The verifiers reject what the type constraints cannot say, with a message.

func.func @range_backwards() {
  // expected-error @+1 {{needs end > start}}
  %r = tile.make_range {end = 0 : i32, start = 8 : i32} : tensor<8xi32>
  return
}

// -----

func.func @range_wrong_size() {
  // expected-error @+1 {{must be a 1-D tensor of end - start = 8 elements}}
  %r = tile.make_range {end = 8 : i32, start = 0 : i32} : tensor<16xi32>
  return
}

// -----

func.func @program_id_axis(%n: i32) {
  // expected-error @+1 {{attribute 'axis' failed to satisfy constraint}}
  %pid = tile.program_id 3 : i32
  return
}

// -----

func.func @splat_wrong_element(%x: f32) {
  // expected-error @+1 {{result element type matches the scalar}}
  %s = "tile.splat"(%x) : (f32) -> tensor<8xf16>
  return
}

// -----

func.func @load_other_without_mask(%p: tensor<8x!tile.ptr<f32>>, %o: tensor<8xf32>) {
  // expected-error @+1 {{`other` is only meaningful with a mask}}
  %x = "tile.load"(%p, %o) <{operandSegmentSizes = array<i32: 1, 0, 1>}> : (tensor<8x!tile.ptr<f32>>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @load_wrong_result(%p: tensor<8x!tile.ptr<f32>>) {
  // expected-error @+1 {{result type 'tensor<8xf16>' does not match pointer type}}
  %x = "tile.load"(%p) <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x!tile.ptr<f32>>) -> tensor<8xf16>
  return
}

// -----

func.func @load_wrong_mask(%p: tensor<8x!tile.ptr<f32>>, %m: tensor<4xi1>) {
  // expected-error @+1 {{mask type 'tensor<4xi1>' does not match pointer type}}
  %x = "tile.load"(%p, %m) <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<8x!tile.ptr<f32>>, tensor<4xi1>) -> tensor<8xf32>
  return
}

// -----

func.func @store_wrong_value(%p: tensor<8x!tile.ptr<f32>>, %v: tensor<8xi32>) {
  // expected-error @+1 {{value type 'tensor<8xi32>' does not match pointer type}}
  "tile.store"(%p, %v) : (tensor<8x!tile.ptr<f32>>, tensor<8xi32>) -> ()
  return
}

// -----

func.func @addptr_shape_mismatch(%p: tensor<8x!tile.ptr<f32>>, %o: tensor<4xi32>) {
  // expected-error @+1 {{all non-scalar operands/results must have the same shape}}
  %q = "tile.addptr"(%p, %o) : (tensor<8x!tile.ptr<f32>>, tensor<4xi32>) -> tensor<8x!tile.ptr<f32>>
  return
}

// -----

func.func @flag_not_i32(%flag: !tile.ptr<f32>) {
  // expected-error @+1 {{flags are i32, got a pointer to 'f32'}}
  tile.signal_flag %flag : !tile.ptr<f32>
  return
}

// -----

func.func @wait_flag_not_i32(%flag: !tile.ptr<i64>) {
  // expected-error @+1 {{flags are i32, got a pointer to 'i64'}}
  tile.wait_flag %flag : !tile.ptr<i64>
  return
}
