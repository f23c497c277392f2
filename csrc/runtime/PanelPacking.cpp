#include "runtime/PanelPacking.h"
#include "runtime/Transpose.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*, which it reports as used
// uninitialized once inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace {

/// Copies `count` runs of `Bytes` bytes: a constant size lets the compiler move each run
/// with a few vector moves instead of a call to memcpy.
template <int64_t Bytes>
void copyRuns(const char *from, int64_t fromStride, char *to, int64_t toStride, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(to + i * toStride, from + i * fromStride, Bytes);
}

void copyRuns(const char *from, int64_t fromStride, char *to, int64_t toStride, int64_t count,
              int64_t bytes) {
  switch (bytes) {
  case 32:
    return copyRuns<32>(from, fromStride, to, toStride, count);
  case 64:
    return copyRuns<64>(from, fromStride, to, toStride, count);
  case 128:
    return copyRuns<128>(from, fromStride, to, toStride, count);
  default:
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(to + i * toStride, from + i * fromStride, bytes);
  }
}

struct FreeBuffer {
  void operator()(void *p) const { std::free(p); }
};

/// Huge pages (2 MB) where the buffer spans them: a panel walk then crosses a page
/// boundary once per 2 MB instead of once per 4 KB.
constexpr int64_t kHugePage = int64_t(2) << 20;

std::unique_ptr<void, FreeBuffer> allocate(int64_t bytes) {
  int64_t alignment = bytes >= kHugePage ? kHugePage : 64;
  int64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void *p = std::aligned_alloc(size_t(alignment), size_t(rounded));
  if (!p)
    throw std::bad_alloc();
#if defined(__linux__)
  if (alignment == kHugePage)
    madvise(p, size_t(rounded), MADV_HUGEPAGE); // advice only: 4 KB pages work as well
#endif
  return std::unique_ptr<void, FreeBuffer>(p);
}

/// Element by element, for a source whose columns are not contiguous: panel by panel, a
/// band of kBandRows rows at a time, column by column down the band (a transposed b's
/// columns are its contiguous runs). The band (16 rows of a panel) stays in L1 while its
/// columns fill it: whole panels at once wrote a line per element, 2 GB/s for f32.
template <typename Element>
void packStrided(const Element *from, int64_t rowStride, int64_t colStride,
                 const tile::runtime::PanelLayout &layout, Element *to, int64_t firstPanel,
                 int64_t lastPanel) {
  constexpr int64_t kBandRows = 16;
  int64_t width = layout.width, rows = layout.rows;
  for (int64_t p = firstPanel; p < lastPanel; ++p) {
    int64_t columns = std::min(width, layout.cols - p * width);
    Element *panel = to + p * rows * width;
    for (int64_t band = 0; band < rows; band += kBandRows) {
      int64_t last = std::min(rows, band + kBandRows);
      for (int64_t j = 0; j < columns; ++j) {
        const Element *column = from + (p * width + j) * colStride;
        for (int64_t r = band; r < last; ++r)
          panel[r * width + j] = column[r * rowStride];
      }
    }
  }
}

