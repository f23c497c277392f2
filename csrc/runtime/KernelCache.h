#ifndef TILE_RUNTIME_KERNELCACHE_H
#define TILE_RUNTIME_KERNELCACHE_H

#include "ops/KernelSpec.h"
#include "runtime/LoadedKernel.h"
#include "tile/Compiler/Target.h"

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tile::runtime {

/// Compiled kernels by (target, spec), in memory. Thread-safe; when several threads ask
/// for a kernel that is not there yet, one compiles and the others wait for it. A failed
/// compile is reported to every waiter and not remembered, so a later call retries.
class KernelCache {
public:
  using KernelPtr = std::shared_ptr<const LoadedKernel>;
  using CompileFn = std::function<KernelPtr(const ops::KernelSpec &, const Target &)>;

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
  };

  explicit KernelCache(CompileFn compile);

  KernelPtr get(const ops::KernelSpec &spec, const Target &target);
  /// The kernel where this cache holds it compiled (counted as a hit), else null: one
  /// that a call would compile, load from the disk cache or wait for.
  KernelPtr ready(const ops::KernelSpec &spec, const Target &target);
  /// Counts a call that a launch plan served with one of this cache's kernels: a hit,
  /// without the lookup.
  void recordHit();
  Stats stats() const;
  /// Forgets every kernel (the next call compiles again); for tests and benchmarks.
  void clear();

  /// The process-wide cache, compiling with compileAndLoad().
  static KernelCache &global();

private:
  static std::string idOf(const ops::KernelSpec &spec, const Target &target);

  CompileFn compile_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<KernelPtr>> kernels_;
  // Counted without the lock: a call that a launch plan served counts a hit on every
  // call (recordHit), where a lock and its release cost about 40 ns of a 1 us call.
  std::atomic<uint64_t> hits_{0}, misses_{0};
};

} // namespace tile::runtime

#endif
