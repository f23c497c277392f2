// The launch plans: a call's signature finds the plan made for it and nothing else, and
// the plans go whenever the kernels or the tuning they were chosen by change.
#include "runtime/LaunchPlans.h"
#include "TestKernels.h"
#include "runtime/Autotuner.h"
#include "runtime/CpuPlans.h"
#include "runtime/KernelCache.h"

#include <gtest/gtest.h>

using namespace tile;
using namespace tile::runtime;
using tile::testing::vectorAddSpec;

namespace {

LaunchPlan planOf(int64_t programs) {
  return LaunchPlan{KernelCache::global().get(vectorAddSpec("f32"), Target::host()), programs, 3};
}

TEST(LaunchPlans, FindsThePlanOfItsSignatureOnly) {
  LaunchPlans plans;
  CallSignature first{0, 6, 6, -1, 32, 64, 64, 64};
  CallSignature second = first;
  second[7] = 65; // another K
  plans.insert(first, planOf(4));
  auto found = plans.find(first);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->programs, 4);
  EXPECT_EQ(found->grain, 3);
  EXPECT_TRUE(found->kernel);
  EXPECT_FALSE(plans.find(second));
  plans.insert(second, planOf(5));
  EXPECT_EQ(plans.find(second)->programs, 5);
  EXPECT_EQ(plans.find(first)->programs, 4);
}

TEST(LaunchPlans, AreBounded) {
  LaunchPlans plans;
  LaunchPlan plan = planOf(1);
  for (int64_t i = 0; i < 10000; ++i)
    plans.insert(CallSignature{i}, plan);
  EXPECT_LE(plans.size(), 4096u);
  EXPECT_TRUE(plans.find(CallSignature{9999}));
}

TEST(LaunchPlans, GoWhenTheKernelsOrTheTuningChange) {
  auto &plans = LaunchPlans::global();
  auto &tuner = Autotuner::global();
  bool wasEnabled = tuner.enabled();
  CallSignature signature{1, 2, 3};
  auto refill = [&] {
    plans.insert(signature, planOf(7));
    ASSERT_TRUE(plans.find(signature));
  };
  refill();
  KernelCache::global().clear();
  EXPECT_FALSE(plans.find(signature)) << "clear_cache() must drop the plans' kernels";
  refill();
  tuner.setEnabled(!wasEnabled);
  EXPECT_FALSE(plans.find(signature)) << "autotuning switched";
  tuner.setEnabled(wasEnabled);
  refill();
  tuner.clear();
  EXPECT_FALSE(plans.find(signature)) << "the tuning winners were forgotten";
  refill();
  tuner.setCandidates("plan_test_op", "cpu", {});
  EXPECT_FALSE(plans.find(signature)) << "the candidates changed";
}

TEST(CpuPlans, TasksTakeHalfAMillionMultiplyAddsOrEightMillionOnTheTiles) {
  // A task of the vector kernel takes at least 2^19 multiply-adds, each result's store
  // counted as 12 of them, one of the tile registers 2^23; b goes to panels of the
  // block's width in the spec's groups; a grid whose rows of blocks all make one group
  // may run in bands of rows.
  Target amx = Target::parse("cpu:sapphirerapids");
  ops::KernelSpec spec = tile::testing::matmulSpec("matmul", "bf16", "bf16", 32, 32, 256);
  spec.config["GROUP_M"] = 8;
  spec.config["packed_b"] = 2;
  LaunchPlan tiles = cpuMatmulPlan(nullptr, spec, amx, 64, 256, 256);
  EXPECT_EQ(tiles.grain, (int64_t(8) << 20) / (32 * 32 * 256));
  EXPECT_EQ(tiles.bPanelWidth, 32);
  EXPECT_EQ(tiles.bPanelGroup, 2);
  EXPECT_EQ(tiles.rowBlocks, 8) << "256 rows: 8 blocks, one group";
  EXPECT_EQ(cpuMatmulPlan(nullptr, spec, amx, 64, 257, 256).rowBlocks, 0) << "9 blocks, two groups";
  spec.config.erase("packed_b");
  LaunchPlan vectors = cpuMatmulPlan(nullptr, spec, amx, 64, 256, 256);
  EXPECT_EQ(vectors.grain, (int64_t(1) << 19) / (32 * 32 * (256 + 12)));
  // An outer product (K = 1): its stores are the work, 13 units a result.
  EXPECT_EQ(cpuMatmulPlan(nullptr, spec, amx, 64, 256, 1).grain,
            (int64_t(1) << 19) / (32 * 32 * 13));
  EXPECT_EQ(vectors.bPanelWidth, 0) << "b as given";
  EXPECT_EQ(vectors.bPanelGroup, 1);
  EXPECT_EQ(cpuMatmulPlan(nullptr, spec, amx, 1, 4, 1 << 30).grain, 1) << "at least one program";
  ops::KernelSpec add = vectorAddSpec("f32");
  EXPECT_EQ(cpuVectorAddPlan(nullptr, add, 10).grain,
            std::max<int64_t>(1, (int64_t(1) << 15) / add.config.at("BLOCK_SIZE")));
}

} // namespace
