// tile::matmul, tile::matmul_leaky_relu and tile::matmul_leaky_relu_backward on the CPU:
// one kernel compiled on first call per (dtypes, config, target) that reads both operands
// through their strides.
#include "AtenParallelFor.h"
#include "MatmulCall.h"
#include "MatmulTuning.h"
#include "runtime/CompileAndLoad.h"
#include "runtime/CpuLauncher.h"
#include "runtime/CpuPlans.h"
#include "runtime/DeviceTarget.h"
#include "runtime/HalfSplit.h"
#include "runtime/KernelCache.h"
#include "runtime/LaunchPlans.h"
#include "runtime/MatmulArguments.h"
#include "runtime/PanelPacking.h"
#include "runtime/Transpose.h"
#include "tile/Target/CpuArch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstdint>
#include <future>
#include <optional>
#include <system_error>

namespace {

/// Operands that are not written yet (float16's bfloat16 terms, whose call's output dtype
/// and bias were checked on its float16 operands), written by the launch itself, over
/// the given threads, so that a first call writes them while its kernel compiles. `a` writes the
/// memory of the a given to matmulCpu, which reads it in place (its rows whole cache lines apart
/// and whole 64-row blocks: prepareMatmul makes no copy of such an a). `bIntoPanels` writes b
/// straight into the panels a launch reads in pairs of k, `bIntoRows` into the memory the b given
/// to matmulCpu views, for launches that take it otherwise.
struct UnwrittenOperands {
  std::function<void(const tile::runtime::ParallelFor &)> a;
  std::function<void(const tile::runtime::PanelLayout &, void *,
                     const tile::runtime::ParallelFor &)>
      bIntoPanels;
  std::function<void(const tile::runtime::ParallelFor &)> bIntoRows;
};

/// The grid a plan's kernel takes: (block rows, block columns) for a kernel whose program
/// ids are its block's (grid_2d), else one id per program.
tile::runtime::Grid gridOf(const tile::runtime::LaunchPlan &plan) {
  if (plan.blockGrid && plan.rowBlocks > 0)
    return tile::runtime::matmulGrid(plan.rowBlocks, plan.programs / plan.rowBlocks, true);
  return tile::runtime::matmulGrid(plan.programs, 1, false);
}

/// `rowBands`: a was just written by the launch's threads, each a band of its rows (see
/// launchCpuInRowBands). `unwritten`: operands that the call writes, not yet written.
at::Tensor matmulCpu(const char *op, const at::Tensor &a, const at::Tensor &b,
                     std::optional<double> negativeSlope, std::optional<at::ScalarType> outDtype,
                     const std::optional<at::Tensor> &bias, bool rowBands = false,
                     const UnwrittenOperands *unwritten = nullptr,
                     std::optional<tile::runtime::ScratchUse> cScratch = std::nullopt) {
  using tile::runtime::LaunchPlan;
  using tile::runtime::ParallelFor;
  const auto &target = tile::runtime::cpuTarget();
  tile::binding::MatmulCall call;
  tile::binding::prepareMatmul(call, op, a, b, negativeSlope, outDtype, bias, target,
                               /*contiguousRowsOfB=*/true, /*termsOfHalves=*/unwritten != nullptr,
                               cScratch);
  if (call.empty())
    return call.result();
  if (unwritten && call.a.const_data_ptr() != a.const_data_ptr())
    throw std::logic_error("matmulCpu: an a not written yet was copied");
  rowBands = rowBands || call.aInRowBands;
  bool aWritten = !unwritten, bInRows = !unwritten, aCopyWritten = !call.writeRowsOfA;
  // b's panels are the calling thread's scratch, whichever thread writes them.
  auto panelsFor = [&](const LaunchPlan &plan) -> void * {
    if (!plan.bPanelWidth)
      return nullptr;
    return tile::runtime::panelScratch(
        tile::binding::bPanelLayout(call, plan.bPanelWidth, plan.bPanelGroup).bytes());
  };
  // b's panels for a launch that packs them in its own tasks, the call's arguments pointed
  // at them; none where the plan reads b as given.
  auto panelLayoutFor = [&](const LaunchPlan &plan,
                            void *panels) -> std::optional<tile::runtime::PanelLayout> {
    if (!plan.bPanelWidth)
      return std::nullopt;
    auto layout = tile::binding::bPanelLayout(call, plan.bPanelWidth, plan.bPanelGroup);
    call.arguments.useBPanels(panels, layout);
    return layout;
  };
  int64_t threads = at::get_num_threads();
  auto inRowBands = [&](const LaunchPlan &plan) {
    return rowBands && plan.rowBlocks >= threads && threads > 1 &&
           plan.programs >= plan.grain * threads;
  };
  // A copy of a and b's panels in one parallel region, each task (the launch's) writing
  // its share of both: the rows of a its programs multiply where the launch runs in row
  // bands, and the panels its programs read where it splits the block columns. In a
  // region of their own the copy had cost a wake-up of the threads more (int8 256^3 with
  // a transposed: 7 us for 64 KB, 4.7 on one thread).
  auto writeCopyOfAWithPanels = [&](const LaunchPlan &plan, void *panels,
                                    const ParallelFor &parallelFor) {
    bool bands = inRowBands(plan);
    int64_t tasks = bands ? threads : (plan.programs + plan.grain - 1) / plan.grain;
    int64_t rows = call.a.size(0);
    auto layout = panelLayoutFor(plan, panels);
    int64_t panelCount = layout ? layout->panels() : 0;
    auto rowOf = [&](int64_t task) {
      return bands ? std::min(rows, plan.blockM * (plan.rowBlocks * task / tasks))
                   : rows * task / tasks;
    };
    char *copy = static_cast<char *>(call.a.data_ptr());
    parallelFor(0, tasks, 1, [&](int64_t first, int64_t last) {
      call.writeRowsOfA(copy, rowOf(first), last == tasks ? rows : rowOf(last));
      if (layout)
        tile::binding::packBPanelRange(call, *layout, panels, panelCount * first / tasks,
                                       panelCount * last / tasks);
    });
  };
  // What a launch reads that is not there yet: a once, b's panels before every launch.
  auto writeOperands = [&](const LaunchPlan &plan, void *panels, const ParallelFor &parallelFor) {
    if (!aCopyWritten) {
      aCopyWritten = true;
      writeCopyOfAWithPanels(plan, panels, parallelFor);
      return;
    }
    if (!aWritten) {
      unwritten->a(parallelFor);
      aWritten = true;
    }
    bool pairsOfK = plan.bPanelWidth && plan.bPanelGroup == 2;
    if (!bInRows && !pairsOfK) {
      unwritten->bIntoRows(parallelFor);
      bInRows = true;
    }
    if (!plan.bPanelWidth)
      return;
    auto layout = tile::binding::bPanelLayout(call, plan.bPanelWidth, plan.bPanelGroup);
    if (!bInRows)
      tile::binding::writeBPanels(call, layout, panels,
                                  [&](const tile::runtime::PanelLayout &layout, void *panels) {
                                    unwritten->bIntoPanels(layout, panels, parallelFor);
                                  });
    else
      tile::binding::packBIntoPanels(call, layout, panels, parallelFor,
                                     (plan.programs + plan.grain - 1) / plan.grain);
  };
  auto launch = [&](const LaunchPlan &plan) {
    if (inRowBands(plan))
      tile::runtime::launchCpuInRowBands(*plan.kernel, call.args(), plan.rowBlocks,
                                         plan.programs / plan.rowBlocks, threads,
                                         tile::binding::atenParallelFor, plan.blockGrid);
    else
      tile::runtime::launchCpu(*plan.kernel, call.args(), gridOf(plan), plan.grain,
                               tile::binding::atenParallelFor);
  };
  // Each task writes the panels of its own block columns, then multiplies them: where the
  // grid is one group (every task's programs read only their columns' panels) and more
  // than one task. Where a copy of a waits too (see prepareMatmul's aCopyPerThread), each
  // task writes one of its own first. One parallel region, no barrier: the panels in a
  // region of their own cost a wake-up of the threads more (2 threads, int8, tile's time
  // over _int_mm's in four alternations: 256^3 1.155 -> 1.08, 320^3 1.25 -> 1.15, 384^3
  // 1.20 -> 1.165). The tasks split the programs evenly, a column where the split falls
  // inside one shared: in whole columns, 5 columns (int8 320^3 in 64-column blocks) had
  // split 3:2 (2-core znver5 against _int_mm: 320^3 0.85 -> 1.00x, 448^3 0.88 -> 0.97x,
  // 192^3 0.78 -> 0.90x).
  auto tasksWriteTheirOwnOperands = [&](const LaunchPlan &plan) {
    if (plan.rowBlocks <= 0 || threads <= 1 || plan.programs <= plan.grain)
      return false;
    if (!aCopyWritten)
      return call.aCopyPerThread;
    return plan.bPanelWidth && aWritten && bInRows;
  };
  // The panels of the block columns that only one task runs are written by it into a
  // buffer of its own, 8 at a time (a stripe of the copy's walk down b's rows), each run
  // right after its write, while they are in the core's caches: written all at once into
  // the shared panels, a task's panels of a b past the L3 went out to memory and came
  // back. 2 threads, znver5, int8 against _int_mm: 16x4096x4096 1.31 -> 1.88x,
  // 32x4096x4096 1.16 -> 1.50x, 16x4096x11008 1.08 -> 1.84x, 16x11008x4096 0.78 ->
  // 0.97-1.33x; 1024^3 (8 columns a task) unchanged. 1 or 2 panels at a time lost
  // where K = 11008 (0.9-1.0x), 32 (a task's 86 columns at N = 11008) 1.2x.
  constexpr int64_t kOwnPanelsPerWrite = 8;
  auto launchWritingOwnOperands = [&](const LaunchPlan &plan, void *panels) {
    int64_t rowBlocks = plan.rowBlocks, rows = call.a.size(0);
    bool copyOfA = !aCopyWritten;
    auto layout = panelLayoutFor(plan, panels);
    tile::runtime::launchCpuInColumnBands(
        *plan.kernel, call.args(), rowBlocks, plan.programs / rowBlocks, plan.grain,
        [&](void **args, int64_t firstBlockRow, int64_t lastBlockRow) {
          if (!copyOfA)
            return;
          auto *own = static_cast<char *>(
              tile::runtime::threadScratch(tile::runtime::ScratchUse::AlignedA, call.aCopyBytes));
          // Only the rows this task's programs multiply: where the tasks split one block
          // column (a narrow b), each copies its share of a, not all of it. 2 threads,
          // znver5, int8 with a transposed against _int_mm, one process: 640x64x320
          // 0.75 -> 0.85x, 100x64x512 0.96 -> 1.07x, 1000x32x1000 0.53 -> 0.74x.
          int64_t firstRow = std::min(rows, firstBlockRow * plan.blockM);
          int64_t lastRow =
              lastBlockRow == rowBlocks ? rows : std::min(rows, lastBlockRow * plan.blockM);
          call.writeRowsOfA(own, firstRow, lastRow);
          thread_local const void *ownA;
          ownA = own;
          args[tile::runtime::MatmulArguments::kA] = &ownA;
        },
        [&](int64_t firstColumn, int64_t lastColumn, void **own) {
          if (!layout)
            return;
          if (!own) {
            tile::binding::packBPanelRange(call, *layout, panels, firstColumn, lastColumn);
            return;
          }
          int64_t panelBytes = layout->panelStride() * layout->elementBytes;
          void *mine = tile::runtime::threadScratch(tile::runtime::ScratchUse::OwnPanels,
                                                    (lastColumn - firstColumn) * panelBytes);
          tile::runtime::packPanelsInto(call.b.const_data_ptr(), call.b.stride(0), call.b.stride(1),
                                        *layout, firstColumn, lastColumn, mine);
          // The kernel finds panel p at b + p * panelBytes: b as if the panels before
          // `firstColumn` preceded these (an address only, never read).
          thread_local const void *ownB;
          ownB = reinterpret_cast<const void *>(reinterpret_cast<uintptr_t>(mine) -
                                                uintptr_t(firstColumn * panelBytes));
          own[tile::runtime::MatmulArguments::kB] = &ownB;
        },
        layout ? kOwnPanelsPerWrite : 0, tile::binding::atenParallelFor, plan.blockGrid);
  };
  // A copy of a shared by the threads (too large for one each) is written first, in a
  // region of its own, where the launch can then run in column bands, each task writing
  // the panels it reads: written in one region with the copy (writeCopyOfAWithPanels),
  // all of b's panels went through the caches before the programs, which then read half
  // of them from the other core's. The extra wake-up costs a few microseconds. 2 threads,
  // znver5, a transposed, against torch, in one process: bfloat16 100x2000x1000 0.65 ->
  // 1.07x, 128x1024x1024 0.88 -> 1.26x, 257x500x1000 0.87 -> 1.06x, 500^3 0.92 -> 0.99x,
  // 300x777x1000 0.85 -> 0.97x; float32 96x2048x2048 3.23 -> 2.04 ms, 300x1000x1000 1.50
  // -> 1.30 ms; int8 2048^3 0.94 -> 0.99x; none slower. Only where the block columns
  // outnumber the threads: with one column a task or fewer, each task read all the rows
  // of the shared copy, half from the other core's cache, where in row bands (the copy
  // and b's panels in one region, then the launch) each reads the rows it wrote (2
  // threads, znver5, a transposed, against torch: bfloat16 1000x128x1000 0.78 -> 0.99x,
  // 384x100x512 0.81 -> 0.93x, 300x128x300 0.97 -> 1.09x, float32 500x100x500 1.20 ->
  // 1.49x; three columns tied either way).
  auto ownPanelsAfterACopy = [&](const LaunchPlan &plan) {
    return !aCopyWritten && !call.aCopyPerThread && plan.rowBlocks > 0 && threads > 1 &&
           plan.programs > plan.grain && plan.bPanelWidth && aWritten && bInRows &&
           plan.programs / plan.rowBlocks > threads;
  };
  auto writeCopyOfA = [&] {
    int64_t rows = call.a.size(0);
    char *copy = static_cast<char *>(call.a.data_ptr());
    tile::binding::atenParallelFor(0, threads, 1, [&](int64_t first, int64_t last) {
      call.writeRowsOfA(copy, rows * first / threads, rows * last / threads);
    });
    aCopyWritten = true;
  };
  auto run = [&](const LaunchPlan &plan) {
    if (ownPanelsAfterACopy(plan))
      writeCopyOfA();
    if (tasksWriteTheirOwnOperands(plan))
      return launchWritingOwnOperands(plan, panelsFor(plan));
    writeOperands(plan, panelsFor(plan), tile::binding::atenParallelFor);
    launch(plan);
  };
  if (auto plan = tile::runtime::reusePlan(call.signature)) {
    run(*plan);
    return call.result();
  }
  call.specify();
  auto &kernels = tile::runtime::KernelCache::global();
  auto planFor = [&](std::shared_ptr<const tile::runtime::LoadedKernel> kernel,
                     const tile::ops::KernelSpec &spec, int64_t programs) {
    return tile::runtime::cpuMatmulPlan(std::move(kernel), spec, target, programs, call.a.size(0),
                                        a.size(1));
  };
  auto [spec, programs] = tile::binding::chooseMatmulConfig(
      call, target,
      [&](const tile::ops::KernelSpec &spec, int64_t programs) {
        run(planFor(kernels.get(spec, target), spec, programs));
      },
      [] {}, /*mayBenchmark=*/true);
  LaunchPlan plan = planFor(kernels.ready(spec, target), spec, programs);
  if (plan.kernel || tile::runtime::storedOnDisk(spec, target)) {
    if (!plan.kernel)
      plan.kernel = kernels.get(spec, target);
    run(plan);
  } else {
    // A kernel to compile: a helper thread writes the operands meanwhile, on its own,
    // touching their fresh pages during the compile instead of after it (12 MB of a
    // 1024^3 float16 call's terms took 14 ms after a compile of about 50 on a 2-core Xeon
    // VM). The compile keeps the calling thread and its warm heap: moved to the helper
    // instead, it ran up to 6 ms slower. A kernel on disk loads in a millisecond or two,
    // too short to hide writes that one thread makes at half the speed of all of them.
    void *panels = panelsFor(plan);
    std::future<void> written;
    try {
      written = std::async(std::launch::async,
                           [&] { writeOperands(plan, panels, tile::runtime::serialFor); });
    } catch (const std::system_error &) {
      // No thread to be had: the operands are written after the compile, as on one thread.
    }
    plan.kernel = kernels.get(spec, target);
    if (written.valid())
      written.get();
    else
      writeOperands(plan, panels, tile::binding::atenParallelFor);
    launch(plan);
  }
  tile::runtime::LaunchPlans::global().insert(call.signature, plan);
  return call.result();
}

/// `elements` bfloat16 values in the calling thread's scratch buffer for `use`.
uint16_t *scratchBfloat16s(tile::runtime::ScratchUse use, int64_t elements) {
  return static_cast<uint16_t *>(tile::runtime::threadScratch(use, elements * 2));
}

/// `x` (2-byte elements) with contiguous rows: itself, a copy in `use`'s scratch where x is
/// transposed (a Linear's weight as b), transposed in tasks of 64 KB (x.contiguous() took
/// 4.5 times as long), or x.contiguous() for other layouts.
at::Tensor halvesInRows(const at::Tensor &x, tile::runtime::ScratchUse use) {
  if (x.stride(1) == 1 || x.size(1) == 1)
    return x;
  if (x.stride(0) != 1 && x.size(0) != 1)
    return x.contiguous();
  constexpr int64_t kBytesPerTask = int64_t(64) << 10, kHalf = 2;
  int64_t rows = x.size(0), cols = x.size(1), rowBytes = cols * kHalf;
  auto *copy = static_cast<char *>(tile::runtime::threadScratch(use, rows * rowBytes));
  const char *from = static_cast<const char *>(x.const_data_ptr());
  tile::binding::atenParallelFor(
      0, rows, std::max<int64_t>(16, kBytesPerTask / std::max<int64_t>(1, rowBytes)),
      [&](int64_t first, int64_t last) {
        tile::runtime::transposeMatrix(from + first * kHalf, x.stride(1) * kHalf, cols,
                                       last - first, kHalf, copy + first * rowBytes, rowBytes);
      });
  return at::from_blob(copy, {rows, cols}, x.options());
}

/// c, in the accumulator's dtype, with the epilogue the kernels apply in theirs, for a call
/// whose kernel ran without it: the bias added (in c's dtype), leaky_relu, then one rounding
/// to `out`.
at::Tensor withEpilogue(at::Tensor c, const std::optional<at::Tensor> &bias,
                        std::optional<double> negativeSlope, at::ScalarType out) {
  if (bias)
    c.add_(*bias);
  if (negativeSlope)
    at::leaky_relu_(c, *negativeSlope);
  return c.scalar_type() == out ? c : c.to(out);
}

/// float16 where the host's matrix tiles take bfloat16 but not float16 (AMX-BF16), into
/// `out` (float16 or float32), the call checked: a and b split into bfloat16 terms
/// (runtime/HalfSplit.h) and multiplied as one bfloat16 dot, three times as long, on the tiles,
/// into float32. On a 2-core Sapphire Rapids the tiles multiply bfloat16 4-6x as fast as the
/// float32 kernel (torch runs float16 as float32): against torch 512^3 0.87 -> 1.13-1.19x, 1024^3
/// 0.88 -> 1.43-1.45x. From 2^20 multiply-adds on they win, now that the terms are written
/// straight where the tiles read them and the result is rounded in the kernel (128^3 42.4 ->
/// 35.2 us, 256^3 152 -> 104, 128x128x64 20.3 -> 18.0); below, the splits cost more than the
/// tiles save (96^3 17.8 against 25.2 us; 64^3 7.3 against 9.3). A dot of more than kChunkK float16
/// steps (6144 bfloat16 ones) ran slower per multiply (4096^2 x 12288: 0.85 TFLOP/s, x 6144: 1.2),
/// so longer ones run in chunks of k whose float32 results are added, the bias and leaky_relu after
/// them; a single dot rounds its float16 result in its own epilogue (a float32 result rounded after
/// it took 0.8 of 7 ms at 1024^3). None where the host has no such tiles, the call is small, or an
/// operand holds an infinity or NaN (see splitHalves).
std::optional<at::Tensor> matmulHalfOnBfloat16Tiles(const char *op, const at::Tensor &a,
                                                    const at::Tensor &b,
                                                    std::optional<double> negativeSlope,
                                                    at::ScalarType out,
                                                    const std::optional<at::Tensor> &bias) {
  const auto &target = tile::runtime::cpuTarget();
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  // A k of less than a tile's step (32 bfloat16) pads each term to whole steps: on the AMX
  // Xeon the float32 kernel ran 2050x200x9 in 151-156 us against 273-348 on the terms,
  // 1030x130x17 in 120-125 against 126-154.
  constexpr int64_t kMultiplyAddsWorthSplits = int64_t(1) << 20, kChunkK = 2048, kShortestK = 32;
  if (k < kShortestK || n == 0 ||
      double(m) * double(n) * double(k) < double(kMultiplyAddsWorthSplits) ||
      !tile::binding::usesMatrixTiles(target, "bf16", /*unitKOfA=*/true, m, k))
    return std::nullopt;
  using tile::runtime::ScratchUse;
  int64_t terms = tile::runtime::halfSplitTerms(k);
  int64_t chunks = (k + kChunkK - 1) / kChunkK, chunkK = (k + chunks - 1) / chunks;
  // Rows of unit stride split 16 elements at a time; others (b transposed, as a Linear's
  // weight) are copied so first.
  at::Tensor aRows = halvesInRows(a, ScratchUse::RowsOfHalvesA);
  at::Tensor bRows = halvesInRows(b, ScratchUse::RowsOfHalvesB);
  auto halves = [](const at::Tensor &x) {
    return reinterpret_cast<const uint16_t *>(x.const_data_ptr<at::Half>());
  };
  auto bfloat16 = a.options().dtype(at::kBFloat16);
  // a's terms to whole tile blocks, the rows past M zeros: the tiles then run the last
  // block row whole, as they would on a's own copy (prepareMatmul), which this spares.
  int64_t rows = tile::binding::rowsOfWholeTileBlocks(m);
  at::Tensor c;
  // An infinity's or NaN's terms would turn products NaN (see splitHalves): such operands
  // take the float32 path. The splits find them, before any launch reads the terms (and a
  // check of its own would read b once more on every call).
  struct NotFinite {};
  for (int64_t k0 = 0; k0 < k; k0 += chunkK) {
    int64_t kk = std::min(chunkK, k - k0), length = tile::runtime::halfSplitTermLength(kk);
    uint16_t *aTerms = scratchBfloat16s(ScratchUse::FloatA, rows * terms * length);
    uint16_t *bTerms = scratchBfloat16s(ScratchUse::FloatB, terms * length * n);
    const uint16_t *aChunk = halves(aRows) + k0 * aRows.stride(1);
    const uint16_t *bChunk = halves(bRows) + k0 * bRows.stride(0);
    auto finite = [](bool split) {
      if (!split)
        throw NotFinite{};
    };
    // The terms are written where the launch reads them: a's whole rows in place, b's
    // into its panels, or into these rows (untouched, so not paged in, where the panels
    // take them).
    using tile::runtime::ParallelFor;
    UnwrittenOperands unwritten{
        [&](const ParallelFor &parallelFor) {
          std::fill(aTerms + m * terms * length, aTerms + rows * terms * length, uint16_t(0));
          finite(tile::runtime::splitHalves(aChunk, m, kk, aRows.stride(0), aRows.stride(1),
                                            tile::runtime::placeRowsOfA(aTerms, kk, terms),
                                            parallelFor));
        },
        [&](const tile::runtime::PanelLayout &layout, void *panels,
            const ParallelFor &parallelFor) {
          finite(tile::runtime::splitHalvesIntoPanels(
              bChunk, kk, n, bRows.stride(0), bRows.stride(1), terms, layout,
              static_cast<uint16_t *>(panels), parallelFor));
        },
        [&](const ParallelFor &parallelFor) {
          finite(tile::runtime::splitHalves(bChunk, kk, n, bRows.stride(0), bRows.stride(1),
                                            tile::runtime::placeRowsOfB(bTerms, kk, n, terms),
                                            parallelFor));
        }};
    at::Tensor aSplit = at::from_blob(aTerms, {rows, terms * length}, bfloat16);
    at::Tensor bSplit = at::from_blob(bTerms, {terms * length, n}, bfloat16);
    try {
      // The kernel takes a bias in its input or output dtype: float16 goes with a float16
      // output, float32 with a float32 one.
      if (chunks == 1)
        return matmulCpu(op, aSplit, bSplit, negativeSlope, out,
                         bias && out == at::kFloat ? bias->to(at::kFloat) : bias, false, &unwritten)
            .narrow(0, 0, m);
      at::Tensor part = matmulCpu("tile::matmul", aSplit, bSplit, std::nullopt, at::kFloat,
                                  std::nullopt, false, &unwritten);
      c = c.defined() ? c.add_(part) : part;
    } catch (const NotFinite &) {
      return std::nullopt;
    }
  }
  return withEpilogue(c.narrow(0, 0, m), bias, negativeSlope, out);
}

/// float16 on the CPU elsewhere runs as float32: the vector kernel converts each element of b
/// where it multiplies it (two micro-ops on the FMA ports per 16 lanes), which ran at
/// 0.5-0.7x of torch on a 2-core Xeon. After the float16 call's own checks, a and b are
/// converted once into float32 copies, the float32 kernel accumulates as the float16 one
/// does (in float32, a bias added there), and the result is rounded once.
std::optional<at::Tensor> matmulHalfAsFloat(const char *op, const at::Tensor &a,
                                            const at::Tensor &b,
                                            std::optional<double> negativeSlope,
                                            std::optional<at::ScalarType> outDtype,
                                            const std::optional<at::Tensor> &bias) {
  if (a.scalar_type() != at::kHalf)
    return std::nullopt;
  at::ScalarType out =
      tile::binding::checkMatmulCall(op, a, b, negativeSlope.has_value(), outDtype, bias);
  if (auto c = matmulHalfOnBfloat16Tiles(op, a, b, negativeSlope, out, bias))
    return *c;
  // Against a transposed b (a float16 Linear's weight) the kernel takes dots along k on
  // the float16 operands, each element widened where it is loaded: the float32 copy of
  // such a b converted all of it on every call, element by element down its columns
  // (2-core znver5, against torch: 1 x 4096 x 4096 0.013 -> 1.55x, 16 rows 0.19 -> 5.1x,
  // 64 rows 0.62 -> 5.7x, 96 0.87 -> 5.9x).
  if (tile::binding::takesDotsAlongK(tile::runtime::cpuTarget(), a, b))
    return std::nullopt;
  std::optional<at::Tensor> bias32;
  if (bias)
    bias32 = bias->to(at::kFloat);
  using tile::runtime::ScratchUse;
  at::Tensor a32 = tile::binding::scratchTensor(ScratchUse::FloatA, a.sizes(), at::kFloat).copy_(a);
  at::Tensor b32 = tile::binding::scratchTensor(ScratchUse::FloatB, b.sizes(), at::kFloat).copy_(b);
  // Each thread then multiplies the rows of a it converted (2-core Xeon, against torch:
  // 256^3 0.82 -> 0.90, 512^3 0.79 -> 0.85); an a of less than 256 KB, which the caches
  // hold whoever wrote it, ran slower so (128^3 0.86 -> 0.78).
  constexpr int64_t kFreshRowsWorthBands = int64_t(256) << 10;
  bool rowBands = a32.numel() * int64_t(sizeof(float)) >= kFreshRowsWorthBands;
  at::Tensor c = matmulCpu(op, a32, b32, negativeSlope, std::nullopt, bias32, rowBands);
  return out == at::kFloat ? c : c.to(at::kHalf);
}

/// c (M x N) written from cT, its transpose (N x M, rows contiguous), by the threads, each
/// a band of cT's rows: c's columns. In the calling thread's scratch for `scratch` where
/// given, else a tensor of its own.
at::Tensor transposedBack(const at::Tensor &cT,
                          std::optional<tile::runtime::ScratchUse> scratch = std::nullopt) {
  int64_t n = cT.size(0), m = cT.size(1), bytes = cT.element_size();
  at::Tensor c = scratch ? tile::binding::scratchTensor(*scratch, {m, n}, cT.scalar_type())
                         : at::empty({m, n}, cT.options());
  const char *from = static_cast<const char *>(cT.const_data_ptr());
  char *to = static_cast<char *>(c.data_ptr());
  int64_t fromStride = cT.stride(0) * bytes;
  constexpr int64_t kColumnsPerTask = 256;
  tile::binding::atenParallelFor(0, n, kColumnsPerTask, [&](int64_t first, int64_t last) {
    tile::runtime::transposeMatrix(from + first * fromStride, fromStride, last - first, m, bytes,
                                   to + first * bytes, n * bytes);
  });
  return c;
}

/// A few rows of a against a transposed b as c^T = b^T a^T (see
/// multipliesTransposedProduct), the call checked on its own operands; none elsewhere. A
/// bias (one per column of c, so per row of c^T) and leaky_relu are applied to c as the
/// kernel's epilogue applies them: in the accumulator's dtype, then rounded once. c^T, and
/// c before its rounding, lie in the thread's scratch.
std::optional<at::Tensor> matmulAsTransposedProduct(const char *op, const at::Tensor &a,
                                                    const at::Tensor &b,
                                                    std::optional<double> negativeSlope,
                                                    std::optional<at::ScalarType> outDtype,
                                                    const std::optional<at::Tensor> &bias) {
  using tile::runtime::ScratchUse;
  if (!tile::binding::multipliesTransposedProduct(tile::runtime::cpuTarget(), a, b))
    return std::nullopt;
  at::ScalarType out =
      tile::binding::checkMatmulCall(op, a, b, negativeSlope.has_value(), outDtype, bias);
  auto transposedProduct = [&](at::ScalarType dtype) {
    return matmulCpu("tile::matmul", b.t(), a.t(), std::nullopt, dtype, std::nullopt, false,
                     nullptr, ScratchUse::ProductTransposed);
  };
  if (!bias && !negativeSlope)
    return transposedBack(transposedProduct(out));
  at::ScalarType accumulator = a.scalar_type() == at::kChar ? at::kInt : at::kFloat;
  at::Tensor c = out == accumulator ? transposedBack(transposedProduct(accumulator))
                                    : transposedBack(transposedProduct(accumulator),
                                                     ScratchUse::ProductInAccumulator);
  return withEpilogue(c, bias, negativeSlope, out);
}

at::Tensor matmul(const at::Tensor &a, const at::Tensor &b, std::optional<at::ScalarType> outDtype,
                  const std::optional<at::Tensor> &bias);
at::Tensor matmulLeakyRelu(const at::Tensor &a, const at::Tensor &b, double negativeSlope,
                           std::optional<at::ScalarType> outDtype,
                           const std::optional<at::Tensor> &bias);

/// A product of one column (a matrix times a vector: N = 1) as its transpose c^T = b^T a^T,
/// one row against a^T, whose columns are a's rows: the kernels' blocks then fill their
/// lanes with a's rows (dots along k where a's k is contiguous), where 64-column blocks had
/// computed 63 lanes past N (float32 300x1x320 17.4 us against MKL's 5.5, x @ w^T for a
/// Linear of one output 127x1x1000 27.8 against 6.8). c^T's one row is c's column in
/// memory. The bias, one value for the column, is every column's of c^T. The call is
/// checked on its own operands.
std::optional<at::Tensor> matmulAsOneRow(const char *op, const at::Tensor &a, const at::Tensor &b,
                                         std::optional<double> negativeSlope,
                                         std::optional<at::ScalarType> outDtype,
                                         const std::optional<at::Tensor> &bias) {
  if (a.dim() != 2 || b.dim() != 2 || b.size(1) != 1 || a.size(0) < 2 || a.size(1) != b.size(0) ||
      !a.device().is_cpu() || !b.device().is_cpu())
    return std::nullopt;
  tile::binding::checkMatmulCall(op, a, b, negativeSlope.has_value(), outDtype, bias);
  int64_t m = a.size(0);
  std::optional<at::Tensor> everyColumn;
  if (bias)
    everyColumn = bias->expand({m});
  at::Tensor cT = negativeSlope
                      ? matmulLeakyRelu(b.t(), a.t(), *negativeSlope, outDtype, everyColumn)
                      : matmul(b.t(), a.t(), outDtype, everyColumn);
  return cT.reshape({m, 1});
}

at::Tensor matmul(const at::Tensor &a, const at::Tensor &b,
                  std::optional<at::ScalarType> outDtype,
                  const std::optional<at::Tensor> &bias) {
  if (auto c = matmulAsOneRow("tile::matmul", a, b, std::nullopt, outDtype, bias))
    return *c;
  if (auto c = matmulHalfAsFloat("tile::matmul", a, b, std::nullopt, outDtype, bias))
    return *c;
  if (auto c = matmulAsTransposedProduct("tile::matmul", a, b, std::nullopt, outDtype, bias))
    return *c;
  return matmulCpu("tile::matmul", a, b, std::nullopt, outDtype, bias);
}

at::Tensor matmulLeakyRelu(const at::Tensor &a, const at::Tensor &b, double negativeSlope,
                           std::optional<at::ScalarType> outDtype,
                           const std::optional<at::Tensor> &bias) {
  if (auto c = matmulAsOneRow("tile::matmul_leaky_relu", a, b, negativeSlope, outDtype, bias))
    return *c;
  if (auto c = matmulHalfAsFloat("tile::matmul_leaky_relu", a, b, negativeSlope, outDtype, bias))
    return *c;
  if (auto c =
          matmulAsTransposedProduct("tile::matmul_leaky_relu", a, b, negativeSlope, outDtype, bias))
    return *c;
  return matmulCpu("tile::matmul_leaky_relu", a, b, negativeSlope, outDtype, bias);
}

/// leaky_relu's backward applied to the product as the GPU kernels apply it, on the
/// accumulator's float32 with one rounding to the output dtype, but after the CPU's kernel
/// rather than inside it: the CPU's matmul takes many routes (rows as dots, transposed
/// products, float16 as bfloat16 terms), each with its own epilogue, and on the CPU the
/// pass over c costs a few percent of the GEMM, where on a GPU it costs a kernel's trip
/// through memory.
at::Tensor matmulLeakyReluBackward(const at::Tensor &a, const at::Tensor &b,
                                   const at::Tensor &activation, double negativeSlope,
                                   std::optional<at::ScalarType> outDtype) {
  const char *op = "tile::matmul_leaky_relu_backward";
  at::ScalarType out =
      tile::binding::checkMatmulCall(op, a, b, /*epilogue=*/true, outDtype, std::nullopt);
  tile::binding::checkActivation(op, activation, a, b, out);
  at::Tensor product = matmul(a, b, at::kFloat, std::nullopt);
  // In place, through torch's vectorized kernel (with the activation widened to the
  // product's float32): a scalar loop stayed a branch per element, mispredicted at every
  // change of sign (0.5 ms for 256 x 1024, as long as the GEMM).
  at::leaky_relu_backward_out(product, product, activation.to(at::kFloat), negativeSlope,
                              /*self_is_result=*/false);
  return product.scalar_type() == out ? product : product.to(out);
}

} // namespace

TORCH_LIBRARY_IMPL(tile, CPU, m) {
  m.impl("matmul", matmul);
  m.impl("matmul_leaky_relu", matmulLeakyRelu);
  m.impl("matmul_leaky_relu_backward", matmulLeakyReluBackward);
}
