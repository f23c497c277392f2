// float16 matrices split into bfloat16 terms for the matrix tiles (runtime/HalfSplit.h).
#include "runtime/HalfSplit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace tile;

namespace {

float halfToFloat(uint16_t h) {
  // Through the compiler's conversion, independent of the one under test.
  _Float16 half;
  std::memcpy(&half, &h, sizeof half);
  return static_cast<float>(half);
}

float bfloat16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

bool finiteHalf(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

TEST(HalfSplit, EveryFiniteHalfIsItsTwoTermsExactly) {
  // All 63,488 finite float16 values, in a row long enough for the 16-lane path and a
  // tail: hi is x rounded to bfloat16 and hi + lo == x exactly, with |lo| <= 2^-8 |x|.
  std::vector<uint16_t> values;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits)
    if (finiteHalf(uint16_t(bits)))
      values.push_back(uint16_t(bits));
  values.push_back(0x3c00); // a tail of one past a multiple of 16
  int64_t cols = int64_t(values.size());
  std::vector<uint16_t> out(2 * cols);
  runtime::HalfSplitPlacement placement{out.data(), 2 * cols, {0}, {cols}};
  ASSERT_TRUE(runtime::splitHalves(values.data(), 1, cols, cols, 1, placement));
  for (int64_t j = 0; j < cols; ++j) {
    float x = halfToFloat(values[j]), hi = bfloat16ToFloat(out[j]),
          lo = bfloat16ToFloat(out[cols + j]);
    ASSERT_EQ(hi + lo, x) << "half bits " << values[j];
    ASSERT_LE(std::fabs(lo), std::ldexp(std::fabs(x), -8)) << "half bits " << values[j];
  }
}

TEST(HalfSplit, StridedColumnsSplitAsContiguousOnes) {
  // A transposed source (column stride != 1) takes the element-by-element path: the same
  // terms as its contiguous copy.
  const int64_t rows = 5, cols = 37;
  std::vector<uint16_t> source(rows * cols), transposed(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i)
    source[i] = uint16_t((i * 2654435761u) & 0x7bffu); // finite, both signs' magnitudes
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      transposed[c * rows + r] = source[r * cols + c];
  std::vector<uint16_t> a(2 * rows * cols), b(2 * rows * cols);
  ASSERT_TRUE(runtime::splitHalves(source.data(), rows, cols, cols, 1,
                                   runtime::HalfSplitPlacement{a.data(), 2 * cols, {0}, {cols}}));
  ASSERT_TRUE(runtime::splitHalves(transposed.data(), rows, cols, 1, rows,
                                   runtime::HalfSplitPlacement{b.data(), 2 * cols, {0}, {cols}}));
  EXPECT_EQ(a, b);
}

TEST(HalfSplit, TermsLandWhereTheDotTakesThem) {
  // a (m x k) as [ah | al | ah] and b (k x n) as [bh ; bh ; bl]: the bfloat16 dot over
  // the terms is ah.bh + al.bh + ah.bl; with four terms al.bl too. Each term is k rounded
  // up to 32 (a's row pitch whole cache lines), zeros after its k.
  const int64_t m = 2, k = 3, n = 2, length = runtime::halfSplitTermLength(k);
  ASSERT_EQ(length, 32);
  std::vector<uint16_t> a = {0x3c01, 0x3555, 0xb800, 0x4248, 0x0001, 0x7bff};
  auto split = [&](const uint16_t *x) {
    std::vector<uint16_t> one(2);
    EXPECT_TRUE(
        runtime::splitHalves(x, 1, 1, 1, 1, runtime::HalfSplitPlacement{one.data(), 2, {0}, {1}}));
    return one;
  };
  for (int64_t terms : {3, 4}) {
    std::vector<uint16_t> out(m * terms * length, 0xffff);
    ASSERT_TRUE(
        runtime::splitHalves(a.data(), m, k, k, 1, runtime::placeRowsOfA(out.data(), k, terms)));
    for (int64_t r = 0; r < m; ++r) {
      const uint16_t *row = out.data() + r * terms * length;
      for (int64_t c = 0; c < length; ++c) {
        std::vector<uint16_t> parts = c < k ? split(&a[r * k + c]) : std::vector<uint16_t>{0, 0};
        EXPECT_EQ(row[c], parts[0]) << r << "," << c;
        EXPECT_EQ(row[length + c], parts[1]) << r << "," << c;
        EXPECT_EQ(row[2 * length + c], parts[0]) << r << "," << c;
        if (terms == 4)
          EXPECT_EQ(row[3 * length + c], parts[1]) << r << "," << c;
      }
    }
    std::vector<uint16_t> bOut(terms * length * n, 0xffff);
    ASSERT_TRUE(runtime::splitHalves(a.data(), k, n, n, 1,
                                     runtime::placeRowsOfB(bOut.data(), k, n, terms)));
    for (int64_t r = 0; r < length; ++r)
      for (int64_t c = 0; c < n; ++c) {
        std::vector<uint16_t> parts = r < k ? split(&a[r * n + c]) : std::vector<uint16_t>{0, 0};
        EXPECT_EQ(bOut[r * n + c], parts[0]) << r << "," << c;
        EXPECT_EQ(bOut[(length + r) * n + c], parts[0]) << r << "," << c;
        EXPECT_EQ(bOut[(2 * length + r) * n + c], parts[1]) << r << "," << c;
        if (terms == 4)
          EXPECT_EQ(bOut[(3 * length + r) * n + c], parts[1]) << r << "," << c;
      }
  }
  EXPECT_EQ(runtime::halfSplitTerms(127), 4);
  EXPECT_EQ(runtime::halfSplitTerms(128), 3);
  EXPECT_EQ(runtime::halfSplitTermLength(64), 64);
  EXPECT_EQ(runtime::halfSplitTermLength(65), 96);
}

TEST(HalfSplit, TermsOfBStraightIntoPanelsAsSplitThenPacked) {
  // b's terms written straight into the tiles' panels (bfloat16 pairs of k rows) are the
  // panels that packing its split rows gives, every element and zero of them: odd and
  // even k, a last panel partly past n, three and four terms, b transposed (its columns
  // strided), 32- and 64-wide panels.
  struct Case {
    int64_t k, n, width;
    bool transposed;
  };
  for (Case c : {Case{130, 200, 64, false}, Case{129, 64, 64, false}, Case{5, 33, 32, false},
                 Case{77, 100, 32, true}, Case{300, 130, 64, true}})
    for (int64_t terms : {3, 4}) {
      std::vector<uint16_t> source(c.k * c.n);
      for (size_t i = 0; i < source.size(); ++i)
        source[i] = uint16_t((i * 2654435761u + 12345u) & 0xfbffu); // finite, both signs
      int64_t rowStride = c.transposed ? 1 : c.n, colStride = c.transposed ? c.k : 1;
      int64_t length = runtime::halfSplitTermLength(c.k);
      runtime::PanelLayout layout{terms * length, c.n, c.width, 2, 2};
      std::vector<uint16_t> rows(terms * length * c.n, 0xffff);
      ASSERT_TRUE(runtime::splitHalves(source.data(), c.k, c.n, rowStride, colStride,
                                       runtime::placeRowsOfB(rows.data(), c.k, c.n, terms)));
      std::vector<uint16_t> expected(layout.bytes() / 2, 0xffff),
          panels(layout.bytes() / 2, 0xffff);
      runtime::packPanels(rows.data(), c.n, 1, layout, expected.data());
      ASSERT_TRUE(runtime::splitHalvesIntoPanels(source.data(), c.k, c.n, rowStride, colStride,
                                                 terms, layout, panels.data()));
      EXPECT_EQ(panels, expected) << "k " << c.k << " n " << c.n << " width " << c.width
                                  << " terms " << terms << (c.transposed ? " transposed" : "");
    }
  runtime::PanelLayout wrongRows{3 * 64, 16, 16, 2, 2};
  std::vector<uint16_t> source(70 * 16), panels(wrongRows.bytes());
  EXPECT_THROW(
      runtime::splitHalvesIntoPanels(source.data(), 70, 16, 16, 1, 3, wrongRows, panels.data()),
      std::invalid_argument)
      << "k = 70 takes terms of 96 rows";
}

TEST(HalfSplit, InfinitiesAndNaNsAreRefused) {
  // inf splits into inf and NaN (or 0): inf * 0 terms would turn an infinite product into
  // NaN, so the caller takes another path.
  for (uint16_t bad : {uint16_t(0x7c00), uint16_t(0xfc00), uint16_t(0x7e00)})
    for (int64_t at : {0, 5, 16, 20}) {
      std::vector<uint16_t> row(21, 0x3c00), out(42);
      row[at] = bad;
      EXPECT_FALSE(runtime::splitHalves(row.data(), 1, 21, 21, 1,
                                        runtime::HalfSplitPlacement{out.data(), 42, {0}, {21}}))
          << "bits " << bad << " at " << at;
      EXPECT_FALSE(runtime::splitHalves(row.data(), 21, 1, 1, 2,
                                        runtime::HalfSplitPlacement{out.data(), 2, {0}, {1}}))
          << "bits " << bad << " at " << at << ", strided";
      runtime::PanelLayout layout{3 * 32, 21, 32, 2, 2};
      std::vector<uint16_t> panels(layout.bytes() / 2);
      EXPECT_FALSE(
          runtime::splitHalvesIntoPanels(row.data(), 1, 21, 21, 1, 3, layout, panels.data()))
          << "bits " << bad << " at " << at << ", into panels";
    }
}

} // namespace
