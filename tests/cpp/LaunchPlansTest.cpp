// The launch plans: a call's signature finds the plan made for it and nothing else, and
// the plans go whenever the kernels or the tuning they were chosen by change.
#include "TestKernels.h"
#include "runtime/Autotuner.h"
#include "runtime/KernelCache.h"
#include "runtime/LaunchPlans.h"

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

} // namespace
