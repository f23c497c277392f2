// The operand copies' transposes: every element lands at its transposed place, for each
// element size, through whole tiles (64 rows by two cache lines), partial tiles and
// squares, and the edges past the last square, between rows padded apart (to rows a
// multiple of 2 KB apart too); both the CPU's own way and the SSE2 baseline's.
#include "runtime/Transpose.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <vector>

using tile::runtime::transposeMatrix;
using tile::runtime::transposeMatrixPortably;
using Transpose = void (*)(const void *, int64_t, int64_t, int64_t, int64_t, void *, int64_t);

namespace {

template <typename Element>
void expectTransposed(Transpose transpose, int64_t rows, int64_t cols, int64_t fromPad,
                      int64_t toPad) {
  int64_t fromStride = cols + fromPad, toStride = rows + toPad;
  std::vector<Element> from(size_t(rows * fromStride), Element(0x11));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      from[size_t(r * fromStride + c)] =
          Element(uint64_t(r) * 1315423911u + uint64_t(c) * 2654435761u + 7);
  constexpr Element kUntouched = Element(0x5a);
  std::vector<Element> to(size_t(cols * toStride), kUntouched);
  transpose(from.data(), fromStride * int64_t(sizeof(Element)), rows, cols,
            int64_t(sizeof(Element)), to.data(), toStride * int64_t(sizeof(Element)));
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < toStride; ++r) {
      Element want = r < rows ? from[size_t(r * fromStride + c)] : kUntouched;
      ASSERT_EQ(to[size_t(c * toStride + r)], want)
          << rows << "x" << cols << " (" << sizeof(Element) << "-byte elements): row " << c
          << ", element " << r << (r < rows ? "" : " (padding, not to be written)");
    }
}

TEST(Transpose, EveryElementLandsAtItsTransposedPlace) {
  for (auto [rows, cols, fromPad, toPad] :
       {std::tuple{int64_t(1), int64_t(1), int64_t(0), int64_t(0)},
        {int64_t(16), int64_t(16), int64_t(0), int64_t(0)},
        {int64_t(64), int64_t(128), int64_t(0), int64_t(0)},
        {int64_t(130), int64_t(150), int64_t(3), int64_t(5)},
        {int64_t(7), int64_t(300), int64_t(1), int64_t(0)},
        {int64_t(300), int64_t(7), int64_t(0), int64_t(9)},
        {int64_t(256), int64_t(256), int64_t(0), int64_t(16)},
        // Destination rows a multiple of 2 KB apart (from 2-byte elements on): the edge
        // tiles go through the tile's buffer.
        {int64_t(1000), int64_t(48), int64_t(0), int64_t(24)},
        {int64_t(1001), int64_t(37), int64_t(2), int64_t(23)}}) {
    // The CPU's own way, and the baseline's (bytes, and the edge tiles of 2-byte
    // elements, take AVX-512 where the CPU has it).
    for (Transpose transpose : {transposeMatrix, transposeMatrixPortably}) {
      expectTransposed<uint8_t>(transpose, rows, cols, fromPad, toPad);
      expectTransposed<uint16_t>(transpose, rows, cols, fromPad, toPad);
      expectTransposed<uint32_t>(transpose, rows, cols, fromPad, toPad);
      expectTransposed<uint64_t>(transpose, rows, cols, fromPad, toPad);
    }
  }
}

TEST(Transpose, OtherElementSizesAreRefused) {
  char buffer[16] = {};
  EXPECT_THROW(transposeMatrix(buffer, 3, 1, 1, 3, buffer, 3), std::invalid_argument);
  EXPECT_THROW(transposeMatrixPortably(buffer, 3, 1, 1, 3, buffer, 3), std::invalid_argument);
}

} // namespace
