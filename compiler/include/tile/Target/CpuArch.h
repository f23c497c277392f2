#ifndef TILE_TARGET_CPUARCH_H
#define TILE_TARGET_CPUARCH_H

#include "tile/Compiler/Target.h"

#include <cstdint>
#include <string>

namespace tile {

/// Bytes of the CPU's vector register file: 32 x 64 with AVX-512, 16 x 32 with AVX2,
/// 16 x 16 otherwise (SSE). A dot's accumulator lives there for its whole K loop.
int64_t vectorRegisterFileBytes(const Target &target);

/// The CPU's resource check: a dot accumulator more than twice the vector register file
/// spills in its inner loop and takes LLVM seconds to minutes to allocate (on AVX-512,
/// 16x64 f32 compiles in 0.7 s, 64x64 in 9 s, 128x128 in over four minutes), so such a
/// config is refused with a CompileError.
///
/// A dot on AMX tile registers (`onTiles`) keeps its accumulator in memory, 16x16 tiles of
/// it in registers at a time; it is refused past kMaxTileAccumulatorElements instead.
void checkCpuAccumulator(int64_t rows, int64_t cols, int64_t elementBytes, const Target &target,
                         bool onTiles = false);

/// The largest accumulator (BLOCK_M x BLOCK_N) of a dot on AMX tile registers: 64 x 64,
/// 16 KB of f32 in a buffer on the stack, beside the zero-padded copies of a's and b's
/// edge blocks.
constexpr int64_t kMaxTileAccumulatorElements = 64 * 64;

/// Whether the CPU target multiplies elements of `dtype` ("bf16", "i8") on AMX tile
/// registers: AMX-TILE with AMX-BF16 or AMX-INT8 (the host reports them only where the OS
/// grants the tile state).
bool hasCpuMatrixTiles(const Target &target, const std::string &dtype);

} // namespace tile

#endif