#if defined(__x86_64__)
/// The interleave of 64 bytes of each row at a time (`Group` x 16 columns, four 16-byte
/// lanes), where the host has AVX-512BW (see interleavesIn512Bits): per lane the unpacks
/// give what the SSE2 loop does, and a transpose of the 16-byte lanes puts each column's
/// word in order. A third of the SSE2 loop's instructions; b's copy into int8 panels had
/// taken 4-5% of a 1024^3 int8 matmul. The last columns are read by masked loads (zeros
/// past `count`) where the output has `room` words for whole 64 bytes: the scalar loop had
/// taken the last panel of an int8 1000^3 matmul (40 columns) at several times a whole
/// one's cost. Returns the columns done.
template <int Group>
__attribute__((target("avx512f,avx512bw"))) int64_t interleaveRows512(const uint8_t *from,
                                                                      int64_t rowBytes,
                                                                      uint32_t *to, int64_t count,
                                                                      int64_t room) {
  constexpr int64_t kColumns = 16 * Group;
  constexpr int64_t kColumnBytes = 4 / Group;
  // (Lambdas would not take the function's target: plain statements.)
  int64_t j = 0;
  for (; j < count && j + kColumns <= room; j += kColumns) {
    const uint8_t *in = from + j * kColumnBytes;
    __mmask64 bytes =
        j + kColumns <= count ? ~__mmask64(0) : (__mmask64(1) << ((count - j) * kColumnBytes)) - 1;
    if constexpr (Group == 4) {
      __m512i r0 = _mm512_maskz_loadu_epi8(bytes, in);
      __m512i r1 = _mm512_maskz_loadu_epi8(bytes, in + rowBytes);
      __m512i r2 = _mm512_maskz_loadu_epi8(bytes, in + 2 * rowBytes);
      __m512i r3 = _mm512_maskz_loadu_epi8(bytes, in + 3 * rowBytes);
      __m512i low01 = _mm512_unpacklo_epi8(r0, r1), high01 = _mm512_unpackhi_epi8(r0, r1);
      __m512i low23 = _mm512_unpacklo_epi8(r2, r3), high23 = _mm512_unpackhi_epi8(r2, r3);
      // Lane l of w[q] holds columns 16 l + 4 q .. 16 l + 4 q + 3.
      __m512i w0 = _mm512_unpacklo_epi16(low01, low23), w1 = _mm512_unpackhi_epi16(low01, low23);
      __m512i w2 = _mm512_unpacklo_epi16(high01, high23);
      __m512i w3 = _mm512_unpackhi_epi16(high01, high23);
      __m512i t0 = _mm512_shuffle_i64x2(w0, w1, 0x44), t1 = _mm512_shuffle_i64x2(w2, w3, 0x44);
      __m512i t2 = _mm512_shuffle_i64x2(w0, w1, 0xee), t3 = _mm512_shuffle_i64x2(w2, w3, 0xee);
      _mm512_storeu_si512(to + j, _mm512_shuffle_i64x2(t0, t1, 0x88));
      _mm512_storeu_si512(to + j + 16, _mm512_shuffle_i64x2(t0, t1, 0xdd));
      _mm512_storeu_si512(to + j + 32, _mm512_shuffle_i64x2(t2, t3, 0x88));
      _mm512_storeu_si512(to + j + 48, _mm512_shuffle_i64x2(t2, t3, 0xdd));
    } else {
      static_assert(Group == 2);
      __m512i r0 = _mm512_maskz_loadu_epi8(bytes, in);
      __m512i r1 = _mm512_maskz_loadu_epi8(bytes, in + rowBytes);
      // Lane l of low holds columns 8 l .. 8 l + 3, of high 8 l + 4 .. 8 l + 7.
      __m512i low = _mm512_unpacklo_epi16(r0, r1), high = _mm512_unpackhi_epi16(r0, r1);
      _mm512_storeu_si512(to + j, _mm512_permutex2var_epi64(
                                      low, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), high));
      _mm512_storeu_si512(
          to + j + 16,
          _mm512_permutex2var_epi64(low, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), high));
    }
  }
  return std::min(j, count);
}

/// Where the 64-byte interleave runs: AMD's cores with AVX-512BW. On the AMX Xeons all
/// 512-bit shuffles take one port, and the interleave ran there at 8-10 GB/s against
/// SSE2's 15-17 (one thread, 384^2 and 512^2 int8 into 32-column panels).
bool interleavesIn512Bits() {
  static const bool fast = __builtin_cpu_supports("avx512f") &&
                           __builtin_cpu_supports("avx512bw") && __builtin_cpu_is("amd");
  return fast;
}
#endif

/// One word of `Group` consecutive rows of a column (little-endian: row r % Group at the
/// lower address), for rows that are contiguous and a whole group. x86 interleaves 16
/// columns at a time with SSE2's unpacks (the scalar loop below ran at 12 GB/s for int8
/// quads), or 64 bytes of each row at a time with AVX-512BW; the scalar loop takes the
/// rest and other hosts. `room` is the words `to` may take, past `count` too.
template <typename Element, int Group>
void interleaveRows(const Element *from, int64_t rowStride, uint32_t *to, int64_t count,
                    int64_t room) {
  static_assert(sizeof(Element) * Group == sizeof(uint32_t));
  constexpr int kBits = 8 * sizeof(Element);
  int64_t j = 0;
#if defined(__x86_64__)
  if (interleavesIn512Bits())
    j = interleaveRows512<Group>(reinterpret_cast<const uint8_t *>(from),
                                 rowStride * int64_t(sizeof(Element)), to, count, room);
#endif
#if defined(__SSE2__)
  constexpr int64_t kColumns = 16 / sizeof(Element); // one 16-byte load per row
  auto row = [&](int s) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + s * rowStride + j));
  };
  auto store = [&](int64_t word, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(to + j + word), v);
  };
  for (; j + kColumns <= count; j += kColumns) {
    if constexpr (Group == 4) {
      __m128i r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3);
      __m128i low01 = _mm_unpacklo_epi8(r0, r1), high01 = _mm_unpackhi_epi8(r0, r1);
      __m128i low23 = _mm_unpacklo_epi8(r2, r3), high23 = _mm_unpackhi_epi8(r2, r3);
      store(0, _mm_unpacklo_epi16(low01, low23));
      store(4, _mm_unpackhi_epi16(low01, low23));
      store(8, _mm_unpacklo_epi16(high01, high23));
      store(12, _mm_unpackhi_epi16(high01, high23));
    } else {
      __m128i r0 = row(0), r1 = row(1);
      store(0, _mm_unpacklo_epi16(r0, r1));
      store(4, _mm_unpackhi_epi16(r0, r1));
    }
  }
