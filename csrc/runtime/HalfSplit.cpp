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
