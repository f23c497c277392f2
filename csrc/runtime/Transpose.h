// Matrix transposes for the CPU's operand copies: a transposed a (a weight gradient's
// x^T) copied to rows, and a transposed b (a Linear's weight) copied to panels.
#ifndef TILE_RUNTIME_TRANSPOSE_H
#define TILE_RUNTIME_TRANSPOSE_H

#include <cstdint>

namespace tile::runtime {

/// Writes the transpose of a `rows` x `cols` matrix of `elementBytes`-byte elements (1, 2,
/// 4 or 8) whose row r starts at `from` + r * `fromStride` bytes (its elements contiguous)
/// into `to`: column c becomes the row at `to` + c * `toStride` bytes. On one thread; a
/// caller splits the work by columns (or rows) over its threads.
void transposeMatrix(const void *from, int64_t fromStride, int64_t rows, int64_t cols,
                     int64_t elementBytes, void *to, int64_t toStride);

/// transposeMatrix on the x86-64 baseline's SSE2 registers whatever the CPU has (or
/// element by element off x86): the way of CPUs without AVX512-BW, which transposeMatrix
/// takes for bytes where the CPU has it.
void transposeMatrixPortably(const void *from, int64_t fromStride, int64_t rows, int64_t cols,
                             int64_t elementBytes, void *to, int64_t toStride);

} // namespace tile::runtime

#endif
