// What an int8 dot of a + 128 adds to a @ b: vpdpbusd multiplies unsigned bytes by signed
// ones, so a kernel that reads a with its sign bits flipped (a + 128, the dot's
// unsigned_a) computes a @ b + 128 * (b's column sums). The CPU binding computes those
// sums once per call and hands them to the kernel in its bias, which takes them off.
#ifndef TILE_RUNTIME_COLUMNSUMS_H
#define TILE_RUNTIME_COLUMNSUMS_H

#include <cstdint>

namespace tile::runtime {

/// out[j] = bias[j] - 128 * (b[0, j] + ... + b[k - 1, j]) for j < n, over the k x n int8
/// matrix b (strides in elements, any layout), in int32 with its wraparound (as the
/// kernel's accumulator). `bias` is int32 (`biasBytes` 4) or int8 (1) with `biasStride`
/// elements between entries, or null for none.
void unsignedAOffsets(const int8_t *b, int64_t k, int64_t n, int64_t rowStride, int64_t colStride,
                      const void *bias, int biasBytes, int64_t biasStride, int32_t *out);

} // namespace tile::runtime

#endif
