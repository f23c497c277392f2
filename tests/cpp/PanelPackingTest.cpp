// b copied into panels for the CPU microkernel: every element lands at its place in its
// panel from any source layout, and a kernel specialized with packed_b reads the panels
// as b (ragged edges included).
#include "runtime/PanelPacking.h"
#include "TestKernels.h"
#include "runtime/CompileAndLoad.h"
#include "runtime/CpuLauncher.h"
#include "runtime/MatmulArguments.h"

#include <gtest/gtest.h>

#include <functional>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <sys/mman.h>
#include <tuple>
#include <unistd.h>
#include <vector>

using namespace tile;
using namespace tile::runtime;

namespace {

/// Two tasks, as at::parallel_for would split the panels over two threads.
const ParallelFor twoTasks = [](int64_t begin, int64_t end, int64_t,
                                const std::function<void(int64_t, int64_t)> &body) {
  int64_t middle = begin + (end - begin) / 2;
  body(begin, middle);
  body(middle, end);
};

template <typename Element>
void expectPanelsOf(int64_t rowStride, int64_t colStride, const char *layoutName) {
  // 37 x 70 in panels of 32 columns: two whole panels and one of 6 columns, written
  // whole (zeros past the matrix's columns: the kernel reads it as a full panel).
  const int64_t rows = 37, cols = 70, width = 32;
  int64_t span = (rows - 1) * rowStride + (cols - 1) * colStride + 1;
  std::vector<Element> source(size_t(span), Element(0));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      source[size_t(r * rowStride + j * colStride)] = Element(r * 131 + j * 7 + 1);
  PanelLayout layout{rows, cols, width, int64_t(sizeof(Element))};
  ASSERT_EQ(layout.panels(), 3);
  ASSERT_EQ(layout.panelStride(), rows * width);
  constexpr Element kUntouched = Element(0x5a);
  std::vector<Element> panels(size_t(layout.bytes() / int64_t(sizeof(Element))), kUntouched);
  packPanels(source.data(), rowStride, colStride, layout, panels.data(), twoTasks);
  for (int64_t p = 0; p < layout.panels(); ++p)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t jj = 0; jj < width; ++jj) {
        int64_t j = p * width + jj;
        Element got = panels[size_t((p * rows + r) * width + jj)];
        Element want = j < cols ? source[size_t(r * rowStride + j * colStride)] : Element(0);
        ASSERT_EQ(got, want) << layoutName << " panel " << p << " row " << r << " column " << jj
                             << " (" << sizeof(Element) << "-byte elements)";
      }
}

TEST(PanelPacking, EveryElementLandsInItsPanel) {
  for (auto [rowStride, colStride, name] : {std::tuple{int64_t(70), int64_t(1), "contiguous"},
                                            {int64_t(1), int64_t(37), "transposed"},
                                            {int64_t(211), int64_t(1), "rows apart"},
                                            {int64_t(213), int64_t(3), "column steps"}}) {
    expectPanelsOf<uint8_t>(rowStride, colStride, name);
    expectPanelsOf<uint16_t>(rowStride, colStride, name);
    expectPanelsOf<uint32_t>(rowStride, colStride, name);
  }
}

