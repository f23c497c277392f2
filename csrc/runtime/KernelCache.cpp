#include "runtime/KernelCache.h"
#include "runtime/LaunchPlans.h"

#include "runtime/CompileAndLoad.h"

using namespace tile;
using namespace tile::runtime;

KernelCache::KernelCache(CompileFn compile) : compile_(std::move(compile)) {}

KernelCache::KernelPtr KernelCache::get(const ops::KernelSpec &spec, const Target &target) {
  // This runs on every op call: the host's long CPU feature list is named, not copied.
  bool hostFeatures = target.features == Target::host().features;
  std::string id = target.str() + "|" + (hostFeatures ? "host" : target.features) + "|" + spec.str();
  std::promise<KernelPtr> promise;
  std::shared_future<KernelPtr> entry;
  bool compileHere = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = kernels_.try_emplace(id);
    if (inserted) {
      it->second = promise.get_future().share();
      compileHere = true;
      ++stats_.misses;
    } else {
      ++stats_.hits;
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

KernelCache::Stats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void KernelCache::recordHit() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.hits;
}

void KernelCache::clear() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kernels_.clear();
    stats_ = {};
  }
  // The plans hold kernels too: they go with them.
  LaunchPlans::global().clear();
}

KernelCache &KernelCache::global() {
  static KernelCache cache(compileAndLoad);
  return cache;
}
