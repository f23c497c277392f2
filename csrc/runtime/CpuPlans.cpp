#include "runtime/CpuPlans.h"

#include "tile/Target/CpuArch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

tile::runtime::LaunchPlan tile::runtime::cpuMatmulPlan(std::shared_ptr<const LoadedKernel> kernel,
                                                       const ops::KernelSpec &spec,
                                                       const Target &target, int64_t programs,
                                                       int64_t m, int64_t k) {
  // A program computes BLOCK_M x BLOCK_N x K multiply-adds; tasks of at least 512K of
  // them pay for a thread on the vector units (2-core AMX Xeon, float32 against MKL,
  // three alternations: 96^3, 884K multiply-adds, 0.74-0.77x on one thread -> 1.09-1.11x
  // on two; 72^3, 373K, stays on one: two had lost, 0.71-0.80 -> 0.65-0.70x). The tile
  // registers (AMX) run 8 times as many per cycle as the vector units, and their tasks
  // take 8M: a 128^3 int8 matmul (16 programs of 32 x 32) took 12 us on 2 threads of a
  // Xeon and 10.5 us on one.
  //
  // On the vector units a result's store counts as 12 multiply-adds: at small K the
  // stores are the work (an outer product, K = 1, is all stores), and a grain of
  // multiply-adds alone had left 50K-element results to one thread (znver5, 2 threads,
  // float32 in one process, 0 -> 12: 63x777x1 7.5 -> 5.3 us (MKL 3.5), 200x777x1 12.9 ->
  // 8.9 (8.9), 256x256x1 6.1 -> 4.7, 64x128x64 5.3 -> 4.4; int8 256x256x8 6.2 -> 5.0;
  // bf16 200x777x2 8.9 -> 6.6; 300x100x1 3.8 either way, where 16 had split it and lost).
  constexpr int64_t kStoreAsMultiplyAdds = 12;
  int64_t blockM = spec.config.at("BLOCK_M");
  auto packed = spec.config.find("packed_b");
  int64_t group = packed != spec.config.end() ? packed->second : 0;
  bool onTiles = group > 1 && hasCpuMatrixTiles(target, spec.dtypes.at(0));
  int64_t perResult = std::max<int64_t>(k, 1) + (onTiles ? 0 : kStoreAsMultiplyAdds);
  int64_t perProgram = std::max<int64_t>(1, blockM * spec.config.at("BLOCK_N") * perResult);
  int64_t perTask = onTiles ? int64_t(8) << 20 : int64_t(512) << 10;
  int64_t rowBlocks = (m + blockM - 1) / blockM;
  bool oneGroup = rowBlocks <= spec.config.at("GROUP_M");
  bool blockGrid = spec.config.count("grid_2d") && spec.config.at("grid_2d") != 0;
  if (blockGrid && !oneGroup)
    throw std::logic_error("kernel " + spec.str() + " takes a 2-D grid of blocks, but its " +
                           std::to_string(rowBlocks) + " block rows make more than one group");
  return LaunchPlan{std::move(kernel),
                    programs,
                    std::max<int64_t>(1, perTask / perProgram),
                    group ? spec.config.at("BLOCK_N") : 0,
                    std::max<int64_t>(group, 1),
                    oneGroup ? rowBlocks : 0,
                    blockM,
                    blockGrid};
}

tile::runtime::LaunchPlan
tile::runtime::cpuVectorAddPlan(std::shared_ptr<const LoadedKernel> kernel,
                                const ops::KernelSpec &spec, int64_t programs) {
  // Each task gets at least 32K elements (ATen's own grain): below that, threads cost
  // more than they give.
  constexpr int64_t kElementsPerTask = int64_t(1) << 15;
  return LaunchPlan{std::move(kernel), programs,
                    std::max<int64_t>(1, kElementsPerTask / spec.config.at("BLOCK_SIZE"))};
}
