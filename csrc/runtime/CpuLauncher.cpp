#include "runtime/CpuLauncher.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

using namespace tile::runtime;

void tile::runtime::serialFor(int64_t begin, int64_t end, int64_t,
                              const std::function<void(int64_t, int64_t)> &body) {
  if (begin < end)
    body(begin, end);
}

void tile::runtime::launchCpu(const LoadedKernel &kernel, void **args, Grid grid, int64_t grain,
                              const ParallelFor &parallelFor) {
  if (!kernel.cpuEntry)
    throw std::logic_error("kernel " + kernel.spec + " was not compiled for the CPU");
  if (grid.x < 0 || grid.y < 0 || grid.z < 0)
    throw std::invalid_argument("negative grid size");
  CpuEntry entry = kernel.cpuEntry;
  parallelFor(0, grid.count(), std::max<int64_t>(grain, 1), [&](int64_t begin, int64_t end) {
    entry(args, begin, end, grid.x, grid.y, grid.z);
  });
}

void tile::runtime::launchCpuInRowBands(const LoadedKernel &kernel, void **args, int64_t rowBlocks,
                                        int64_t colBlocks, int64_t bands,
                                        const ParallelFor &parallelFor, bool blockGrid) {
  if (!kernel.cpuEntry)
    throw std::logic_error("kernel " + kernel.spec + " was not compiled for the CPU");
  if (rowBlocks < 0 || colBlocks < 0 || bands < 1 || rowBlocks * colBlocks > INT32_MAX)
    throw std::invalid_argument("bad row bands of a grid");
  CpuEntry entry = kernel.cpuEntry;
  Grid grid = matmulGrid(rowBlocks, colBlocks, blockGrid);
  parallelFor(0, bands, 1, [&](int64_t begin, int64_t end) {
    for (int64_t band = begin; band < end; ++band) {
      int64_t first = rowBlocks * band / bands, last = rowBlocks * (band + 1) / bands;
      for (int64_t column = 0; first < last && column < colBlocks; ++column)
        entry(args, column * rowBlocks + first, column * rowBlocks + last, grid.x, grid.y, grid.z);
    }
  });
}

void tile::runtime::launchCpuInColumnBands(
    const LoadedKernel &kernel, void **args, int64_t rowBlocks, int64_t colBlocks, int64_t grain,
    const std::function<void(void **, int64_t, int64_t)> &prepare,
    const std::function<void(int64_t, int64_t, void **)> &writeColumns, int64_t columnsPerWrite,
    const ParallelFor &parallelFor, bool blockGrid) {
  if (!kernel.cpuEntry)
    throw std::logic_error("kernel " + kernel.spec + " was not compiled for the CPU");
  if (rowBlocks < 1 || colBlocks < 0 || rowBlocks * colBlocks > INT32_MAX)
    throw std::invalid_argument("bad column bands of a grid");
  CpuEntry entry = kernel.cpuEntry;
  int64_t programs = rowBlocks * colBlocks;
  Grid grid = matmulGrid(rowBlocks, colBlocks, blockGrid);
  // Per column, the task that claimed it (its first program + 1; 0: none yet) and its
  // phase. A task claims the unclaimed columns of its range and writes them before it
  // runs any program or waits for anything; it then runs its own columns, and last those
  // another task claimed, waiting for any still being written. A wait is thus only ever on
  // a write that waits on nothing: no order of the tasks, nor one thread running them all,
  // can deadlock.
  enum : int64_t { kWriting = 1, kWritten = 2, kFailed = 3 };
  thread_local std::unique_ptr<std::atomic<int64_t>[]> kept;
  thread_local int64_t keptColumns = 0;
  if (colBlocks > keptColumns) {
    kept.reset(new std::atomic<int64_t>[size_t(colBlocks)]);
    keptColumns = colBlocks;
  }
  std::atomic<int64_t> *state = kept.get();
  for (int64_t c = 0; c < colBlocks; ++c)
    state[c].store(0, std::memory_order_relaxed);
  parallelFor(0, programs, std::max<int64_t>(grain, 1), [&](int64_t first, int64_t last) {
    int64_t me = (first + 1) << 2, firstColumn = first / rowBlocks;
    int64_t lastColumn = (last + rowBlocks - 1) / rowBlocks;
    auto mine = [&](int64_t c) {
      return (state[c].load(std::memory_order_acquire) & ~int64_t(3)) == me;
    };
    for (int64_t c = firstColumn; c < lastColumn; ++c) {
      int64_t none = 0;
      state[c].compare_exchange_strong(none, me | kWriting, std::memory_order_acq_rel);
    }
    // The columns no other task runs, where they are written for this task alone.
    int64_t ownFrom = lastColumn, ownTo = lastColumn;
    if (columnsPerWrite > 0) {
      ownFrom = (first + rowBlocks - 1) / rowBlocks;
      ownTo = std::max(ownFrom, last / rowBlocks);
    }
    auto shared = [&](int64_t c) { return mine(c) && (c < ownFrom || c >= ownTo); };
    // Each run of claimed columns that others may read in one write (several panels
    // abreast read b's rows in longer runs), before any program: another task may wait
    // for them.
    for (int64_t c = firstColumn; c < lastColumn;) {
      if (!shared(c)) {
        ++c;
        continue;
      }
      int64_t end = c + 1;
      while (end < lastColumn && shared(end))
        ++end;
      try {
        writeColumns(c, end, nullptr);
      } catch (...) {
        for (int64_t f = c; f < lastColumn; ++f)
          if (mine(f))
            state[f].store(me | kFailed, std::memory_order_release);
        throw;
      }
      for (int64_t w = c; w < end; ++w)
        state[w].store(me | kWritten, std::memory_order_release);
      c = end;
    }
    void *own[kArgumentSlots];
    std::copy(args, args + kArgumentSlots, own);
    // The block rows this task's programs run: part of one column's, or every row.
    int64_t firstRow = first % rowBlocks, lastRow = (last - 1) % rowBlocks + 1;
    if (last - first >= rowBlocks || firstRow >= lastRow)
      firstRow = 0, lastRow = rowBlocks;
    prepare(own, firstRow, lastRow);
    auto runWith = [&](void **arguments, int64_t c) {
      entry(arguments, std::max(first, c * rowBlocks), std::min(last, (c + 1) * rowBlocks), grid.x,
            grid.y, grid.z);
    };
    auto run = [&](int64_t c) { runWith(own, c); };
    // No other task waits for these. Their writes may repoint a copy of the arguments.
    for (int64_t c = ownFrom; c < ownTo;) {
      int64_t end = std::min(ownTo, c + columnsPerWrite);
      void *alone[kArgumentSlots];
      std::copy(own, own + kArgumentSlots, alone);
      writeColumns(c, end, alone);
      for (; c < end; ++c)
        runWith(alone, c);
    }
    for (int64_t c = firstColumn; c < lastColumn; ++c)
      if (shared(c))
        run(c);
    for (int64_t c = firstColumn; c < lastColumn; ++c) {
      if (mine(c))
        continue;
      int64_t seen;
      while (((seen = state[c].load(std::memory_order_acquire)) & 3) == kWriting)
        std::this_thread::yield();
      if ((seen & 3) == kFailed)
        throw std::runtime_error("the operands of block column " + std::to_string(c) +
                                 " could not be written");
      run(c);
    }
  });
}
