#ifndef TILE_OPS_KERNELSPEC_H
#define TILE_OPS_KERNELSPEC_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tile::ops {

/// Everything that selects one kernel of an op, short of the target: the op, its
/// element types ("f32", "f16", "bf16", ...) and its config knobs (BLOCK_SIZE, ...).
struct KernelSpec {
  std::string op;
  std::vector<std::string> dtypes;
  std::map<std::string, int64_t> config;

  /// Canonical text, e.g. "vector_add[f16]{BLOCK_SIZE=1024,index_bits=32}".
  std::string str() const;
  int64_t knob(const std::string &name) const;
};

/// The tile IR of the kernel, built in `context`. Throws std::invalid_argument for an
/// unknown op or a spec the op cannot build.
mlir::OwningOpRef<mlir::ModuleOp> buildKernel(mlir::MLIRContext &context, const KernelSpec &spec);

/// One generator per op, in ops/<op>.cpp.
mlir::OwningOpRef<mlir::ModuleOp> buildVectorAdd(mlir::MLIRContext &context,
                                                 const KernelSpec &spec);

/// C = A @ B with an optional leaky_relu epilogue (op "matmul" or "matmul_leaky_relu"),
/// dtypes {input, output}, knobs BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M and index_bits.
mlir::OwningOpRef<mlir::ModuleOp> buildMatmul(mlir::MLIRContext &context, const KernelSpec &spec);

/// The MLIR element type named by a KernelSpec dtype string.
mlir::Type elementTypeOf(mlir::MLIRContext &context, const std::string &dtype);

} // namespace tile::ops

#endif