template <typename Element>
void expectGroupedPanelsOf(int64_t rowStride, int64_t colStride, const char *layoutName,
                           int64_t cols = 70, int64_t width = 32) {
  // 37 x cols in panels of `width` columns, rows in groups of 4 / sizeof(Element): the last
  // group, the rows of groups up to 16 (a tile's) and the last panel are filled with zeros.
  const int64_t rows = 37, group = 4 / int64_t(sizeof(Element));
  int64_t span = (rows - 1) * rowStride + (cols - 1) * colStride + 1;
  std::vector<Element> source(size_t(span), Element(0x77));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      source[size_t(r * rowStride + j * colStride)] = Element(r * 131 + j * 7 + 1);
  PanelLayout layout{rows, cols, width, int64_t(sizeof(Element)), group};
  ASSERT_EQ(layout.groupRows(), ((rows + group - 1) / group + 15) / 16 * 16)
      << "rows of groups padded to a whole tile's 16";
  ASSERT_EQ(layout.panelStride(), layout.groupRows() * group * width);
  std::vector<Element> panels(size_t(layout.bytes() / int64_t(sizeof(Element))), Element(0x5a));
  packPanels(source.data(), rowStride, colStride, layout, panels.data(), twoTasks);
  for (int64_t p = 0; p < layout.panels(); ++p)
    for (int64_t r = 0; r < layout.groupRows() * group; ++r)
      for (int64_t jj = 0; jj < width; ++jj) {
        int64_t j = p * width + jj;
        size_t at =
            size_t(p * layout.panelStride() + ((r / group) * width + jj) * group + r % group);
        Element want =
            j < cols && r < rows ? source[size_t(r * rowStride + j * colStride)] : Element(0);
        ASSERT_EQ(panels[at], want) << layoutName << " panel " << p << " row " << r << " column "
                                    << jj << " (groups of " << group << ")";
      }
}

TEST(PanelPacking, EveryElementLandsInItsGroupOfRows) {
  for (auto [rowStride, colStride, name] : {std::tuple{int64_t(70), int64_t(1), "contiguous"},
                                            {int64_t(1), int64_t(37), "transposed"},
                                            {int64_t(211), int64_t(1), "rows apart"},
                                            {int64_t(213), int64_t(3), "column steps"}}) {
    expectGroupedPanelsOf<uint8_t>(rowStride, colStride, name);
    expectGroupedPanelsOf<uint16_t>(rowStride, colStride, name);
  }
  // Eleven panels: the copy walks eight side by side, then the last three.
  expectGroupedPanelsOf<uint8_t>(333, 1, "eleven panels", 333);
  expectGroupedPanelsOf<uint16_t>(333, 1, "eleven panels", 333);
  // Panels 64 wide, as the int8 kernels read them: whole 64-byte rows of quads, and a last
  // panel of 13 columns (masked loads where the host has AVX-512BW).
  expectGroupedPanelsOf<uint8_t>(333, 1, "64 wide", 333, 64);
  expectGroupedPanelsOf<uint16_t>(333, 1, "64 wide", 333, 64);
  expectGroupedPanelsOf<uint8_t>(70, 1, "64 wide, two panels", 70, 64);
  PanelLayout wrongWidth{4, 4, 32, 4, 2};
  std::vector<uint32_t> source(16), panels(size_t(wrongWidth.bytes() / 4));
  EXPECT_THROW(packPanels(source.data(), 4, 1, wrongWidth, panels.data()), std::invalid_argument)
      << "groups of rows are 32-bit words";
}

TEST(PanelPacking, SmallPanelsSplitAsTheLaunchDoes) {
  // b of an int8 256^3 matmul: 8 panels of 8 KB, under one task's 64 KB. Alone the copy
  // takes one task; for a launch of two tasks it takes two, each half of the panels (so
  // that each thread's programs read the panels it wrote), and still writes each once.
  PanelLayout layout{256, 256, 32, 1, 4};
  ASSERT_EQ(layout.panels(), 8);
  std::vector<uint8_t> source(256 * 256);
  for (size_t i = 0; i < source.size(); ++i)
    source[i] = uint8_t(i * 37 + 11);
  for (int64_t tasks : {1, 2, 3}) {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    ParallelFor recording = [&](int64_t begin, int64_t end, int64_t grain,
                                const std::function<void(int64_t, int64_t)> &body) {
      for (int64_t first = begin; first < end; first += grain) {
        ranges.emplace_back(first, std::min(end, first + grain));
        body(first, std::min(end, first + grain));
      }
    };
    std::vector<uint8_t> panels(size_t(layout.bytes())), once(size_t(layout.bytes()));
    packPanels(source.data(), 256, 1, layout, panels.data(), recording, tasks);
    packPanels(source.data(), 256, 1, layout, once.data());
    EXPECT_EQ(panels, once) << tasks << " tasks";
    EXPECT_EQ(int64_t(ranges.size()), tasks) << "a task per task of the launch";
  }
}

