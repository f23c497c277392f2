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

#define GEN_PASS_DECL
#include "tile/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tile/Conversion/Passes.h.inc"

} // namespace mlir::tile

#endif // TILE_CONVERSION_PASSES_H
