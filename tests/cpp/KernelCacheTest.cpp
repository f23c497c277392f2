// The in-memory kernel cache: hits, one compile under concurrent first calls, failures.
#include "TestKernels.h"
#include "runtime/CompileAndLoad.h"
#include "runtime/KernelCache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace tile;
using namespace tile::runtime;
using tile::testing::vectorAddSpec;

namespace {

struct CountingCompiler {
  std::atomic<int> compiles{0};
  KernelCache::CompileFn fn() {
    return [this](const ops::KernelSpec &spec, const Target &target) {
      ++compiles;
      return compileAndLoad(spec, target);
    };
  }
};

TEST(KernelCache, SecondCallHits) {
  CountingCompiler compiler;
  KernelCache cache(compiler.fn());
  auto first = cache.get(vectorAddSpec("f32"), Target::host());
  auto second = cache.get(vectorAddSpec("f32"), Target::host());
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(compiler.compiles.load(), 1);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_GT(first->compileMs, 0.0);
  EXPECT_EQ(first->key.size(), 64u);
}

TEST(KernelCache, DifferentSpecsAreDifferentKernels) {
  CountingCompiler compiler;
  KernelCache cache(compiler.fn());
  auto f32 = cache.get(vectorAddSpec("f32"), Target::host());
  auto f16 = cache.get(vectorAddSpec("f16"), Target::host());
  auto bigBlock = cache.get(vectorAddSpec("f32", 512), Target::host());
  EXPECT_NE(f32.get(), f16.get());
  EXPECT_NE(f32.get(), bigBlock.get());
  EXPECT_NE(f32->key, f16->key);
  EXPECT_NE(f32->cpuEntry, f16->cpuEntry);
  EXPECT_EQ(compiler.compiles.load(), 3);
}

TEST(KernelCache, ConcurrentFirstCallsCompileOnce) {
  std::atomic<int> compiles{0};
  KernelCache cache([&](const ops::KernelSpec &spec, const Target &target) {
    ++compiles;
    // Hold the compile open so that every thread arrives while it runs.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return compileAndLoad(spec, target);
  });
  const int threadCount = 8;
  std::vector<KernelCache::KernelPtr> kernels(threadCount);
  std::vector<std::thread> threads;
  for (int i = 0; i < threadCount; ++i)
    threads.emplace_back([&, i] { kernels[i] = cache.get(vectorAddSpec("bf16"), Target::host()); });
  for (auto &thread : threads)
    thread.join();
  EXPECT_EQ(compiles.load(), 1);
  for (const auto &kernel : kernels)
    EXPECT_EQ(kernel.get(), kernels[0].get());
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().hits, uint64_t(threadCount - 1));
}

TEST(KernelCache, FailedCompileReachesEveryWaiterAndIsRetried) {
  std::atomic<int> attempts{0};
  KernelCache cache([&](const ops::KernelSpec &, const Target &) -> KernelCache::KernelPtr {
    ++attempts;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    throw CompileError("boom");
  });
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      try {
        cache.get(vectorAddSpec("f32"), Target::host());
      } catch (const CompileError &) {
        ++failures;
      }
    });
  for (auto &thread : threads)
    thread.join();
  EXPECT_EQ(failures.load(), 4);
  int before = attempts.load();
  EXPECT_THROW(cache.get(vectorAddSpec("f32"), Target::host()), CompileError);
  EXPECT_EQ(attempts.load(), before + 1);
}

TEST(KernelCache, ClearForgetsKernels) {
  CountingCompiler compiler;
  KernelCache cache(compiler.fn());
  cache.get(vectorAddSpec("f32"), Target::host());
  cache.clear();
  cache.get(vectorAddSpec("f32"), Target::host());
  EXPECT_EQ(compiler.compiles.load(), 2);
}

} // namespace
