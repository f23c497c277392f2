#include "runtime/HalfSplit.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*, which it reports as used
// uninitialized once inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

using namespace tile;

namespace {

/// The float32 value of float16 bits.
float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else { // subnormal: normalize
    int shift = 0;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

/// bfloat16 bits of a finite float32, rounded to nearest even (as vcvtneps2bf16 does).
uint16_t floatToBfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float bfloat16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

bool finiteHalf(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

/// One row, element by element: hi and lo terms into `hi` and `lo`; false at a
/// non-finite element.
bool splitRowScalar(const uint16_t *source, int64_t cols, int64_t colStride, uint16_t *hi,
                    uint16_t *lo) {
  for (int64_t j = 0; j < cols; ++j) {
    uint16_t h = source[j * colStride];
    if (!finiteHalf(h))
      return false;
    float x = halfToFloat(h);
    hi[j] = floatToBfloat16(x);
    lo[j] = floatToBfloat16(x - bfloat16ToFloat(hi[j]));
  }
  return true;
}

/// The same, 16 unit-stride elements at a time.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) bool
splitRowVector(const uint16_t *source, int64_t cols, uint16_t *hi, uint16_t *lo) {
  const __m256i exponent = _mm256_set1_epi16(0x7c00);
  for (int64_t j = 0; j < cols; j += 16) {
    __mmask16 lanes = cols - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (cols - j)) - 1);
    __m256i halves = _mm256_maskz_loadu_epi16(lanes, source + j);
    if (_mm256_mask_cmpeq_epi16_mask(lanes, _mm256_and_si256(halves, exponent), exponent))
      return false;
    __m512 x = _mm512_cvtph_ps(halves);
    __m256bh high = _mm512_cvtneps_pbh(x);
    __m512 highAsFloat = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(high)), 16));
    __m256bh low = _mm512_cvtneps_pbh(_mm512_sub_ps(x, highAsFloat));
    _mm256_mask_storeu_epi16(hi + j, lanes, reinterpret_cast<__m256i>(high));
    _mm256_mask_storeu_epi16(lo + j, lanes, reinterpret_cast<__m256i>(low));
  }
  return true;
}

/// Rows `even` and `odd` (`width` elements each) side by side, element j of each at
/// 2j and 2j + 1 of `out`: two rows of k as a panel in groups of 2 holds them.
void interleaveScalar(const uint16_t *even, const uint16_t *odd, int64_t width, uint16_t *out) {
  for (int64_t j = 0; j < width; ++j) {
    out[2 * j] = even[j];
    out[2 * j + 1] = odd[j];
  }
}

/// The same, 16 elements of each row at a time (`width` a multiple of 16).
__attribute__((target("avx512f,avx512bw"))) void
interleaveVector(const uint16_t *even, const uint16_t *odd, int64_t width, uint16_t *out) {
  const __m512i pairs = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40,
                                         8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  for (int64_t j = 0; j < width; j += 16) {
    __m512i x =
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(even + j)));
    __m512i y =
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(odd + j)));
    _mm512_storeu_si512(out + 2 * j, _mm512_permutex2var_epi16(x, pairs, y));
  }
}

bool hostSplitsInVectors() {
  static const bool vectors = __builtin_cpu_supports("avx512bw") &&
                              __builtin_cpu_supports("avx512vl") &&
                              __builtin_cpu_supports("avx512bf16");
  return vectors;
}

} // namespace

int64_t runtime::halfSplitTerms(int64_t k) {
  constexpr int64_t kSumLongEnoughForThree = 128;
  return k >= kSumLongEnoughForThree ? 3 : 4;
}

int64_t runtime::halfSplitTermLength(int64_t k) {
  constexpr int64_t kTileStep = 32;
  return (k + kTileStep - 1) / kTileStep * kTileStep;
}

runtime::HalfSplitPlacement runtime::placeRowsOfA(uint16_t *out, int64_t k, int64_t terms) {
  int64_t length = halfSplitTermLength(k);
  HalfSplitPlacement placement{out, terms * length, {0, 2 * length}, {length}, length, 0};
  if (terms == 4)
    placement.loOffsets.push_back(3 * length);
  return placement;
}

runtime::HalfSplitPlacement runtime::placeRowsOfB(uint16_t *out, int64_t k, int64_t n,
                                                  int64_t terms) {
  int64_t length = halfSplitTermLength(k);
  HalfSplitPlacement placement{out, n, {0, length * n}, {2 * length * n}, 0, length - k};
  if (terms == 4)
    placement.loOffsets.push_back(3 * length * n);
  return placement;
}

