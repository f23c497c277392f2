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
// The AVX-512 build of the byte transposes takes GCC's target pragma (clang builds keep
// the SSE2 code).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define TILE_TRANSPOSE_WIDE 1
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
template <int Width, bool High>
[[gnu::always_inline]] inline __m128i interleave(__m128i x, __m128i y) {
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
[[gnu::always_inline]] inline void interleaveRound(__m128i (&rows)[N], std::index_sequence<I...>) {
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

/// The rows of one 16-byte square (16 x 16 bytes, 8 x 8 halves, 4 x 4 words, 2 x 2
/// doubles), loaded by `loadRow(i)`, transposed in registers and stored to `to`.
template <int Bytes, typename LoadRow, size_t... I>
[[gnu::always_inline]] inline void transposeSquare(LoadRow loadRow, char *to, int64_t toStride,
                                                   std::index_sequence<I...>) {
  constexpr size_t N = sizeof...(I);
  __m128i rows[N] = {loadRow(int64_t(I))...};
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

template <int Bytes>
[[gnu::always_inline]] inline void transposeSquare(const char *from, int64_t fromStride, char *to,
                                                   int64_t toStride) {
  auto loadRow = [=](int64_t i) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i * fromStride));
  };
  transposeSquare<Bytes>(loadRow, to, toStride, std::make_index_sequence<16 / Bytes>{});
}

/// Squares straight to `to`, the elements past the last squares one by one: a part of a
/// matrix.
template <int Bytes>
void transposeDirect(const char *from, int64_t fromStride, int64_t rows, int64_t cols, char *to,
                     int64_t toStride) {
  constexpr int64_t kSquare = 16 / Bytes;
  int64_t r = 0;
  for (; r + kSquare <= rows; r += kSquare) {
    int64_t c = 0;
    for (; c + kSquare <= cols; c += kSquare)
      transposeSquare<Bytes>(from + r * fromStride + c * Bytes, fromStride,
                             to + c * toStride + r * Bytes, toStride);
    transposeElements<Bytes>(from + r * fromStride + c * Bytes, fromStride, kSquare, cols - c,
                             to + c * toStride + r * Bytes, toStride);
  }
  transposeElements<Bytes>(from + r * fromStride, fromStride, rows - r, cols, to + r * Bytes,
                           toStride);
}

/// A tile of a transpose: 64 source rows by two cache lines of them.
constexpr int64_t kLine = 64, kTileRows = 64;

/// `count` bytes (under a few lines) by fixed-size moves: a library call per row of a
/// partial tile had cost more than the row's transpose.
[[gnu::always_inline]] inline void copyShort(char *to, const char *from, int64_t count) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16)
    std::memcpy(to + i, from + i, 16);
  if (count - i >= 8) {
    std::memcpy(to + i, from + i, 8);
    i += 8;
  }
  if (count - i >= 4) {
    std::memcpy(to + i, from + i, 4);
    i += 4;
  }
  if (count - i >= 2) {
    std::memcpy(to + i, from + i, 2);
    i += 2;
  }
  if (count - i >= 1)
    to[i] = from[i];
}

/// The first `cols` rows of a tile's buffer (`stagedPitch` apart), `rowBytes` each, out
/// to the destination's rows.
[[gnu::always_inline]] inline void writeStagedRows(char *to, int64_t toStride, const char *staged,
                                                   int64_t stagedPitch, int64_t cols,
                                                   int64_t rowBytes) {
  for (int64_t c = 0; c < cols; ++c)
    copyShort(to + c * toStride, staged + c * stagedPitch, rowBytes);
}

/// The tiles at a matrix's edges (fewer rows or columns than a whole tile) on SSE2: their
/// squares straight to the destination and the elements past them one by one, except
/// where the destination's rows lie a multiple of 2 KB apart. There a tile's rows share
/// a few L1 sets, and written 16 bytes at a time they were evicted half written (one
/// thread of a znver5, 1000 x 48 halves to rows 2 KB apart: 24.5 us, 4 GB/s): such tiles
/// go through the tile's buffer as whole ones do, and its rows out by fixed-size moves
/// (6.1 us; 1000 x 96 halves 21.6 -> 8.5, 1024 x 48 words to rows 4 KB apart 12-16 ->
/// 5.8). Elsewhere the buffer cost more than it saved (rows 704 bytes apart, 333 x 129
/// halves: 3.0-3.3 us direct, 4.0-4.3 staged; 1 KB apart, 512 x 100 halves: 3.5 against
/// 5.6).
struct EdgeTilesOnBaseline {
  template <int Bytes>
  void transpose(const char *from, int64_t fromStride, int64_t rows, int64_t cols, char *to,
                 int64_t toStride, char *staged) const {
    constexpr int64_t kSetAliasingPitch = 2048, kStagedPitch = kTileRows * Bytes;
    if (toStride % kSetAliasingPitch != 0)
      return transposeDirect<Bytes>(from, fromStride, rows, cols, to, toStride);
    transposeDirect<Bytes>(from, fromStride, rows, cols, staged, kStagedPitch);
    writeStagedRows(to, toStride, staged, kStagedPitch, cols, rows * Bytes);
  }
};