TEST(PanelPacking, RangesOfPanelsMakeTheWholeCopy) {
  // A caller that splits the copy itself (a launch's tasks, beside their rows of a) packs
  // ranges of panels: together they write what packPanels writes, the last range the
  // zeros past the matrix's columns too, for every source layout and grouping. A task's
  // own copy of a range (packPanelsInto) holds the same panels from its start.
  for (auto [rowStride, colStride, group] : {std::tuple{int64_t(70), int64_t(1), int64_t(1)},
                                             {int64_t(1), int64_t(37), int64_t(1)},
                                             {int64_t(70), int64_t(1), int64_t(2)},
                                             {int64_t(1), int64_t(37), int64_t(2)},
                                             {int64_t(213), int64_t(3), int64_t(1)}}) {
    PanelLayout layout{37, 70, 16, 2, group};
    std::vector<uint16_t> source(size_t(36 * rowStride + 69 * colStride + 1));
    for (size_t i = 0; i < source.size(); ++i)
      source[i] = uint16_t(i * 131 + 7);
    std::vector<uint16_t> whole(size_t(layout.bytes() / 2), 0x5a5a), parts(whole);
    packPanels(source.data(), rowStride, colStride, layout, whole.data());
    ASSERT_EQ(layout.panels(), 5);
    int64_t stride = layout.panelStride();
    for (auto [first, last] :
         {std::pair{int64_t(0), int64_t(2)}, {int64_t(2), int64_t(3)}, {int64_t(3), int64_t(5)}}) {
      packPanelRange(source.data(), rowStride, colStride, layout, parts.data(), first, last);
      std::vector<uint16_t> own(size_t((last - first) * stride), 0x5a5a);
      packPanelsInto(source.data(), rowStride, colStride, layout, first, last, own.data());
      EXPECT_TRUE(std::equal(own.begin(), own.end(), whole.begin() + first * stride))
          << "own panels " << first << ".." << last << ", strides " << rowStride << ", "
          << colStride << ", groups of " << group;
    }
    EXPECT_EQ(parts, whole) << "strides " << rowStride << ", " << colStride << ", groups of "
                            << group;
    std::vector<uint16_t> one(static_cast<size_t>(stride));
    EXPECT_THROW(packPanelsInto(source.data(), rowStride, colStride, layout, 4, 6, one.data()),
                 std::invalid_argument)
        << "a range past the panels";
  }
}

TEST(PanelPacking, ScratchIsKeptUpToItsLimit) {
  void *first = panelScratch(4096);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u) << "panels start on a cache line";
  std::memset(first, 1, 4096);
  EXPECT_EQ(panelScratch(1024), first) << "a smaller call reuses the kept buffer";
  void *larger = panelScratch(int64_t(3) << 20);
  std::memset(larger, 2, size_t(3) << 20);
  EXPECT_EQ(panelScratch(int64_t(3) << 20), larger) << "the grown buffer is kept";
  void *huge = panelScratch(kRetainedPanelBytes + 4096);
  std::memset(huge, 3, size_t(kRetainedPanelBytes + 4096));
  EXPECT_EQ(panelScratch(4096), larger) << "a buffer past the limit is not kept in its place";
}

TEST(PanelPacking, RowsAreCopiedToTheirNewPitch) {
  // a's rows moved onto whole cache lines: each run lands at its row's new start, the
  // source is read at its own stride, and zeros fill the bytes up to the next run (the
  // kernel then reads them as k past the matrix's); enough rows for several tasks.
  const int64_t rows = 300, rowBytes = 500, fromStride = 503, toStride = 512;
  std::vector<unsigned char> from(rows * fromStride), to(rows * toStride, 0xee);
  for (size_t i = 0; i < from.size(); ++i)
    from[i] = static_cast<unsigned char>(i * 7 + 3);
  auto threads = [](int64_t begin, int64_t end, int64_t grain,
                    const std::function<void(int64_t, int64_t)> &body) {
    for (int64_t first = begin; first < end; first += grain)
      body(first, std::min(end, first + grain));
  };
  copyRows(from.data(), fromStride, rows, rowBytes, to.data(), toStride, threads);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < toStride; ++j)
      ASSERT_EQ(to[r * toStride + j], j < rowBytes ? from[r * fromStride + j] : 0) << r << "," << j;
}