bool runtime::splitHalves(const uint16_t *source, int64_t rows, int64_t cols, int64_t rowStride,
                          int64_t colStride, const HalfSplitPlacement &placement,
                          const ParallelFor &parallelFor) {
  if (placement.hiOffsets.empty() || placement.loOffsets.empty())
    throw std::invalid_argument("splitHalves: a placement needs a hi and a lo offset");
  std::atomic<bool> finite{true};
  // A task splits at least kElementsPerTask: waking a thread costs a few microseconds.
  constexpr int64_t kElementsPerTask = int64_t(32) << 10;
  int64_t grain = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(cols, 1));
  bool vectors = colStride == 1 && hostSplitsInVectors();
  int64_t padding = std::max<int64_t>(placement.termLength - cols, 0);
  auto zeros = [&](uint16_t *at, int64_t count) {
    std::memset(at, 0, size_t(count) * sizeof(uint16_t));
  };
  parallelFor(0, rows + placement.padRows, grain, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last && finite.load(std::memory_order_relaxed); ++r) {
      uint16_t *row = placement.out + r * placement.rowPitch;
      if (r >= rows) {
        for (const auto *offsets : {&placement.hiOffsets, &placement.loOffsets})
          for (int64_t offset : *offsets)
            zeros(row + offset, cols + padding);
        continue;
      }
      uint16_t *hi = row + placement.hiOffsets.front(), *lo = row + placement.loOffsets.front();
      const uint16_t *from = source + r * rowStride;
      bool ok = vectors ? splitRowVector(from, cols, hi, lo)
                        : splitRowScalar(from, cols, colStride, hi, lo);
      if (!ok) {
        finite.store(false, std::memory_order_relaxed);
        return;
      }
      zeros(hi + cols, padding);
      zeros(lo + cols, padding);
      for (size_t i = 1; i < placement.hiOffsets.size(); ++i)
        std::memcpy(row + placement.hiOffsets[i], hi, (cols + padding) * sizeof(uint16_t));
      for (size_t i = 1; i < placement.loOffsets.size(); ++i)
        std::memcpy(row + placement.loOffsets[i], lo, (cols + padding) * sizeof(uint16_t));
    }
  });
  return finite.load();
}

bool runtime::splitHalvesIntoPanels(const uint16_t *source, int64_t k, int64_t n, int64_t rowStride,
                                    int64_t colStride, int64_t terms, const PanelLayout &layout,
                                    uint16_t *panels, const ParallelFor &parallelFor) {
  int64_t length = halfSplitTermLength(k);
  if (layout.group != 2 || layout.elementBytes != 2 || layout.rows != terms * length ||
      layout.cols != n || (terms != 3 && terms != 4))
    throw std::invalid_argument("splitHalvesIntoPanels: the panels must hold the " +
                                std::to_string(terms) + " terms of a " + std::to_string(k) + " x " +
                                std::to_string(n) + " b in bfloat16 pairs");
  // Where each term starts among the panel's rows (placeRowsOfB's order).
  std::vector<int64_t> hiRows = {0, length}, loRows = {2 * length};
  if (terms == 4)
    loRows.push_back(3 * length);
  int64_t width = layout.width, panelStride = layout.panelStride();
  bool vectors = colStride == 1 && width % 16 == 0 && hostSplitsInVectors();
  std::atomic<bool> finite{true};
  // A task writes whole panels, at least kElementsPerTask of them (as splitHalves).
  constexpr int64_t kElementsPerTask = int64_t(32) << 10;
  int64_t grain = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(panelStride, 1));
  parallelFor(0, layout.panels(), grain, [&](int64_t first, int64_t last) {
    // Two source rows' hi and lo terms over one panel's columns, zeros past n.
    std::vector<uint16_t> split(4 * width);
    uint16_t *hi[2] = {split.data(), split.data() + width};
    uint16_t *lo[2] = {split.data() + 2 * width, split.data() + 3 * width};
    for (int64_t p = first; p < last && finite.load(std::memory_order_relaxed); ++p) {
      uint16_t *panel = panels + p * panelStride;
      int64_t cols = std::min(width, n - p * width);
      if (cols < width)
        std::fill(split.begin(), split.end(), uint16_t(0));
      for (int64_t r = 0; r < k; r += 2) {
        for (int64_t i = 0; i < 2; ++i) {
          if (r + i >= k) {
            std::fill(hi[i], hi[i] + width, uint16_t(0));
            std::fill(lo[i], lo[i] + width, uint16_t(0));
            continue;
          }
          const uint16_t *from = source + (r + i) * rowStride + p * width * colStride;
          bool ok = vectors ? splitRowVector(from, cols, hi[i], lo[i])
                            : splitRowScalar(from, cols, colStride, hi[i], lo[i]);
          if (!ok) {
            finite.store(false, std::memory_order_relaxed);
            return;
          }
        }
        for (auto [rows, rowsOfTerm] : {std::pair{&hiRows, hi}, std::pair{&loRows, lo}})
          for (int64_t start : *rows) {
            uint16_t *out = panel + (start + r) / 2 * 2 * width;
            if (vectors)
              interleaveVector(rowsOfTerm[0], rowsOfTerm[1], width, out);
            else
              interleaveScalar(rowsOfTerm[0], rowsOfTerm[1], width, out);
          }
      }
      // Each term's rows past k, and the panel's past its terms (up to whole tiles): zeros.
      int64_t pairsOfK = (k + 1) / 2, pairsOfTerm = length / 2;
      for (const auto *rows : {&hiRows, &loRows})
        for (int64_t start : *rows)
          std::fill(panel + (start / 2 + pairsOfK) * 2 * width,
                    panel + (start / 2 + pairsOfTerm) * 2 * width, uint16_t(0));
      std::fill(panel + terms * pairsOfTerm * 2 * width, panel + panelStride, uint16_t(0));
    }
  });
  return finite.load();
}