/// Tile by tile: up to 64 source rows by two cache lines of them, transposed square by
/// square into a buffer on the stack, whose rows then go out whole. Both the source rows
/// and the destination rows of an operand are often a multiple of 4 KB apart (a 1024-row
/// f32 matrix transposed), which puts every line of a tile in one L1 set: written straight
/// to the destination, 16 bytes at a time, the lines were evicted half written, and a 4 MB
/// copy ran at 5 GB/s, this way at 8 (one thread of a Xeon VM, memcpy 16). Tiles of 16-128
/// rows by 1-4 lines: 64 by 2 was the fastest. The tiles at a matrix's edges go to
/// `Edge`.
template <int Bytes, typename Edge>
[[gnu::always_inline]] inline void transposeTiles(const char *from, int64_t fromStride,
                                                  int64_t rows, int64_t cols, char *to,
                                                  int64_t toStride, Edge edge) {
  constexpr int64_t kTileCols = 2 * kLine / Bytes;
  constexpr int64_t kSquare = 16 / Bytes, kStagedPitch = kTileRows * Bytes;
  alignas(kLine) char staged[kTileCols * kStagedPitch];
  for (int64_t r0 = 0; r0 < rows; r0 += kTileRows)
    for (int64_t c0 = 0; c0 < cols; c0 += kTileCols) {
      const char *in = from + r0 * fromStride + c0 * Bytes;
      char *out = to + c0 * toStride + r0 * Bytes;
      int64_t tileRows = std::min(kTileRows, rows - r0), tileCols = std::min(kTileCols, cols - c0);
      if (tileRows == kTileRows && tileCols == kTileCols) {
        for (int64_t r = 0; r < kTileRows; r += kSquare)
          for (int64_t c = 0; c < kTileCols; c += kSquare)
            transposeSquare<Bytes>(in + r * fromStride + c * Bytes, fromStride,
                                   staged + c * kStagedPitch + r * Bytes, kStagedPitch);
        for (int64_t c = 0; c < kTileCols; ++c)
          std::memcpy(out + c * toStride, staged + c * kStagedPitch, kStagedPitch);
        continue;
      }
      edge.template transpose<Bytes>(in, fromStride, tileRows, tileCols, out, toStride, staged);
    }
}
#endif

/// The x86-64 baseline's way: SSE2 squares, or element by element off x86.
template <int Bytes>
void transposeOnBaseline(const char *from, int64_t fromStride, int64_t rows, int64_t cols, char *to,
                         int64_t toStride) {
#if defined(__SSE2__)
  transposeTiles<Bytes>(from, fromStride, rows, cols, to, toStride, EdgeTilesOnBaseline{});
#else
  transposeElements<Bytes>(from, fromStride, rows, cols, to, toStride);
#endif
}

#if defined(TILE_TRANSPOSE_WIDE)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")
/// The tiles at a matrix's edges by AVX-512's masked loads, which read only the elements
/// inside (and do not fault past them): every square through registers into the tile's
/// buffer, rows past the edge as zeros, and the buffer's rows out by fixed-size moves.
/// One by one, the elements past the last squares had taken a third of a 1000 x 500 byte
/// transpose.
struct EdgeTilesMasked {
  template <int Bytes>
  void transpose(const char *from, int64_t fromStride, int64_t rows, int64_t cols, char *to,
                 int64_t toStride, char *staged) const {
    constexpr int64_t kSquare = 16 / Bytes, kStagedPitch = kTileRows * Bytes;
    for (int64_t r = 0; r < rows; r += kSquare)
      for (int64_t c = 0; c < cols; c += kSquare) {
        const char *square = from + r * fromStride + c * Bytes;
        int64_t squareRows = std::min(kSquare, rows - r);
        __mmask16 inside = __mmask16((1u << (std::min(kSquare, cols - c) * Bytes)) - 1);
        auto loadRow = [=](int64_t i) {
          return i < squareRows ? _mm_maskz_loadu_epi8(inside, square + i * fromStride)
                                : _mm_setzero_si128();
        };
        transposeSquare<Bytes>(loadRow, staged + c * kStagedPitch + r * Bytes, kStagedPitch,
                               std::make_index_sequence<kSquare>{});
      }
    writeStagedRows(to, toStride, staged, kStagedPitch, cols, rows * Bytes);
  }
};