TEST(PanelPacking, KernelWithPackedBReadsPanels) {
  // The same product as from b itself, at a shape with a partial block column (45 of 64
  // columns in the second panel), partial block rows and a K of no whole BLOCK_K.
  auto spec = tile::testing::matmulSpec("matmul_leaky_relu", "f32", "f32", 8, 32, 16);
  spec.config["packed_b"] = 1;
  auto kernel = compileAndLoad(spec, Target::host());
  const int64_t m = 21, n = 45, k = 19;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist;
  std::vector<float> a(size_t(m * k)), b(size_t(k * n)), c(size_t(m * n) + 8, NAN);
  for (auto &x : a)
    x = dist(rng);
  for (auto &x : b)
    x = dist(rng);
  PanelLayout layout{k, n, 32, 4};
  std::vector<float> panels(size_t(layout.bytes() / 4), NAN);
  packPanels(b.data(), n, 1, layout, panels.data());
  StridedOperand aOperand{a.data(), 2, {m, k}, {k, 1}, 4}, bOperand{b.data(), 2, {k, n}, {n, 1}, 4};
  int64_t cStrides[2] = {n, 1};
  MatmulArguments arguments;
  float slope = 0.25f;
  arguments.pack(aOperand, bOperand, c.data(), cStrides, nullptr, slope, 32);
  arguments.useBPanels(panels.data(), layout);
  EXPECT_EQ(*static_cast<int32_t *>(arguments.args[8]), 32) << "b's row stride is the panel width";
  EXPECT_EQ(*static_cast<int32_t *>(arguments.args[9]), k * 32)
      << "b's column stride is the panel stride";
  launchCpu(*kernel, arguments.args, Grid{int32_t(((m + 7) / 8) * ((n + 31) / 32)), 1, 1}, 1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t kk = 0; kk < k; ++kk)
        sum += double(a[size_t(i * k + kk)]) * b[size_t(kk * n + j)];
      double expected = sum > 0 ? sum : sum * slope;
      ASSERT_NEAR(c[size_t(i * n + j)], expected, 1e-4 * (1 + std::abs(expected)))
          << i << ", " << j;
    }
  for (size_t i = size_t(m * n); i < c.size(); ++i)
    ASSERT_TRUE(std::isnan(c[i])) << "kernel wrote past the end of C";
}

} // namespace

namespace {

/// bf16 (the top half of an f32's bits) and int8 as the kernels take them.
uint16_t bf16Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return uint16_t(bits >> 16);
}

float fromBf16(uint16_t bits) {
  uint32_t word = uint32_t(bits) << 16;
  float x;
  std::memcpy(&x, &word, 4);
  return x;
}

struct GroupedPanelCase {
  const char *in, *out, *feature;
  int64_t group, blockM, blockN, blockK;
  const char *name;
};

class GroupedPanels : public ::testing::TestWithParam<GroupedPanelCase> {};

/// Element (i, j) of a @ b, both row-major (a with k columns, b with n), in doubles.
double productAt(const std::vector<double> &a, const std::vector<double> &b, int64_t k, int64_t n,
                 int64_t i, int64_t j) {
  double sum = 0;
  for (int64_t kk = 0; kk < k; ++kk)
    sum += a[size_t(i * k + kk)] * b[size_t(kk * n + j)];
  return sum;
}

/// Runs the case's kernel over c (m x n) = a (m x k) @ b (k x n), both row-major, b copied
/// into the case's panels first.
void launchOnGroupedPanels(const LoadedKernel &kernel, const GroupedPanelCase &c, const void *aData,
                           const void *bData, int64_t m, int64_t n, int64_t k, int64_t elementBytes,
                           void *cData) {
  PanelLayout layout{k, n, c.blockN, elementBytes, c.group};
  std::vector<uint8_t> panels(size_t(layout.bytes()), 0xff);
  packPanels(bData, n, 1, layout, panels.data());
  StridedOperand aOperand{aData, 2, {m, k}, {k, 1}, elementBytes},
      bOperand{bData, 2, {k, n}, {n, 1}, elementBytes};
  int64_t cStrides[2] = {n, 1};
  MatmulArguments arguments;
  arguments.pack(aOperand, bOperand, cData, cStrides, nullptr, std::nullopt, 32);
  arguments.useBPanels(panels.data(), layout);
  launchCpu(kernel, arguments.args,
            Grid{int32_t(((m + c.blockM - 1) / c.blockM) * ((n + c.blockN - 1) / c.blockN)), 1, 1},
            1);
}

