// RUN: tile-opt %s | tile-opt | FileCheck %s
// Every tile op parses, verifies and prints back to the same form.

// CHECK-LABEL: func.func @all_ops
// CHECK-SAME: (%[[P:.+]]: !tile.ptr<f16>, %[[N:.+]]: i32)
func.func @all_ops(%p: !tile.ptr<f16>, %n: i32) attributes {tile.kernel} {
  // CHECK: %[[PID:.+]] = tile.program_id 0 : i32
  %pid = tile.program_id 0 : i32
  // CHECK: tile.num_programs 2 : i32
  %grid = tile.num_programs 2 : i32
  // CHECK: %[[R:.+]] = tile.make_range {end = 136 : i32, start = 8 : i32} : tensor<128xi32>
  %r = tile.make_range {end = 136 : i32, start = 8 : i32} : tensor<128xi32>
  // CHECK: %[[S:.+]] = tile.splat %[[N]] : i32 -> tensor<128xi32>
  %s = tile.splat %n : i32 -> tensor<128xi32>
  %m = arith.cmpi slt, %r, %s : tensor<128xi32>
  // CHECK: %[[BASE:.+]] = tile.splat %[[P]] : !tile.ptr<f16> -> tensor<128x!tile.ptr<f16>>
  %base = tile.splat %p : !tile.ptr<f16> -> tensor<128x!tile.ptr<f16>>
  // CHECK: %[[PTRS:.+]] = tile.addptr %[[BASE]], %[[R]] : tensor<128x!tile.ptr<f16>>, tensor<128xi32>
  %ptrs = tile.addptr %base, %r : tensor<128x!tile.ptr<f16>>, tensor<128xi32>
  // CHECK: %[[X:.+]] = tile.load %[[PTRS]] : tensor<128x!tile.ptr<f16>>
  %x = tile.load %ptrs : tensor<128x!tile.ptr<f16>>
  // CHECK: %[[Y:.+]] = tile.load %[[PTRS]], %[[M:.+]], %[[X]] : tensor<128x!tile.ptr<f16>>
  %y = tile.load %ptrs, %m, %x : tensor<128x!tile.ptr<f16>>
  // CHECK: tile.store %[[PTRS]], %[[Y]], %[[M]] : tensor<128x!tile.ptr<f16>>
  tile.store %ptrs, %y, %m : tensor<128x!tile.ptr<f16>>
  // Scalar pointers and offsets work too.
  // CHECK: %[[Q:.+]] = tile.addptr %[[P]], %[[PID]] : !tile.ptr<f16>, i32
  %q = tile.addptr %p, %pid : !tile.ptr<f16>, i32
  // CHECK: %[[V:.+]] = tile.load %[[Q]] : !tile.ptr<f16>
  %v = tile.load %q : !tile.ptr<f16>
  // CHECK: tile.store %[[Q]], %[[V]] : !tile.ptr<f16>
  tile.store %q, %v : !tile.ptr<f16>
  return
}

// CHECK-LABEL: func.func @flags
// CHECK-SAME: (%[[F:.+]]: !tile.ptr<i32>)
func.func @flags(%flag: !tile.ptr<i32>) attributes {tile.kernel} {
  // CHECK: tile.signal_flag %[[F]] : !tile.ptr<i32>
  tile.signal_flag %flag : !tile.ptr<i32>
  // CHECK: tile.wait_flag %[[F]] : !tile.ptr<i32>
  tile.wait_flag %flag : !tile.ptr<i32>
  return
}
