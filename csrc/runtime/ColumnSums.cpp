#include "runtime/ColumnSums.h"

namespace tile::runtime {
namespace {

/// The sums into `sums` (uint32, wrapping as int32 does): by rows where they are
/// contiguous (each row's bytes added to every column's sum at once), by columns where
/// those are (b transposed: a Linear's weight), element by element otherwise. Inlined into
/// each caller, it takes the caller's target (AVX-512's below).
[[gnu::always_inline]] inline void columnSums(const int8_t *b, int64_t k, int64_t n,
                                              int64_t rowStride, int64_t colStride,
                                              uint32_t *sums) {
  for (int64_t j = 0; j < n; ++j)
    sums[j] = 0;
  if (colStride == 1) {
    for (int64_t r = 0; r < k; ++r) {
      const int8_t *row = b + r * rowStride;
      for (int64_t j = 0; j < n; ++j)
        sums[j] += uint32_t(int32_t(row[j]));
    }
    return;
  }
  if (rowStride == 1) {
    for (int64_t j = 0; j < n; ++j) {
      const int8_t *column = b + j * colStride;
      int32_t sum = 0;
      for (int64_t r = 0; r < k; ++r)
        sum += column[r];
      sums[j] = uint32_t(sum);
    }
    return;
  }
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < n; ++j)
      sums[j] += uint32_t(int32_t(b[r * rowStride + j * colStride]));
}

#if defined(__x86_64__)
// The int8 calls that take these sums run on AVX-512 hosts (vpdpbusd): there the loops
// widen 64 bytes at a time.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")
void columnSumsWide(const int8_t *b, int64_t k, int64_t n, int64_t rowStride, int64_t colStride,
                    uint32_t *sums) {
  columnSums(b, k, n, rowStride, colStride, sums);
}
#pragma GCC pop_options

bool hasAvx512Bw() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return has;
}
#endif

} // namespace

void unsignedAOffsets(const int8_t *b, int64_t k, int64_t n, int64_t rowStride, int64_t colStride,
                      const void *bias, int biasBytes, int64_t biasStride, int32_t *out) {
  uint32_t *sums = reinterpret_cast<uint32_t *>(out);
#if defined(__x86_64__)
  if (hasAvx512Bw())
    columnSumsWide(b, k, n, rowStride, colStride, sums);
  else
#endif
    columnSums(b, k, n, rowStride, colStride, sums);
  for (int64_t j = 0; j < n; ++j) {
    uint32_t offset = 0;
    if (bias && biasBytes == 4)
      offset = uint32_t(static_cast<const int32_t *>(bias)[j * biasStride]);
    else if (bias)
      offset = uint32_t(int32_t(static_cast<const int8_t *>(bias)[j * biasStride]));
    out[j] = int32_t(offset - sums[j] * 128u);
  }
}

} // namespace tile::runtime
