// RUN: tile-opt %s --convert-tile-to-cpu | FileCheck %s
// A masked, contiguous block: one vector access, unmasked when the whole block is in
// range, masked for the ragged last block; program ids become kernel arguments; a
// packed entry point runs a range of program instances.

// CHECK-LABEL: func.func @vector_add
// CHECK-SAME: (%[[A:[^:]+]]: !llvm.ptr, %[[B:[^:]+]]: !llvm.ptr, %[[OUT:[^:]+]]: !llvm.ptr, %[[N:[^:]+]]: i32, %[[PID:[^:]+]]: i32, %{{.+}}: i32, %{{.+}}: i32, %{{.+}}: i32, %{{.+}}: i32, %{{.+}}: i32)
// CHECK-SAME: llvm.linkage = #llvm.linkage<internal>
// CHECK-NOT: tile.
// CHECK: %[[START:.+]] = arith.muli %[[PID]], %{{.+}} : i32
// CHECK: %[[MASK:.+]] = arith.cmpi slt, %{{.+}}, %{{.+}} : vector<256xi32>
// The mask is `lanes < n`, so the block is full when n - start >= 256: no reduction.
// CHECK-NOT: vector.reduction
// CHECK: %[[START64:.+]] = arith.extsi %[[START]] : i32 to i64
// CHECK: %[[FULL:.+]] = arith.cmpi eq, %{{.+}}, %{{.+}} : i64
// CHECK: scf.if %[[FULL]] -> (vector<256xf32>)
// CHECK:   %[[ABASE:.+]] = llvm.getelementptr %[[A]][%{{.+}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:   llvm.load %[[ABASE]] {alignment = 4 : i64} : !llvm.ptr -> vector<256xf32>
// CHECK: } else {
// CHECK:   %[[APART:.+]] = llvm.getelementptr %[[A]][%{{.+}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:   llvm.intr.masked.load %[[APART]], %[[MASK]], %{{.+}} {alignment = 4 : i32}
// CHECK: arith.addf %{{.+}}, %{{.+}} : vector<256xf32>
// CHECK: scf.if
// CHECK:   llvm.getelementptr %[[OUT]]
// CHECK:   llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : vector<256xf32>, !llvm.ptr
// CHECK: } else {
// CHECK:   llvm.intr.masked.store
// CHECK-NOT: masked_gather

// CHECK-LABEL: func.func @vector_add_cpu_entry
// CHECK-SAME: (%[[ARGS:.+]]: !llvm.ptr, %[[BEGIN:.+]]: i64, %[[END:.+]]: i64, %[[GX:.+]]: i32, %[[GY:.+]]: i32, %[[GZ:.+]]: i32)
// CHECK: %[[SLOT0:.+]] = llvm.getelementptr %[[ARGS]][0]
// CHECK: %[[ARG0:.+]] = llvm.load %[[SLOT0]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.load %[[ARG0]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.getelementptr %[[ARGS]][3]
// CHECK: scf.for %[[ID:.+]] = %[[BEGIN]] to %[[END]]
// CHECK-SAME: iter_args(%[[X:.+]] = %{{.+}}, %[[Y:.+]] = %{{.+}}, %[[Z:.+]] = %{{.+}})
// CHECK-NOT: arith.divsi
// CHECK:   func.call @vector_add({{.*}}, %[[X]], %[[Y]], %[[Z]], %[[GX]], %[[GY]], %[[GZ]])
// CHECK:   arith.cmpi eq, %{{.+}}, %[[GX]] : i32
func.func @vector_add(%a: !tile.ptr<f32>, %b: !tile.ptr<f32>, %out: !tile.ptr<f32>, %n: i32) attributes {tile.kernel} {
  %pid = tile.program_id 0 : i32
  %c256 = arith.constant 256 : i32
  %start = arith.muli %pid, %c256 : i32
  %lanes = tile.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
  %starts = tile.splat %start : i32 -> tensor<256xi32>
  %offsets = arith.addi %starts, %lanes : tensor<256xi32>
  %ns = tile.splat %n : i32 -> tensor<256xi32>
  %mask = arith.cmpi slt, %offsets, %ns : tensor<256xi32>
  %pa = tile.splat %a : !tile.ptr<f32> -> tensor<256x!tile.ptr<f32>>
  %pa1 = tile.addptr %pa, %offsets : tensor<256x!tile.ptr<f32>>, tensor<256xi32>
  %x = tile.load %pa1, %mask : tensor<256x!tile.ptr<f32>>
  %pb = tile.splat %b : !tile.ptr<f32> -> tensor<256x!tile.ptr<f32>>
  %pb1 = tile.addptr %pb, %offsets : tensor<256x!tile.ptr<f32>>, tensor<256xi32>
  %y = tile.load %pb1, %mask : tensor<256x!tile.ptr<f32>>
  %sum = arith.addf %x, %y : tensor<256xf32>
  %po = tile.splat %out : !tile.ptr<f32> -> tensor<256x!tile.ptr<f32>>
  %po1 = tile.addptr %po, %offsets : tensor<256x!tile.ptr<f32>>, tensor<256xi32>
  tile.store %po1, %sum, %mask : tensor<256x!tile.ptr<f32>>
  return
}
