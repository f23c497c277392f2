#include "runtime/KernelCache.h"
#include "runtime/LaunchPlans.h"

#include "runtime/CompileAndLoad.h"

#include <chrono>

using namespace tile;
using namespace tile::runtime;

KernelCache::KernelCache(CompileFn compile) : compile_(std::move(compile)) {}

std::string KernelCache::idOf(const ops::KernelSpec &spec, const Target &target) {
  // The host's long CPU feature list is named, not copied.
  bool hostFeatures = target.features == Target::host().features;
  return target.str() + "|" + (hostFeatures ? "host" : target.features) + "|" + spec.str();
}

KernelCache::KernelPtr KernelCache::get(const ops::KernelSpec &spec, const Target &target) {
  std::string id = idOf(spec, target);
  std::promise<KernelPtr> promise;
  std::shared_future<KernelPtr> entry;
  bool compileHere = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = kernels_.try_emplace(id);
    if (inserted) {
      it->second = promise.get_future().share();
      compileHere = true;
      ++misses_;
    } else {
      ++hits_;
    }
    entry = it->second;
  }
  // Waiting and compiling happen outside the lock, so other kernels stay reachable.
  if (!compileHere)
    return entry.get();
  try {
    KernelPtr kernel = compile_(spec, target);
    promise.set_value(kernel);
    return kernel;
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      kernels_.erase(id);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

KernelCache::KernelPtr KernelCache::ready(const ops::KernelSpec &spec, const Target &target) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kernels_.find(idOf(spec, target));
  // An entry in the map is either in flight or compiled: a failed compile leaves it.
  if (it == kernels_.end() ||
      it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return nullptr;
  ++hits_;
  return it->second.get();
}

KernelCache::Stats KernelCache::stats() const { return Stats{hits_.load(), misses_.load()}; }

void KernelCache::recordHit() { hits_.fetch_add(1, std::memory_order_relaxed); }

void KernelCache::clear() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kernels_.clear();
    hits_ = 0;
    misses_ = 0;
  }
  // The plans hold kernels too: they go with them.
  LaunchPlans::global().clear();
}

KernelCache &KernelCache::global() {
  static KernelCache cache(compileAndLoad);
  return cache;
}
