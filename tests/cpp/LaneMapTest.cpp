// The matrix instructions' lane maps, as data: for every arch, input type and shape, the
// elements each lane holds of a, b and the accumulator must tile the instruction's
// operands exactly (each element once, or once per half-wave where RDNA3's WMMA repeats
// its inputs). A wrong entry here computes wrong results on hardware that CI never
// sees, so it is checked by evaluating the maps lane by lane.
#include "EvaluateArith.h"
#include "GpuLowering.h"

#include "ops/KernelBuilders.h"
#include "tile/Compiler/Compile.h"
#include "tile/Target/GpuArch.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <gtest/gtest.h>

#include <map>

using namespace mlir;
using namespace mlir::tile::gpu_lowering;
using ::tile::testing::evaluate;
using ::tile::testing::ScratchModule;

namespace {

struct Case {
  const char *arch;
  const char *type;
  int64_t nonKDim;
};

class LaneMaps : public ::testing::TestWithParam<Case> {};

TEST_P(LaneMaps, CoverEveryOperandAndAccumulatorElement) {
  Case c = GetParam();
  ScratchModule scratch;
  OpBuilder &b = scratch.b;
  Location loc = scratch.loc;
  auto arch = *::tile::lookupGpuArch(c.arch);
  AccumulatorTile tile = accumulatorTileFor(arch, c.nonKDim);
  bool f32 = std::string(c.type) == "f32";
  auto mi = matrixInstructionFor(tile, ::tile::ops::elementTypeOf(*scratch.context, c.type), arch, /*kpack=*/1,
                                 /*allowTf32=*/f32 && !arch.amd);
  ASSERT_TRUE(mi) << c.arch << " " << c.type;
  int64_t lanes = arch.waveSize;
  // RDNA3 WMMA: both half-waves hold the same a and b elements.
  int64_t copies = tile.kind == AccumulatorTile::Kind::WmmaGfx11 ? 2 : 1;
  // MFMA and gfx12 WMMA are fed swapped operands (they compute C^T): the instruction's
  // a is this dot's b^T and the other way round, which the maps already account for.
  std::map<std::pair<int64_t, int64_t>, int> a, bTile, acc;
  for (int64_t lane = 0; lane < lanes; ++lane) {
    Value l = i32Constant(b, loc, lane);
    for (int64_t j = 0; j < mi->aPerLane; ++j) {
      auto [row, k] = mi->a(b, loc, l, j);
      ++a[std::make_pair(evaluate(row), evaluate(k))];
    }
    for (int64_t j = 0; j < mi->bPerLane; ++j) {
      auto [k, col] = mi->b(b, loc, l, j);
      ++bTile[std::make_pair(evaluate(k), evaluate(col))];
    }
    for (int64_t j = 0; j < tile.perLane; ++j) {
      auto [row, col] = tile.coordinates(b, loc, l, j);
      ++acc[std::make_pair(evaluate(row), evaluate(col))];
    }
  }
  std::string where = std::string(c.arch) + " " + c.type;
  auto covers = [&](const std::map<std::pair<int64_t, int64_t>, int> &seen, int64_t rows,
                    int64_t cols, int times, const char *what) {
    EXPECT_EQ(int64_t(seen.size()), rows * cols) << where << ": " << what << " elements held";
    for (const auto &[at, count] : seen) {
      EXPECT_TRUE(at.first >= 0 && at.first < rows && at.second >= 0 && at.second < cols)
          << where << ": " << what << " (" << at.first << ", " << at.second << ") outside";
      EXPECT_EQ(count, times) << where << ": " << what << " (" << at.first << ", " << at.second
                              << ") held " << count << " times";
    }
  };
  covers(a, tile.tileM, mi->tileK, copies, "a");
  covers(bTile, mi->tileK, tile.tileN, copies, "b");
  covers(acc, tile.tileM, tile.tileN, 1, "accumulator");
}

TEST(LaneMapExchange, Gfx11LanesEndWithTwoRunsOfFourColumnsCoveringTheTile) {
  // The epilogue's trade between lanes l and l ^ 16 (kExchangeSends, kExchangeRuns),
  // evaluated on the accumulator map: every run is 4 consecutive columns of one row
  // starting at a multiple of 4, and the runs of all lanes hold each element once.
  ScratchModule scratch;
  OpBuilder &b = scratch.b;
  Location loc = scratch.loc;
  AccumulatorTile tile = accumulatorTileFor(*::tile::lookupGpuArch("gfx1100"), 16);
  ASSERT_EQ(tile.exchangedRun, 4);
  ASSERT_EQ(tile.colRun, 1);
  auto at = [&](int64_t lane, int64_t j) {
    auto [row, col] = tile.coordinates(b, loc, i32Constant(b, loc, lane), j);
    return std::pair{evaluate(row), evaluate(col)};
  };
  std::map<std::pair<int64_t, int64_t>, int> held;
  for (int64_t lane = 0; lane < 32; ++lane) {
    int64_t half = lane / 16;
    for (int64_t r = 0; r < 2; ++r) {
      std::pair<int64_t, int64_t> first;
      for (int64_t i = 0; i < 4; ++i) {
        int64_t entry = kExchangeRuns[half][r][i];
        auto element = entry >= 0 ? at(lane, entry) : at(lane ^ 16, kExchangeSends[1 - half][-1 - entry]);
        if (i == 0)
          first = element;
        EXPECT_EQ(element.first, first.first) << "lane " << lane << " run " << r << ": rows differ";
        EXPECT_EQ(element.second, first.second + i) << "lane " << lane << " run " << r << " position " << i;
        ++held[element];
      }
      EXPECT_EQ(first.second % 4, 0) << "lane " << lane << " run " << r << " starts at column " << first.second;
    }
  }
  EXPECT_EQ(held.size(), size_t(16 * 16));
  for (const auto &[element, count] : held)
    EXPECT_EQ(count, 1) << "(" << element.first << ", " << element.second << ") held " << count << " times";
}

TEST(LaneMapWarpgroups, WgmmaAccumulatorIsThePtxIsaFragmentLayout) {
  // The PTX ISA's register fragment of wgmma .m64nNk16's accumulator D: thread T of a
  // warpgroup holds d[i] at row 16 (T / 32) + (T % 32) / 4 + 8 ((i % 4) / 2) and column
  // 8 (i / 4) + 2 (T % 4) + i % 2. Warpgroup g takes rows g * band .. of the block, one
  // instruction per 64 of them. Checked element by element for each block a default or
  // tutorial config gives, and that the block's elements are each held once.
  ScratchModule scratch;
  OpBuilder &b = scratch.b;
  Location loc = scratch.loc;
  struct Block {
    int64_t rows, cols, warps;
  };
  for (auto [rows, cols, warps] : {Block{128, 256, 8}, Block{128, 128, 4}, Block{256, 128, 8}, Block{64, 64, 4}}) {
    Distribution dist;
    dist.arch = *::tile::lookupGpuArch("sm_90a");
    dist.numWarps = warps;
    dist.threads = warps * 32;
    dist.warpgroupMma = true;
    MatrixLayout layout = dist.matrixOf(RankedTensorType::get({rows, cols}, b.getF32Type()));
    std::string where = std::to_string(rows) + "x" + std::to_string(cols) + " over " + std::to_string(warps);
    ASSERT_TRUE(layout.fits) << where;
    int64_t band = rows / (warps / 4), perInstruction = cols / 2;
    ASSERT_EQ(layout.perThread(), band / 64 * perInstruction) << where;
    std::map<std::pair<int64_t, int64_t>, int> held;
    for (int64_t thread = 0; thread < dist.threads; ++thread) {
      dist.threadId = i32Constant(b, loc, thread);
      int64_t group = thread / 128, t = thread % 128;
      MatrixPlaces places(b, loc, dist, layout);
      for (int64_t e = 0; e < layout.perThread(); ++e) {
        auto [row, col] = places.at(b, loc, e);
        int64_t instruction = e / perInstruction, i = e % perInstruction;
        int64_t expectRow = group * band + instruction * 64 + 16 * (t / 32) + (t % 32) / 4 + 8 * ((i % 4) / 2);
        int64_t expectCol = 8 * (i / 4) + 2 * (t % 4) + i % 2;
        EXPECT_EQ(evaluate(row), expectRow) << where << ": thread " << thread << " element " << e;
        EXPECT_EQ(evaluate(col), expectCol) << where << ": thread " << thread << " element " << e;
        ++held[{evaluate(row), evaluate(col)}];
      }
    }
    EXPECT_EQ(int64_t(held.size()), rows * cols) << where;
    for (const auto &[element, count] : held)
      EXPECT_EQ(count, 1) << where << ": (" << element.first << ", " << element.second << ") held " << count;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Archs, LaneMaps,
    ::testing::Values(Case{"gfx90a", "f16", 16}, Case{"gfx90a", "f16", 32}, Case{"gfx90a", "bf16", 16},
                      Case{"gfx90a", "f32", 16}, Case{"gfx90a", "f32", 32}, Case{"gfx90a", "i8", 16},
                      Case{"gfx942", "f16", 16}, Case{"gfx942", "f16", 32}, Case{"gfx942", "bf16", 32},
                      Case{"gfx942", "i8", 16}, Case{"gfx942", "i8", 32}, Case{"gfx942", "f32", 16},
                      Case{"gfx950", "f16", 16}, Case{"gfx950", "bf16", 16}, Case{"gfx950", "i8", 16},
                      Case{"gfx1100", "f16", 16}, Case{"gfx1100", "bf16", 16}, Case{"gfx1100", "i8", 16},
                      Case{"gfx1201", "f16", 16}, Case{"gfx1201", "bf16", 16}, Case{"gfx1201", "i8", 16},
                      Case{"sm_80", "f16", 16}, Case{"sm_90", "bf16", 16}, Case{"sm_90", "i8", 16},
                      Case{"sm_90", "f32", 16}),
    [](const ::testing::TestParamInfo<Case> &info) {
      return std::string(info.param.arch) + "_" + info.param.type + "_" +
             std::to_string(info.param.nonKDim);
    });

} // namespace