/// The case's kernel, specialized as the binding specializes one that reads b's panels
/// in groups of k: a's k and c's columns unit-stride.
std::shared_ptr<const LoadedKernel> groupedPanelKernel(const GroupedPanelCase &c) {
  auto spec = tile::testing::matmulSpec("matmul", c.in, c.out, c.blockM, c.blockN, c.blockK);
  spec.config["packed_b"] = c.group;
  spec.config["unit_strides"] = 1 << 1 | 1 << 5;
  return compileAndLoad(spec, Target::host());
}

TEST_P(GroupedPanels, KernelReadsBInGroupsOfK) {
  // A kernel specialized with packed_b = g reads b's panels in groups of g k with the
  // host's dot-product instruction (and its tile registers, where it has AMX and the
  // blocks are 32 x 32): the same product as the reference, in full blocks and at every
  // ragged edge (a K of no whole group nor whole tile, partial block rows and columns).
  const GroupedPanelCase &c = GetParam();
  if (!Target::host().hasFeature(c.feature))
    GTEST_SKIP() << "this CPU has no " << c.feature;
  auto kernel = groupedPanelKernel(c);
  bool bf16 = c.group == 2;
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> small(-128, 127);
  for (auto [m, n, k] : {std::tuple{int64_t(16), int64_t(64), int64_t(64)},
                         {int64_t(21), int64_t(45), int64_t(19)},
                         {int64_t(9), int64_t(33), int64_t(6)},
                         {int64_t(8), int64_t(32), int64_t(35)},
                         {int64_t(64), int64_t(64), int64_t(512)},
                         {int64_t(70), int64_t(77), int64_t(301)},
                         {int64_t(128), int64_t(96), int64_t(1100)}}) {
    // Elements as raw 16- or 8-bit words, and their values.
    std::vector<uint16_t> a16(size_t(m * k)), b16(size_t(k * n));
    std::vector<int8_t> a8(size_t(m * k)), b8(size_t(k * n));
    std::vector<double> av(size_t(m * k)), bv(size_t(k * n));
    for (size_t i = 0; i < av.size(); ++i) {
      a16[i] = bf16Bits(normal(rng));
      a8[i] = int8_t(small(rng));
      av[i] = bf16 ? fromBf16(a16[i]) : a8[i];
    }
    for (size_t i = 0; i < bv.size(); ++i) {
      b16[i] = bf16Bits(normal(rng));
      b8[i] = int8_t(small(rng));
      bv[i] = bf16 ? fromBf16(b16[i]) : b8[i];
    }
    const void *aData = bf16 ? static_cast<const void *>(a16.data()) : a8.data();
    const void *bData = bf16 ? static_cast<const void *>(b16.data()) : b8.data();
    int64_t eb = bf16 ? 2 : 1;
    std::vector<float> cf(size_t(m * n) + 8, NAN);
    std::vector<int32_t> ci(size_t(m * n) + 8, 0x7eadbeef);
    void *cData = bf16 ? static_cast<void *>(cf.data()) : ci.data();
    launchOnGroupedPanels(*kernel, c, aData, bData, m, n, k, eb, cData);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = productAt(av, bv, k, n, i, j);
        if (bf16)
          ASSERT_NEAR(cf[size_t(i * n + j)], sum, 1e-4 * (1 + std::abs(sum)))
              << m << "x" << n << "x" << k << " at " << i << ", " << j;
        else
          ASSERT_EQ(ci[size_t(i * n + j)], int32_t(sum))
              << m << "x" << n << "x" << k << " at " << i << ", " << j;
      }
    for (size_t i = size_t(m * n); i < cf.size(); ++i)
      ASSERT_TRUE(bf16 ? std::isnan(cf[i]) : ci[i] == 0x7eadbeef)
          << "kernel wrote past the end of C";
  }
}

