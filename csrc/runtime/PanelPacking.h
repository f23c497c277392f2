// b packed into panels for the CPU microkernel: each block column of b (BLOCK_N columns)
// copied into its own contiguous run of K rows, so that a program reads its panel front
// to back. Where b's rows lie a page or more apart, every row the microkernel loads is
// otherwise a TLB miss, and rows a multiple of 4 KB apart evict each other from the
// caches; MKL and oneDNN pack b for the same reason.
#ifndef TILE_RUNTIME_PANELPACKING_H
#define TILE_RUNTIME_PANELPACKING_H

#include "runtime/CpuLauncher.h"

#include <cstdint>

namespace tile::runtime {

/// A rows x cols matrix as panels of `width` columns: panel p
/// holds columns [p * width, (p + 1) * width) of every row, row r at element
/// (p * rows + r) * width. The last panel's columns past `cols` are zeros: the kernel
/// reads a panel at N's edge as a whole one (its store alone masks those columns).
///
/// With `group` g > 1, g consecutive rows of a column lie side by side, the operand
/// layout of x86's dot-product instructions (vdpbf16ps: pairs of bf16; vpdpbusd: quads
/// of int8): element (r, j) of panel p is at p * panelStride() + ((r / g) * width + j) * g
/// + r % g. Such panels are written whole: zeros past `rows` (up to a multiple of 16
/// rows of groups, 64 bytes of k: what one AMX tile register takes) and past `cols` (up to
/// a multiple of width), so that the kernel reads whole rows and tiles without masks.
struct PanelLayout {
  int64_t rows = 0, cols = 0, width = 1, elementBytes = 1, group = 1;

  int64_t panels() const { return (cols + width - 1) / width; }
  /// Rows of groups: rows / group rounded up, and for groups to whole tiles (16 rows).
  int64_t groupRows() const {
    int64_t groups = (rows + group - 1) / group;
    return group > 1 ? (groups + kTileGroupRows - 1) / kTileGroupRows * kTileGroupRows : groups;
  }
  static constexpr int64_t kTileGroupRows = 16;
  /// Elements from one panel to the next: what the kernel takes as b's column stride.
  int64_t panelStride() const { return groupRows() * group * width; }
  int64_t bytes() const { return panels() * panelStride() * elementBytes; }
};

/// Copies `source` (strides in elements, any layout: a transposed b is packed in the
/// same pass) into `panels` (layout.bytes() of them), over `parallelFor`'s threads, in at
/// least `tasks` tasks where there are as many panels: the launch that reads the panels
/// passes its own tasks, so that each thread writes the panels its programs read.
void packPanels(const void *source, int64_t rowStride, int64_t colStride, const PanelLayout &layout,
                void *panels, const ParallelFor &parallelFor = serialFor, int64_t tasks = 1);

/// The panels [first, last) of packPanels' copy, on the calling thread (the last panel's
/// zeros past the matrix's columns with it): a part of a copy that a caller splits itself.
void packPanelRange(const void *source, int64_t rowStride, int64_t colStride,
                    const PanelLayout &layout, void *panels, int64_t first, int64_t last);

/// The panels [first, last) of packPanels' copy written from the start of `to` (panel
/// `first` at `to`), a buffer of (last - first) * panelStride() elements: a task's own
/// copy of the panels it alone reads.
void packPanelsInto(const void *source, int64_t rowStride, int64_t colStride,
                    const PanelLayout &layout, int64_t first, int64_t last, void *to);

/// Copies `rows` runs of `rowBytes` bytes, `fromStride` bytes apart, to `to`, `toStride`
/// bytes apart, each followed by zeros up to the next, over `parallelFor`'s threads.
void copyRows(const void *from, int64_t fromStride, int64_t rows, int64_t rowBytes, void *to,
              int64_t toStride, const ParallelFor &parallelFor = serialFor);

/// What a thread's scratch buffer holds during a call: b's panels, the converted copies
/// (float32, or bfloat16 terms) of a float16 call's a and b, a's rows moved onto whole
/// cache lines, a float16 call's transposed a and b copied to rows, or the panels a
/// launch's task writes for itself (packPanelsInto).
/// - ProductTransposed: c^T of a call run as the transposed product, which the caller
///   transposes back into c at once; ProductInAccumulator: that c in the accumulator's
///   dtype, before its bias, leaky_relu and rounding. (Fresh allocations of them had
///   faulted in their pages again on every call.)
/// - UnsignedAOffsets: an int8 call's bias with b's column sums taken off (ColumnSums.h).
enum class ScratchUse {
  Panels,
  FloatA,
  FloatB,
  AlignedA,
  RowsOfHalvesA,
  RowsOfHalvesB,
  OwnPanels,
  ProductTransposed,
  ProductInAccumulator,
  UnsignedAOffsets,
  Count ///< of the uses above: keep it last
};

/// A buffer of at least `bytes` for the calling thread's `use`, valid until its next call
/// for the same use. Buffers up to kRetainedPanelBytes are kept for the next call: a
/// fresh allocation of a few MB is zero-filled by the OS page by page on first touch,
/// which cost more than the copy itself (2048^3 bf16: about 7% of the whole call).
void *threadScratch(ScratchUse use, int64_t bytes);
inline void *panelScratch(int64_t bytes) { return threadScratch(ScratchUse::Panels, bytes); }

constexpr int64_t kRetainedPanelBytes = int64_t(64) << 20;

} // namespace tile::runtime

#endif