#endif
  for (; j < count; ++j) {
    uint32_t word = 0;
    for (int s = 0; s < Group; ++s)
      word |= uint32_t(from[s * rowStride + j]) << (s * kBits);
    to[j] = word;
  }
}

/// Asks for `rows` runs of `runBytes` bytes, `rowBytes` apart, to be brought into the
/// caches. A copy that walks down a panel's rows reads each from another page where the
/// rows are 4 KB or more long, and the hardware prefetchers, which follow a stream within
/// a page, leave every such read to wait for memory.
void prefetchRuns(const void *first, int64_t rowBytes, int64_t rows, int64_t runBytes) {
  constexpr int64_t kLineBytes = 64;
  const char *row = static_cast<const char *>(first);
  for (int64_t r = 0; r < rows; ++r, row += rowBytes)
    for (int64_t offset = 0; offset < runBytes; offset += kLineBytes)
      __builtin_prefetch(row + offset, /*rw=*/0, /*locality=*/3);
}

/// Panels of rows in groups (PanelLayout::group > 1), written whole: a row-major source is
/// interleaved a row of groups at a time, any other element by element. Several panels
/// side by side take each row of groups together, so that the source's rows are read in
/// runs of kPanelsAbreast panels (a panel's own run is 64 bytes of int8 at width 64, and
/// rows read a line each ran at 4 GB/s past the L2).
template <typename Element>
void packGrouped(const Element *from, int64_t rowStride, int64_t colStride,
                 const tile::runtime::PanelLayout &layout, Element *to, int64_t firstPanel,
                 int64_t lastPanel) {
  constexpr int64_t kPanelsAbreast = 8;
  // The source rows of the group kGroupsAhead groups on are asked for before each group
  // is interleaved. 2 threads, znver5, int8 32x4096x4096 (b copied into panels, each of
  // its rows a page): 2.48 ms -> 1.18 ms for 4 groups ahead (1: 1.41, 2: 1.24, 8: 1.29).
  constexpr int64_t kGroupsAhead = 4;
  int64_t width = layout.width, g = layout.group, rows = layout.rows;
  for (int64_t first = firstPanel; first < lastPanel; first += kPanelsAbreast) {
    int64_t last = std::min(first + kPanelsAbreast, lastPanel);
    for (int64_t group = 0; group < layout.groupRows(); ++group) {
      int64_t valid = std::min(g, rows - group * g);
      for (int64_t p = first; p < last; ++p) {
        int64_t columns = std::min(width, layout.cols - p * width);
        Element *out = to + p * layout.panelStride() + group * width * g;
        // Rows of groups past b's (the panel's rows are whole tiles' 16) are zeros.
        if (valid <= 0) {
          std::memset(out, 0, size_t(width * g) * sizeof(Element));
          continue;
        }
        const Element *in = from + p * width * colStride + group * g * rowStride;
        if (colStride == 1 && (group + kGroupsAhead + 1) * g <= rows)
          prefetchRuns(in + kGroupsAhead * g * rowStride, rowStride * sizeof(Element), g,
                       columns * sizeof(Element));
        if (colStride == 1 && valid == g && sizeof(Element) * g == sizeof(uint32_t)) {
          auto *words = reinterpret_cast<uint32_t *>(out);
          if constexpr (sizeof(Element) == 2)
            interleaveRows<Element, 2>(in, rowStride, words, columns, width);
          else if constexpr (sizeof(Element) == 1)
            interleaveRows<Element, 4>(in, rowStride, words, columns, width);
        } else {
          for (int64_t j = 0; j < columns; ++j)
            for (int64_t s = 0; s < g; ++s)
              out[j * g + s] = s < valid ? in[j * colStride + s * rowStride] : Element(0);
        }
        std::fill(out + columns * g, out + width * g, Element(0));
      }
    }
  }
}

