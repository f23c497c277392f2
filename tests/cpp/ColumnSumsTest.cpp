// b's column sums for an int8 kernel that reads a + 128 (unsigned_a): from every layout,
// with the caller's bias of either width, in int32 with its wraparound; the kernel takes
// them off through its bias, so that a call's product is exact.
#include "runtime/ColumnSums.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

using namespace tile::runtime;

namespace {

/// bias[j] - 128 * sum of column j, in 64 bits, then wrapped to int32 as the kernel's
/// accumulator wraps.
int32_t expected(const std::vector<int8_t> &b, int64_t k, int64_t rowStride, int64_t colStride,
                 int64_t j, int64_t bias) {
  int64_t sum = 0;
  for (int64_t r = 0; r < k; ++r)
    sum += b[size_t(r * rowStride + j * colStride)];
  return int32_t(uint32_t(uint64_t(bias - 128 * sum)));
}

struct Layout {
  const char *name;
  int64_t rowStride, colStride, elements;
};

} // namespace

TEST(ColumnSums, EveryLayoutAndBias) {
  constexpr int64_t k = 257, n = 131;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(-128, 127);
  // Rows contiguous, columns contiguous (b transposed), both strided, and a broadcast
  // column (stride 0), the layouts the binding's panels take b from.
  for (Layout layout :
       {Layout{"rows", n + 3, 1, k * (n + 3)}, Layout{"columns", 1, k + 5, n * (k + 5)},
        Layout{"strided", 2 * n, 2, 2 * n * k}, Layout{"broadcast", 1, 0, k}}) {
    std::vector<int8_t> b(size_t(layout.elements));
    for (auto &x : b)
      x = int8_t(byte(rng));
    std::vector<int32_t> wide(size_t(2 * n));
    for (int64_t j = 0; j < 2 * n; ++j)
      wide[size_t(j)] = j % 2 ? INT32_MAX - int32_t(j) : INT32_MIN + int32_t(j);
    std::vector<int8_t> narrow(static_cast<size_t>(n));
    for (auto &x : narrow)
      x = int8_t(byte(rng));
    std::vector<int32_t> out(size_t(n), 12345);
    unsignedAOffsets(b.data(), k, n, layout.rowStride, layout.colStride, nullptr, 0, 0, out.data());
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(out[size_t(j)], expected(b, k, layout.rowStride, layout.colStride, j, 0))
          << layout.name << ", no bias, column " << j;
    unsignedAOffsets(b.data(), k, n, layout.rowStride, layout.colStride, wide.data(), 4, 2,
                     out.data());
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(out[size_t(j)],
                expected(b, k, layout.rowStride, layout.colStride, j, wide[size_t(2 * j)]))
          << layout.name << ", int32 bias at stride 2, column " << j;
    unsignedAOffsets(b.data(), k, n, layout.rowStride, layout.colStride, narrow.data(), 1, 1,
                     out.data());
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(out[size_t(j)],
                expected(b, k, layout.rowStride, layout.colStride, j, narrow[size_t(j)]))
          << layout.name << ", int8 bias, column " << j;
  }
}

TEST(ColumnSums, EmptyKLeavesTheBias) {
  std::vector<int32_t> bias = {7, -9, 11}, out(3, 0);
  unsignedAOffsets(nullptr, 0, 3, 3, 1, bias.data(), 4, 1, out.data());
  EXPECT_EQ(out, bias);
}