TEST_P(GroupedPanels, EdgeBlockRowsStopAtAnUnmappedPage) {
  // A block row at M's edge takes rows past a's: where a ends at a page's end and the
  // next page is not mapped, the kernel reads none of them (a masked load there still
  // takes an address, which costs the CPU a fault-suppression assist per load) and gives
  // the product of the rows a has.
  const GroupedPanelCase &c = GetParam();
  if (!Target::host().hasFeature(c.feature))
    GTEST_SKIP() << "this CPU has no " << c.feature;
  bool bf16 = c.group == 2;
  // AMX tile loads read whole rows of a: there the binding pads a's copy to whole blocks.
  if (c.blockM >= 32 && Target::host().hasFeature(bf16 ? "amx-bf16" : "amx-int8"))
    GTEST_SKIP() << "the tile registers read a's rows past M from a padded copy";
  auto kernel = groupedPanelKernel(c);
  int64_t eb = bf16 ? 2 : 1, page = sysconf(_SC_PAGESIZE);
  int64_t m = c.blockM + 1, n = 2 * c.blockN, k = page / eb;
  // a's m rows fill whole pages, the next page unmapped.
  int64_t aBytes = m * k * eb;
  void *region = mmap(nullptr, size_t(aBytes + page), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char *>(region) + aBytes, size_t(page), PROT_NONE), 0);
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> small(-8, 7);
  std::vector<double> av(size_t(m * k)), bv(size_t(k * n));
  auto *a16 = static_cast<uint16_t *>(region);
  auto *a8 = static_cast<int8_t *>(region);
  std::vector<uint16_t> b16(size_t(k * n));
  std::vector<int8_t> b8(size_t(k * n));
  for (size_t i = 0; i < av.size(); ++i) {
    int v = small(rng);
    if (bf16)
      a16[i] = bf16Bits(float(v));
    else
      a8[i] = int8_t(v);
    av[i] = v;
  }
  for (size_t i = 0; i < bv.size(); ++i) {
    int v = small(rng);
    b16[i] = bf16Bits(float(v));
    b8[i] = int8_t(v);
    bv[i] = v;
  }
  const void *bData = bf16 ? static_cast<const void *>(b16.data()) : b8.data();
  std::vector<float> cf(size_t(m * n), NAN);
  std::vector<int32_t> ci(size_t(m * n), 0x7eadbeef);
  void *cData = bf16 ? static_cast<void *>(cf.data()) : ci.data();
  launchOnGroupedPanels(*kernel, c, region, bData, m, n, k, eb, cData);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(bf16 ? double(cf[size_t(i * n + j)]) : double(ci[size_t(i * n + j)]),
                productAt(av, bv, k, n, i, j))
          << i << ", " << j;
  munmap(region, size_t(aBytes + page));
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, GroupedPanels,
    ::testing::Values(GroupedPanelCase{"bf16", "f32", "avx512bf16", 2, 8, 32, 16, "bf16"},
                      GroupedPanelCase{"i8", "i32", "avx512vnni", 4, 8, 32, 16, "i8"},
                      GroupedPanelCase{"bf16", "f32", "avx512bf16", 2, 32, 32, 128, "bf16_tiles"},
                      GroupedPanelCase{"i8", "i32", "avx512vnni", 4, 32, 32, 128, "i8_tiles"},
                      // 64 x 64 accumulators fit only the tile registers.
                      GroupedPanelCase{"bf16", "f32", "amx-bf16", 2, 64, 64, 512,
                                       "bf16_sub_blocks"},
                      GroupedPanelCase{"i8", "i32", "amx-int8", 4, 64, 64, 512, "i8_sub_blocks"}),
    [](const ::testing::TestParamInfo<GroupedPanelCase> &info) {
      return std::string(info.param.name);
    });

} // namespace