/// A source whose columns are contiguous (b transposed, as a Linear's weight: its rows
/// are b's columns), each panel the transpose of its columns, a group of rows being one
/// element of it (a group of a column is contiguous there). Element by element
/// (packStrided, packGrouped) a panel ran at 2-4 GB/s; the partial last group, the rows of
/// groups past it and the columns past the matrix's are written as zeros.
void packColumns(const char *from, int64_t colStride, const tile::runtime::PanelLayout &layout,
                 char *to, int64_t firstPanel, int64_t lastPanel) {
  int64_t eb = layout.elementBytes, g = layout.group, width = layout.width;
  int64_t groupBytes = eb * g, wholeGroups = layout.rows / g, partial = layout.rows % g;
  int64_t filledGroups = wholeGroups + (partial ? 1 : 0), columnBytes = colStride * eb;
  for (int64_t p = firstPanel; p < lastPanel; ++p) {
    int64_t columns = std::min(width, layout.cols - p * width);
    const char *in = from + p * width * columnBytes;
    char *out = to + p * layout.panelStride() * eb;
    tile::runtime::transposeMatrix(in, columnBytes, columns, wholeGroups, groupBytes, out,
                                   width * groupBytes);
    if (partial) {
      char *last = out + wholeGroups * width * groupBytes;
      std::memset(last, 0, size_t(width * groupBytes));
      for (int64_t j = 0; j < columns; ++j)
        std::memcpy(last + j * groupBytes, in + j * columnBytes + wholeGroups * groupBytes,
                    size_t(partial * eb));
    }
    if (columns < width)
      for (int64_t q = 0; q < wholeGroups; ++q)
        std::memset(out + (q * width + columns) * groupBytes, 0,
                    size_t((width - columns) * groupBytes));
    std::memset(out + filledGroups * width * groupBytes, 0,
                size_t((layout.groupRows() - filledGroups) * width * groupBytes));
  }
}

/// The last panel's columns past the matrix's as zeros (panels of single rows; grouped
/// ones are written whole as they are interleaved), whichever way the others were copied.
void zeroPastTheColumns(const tile::runtime::PanelLayout &layout, char *panels) {
  int64_t eb = layout.elementBytes, width = layout.width, last = layout.panels() - 1;
  int64_t columns = layout.cols - last * width;
  if (last < 0 || columns >= width)
    return;
  char *panel = panels + last * layout.panelStride() * eb;
  for (int64_t r = 0; r < layout.rows; ++r)
    std::memset(panel + (r * width + columns) * eb, 0, size_t((width - columns) * eb));
}

/// Groups of rows are 32-bit words: the operand of the dot-product instructions.
void checkGroups(const tile::runtime::PanelLayout &layout) {
  if (layout.group > 1 && layout.elementBytes * layout.group != int64_t(sizeof(uint32_t)))
    throw std::invalid_argument("panels in groups of " + std::to_string(layout.group) +
                                " rows hold " + std::to_string(4 / layout.group) +
                                "-byte elements, got " + std::to_string(layout.elementBytes));
}

} // namespace

void *tile::runtime::threadScratch(ScratchUse use, int64_t bytes) {
  constexpr int kUses = static_cast<int>(ScratchUse::Count);
  thread_local std::unique_ptr<void, FreeBuffer> kept[kUses];
  thread_local int64_t keptBytes[kUses] = {};
  thread_local std::unique_ptr<void, FreeBuffer> once[kUses];
  int slot = static_cast<int>(use);
  once[slot].reset();
  if (bytes > kRetainedPanelBytes) {
    once[slot] = allocate(bytes);
    return once[slot].get();
  }
  if (bytes > keptBytes[slot]) {
    kept[slot].reset();
    kept[slot] = allocate(bytes);
    keptBytes[slot] = bytes;
  }
  return kept[slot].get();
}

