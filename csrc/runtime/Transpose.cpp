#include "runtime/Transpose.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace {

/// Element by element: the edges of a square transpose, and hosts without SSE2.
template <int Bytes>
void transposeElements(const char *from, int64_t fromStride, int64_t rows, int64_t cols, char *to,
                       int64_t toStride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(to + c * toStride + r * Bytes, from + r * fromStride + c * Bytes, Bytes);
}

#if defined(__SSE2__)
/// The low (or high) halves of two registers, interleaved `Width` bytes at a time.
template <int Width, bool High> __m128i interleave(__m128i x, __m128i y) {
  if constexpr (Width == 1)
    return High ? _mm_unpackhi_epi8(x, y) : _mm_unpacklo_epi8(x, y);
  else if constexpr (Width == 2)
    return High ? _mm_unpackhi_epi16(x, y) : _mm_unpacklo_epi16(x, y);
  else if constexpr (Width == 4)
    return High ? _mm_unpackhi_epi32(x, y) : _mm_unpacklo_epi32(x, y);
  else
    return High ? _mm_unpackhi_epi64(x, y) : _mm_unpacklo_epi64(x, y);
}

/// A round of interleaving: rows 2i and 2i + 1 become rows i (their low halves) and
/// i + N/2 (their high halves), `Width` bytes at a time. After log2(N) rounds at widths
/// doubling up to 8 bytes, row j holds the source's column whose index is j's bits
/// reversed. The indices are template constants, so that the rows stay in registers.
template <int Width, size_t N, size_t... I>
void interleaveRound(__m128i (&rows)[N], std::index_sequence<I...>) {
  __m128i low[] = {interleave<Width, false>(rows[2 * I], rows[2 * I + 1])...};
  __m128i high[] = {interleave<Width, true>(rows[2 * I], rows[2 * I + 1])...};
  ((rows[I] = low[I]), ...);
  ((rows[I + N / 2] = high[I]), ...);
}

constexpr size_t bitsReversed(size_t value, size_t count) {
  size_t reversed = 0;
  for (size_t bit = 0; bit < count; ++bit)
    reversed |= ((value >> bit) & 1) << (count - 1 - bit);
  return reversed;
}

constexpr size_t log2Of(size_t n) { return n <= 1 ? 0 : 1 + log2Of(n / 2); }

template <int Bytes, size_t... I>
void transposeSquare(const char *from, int64_t fromStride, char *to, int64_t toStride,
                     std::index_sequence<I...> lanes) {
  constexpr size_t N = sizeof...(I);
  __m128i rows[N] = {
      _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + int64_t(I) * fromStride))...};
  auto pairs = std::make_index_sequence<N / 2>{};
  interleaveRound<Bytes>(rows, pairs);
  if constexpr (Bytes * 2 < 16)
    interleaveRound<Bytes * 2>(rows, pairs);
  if constexpr (Bytes * 4 < 16)
    interleaveRound<Bytes * 4>(rows, pairs);
  if constexpr (Bytes * 8 < 16)
    interleaveRound<Bytes * 8>(rows, pairs);
  (_mm_storeu_si128(
       reinterpret_cast<__m128i *>(
           to +
           int64_t(std::integral_constant<size_t, bitsReversed(I, log2Of(N))>::value) * toStride),
       rows[I]),
   ...);
}

/// One 16-byte square (16 x 16 bytes, 8 x 8 halves, 4 x 4 words, 2 x 2 doubles) in registers.
template <int Bytes>
void transposeSquare(const char *from, int64_t fromStride, char *to, int64_t toStride) {
  transposeSquare<Bytes>(from, fromStride, to, toStride, std::make_index_sequence<16 / Bytes>{});
}
#endif

/// Squares straight to the destination, elements at the edges: a part of a matrix.
template <int Bytes>
void transposeDirect(const char *from, int64_t fromStride, int64_t rows, int64_t cols, char *to,
                     int64_t toStride) {
  int64_t r = 0;
#if defined(__SSE2__)
  constexpr int64_t kSquare = 16 / Bytes;
  for (; r + kSquare <= rows; r += kSquare) {
    int64_t c = 0;
    for (; c + kSquare <= cols; c += kSquare)
      transposeSquare<Bytes>(from + r * fromStride + c * Bytes, fromStride,
                             to + c * toStride + r * Bytes, toStride);
    transposeElements<Bytes>(from + r * fromStride + c * Bytes, fromStride, kSquare, cols - c,
                             to + c * toStride + r * Bytes, toStride);
  }
#endif
  transposeElements<Bytes>(from + r * fromStride, fromStride, rows - r, cols, to + r * Bytes,
                           toStride);
}

/// Tile by tile: 64 source rows by two cache lines of them, transposed into a buffer on the
/// stack, whose rows then go out as whole lines. Both the source rows and the destination
/// rows of an operand are often a multiple of 4 KB apart (a 1024-row f32 matrix
/// transposed), which puts every line of a tile in one L1 set: written straight to the
/// destination, 16 bytes at a time, the lines were evicted half written, and a 4 MB copy
/// ran at 5 GB/s, this way at 8 (one thread of a Xeon VM, memcpy 16). Tiles of 16-128
/// rows by 1-4 lines: 64 by 2 was the fastest.
template <int Bytes>
void transposeTiles(const char *from, int64_t fromStride, int64_t rows, int64_t cols, char *to,
                    int64_t toStride) {
  constexpr int64_t kLine = 64, kTileRows = 64, kTileCols = 2 * kLine / Bytes;
  alignas(kLine) char staged[kTileCols * kTileRows * Bytes];
  for (int64_t r0 = 0; r0 < rows; r0 += kTileRows)
    for (int64_t c0 = 0; c0 < cols; c0 += kTileCols) {
      const char *in = from + r0 * fromStride + c0 * Bytes;
      char *out = to + c0 * toStride + r0 * Bytes;
      int64_t tileRows = std::min(kTileRows, rows - r0), tileCols = std::min(kTileCols, cols - c0);
      if (tileRows < kTileRows || tileCols < kTileCols) {
        transposeDirect<Bytes>(in, fromStride, tileRows, tileCols, out, toStride);
        continue;
      }
      transposeDirect<Bytes>(in, fromStride, kTileRows, kTileCols, staged, kTileRows * Bytes);
      for (int64_t c = 0; c < kTileCols; ++c)
        std::memcpy(out + c * toStride, staged + c * kTileRows * Bytes, kTileRows * Bytes);
    }
}

} // namespace

void tile::runtime::transposeMatrix(const void *from, int64_t fromStride, int64_t rows,
                                    int64_t cols, int64_t elementBytes, void *to,
                                    int64_t toStride) {
  const char *in = static_cast<const char *>(from);
  char *out = static_cast<char *>(to);
  switch (elementBytes) {
  case 1:
    return transposeTiles<1>(in, fromStride, rows, cols, out, toStride);
  case 2:
    return transposeTiles<2>(in, fromStride, rows, cols, out, toStride);
  case 4:
    return transposeTiles<4>(in, fromStride, rows, cols, out, toStride);
  case 8:
    return transposeTiles<8>(in, fromStride, rows, cols, out, toStride);
  default:
    throw std::invalid_argument("transposeMatrix takes 1-, 2-, 4- or 8-byte elements, got " +
                                std::to_string(elementBytes));
  }
}
