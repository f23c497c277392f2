#ifndef TILE_TARGET_CPUARCH_H
#define TILE_TARGET_CPUARCH_H

#include "tile/Compiler/Target.h"

#include <cstdint>

namespace tile {

/// Bytes of the CPU's vector register file: 32 x 64 with AVX-512, 16 x 32 with AVX2,
/// 16 x 16 otherwise (SSE). A dot's accumulator lives there for its whole K loop.
int64_t vectorRegisterFileBytes(const Target &target);

/// The CPU's resource check: a dot accumulator more than twice the vector register file
/// spills in its inner loop and takes LLVM seconds to minutes to allocate (on AVX-512,
/// 16x64 f32 compiles in 0.7 s, 64x64 in 9 s, 128x128 in over four minutes), so such a
/// config is refused with a CompileError.
void checkCpuAccumulator(int64_t rows, int64_t cols, int64_t elementBytes, const Target &target);

} // namespace tile

#endif