void tile::runtime::packPanelRange(const void *source, int64_t rowStride, int64_t colStride,
                                   const PanelLayout &layout, void *panels, int64_t first,
                                   int64_t last) {
  const char *from = static_cast<const char *>(source);
  char *to = static_cast<char *>(panels);
  int64_t eb = layout.elementBytes, width = layout.width, rows = layout.rows;
  checkGroups(layout);
  if (rowStride == 1 && colStride != 1 && layout.cols > 1)
    return packColumns(from, colStride, layout, to, first, last);
  if (layout.group > 1) {
    if (eb == 2)
      packGrouped(reinterpret_cast<const uint16_t *>(from), rowStride, colStride, layout,
                  reinterpret_cast<uint16_t *>(to), first, last);
    else
      packGrouped(reinterpret_cast<const uint8_t *>(from), rowStride, colStride, layout,
                  reinterpret_cast<uint8_t *>(to), first, last);
    return;
  }
  if (colStride != 1 && layout.cols > 1) {
    switch (eb) {
    case 1:
      packStrided(reinterpret_cast<const uint8_t *>(from), rowStride, colStride, layout,
                  reinterpret_cast<uint8_t *>(to), first, last);
      break;
    case 2:
      packStrided(reinterpret_cast<const uint16_t *>(from), rowStride, colStride, layout,
                  reinterpret_cast<uint16_t *>(to), first, last);
      break;
    case 4:
      packStrided(reinterpret_cast<const uint32_t *>(from), rowStride, colStride, layout,
                  reinterpret_cast<uint32_t *>(to), first, last);
      break;
    default:
      packStrided(reinterpret_cast<const uint64_t *>(from), rowStride, colStride, layout,
                  reinterpret_cast<uint64_t *>(to), first, last);
    }
  } else {
    // A few panels side by side walk down the rows together, so that each source row is
    // read as one longer run.
    int64_t runBytes = width * eb, fromStride = rowStride * eb;
    constexpr int64_t kPanelsAbreast = 8, kRowsAtOnce = 64;
    for (int64_t group = first; group < last; group += kPanelsAbreast)
      for (int64_t row = 0; row < rows; row += kRowsAtOnce) {
        int64_t count = std::min(kRowsAtOnce, rows - row);
        for (int64_t p = group; p < std::min(group + kPanelsAbreast, last); ++p) {
          int64_t columns = std::min(width, layout.cols - p * width);
          const char *in = from + row * fromStride + p * runBytes;
          char *out = to + (p * rows + row) * runBytes;
          copyRuns(in, fromStride, out, runBytes, count,
                   columns == width ? runBytes : columns * eb);
        }
      }
  }
  if (last == layout.panels())
    zeroPastTheColumns(layout, to);
}

void tile::runtime::packPanelsInto(const void *source, int64_t rowStride, int64_t colStride,
                                   const PanelLayout &layout, int64_t first, int64_t last,
                                   void *to) {
  if (first < 0 || last > layout.panels() || first >= last)
    throw std::invalid_argument("packPanelsInto: panels [" + std::to_string(first) + ", " +
                                std::to_string(last) + ") of " + std::to_string(layout.panels()));
  // The same panels of the columns from `first`'s on, as a matrix of their own.
  PanelLayout part = layout;
  part.cols = std::min(layout.cols, last * layout.width) - first * layout.width;
  const char *from =
      static_cast<const char *>(source) + first * layout.width * colStride * layout.elementBytes;
  packPanelRange(from, rowStride, colStride, part, to, 0, last - first);
}

void tile::runtime::packPanels(const void *source, int64_t rowStride, int64_t colStride,
                               const PanelLayout &layout, void *panels,
                               const ParallelFor &parallelFor, int64_t tasks) {
  // A task copies at least kBytesPerTask: waking a thread costs a few microseconds, what a
  // copy of some 64 KB takes (b of a 128^3 int8 matmul is 16 KB). But where the launch
  // runs in several tasks, the copy runs in as many: a thread's programs (one group of
  // rows, a run of block columns) then read the panels it wrote. Written by one thread,
  // the 64 KB of panels of an int8 256^3 matmul came to the other core's programs from the
  // first core's cache at every call: each thread's half of the programs took 16 us where
  // one thread took 18 for all (2-core Xeon VM); with a thread's own panels, 11-12 us.
  constexpr int64_t kBytesPerTask = int64_t(64) << 10;
  int64_t grain = std::max<int64_t>(
      1, kBytesPerTask / std::max<int64_t>(1, layout.panelStride() * layout.elementBytes));
  if (tasks > 1)
    grain = std::min(grain, std::max<int64_t>(1, (layout.panels() + tasks - 1) / tasks));
  checkGroups(layout);
  parallelFor(0, layout.panels(), grain, [&](int64_t first, int64_t last) {
    packPanelRange(source, rowStride, colStride, layout, panels, first, last);
  });
}

void tile::runtime::copyRows(const void *from, int64_t fromStride, int64_t rows, int64_t rowBytes,
                             void *to, int64_t toStride, const ParallelFor &parallelFor) {
  constexpr int64_t kBytesPerTask = int64_t(64) << 10;
  const char *in = static_cast<const char *>(from);
  char *out = static_cast<char *>(to);
  parallelFor(0, rows, std::max<int64_t>(1, kBytesPerTask / std::max<int64_t>(rowBytes, 1)),
              [&](int64_t first, int64_t last) {
                for (int64_t r = first; r < last; ++r) {
                  std::memcpy(out + r * toStride, in + r * fromStride, size_t(rowBytes));
                  std::memset(out + r * toStride + rowBytes, 0, size_t(toStride - rowBytes));
                }
              });
}
