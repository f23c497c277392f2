#ifndef TILE_OPS_TD
#define TILE_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "tile/Dialect/Tile/IR/TileBase.td"
include "tile/Dialect/Tile/IR/TileTypes.td"

def Tile_ProgramIdOp : Tile_Op<"program_id", [Pure]> {
  let summary = "Index of this program instance along a grid axis";
  let description = [{
    Each program instance of the launch grid runs the kernel once; `program_id` gives
    its coordinate along `axis` (0, 1 or 2).

    ```mlir
    %pid = tile.program_id 0 : i32
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<2>]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Tile_NumProgramsOp : Tile_Op<"num_programs", [Pure]> {
  let summary = "Size of the launch grid along an axis";
  let description = [{
    ```mlir
    %n = tile.num_programs 1 : i32
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<2>]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Tile_MakeRangeOp : Tile_Op<"make_range", [Pure]> {
  let summary = "The integers start, start + 1, ..., end - 1 as a 1-D tensor";
  let description = [{
    ```mlir
    %lanes = tile.make_range {start = 0 : i32, end = 1024 : i32} : tensor<1024xi32>
    ```
  }];
  let arguments = (ins I32Attr:$start, I32Attr:$end);
  let results = (outs RankedTensorOf<[I32]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tile_SplatOp : Tile_Op<"splat", [Pure,
    TypesMatchWith<"result element type matches the scalar", "result", "src",
                   "::llvm::cast<::mlir::RankedTensorType>($_self).getElementType()">]> {
  let summary = "A tensor whose every element is the scalar operand";
  let description = [{
    ```mlir
    %offsets = tile.splat %start : i32 -> tensor<1024xi32>
    ```
  }];
  let arguments = (ins Tile_Scalar:$src);
  let results = (outs Tile_Tensor:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
}

def Tile_AddPtrOp : Tile_Op<"addptr", [Pure, Elementwise, SameOperandsAndResultShape,
    AllTypesMatch<["ptr", "result"]>]> {
  let summary = "Advance pointers by a number of elements";
  let description = [{
    Lane-wise `ptr + offset`, with the offset counted in elements of the pointee type.

    ```mlir
    %q = tile.addptr %p, %offsets : tensor<1024x!tile.ptr<f32>>, tensor<1024xi32>
    ```
  }];
  let arguments = (ins Tile_PtrLike:$ptr, Tile_IntLike:$offset);
  let results = (outs Tile_PtrLike:$result);
  let assemblyFormat = "$ptr `,` $offset attr-dict `:` type($result) `,` type($offset)";
}

def Tile_LoadOp : Tile_Op<"load", [AttrSizedOperandSegments,
    MemoryEffects<[MemRead<DefaultResource>]>]> {
  let summary = "Load a block of elements, with lanes switched off by a mask";
  let description = [{
    Loads one element per lane of `ptr`. Where `mask` is false no memory is touched and
    the lane takes `other` (zero when `other` is absent). The mask has the shape of
    `ptr` with element type i1; `other` has the type of the result.

    ```mlir
    %x = tile.load %ptrs, %mask : tensor<1024x!tile.ptr<f16>>
    %y = tile.load %ptrs, %mask, %zero : tensor<1024x!tile.ptr<f16>>
    ```
  }];
  let arguments = (ins Tile_PtrLike:$ptr, Optional<Tile_BoolTensor>:$mask,
                       Optional<Tile_Value>:$other);
  let results = (outs Tile_Value:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$ptr, CArg<"::mlir::Value", "{}">:$mask,
                   CArg<"::mlir::Value", "{}">:$other)>
  ];
}

def Tile_StoreOp : Tile_Op<"store", [MemoryEffects<[MemWrite<DefaultResource>]>]> {
  let summary = "Store a block of elements where the mask is true";
  let description = [{
    ```mlir
    tile.store %ptrs, %value, %mask : tensor<1024x!tile.ptr<f16>>
    ```
  }];
  let arguments = (ins Tile_PtrLike:$ptr, Tile_Value:$value, Optional<Tile_BoolTensor>:$mask);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Tile_SignalFlagOp : Tile_Op<"signal_flag", [MemoryEffects<[MemRead<DefaultResource>,
                                                                  MemWrite<DefaultResource>]>]> {
  let summary = "Publish this program's earlier stores to the program that waits on a flag";
  let description = [{
    Every thread of the program reaches this point, then the flag (an i32 that is 0)
    becomes 1 with release semantics at device scope: a program whose `wait_flag` on the
    same flag returns sees every store this program made before it. Programs that signal
    and wait on each other must be resident at the same time (a persistent kernel).

    ```mlir
    tile.signal_flag %flag : !tile.ptr<i32>
    ```
  }];
  let arguments = (ins Tile_Ptr:$flag);
  let assemblyFormat = "$flag attr-dict `:` qualified(type($flag))";
  let hasVerifier = 1;
}

def Tile_WaitFlagOp : Tile_Op<"wait_flag", [MemoryEffects<[MemRead<DefaultResource>,
                                                              MemWrite<DefaultResource>]>]> {
  let summary = "Wait until another program signals a flag, then clear it";
  let description = [{
    Waits until the i32 flag is nonzero (acquire semantics at device scope), sets it back
    to 0 for the next launch, and lets every thread of the program go on: they see the
    stores the signalling program made before its `signal_flag`.

    ```mlir
    tile.wait_flag %flag : !tile.ptr<i32>
    ```
  }];
  let arguments = (ins Tile_Ptr:$flag);
  let assemblyFormat = "$flag attr-dict `:` qualified(type($flag))";
  let hasVerifier = 1;
}

def Tile_ExpandDimsOp : Tile_Op<"expand_dims", [Pure]> {
  let summary = "Insert a dimension of size 1 into a tensor";
  let description = [{
    The result has the elements of `src` with a new dimension of size 1 at `axis`, as
    `x[:, None]` (axis 1) and `x[None, :]` (axis 0) in Triton and NumPy.

    ```mlir
    %col = tile.expand_dims %rows {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    ```
  }];
  let arguments = (ins Tile_Tensor:$src, ConfinedAttr<I32Attr, [IntMinValue<0>]>:$axis);
  let results = (outs Tile_Tensor:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_BroadcastOp : Tile_Op<"broadcast", [Pure]> {
  let summary = "Stretch the size-1 dimensions of a tensor";
  let description = [{
    Source and result have the same rank and element type; every source dimension is
    either the result's size or 1, and a size-1 dimension repeats along the result's.
    Elementwise ops take operands of one shape, so a program broadcasts explicitly.

    ```mlir
    %tile = tile.broadcast %col : tensor<64x1xi32> -> tensor<64x32xi32>
    ```
  }];
  let arguments = (ins Tile_Tensor:$src);
  let results = (outs Tile_Tensor:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_DotOp : Tile_Op<"dot", [Pure,
    AllTypesMatch<["acc", "result"]>]> {
  let summary = "Matrix product of two 2-D blocks added to an accumulator";
  let description = [{
    `result = a @ b + acc`, with `a` of shape MxK and `b` of shape KxN. Products are
    formed and summed in the accumulator's type: f32 for f16, bf16 and f32 inputs, i32
    for i8 inputs, so a K loop keeps full precision until the program casts the result.

    ```mlir
    %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
    ```

    With `b_k_group` = g > 1, `b` holds its KxN matrix in groups of g consecutive k:
    `b` is (K/g)x(N*g), and element (k, n) of the matrix is `b[k / g, n * g + k % g]`.
    That is the operand layout of x86's dot-product instructions (vdpbf16ps takes pairs
    of bf16, vpdpbusd quads of i8), which a CPU kernel then reads with no shuffle. Only
    the CPU lowering takes it.

    ```mlir
    %d = tile.dot %a, %b, %c {b_k_group = 2 : i64}
        : tensor<8x256xbf16>, tensor<128x64xbf16> -> tensor<8x32xf32>
    ```

    With `unsigned_a` (i8 only), a's bytes count as unsigned with their sign bit flipped:
    `result = (a + 128) @ b + acc`. That is vpdpbusd's own operand (u8 x s8), which then
    needs no correction inside the dot: the program subtracts 128 times b's column sums
    itself, from sums its caller computed once (the CPU binding's int8 calls of short K,
    where each block column's programs had summed the same rows of a again). Only the CPU
    lowering on vpdpbusd takes it.
  }];
  let arguments = (ins RankedTensorOf<[F16, BF16, F32, I8]>:$a,
                       RankedTensorOf<[F16, BF16, F32, I8]>:$b,
                       RankedTensorOf<[F32, I32]>:$acc,
                       OptionalAttr<I64Attr>:$b_k_group,
                       UnitAttr:$unsigned_a);
  let results = (outs RankedTensorOf<[F32, I32]>:$result);
  let assemblyFormat = "$a `,` $b `,` $acc attr-dict `:` type($a) `,` type($b) `->` type($result)";
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "Type":$result, "Value":$a, "Value":$b, "Value":$acc), [{
      build($_builder, $_state, result, a, b, acc, IntegerAttr(), UnitAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The k per group of b's layout (see b_k_group): 1 for a plain KxN b.
    int64_t kGroup() { return getBKGroup() ? static_cast<int64_t>(*getBKGroup()) : 1; }
  }];
}

#endif // TILE_OPS_TD
