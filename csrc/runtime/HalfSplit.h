// float16 matrices as sums of bfloat16 terms, for hosts whose matrix tiles multiply
// bfloat16 but not float16 (AMX-BF16 without AMX-FP16: Sapphire and Emerald Rapids).
//
// A float16 value has 11 significant bits, a bfloat16 8: x = hi + lo exactly, with
// hi = bf16(x) and lo = bf16(x - hi) (|lo| <= 2^-8 |x|). So a . b = ah.bh + al.bh + ah.bl
// + al.bl, each product exact in float32; the tiles sum them as one bfloat16 dot over a
// k three or four times as long: a's rows [ah | al | ah (| al)] against b's rows
// [bh ; bh ; bl (; bl)]. Dropping al.bl changes each product by at most 2^-16 of
// |a||b|, within float32's rounding of a sum of 128 or more terms; shorter sums keep it.
#ifndef TILE_RUNTIME_HALFSPLIT_H
#define TILE_RUNTIME_HALFSPLIT_H

#include "runtime/CpuLauncher.h"
#include "runtime/PanelPacking.h"

#include <cstdint>
#include <vector>

namespace tile::runtime {

/// Products per element pair that a float16 dot of length `k` takes as bfloat16 terms:
/// 3 from k = 128 on, else 4 (every product).
int64_t halfSplitTerms(int64_t k);

/// The k of each term: `k` rounded up to whole tile steps (32 bfloat16, 64 bytes), the
/// padding zeros. a's split rows then lie whole cache lines apart (a tile row that
/// straddles two lines costs both, a third of a 512x512x500 int8 matmul's speed), and the
/// dot has no partial step to stage.
int64_t halfSplitTermLength(int64_t k);

/// Where each source row's terms go: its hi and lo rows (`cols` elements each, then zeros
/// up to `termLength` where that is longer) at these element offsets from `out` + row *
/// rowPitch; the `padRows` rows after the source's last get zeros at every offset.
struct HalfSplitPlacement {
  uint16_t *out = nullptr;
  int64_t rowPitch = 0;
  std::vector<int64_t> hiOffsets, loOffsets;
  int64_t termLength = 0, padRows = 0;
};

/// a (m x k) as [ah | al | ah (| al)], each term halfSplitTermLength(k) long.
HalfSplitPlacement placeRowsOfA(uint16_t *out, int64_t k, int64_t terms);
/// b (k x n) as [bh ; bh ; bl (; bl)], each term halfSplitTermLength(k) rows.
HalfSplitPlacement placeRowsOfB(uint16_t *out, int64_t k, int64_t n, int64_t terms);

/// Splits the float16 matrix `source` (rows x cols, strides in elements) into bfloat16 hi
/// and lo terms at `placement`, over `parallelFor`'s threads. Returns false where some
/// element is not finite: an infinity's terms (inf and 0) would give inf * 0 = NaN where
/// the float16 product is infinite, so such calls take another path (the outputs are
/// then left partly written).
bool splitHalves(const uint16_t *source, int64_t rows, int64_t cols, int64_t rowStride,
                 int64_t colStride, const HalfSplitPlacement &placement,
                 const ParallelFor &parallelFor = serialFor);

/// b (k x n, strides in elements) as placeRowsOfB's terms [bh ; bh ; bl (; bl)], written
/// straight into the panels of `layout` (terms * halfSplitTermLength(k) rows, n columns,
/// bfloat16 in groups of 2 rows, as the matrix tiles read b) at `panels`: the split and
/// the packing in one pass, where splitting into rows and packing those moved the terms
/// twice more. Returns false where some element is not finite (as splitHalves).
bool splitHalvesIntoPanels(const uint16_t *source, int64_t k, int64_t n, int64_t rowStride,
                           int64_t colStride, int64_t terms, const PanelLayout &layout,
                           uint16_t *panels, const ParallelFor &parallelFor = serialFor);

} // namespace tile::runtime

#endif
