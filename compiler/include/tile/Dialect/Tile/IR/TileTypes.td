#ifndef TILE_TYPES_TD
#define TILE_TYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"
include "tile/Dialect/Tile/IR/TileBase.td"

def Tile_PointerType : TypeDef<Tile_Dialect, "Pointer"> {
  let mnemonic = "ptr";
  let summary = "Pointer to elements of global memory";
  let description = [{
    A scalar address of one element of type `pointeeType` in global memory. Tensors of
    pointers address a block of elements, one per lane:

    ```mlir
    %p = tile.splat %base : !tile.ptr<f16> -> tensor<1024x!tile.ptr<f16>>
    ```
  }];
  let parameters = (ins "Type":$pointeeType);
  let assemblyFormat = "`<` $pointeeType `>`";
}

def Tile_Ptr : Type<CPred<"::llvm::isa<::mlir::tile::PointerType>($_self)">,
                    "tile pointer", "::mlir::tile::PointerType">;
def Tile_PtrTensor : RankedTensorOf<[Tile_Ptr]>;
def Tile_PtrLike : AnyTypeOf<[Tile_Ptr, Tile_PtrTensor]>;

def Tile_Int : AnyTypeOf<[I32, I64]>;
def Tile_IntTensor : RankedTensorOf<[I32, I64]>;
def Tile_IntLike : AnyTypeOf<[Tile_Int, Tile_IntTensor]>;
def Tile_BoolTensor : RankedTensorOf<[I1]>;

def Tile_Scalar : AnyTypeOf<[AnyInteger, AnyFloat, Tile_Ptr]>;
def Tile_Tensor : RankedTensorOf<[AnyInteger, AnyFloat, Tile_Ptr]>;
def Tile_Value : AnyTypeOf<[Tile_Scalar, Tile_Tensor]>;

#endif // TILE_TYPES_TD