/// Bytes on AVX-512's 32 vector registers: a 16 x 16 byte square's rows and their
/// interleavings fit, where on SSE2's 16 they spilled to the stack, and the edges take
/// masked loads (one thread of a znver5 against the SSE2 code: 128 x 128 bytes 0.88 ->
/// 0.42 us, 256 x 256 3.6 -> 1.9, 1000 x 500 50 -> 25, 1024 x 512 30 -> 23). Other element
/// sizes keep the SSE2 code: their squares fit 16 registers, and the 32-register build of
/// it ran large 2- and 4-byte transposes up to 25% slower.
void transposeBytesOn32Registers(const char *from, int64_t fromStride, int64_t rows, int64_t cols,
                                 char *to, int64_t toStride) {
  transposeTiles<1>(from, fromStride, rows, cols, to, toStride, EdgeTilesMasked{});
}

/// A tile at a matrix's edge through EdgeTilesMasked, built for AVX-512 apart from the
/// whole tiles, which keep the baseline's code (see transposeMatrix for which element
/// sizes take it).
template <int Bytes>
[[gnu::noinline]] void transposeEdgeTileMasked(const char *from, int64_t fromStride, int64_t rows,
                                               int64_t cols, char *to, int64_t toStride,
                                               char *staged) {
  EdgeTilesMasked{}.transpose<Bytes>(from, fromStride, rows, cols, to, toStride, staged);
}
#pragma GCC pop_options

struct EdgeTilesMaskedApart {
  template <int Bytes>
  void transpose(const char *from, int64_t fromStride, int64_t rows, int64_t cols, char *to,
                 int64_t toStride, char *staged) const {
    transposeEdgeTileMasked<Bytes>(from, fromStride, rows, cols, to, toStride, staged);
  }
};

/// Whole tiles on SSE2, the tiles at the edges by AVX-512's masked loads: for 2-byte
/// elements (bfloat16 and float16 copies), whose edges on SSE2 went square by square
/// straight to the destination and the elements past the last squares one by one (one
/// thread of a znver5: 500 x 250 halves 15.6 -> 10.5 us, 496 x 248 13.2 -> 9.2, 1000 x 48
/// 6.4 -> 4.4; 512 x 100 and 333 x 129 unchanged). 4-byte elements ran slower so (496 x
/// 248 words 12.7 -> 14.5 us) and keep the baseline's edges.
template <int Bytes>
void transposeWithMaskedEdges(const char *from, int64_t fromStride, int64_t rows, int64_t cols,
                              char *to, int64_t toStride) {
  transposeTiles<Bytes>(from, fromStride, rows, cols, to, toStride, EdgeTilesMaskedApart{});
}

bool hasAvx512Bw() {
  static const bool has = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return has;
}
#endif

} // namespace

void tile::runtime::transposeMatrixPortably(const void *from, int64_t fromStride, int64_t rows,
                                            int64_t cols, int64_t elementBytes, void *to,
                                            int64_t toStride) {
  const char *in = static_cast<const char *>(from);
  char *out = static_cast<char *>(to);
  switch (elementBytes) {
  case 1:
    return transposeOnBaseline<1>(in, fromStride, rows, cols, out, toStride);
  case 2:
    return transposeOnBaseline<2>(in, fromStride, rows, cols, out, toStride);
  case 4:
    return transposeOnBaseline<4>(in, fromStride, rows, cols, out, toStride);
  case 8:
    return transposeOnBaseline<8>(in, fromStride, rows, cols, out, toStride);
  }
  throw std::invalid_argument("transposeMatrix takes 1-, 2-, 4- or 8-byte elements, got " +
                              std::to_string(elementBytes));
}

void tile::runtime::transposeMatrix(const void *from, int64_t fromStride, int64_t rows,
                                    int64_t cols, int64_t elementBytes, void *to,
                                    int64_t toStride) {
#if defined(TILE_TRANSPOSE_WIDE)
  if (elementBytes == 1 && hasAvx512Bw())
    return transposeBytesOn32Registers(static_cast<const char *>(from), fromStride, rows, cols,
                                       static_cast<char *>(to), toStride);
  if (elementBytes == 2 && hasAvx512Bw())
    return transposeWithMaskedEdges<2>(static_cast<const char *>(from), fromStride, rows, cols,
                                       static_cast<char *>(to), toStride);
#endif
  transposeMatrixPortably(from, fromStride, rows, cols, elementBytes, to, toStride);
}
