#include "tile/Target/CpuArch.h"

#include "tile/Compiler/Compile.h"

#include <string>

int64_t tile::vectorRegisterFileBytes(const Target &target) {
  if (target.hasFeature("avx512f"))
    return 32 * 64;
  if (target.hasFeature("avx2"))
    return 16 * 32;
  return 16 * 16;
}

bool tile::hasCpuMatrixTiles(const Target &target, const std::string &dtype) {
  if (target.kind != TargetKind::Cpu || !target.hasFeature("amx-tile"))
    return false;
  return (dtype == "bf16" && target.hasFeature("amx-bf16")) ||
         (dtype == "i8" && target.hasFeature("amx-int8"));
}

void tile::checkCpuAccumulator(int64_t rows, int64_t cols, int64_t elementBytes,
                               const Target &target, bool onTiles) {
  if (onTiles) {
    if (rows * cols > kMaxTileAccumulatorElements)
      throw CompileError("the " + std::to_string(rows) + "x" + std::to_string(cols) +
                         " dot accumulator on AMX tiles is larger than the " +
                         std::to_string(kMaxTileAccumulatorElements) +
                         " elements its buffer holds (use a smaller BLOCK_M x BLOCK_N)");
    return;
  }
  int64_t bytes = rows * cols * elementBytes;
  int64_t available = vectorRegisterFileBytes(target);
  if (bytes > 2 * available)
    throw CompileError("the " + std::to_string(rows) + "x" + std::to_string(cols) +
                       " dot accumulator needs " + std::to_string(bytes) + " bytes of registers; " +
                       target.str() + " has " + std::to_string(available) +
                       " bytes of vector registers, and more than twice that spills (use a "
                       "smaller BLOCK_M x BLOCK_N)");
}
