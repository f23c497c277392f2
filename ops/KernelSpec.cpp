#include "ops/KernelBuilders.h"

#include "mlir/IR/Builders.h"

#include <stdexcept>

using namespace tile::ops;

std::string KernelSpec::str() const {
  std::string text = op + "[";
  for (size_t i = 0; i < dtypes.size(); ++i)
    text += (i ? "," : "") + dtypes[i];
  text += "]{";
  bool first = true;
  for (const auto &[name, value] : config) {
    text += (first ? "" : ",") + name + "=" + std::to_string(value);
    first = false;
  }
  return text + "}";
}

int64_t KernelSpec::knob(const std::string &name) const {
  auto it = config.find(name);
  if (it == config.end())
    throw std::invalid_argument(op + " kernel needs the config knob " + name + " (spec " + str() +
                                ")");
  return it->second;
}

mlir::Type tile::ops::elementTypeOf(mlir::MLIRContext &context, const std::string &dtype) {
  mlir::Builder builder(&context);
  if (dtype == "f32")
    return builder.getF32Type();
  if (dtype == "f16")
    return builder.getF16Type();
  if (dtype == "bf16")
    return builder.getBF16Type();
  if (dtype == "i8")
    return builder.getI8Type();
  if (dtype == "i32")
    return builder.getI32Type();
  throw std::invalid_argument("unsupported element type '" + dtype + "'");
}

mlir::OwningOpRef<mlir::ModuleOp> tile::ops::buildKernel(mlir::MLIRContext &context,
                                                         const KernelSpec &spec) {
  if (spec.op == "vector_add")
    return buildVectorAdd(context, spec);
  if (spec.op == "matmul" || spec.op == "matmul_leaky_relu" ||
      spec.op == "matmul_leaky_relu_backward")
    return buildMatmul(context, spec);
  throw std::invalid_argument("no tile kernel generator for op '" + spec.op + "'");
}

tile::CompileOptions tile::ops::compileOptionsFor(const KernelSpec &spec) {
  CompileOptions options;
  if (auto warps = spec.config.find("num_warps"); warps != spec.config.end())
    options.numWarps = warps->second;
  if (auto nonKDim = spec.config.find("matrix_instr_nonkdim"); nonKDim != spec.config.end())
    options.matrixInstrNonKDim = nonKDim->second;
  if (auto kpack = spec.config.find("kpack"); kpack != spec.config.end())
    options.kpack = kpack->second;
  if (auto stages = spec.config.find("num_stages"); stages != spec.config.end())
    options.numStages = stages->second;
  if (auto waves = spec.config.find("waves_per_eu"); waves != spec.config.end())
    options.wavesPerEu = waves->second;
  if (auto specialize = spec.config.find("warp_specialize"); specialize != spec.config.end())
    options.warpSpecialize = specialize->second;
  if (auto tf32 = spec.config.find("allow_tf32"); tf32 != spec.config.end())
    options.allowTf32 = tf32->second != 0;
  return options;
}
