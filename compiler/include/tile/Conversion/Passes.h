#ifndef TILE_CONVERSION_PASSES_H
#define TILE_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::tile {

/// On archs whose shared memory is sized at launch (GpuArch::dynamicShared), the bytes of
/// the one dynamic shared array a gpu.func of convert-tile-to-gpu uses: an i64 attribute
/// on the function, which the launcher provides at every launch.
inline constexpr llvm::StringLiteral kDynamicSharedBytesAttrName = "tile.dynamic_shared_bytes";
/// On a converted GPU kernel: the tensor maps its bulk tensor copies read, one dictionary
/// each (operand, contiguous_dim, box_inner, box_outer, swizzle_bytes), taken as its last
/// parameters in this order. The host encodes them for each launch.
inline constexpr llvm::StringLiteral kTensorMapsAttrName = "tile.tensor_maps";

#define GEN_PASS_DECL
#include "tile/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tile/Conversion/Passes.h.inc"

} // namespace mlir::tile

#endif // TILE_CONVERSION_PASSES_H
