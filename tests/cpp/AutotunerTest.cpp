// The autotuner without torch: the fastest candidate wins, rejected candidates are
// skipped, a winner is measured once and then comes from memory or from the disk cache.
#include "runtime/Autotuner.h"
#include "runtime/DiskCache.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <stdexcept>

using namespace tile;
using namespace tile::runtime;

namespace {

class AutotunerTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tile-autotuner", dir));
    scratch = dir.str().str();
    savedRoot = DiskCache::global().root();
    DiskCache::global().setRoot(scratch);
    tuner.setEnabled(true);
    tuner.setCandidates("matmul", "cpu", {slow, fast, invalid});
  }
  void TearDown() override {
    DiskCache::global().setRoot(savedRoot);
    llvm::sys::fs::remove_directories(scratch);
  }

  /// Seconds per candidate from its BLOCK_M; BLOCK_M 3 is refused as the compiler would.
  Autotuner::Measure fakeMeasure(int &calls) {
    return [&calls](const Config &config) {
      ++calls;
      if (config.at("BLOCK_M") == 3)
        throw std::invalid_argument("BLOCK_M must be a power of two");
      return config.at("BLOCK_M") == 8 ? 2e-3 : 1e-3;
    };
  }

  Config slow{{"BLOCK_M", 8}, {"BLOCK_N", 32}};
  Config fast{{"BLOCK_M", 16}, {"BLOCK_N", 16}};
  Config invalid{{"BLOCK_M", 3}};
  Autotuner tuner;
  std::string scratch, savedRoot;
};

TEST_F(AutotunerTest, PicksTheFastestAndSkipsRejectedCandidates) {
  int calls = 0;
  auto winner = tuner.tuned("matmul", "matmul[f32,f32] 64x64x64", Target::host(),
                            fakeMeasure(calls));
  ASSERT_TRUE(winner);
  EXPECT_EQ(*winner, fast);
  EXPECT_EQ(calls, 3);
  auto stats = tuner.stats();
  EXPECT_EQ(stats.benchmarked, 1);
  EXPECT_EQ(stats.candidatesRun, 2);
  EXPECT_EQ(stats.candidatesRejected, 1);
  // Remembered: no second measurement.
  EXPECT_EQ(*tuner.tuned("matmul", "matmul[f32,f32] 64x64x64", Target::host(),
                         fakeMeasure(calls)),
            fast);
  EXPECT_EQ(calls, 3);
}

TEST_F(AutotunerTest, AnotherTunerReadsTheWinnerFromDisk) {
  int calls = 0;
  tuner.tuned("matmul", "matmul[f16,f16] 128x128x64", Target::host(), fakeMeasure(calls));
  Autotuner later; // as in a new process
  later.setEnabled(true);
  later.setCandidates("matmul", "cpu", {slow, fast, invalid});
  auto winner = later.tuned("matmul", "matmul[f16,f16] 128x128x64", Target::host(), nullptr);
  ASSERT_TRUE(winner);
  EXPECT_EQ(*winner, fast);
  EXPECT_EQ(later.stats().diskLoads, 1);
  EXPECT_EQ(later.stats().benchmarked, 0);
  // A different candidate list is a different question.
  later.setCandidates("matmul", "cpu", {slow});
  EXPECT_FALSE(later.tuned("matmul", "matmul[f16,f16] 128x128x64", Target::host(), nullptr));
}

TEST_F(AutotunerTest, LookupOnlyAndNoCandidatesGiveNothing) {
  EXPECT_FALSE(tuner.tuned("matmul", "matmul[f32,f32] 8x8x8", Target::host(), nullptr));
  EXPECT_FALSE(tuner.tuned("vector_add", "vector_add[f32] 8", Target::host(),
                           [](const Config &) { return 1.0; }));
  EXPECT_EQ(tuner.stats().benchmarked, 0);
}

TEST_F(AutotunerTest, AllRejectedIsRememberedAsTheDefault) {
  tuner.setCandidates("matmul", "cpu", {invalid});
  int calls = 0;
  EXPECT_FALSE(tuner.tuned("matmul", "matmul[f32,f32] 32x32x32", Target::host(),
                           fakeMeasure(calls)));
  EXPECT_FALSE(tuner.tuned("matmul", "matmul[f32,f32] 32x32x32", Target::host(),
                           fakeMeasure(calls)));
  EXPECT_EQ(calls, 1);
}

TEST(MeasureSeconds, TakesTheMedianOfBatchesAfterAWarmUp) {
  int runs = 0, syncs = 0;
  double seconds = measureSeconds([&] { ++runs; }, [&] { ++syncs; });
  EXPECT_GT(seconds, 0);
  EXPECT_LT(seconds, 1e-3);
  EXPECT_GE(runs, 2 + 3); // warm-up, one timed run, at least three batches
  EXPECT_GE(syncs, 5);
}

} // namespace
