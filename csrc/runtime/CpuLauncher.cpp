#include "runtime/CpuLauncher.h"

#include <algorithm>
#include <stdexcept>

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
                                        const ParallelFor &parallelFor) {
  if (!kernel.cpuEntry)
    throw std::logic_error("kernel " + kernel.spec + " was not compiled for the CPU");
  if (rowBlocks < 0 || colBlocks < 0 || bands < 1 || rowBlocks * colBlocks > INT32_MAX)
    throw std::invalid_argument("bad row bands of a grid");
  CpuEntry entry = kernel.cpuEntry;
  int32_t programs = int32_t(rowBlocks * colBlocks);
  parallelFor(0, bands, 1, [&](int64_t begin, int64_t end) {
    for (int64_t band = begin; band < end; ++band) {
      int64_t first = rowBlocks * band / bands, last = rowBlocks * (band + 1) / bands;
      for (int64_t column = 0; first < last && column < colBlocks; ++column)
        entry(args, column * rowBlocks + first, column * rowBlocks + last, programs, 1, 1);
    }
  });
}

void tile::runtime::launchCpuInColumnBands(
    const LoadedKernel &kernel, void **args, int64_t rowBlocks, int64_t colBlocks, int64_t grain,
    const std::function<void(int64_t, int64_t, void **)> &prepare, const ParallelFor &parallelFor) {
  if (!kernel.cpuEntry)
    throw std::logic_error("kernel " + kernel.spec + " was not compiled for the CPU");
  if (rowBlocks < 0 || colBlocks < 0 || rowBlocks * colBlocks > INT32_MAX)
    throw std::invalid_argument("bad column bands of a grid");
  CpuEntry entry = kernel.cpuEntry;
  int32_t programs = int32_t(rowBlocks * colBlocks);
  parallelFor(0, colBlocks, std::max<int64_t>(grain, 1), [&](int64_t first, int64_t last) {
    void *own[kArgumentSlots];
    std::copy(args, args + kArgumentSlots, own);
    prepare(first, last, own);
    entry(own, first * rowBlocks, last * rowBlocks, programs, 1, 1);
  });
}
