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

void tile::checkCpuAccumulator(int64_t rows, int64_t cols, int64_t elementBytes,
                               const Target &target) {
  int64_t bytes = rows * cols * elementBytes;
  int64_t available = vectorRegisterFileBytes(target);
  if (bytes > 2 * available)
    throw CompileError("the " + std::to_string(rows) + "x" + std::to_string(cols) +
                       " dot accumulator needs " + std::to_string(bytes) + " bytes of registers; " +
                       target.str() + " has " + std::to_string(available) +
                       " bytes of vector registers, and more than twice that spills (use a "
                       "smaller BLOCK_M x BLOCK_N)");
}
