#ifndef TILE_RUNTIME_CPULAUNCHER_H
#define TILE_RUNTIME_CPULAUNCHER_H

#include "runtime/LoadedKernel.h"

#include <cstdint>
#include <functional>

namespace tile::runtime {

struct Grid {
  int32_t x = 1, y = 1, z = 1;
  int64_t count() const { return int64_t(x) * y * z; }
};

/// Runs body(begin, end) over sub-ranges of [begin, end) of at least `grain` items,
/// possibly in parallel. The torch binding passes at::parallel_for.
using ParallelFor = std::function<void(int64_t begin, int64_t end, int64_t grain,
                                       const std::function<void(int64_t, int64_t)> &body)>;

/// A ParallelFor that runs everything on the calling thread.
void serialFor(int64_t begin, int64_t end, int64_t grain,
               const std::function<void(int64_t, int64_t)> &body);

/// Runs every program instance of `grid`; `grain` program instances at least per task.
/// args[i] points at the value of the kernel's i-th argument.
void launchCpu(const LoadedKernel &kernel, void **args, Grid grid, int64_t grain,
               const ParallelFor &parallelFor = serialFor);

/// Runs a grid that is one group of the grouped order (program n * rowBlocks + m computes
/// block row m of block column n) as `bands` tasks of consecutive block rows, each over
/// every block column: a task then reads only its rows of a. Where a was just written by
/// the same threads in the same bands (the float16 path's float32 copy), each reads what
/// its own core's cache holds; split by columns, each would read all of a, half of it
/// from the other core's.
/// The grid of a matmul kernel over rowBlocks x colBlocks blocks, block rows fastest:
/// (rowBlocks, colBlocks) where the kernel takes its block from a 2-D grid (`blockGrid`,
/// its grid_2d knob), else one id per program (the same programs in the same order).
inline Grid matmulGrid(int64_t rowBlocks, int64_t colBlocks, bool blockGrid) {
  if (blockGrid)
    return {int32_t(rowBlocks), int32_t(colBlocks), 1};
  return {int32_t(rowBlocks * colBlocks), 1, 1};
}

/// `blockGrid`: as matmulGrid's.
void launchCpuInRowBands(const LoadedKernel &kernel, void **args, int64_t rowBlocks,
                         int64_t colBlocks, int64_t bands, const ParallelFor &parallelFor,
                         bool blockGrid = false);

/// Runs a grid that is one group of the grouped order (program n * rowBlocks + m computes
/// block row m of block column n) as tasks of consecutive programs, at least `grain` each,
/// a block column at a time. Each task first calls `prepare(args, firstRow, lastRow)` on
/// a copy of the kArgumentSlots argument pointers of its own, which it may point at data
/// it writes for itself (a copy of a in its own core's cache): its programs run only block
/// rows [firstRow, lastRow) (every row unless they lie inside one column). Before a column's
/// programs run, `writeColumns(first, last)` has run once over it (the columns' panels of b): each
/// task claims the columns of its range that no other task has, writes them, runs them, and runs
/// last the one where the tasks' split falls inside a column (5 columns on 2 threads), once the
/// task that claimed it has written it. No barrier separates the writes from the programs, and no
/// thread waits for a whole column's share of the work.
///
/// `writeColumns(first, last, own)` writes where every task may read (`own` null), or,
/// given the task's own argument pointers, where the task alone reads: it may point them
/// at a buffer of its own. Where `columnsPerWrite` > 0, the columns that lie whole inside
/// a task's programs (no other task runs any of them) are written so, that many at a
/// time, each run right after its write, while it is in the core's cache.
constexpr int kArgumentSlots = 24;
void launchCpuInColumnBands(const LoadedKernel &kernel, void **args, int64_t rowBlocks,
                            int64_t colBlocks, int64_t grain,
                            const std::function<void(void **, int64_t, int64_t)> &prepare,
                            const std::function<void(int64_t, int64_t, void **)> &writeColumns,
                            int64_t columnsPerWrite, const ParallelFor &parallelFor,
                            bool blockGrid = false);

} // namespace tile::runtime

#endif
