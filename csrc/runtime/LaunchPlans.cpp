#include "runtime/LaunchPlans.h"

#include "runtime/KernelCache.h"

namespace tile::runtime {

size_t LaunchPlans::Hash::operator()(const CallSignature &signature) const {
  uint64_t hash = 1469598103934665603ull;
  for (int64_t value : signature)
    hash = (hash ^ static_cast<uint64_t>(value)) * 1099511628211ull;
  return static_cast<size_t>(hash);
}

std::optional<LaunchPlan> LaunchPlans::find(const CallSignature &signature) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(signature);
  if (it == plans_.end())
    return std::nullopt;
  return it->second;
}

void LaunchPlans::insert(const CallSignature &signature, LaunchPlan plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (plans_.size() >= kCapacity)
    plans_.clear();
  plans_[signature] = std::move(plan);
}

void LaunchPlans::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  plans_.clear();
}

size_t LaunchPlans::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

std::optional<LaunchPlan> reusePlan(const CallSignature &signature) {
  std::optional<LaunchPlan> plan = LaunchPlans::global().find(signature);
  if (plan)
    KernelCache::global().recordHit();
  return plan;
}

LaunchPlans &LaunchPlans::global() {
  static LaunchPlans plans;
  return plans;
}

} // namespace tile::runtime
