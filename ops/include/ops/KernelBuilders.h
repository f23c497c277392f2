#ifndef TILE_OPS_KERNELBUILDERS_H
#define TILE_OPS_KERNELBUILDERS_H

#include "ops/KernelSpec.h"
#include "tile/Compiler/Compile.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace tile::ops {

/// The tile IR of the kernel, built in `context`. Throws std::invalid_argument for an
/// unknown op or a spec the op cannot build.
mlir::OwningOpRef<mlir::ModuleOp> buildKernel(mlir::MLIRContext &context, const KernelSpec &spec);

/// One generator per op, in ops/<op>.cpp.
mlir::OwningOpRef<mlir::ModuleOp> buildVectorAdd(mlir::MLIRContext &context,
                                                 const KernelSpec &spec);

/// C = A @ B with an optional epilogue: op "matmul", "matmul_leaky_relu", or
/// "matmul_leaky_relu_backward" (leaky_relu's backward gated by an activation's sign);
/// dtypes {input, output} and the bias's or the activation's, knobs BLOCK_M, BLOCK_N,
/// BLOCK_K, GROUP_M and index_bits.
mlir::OwningOpRef<mlir::ModuleOp> buildMatmul(mlir::MLIRContext &context, const KernelSpec &spec);

/// The MLIR element type named by a KernelSpec dtype string.
mlir::Type elementTypeOf(mlir::MLIRContext &context, const std::string &dtype);

/// The compiler options a spec's knobs select: num_warps and matrix_instr_nonkdim (GPU).
CompileOptions compileOptionsFor(const KernelSpec &spec);

} // namespace tile::ops

#endif
