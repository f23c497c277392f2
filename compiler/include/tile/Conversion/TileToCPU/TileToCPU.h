#ifndef TILE_CONVERSION_TILETOCPU_TILETOCPU_H
#define TILE_CONVERSION_TILETOCPU_TILETOCPU_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::tile {

/// Number of i32 arguments the CPU lowering appends to a kernel: program id x, y, z,
/// then the grid size x, y, z.
inline constexpr unsigned kCpuGridArgCount = 6;

/// The packed entry symbol of a kernel on the CPU.
std::string cpuEntryName(llvm::StringRef kernelName);

/// Builds `<kernel>_cpu_entry(ptr args, i64 begin, i64 end, i32 gx, i32 gy, i32 gz)`
/// beside an already converted kernel whose last kCpuGridArgCount arguments are the
/// grid arguments. `args[i]` points at the value of the kernel's i-th argument, as in
/// cuLaunchKernel and hipModuleLaunchKernel.
func::FuncOp buildCpuEntryPoint(OpBuilder &builder, func::FuncOp kernel);

} // namespace mlir::tile

#endif
