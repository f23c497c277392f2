// RUN: tile-opt %s --tile-cpu-to-llvm | FileCheck %s
// A loop LLVM is told not to unroll keeps that through the lowering to branches: the
// annotation reaches the latch branch's own loop_annotation, from which the translation
// emits !llvm.loop (a discardable attribute there would be dropped).

// CHECK-DAG: #[[UNROLL:.+]] = #llvm.loop_unroll<disable = true>
// CHECK-DAG: #[[LOOP:.+]] = #llvm.loop_annotation<unroll = #[[UNROLL]]>
// CHECK-LABEL: llvm.func @count
// CHECK: llvm.br ^{{.+}} {loop_annotation = #[[LOOP]]}
// CHECK-NOT: llvm.loop_annotation =
#unroll = #llvm.loop_unroll<disable = true>
#loop = #llvm.loop_annotation<unroll = #unroll>
func.func @count(%p: !llvm.ptr, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1 : i32
  scf.for %i = %c0 to %n step %c1 {
    %j = arith.index_cast %i : index to i64
    %q = llvm.getelementptr %p[%j] : (!llvm.ptr, i64) -> !llvm.ptr, i32
    llvm.store %one, %q : i32, !llvm.ptr
  } {llvm.loop_annotation = #loop}
  return
}
