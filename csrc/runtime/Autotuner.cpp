#include "runtime/Autotuner.h"
#include "runtime/LaunchPlans.h"

#include "runtime/BuildId.h"
#include "runtime/DiskCache.h"
#include "runtime/KernelKey.h"
#include "tile/Compiler/Compile.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unistd.h>

using namespace tile;
using namespace tile::runtime;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string familyOf(const Target &target) {
  switch (target.kind) {
  case TargetKind::Cpu:
    return "cpu";
  case TargetKind::Hip:
    return "hip";
  case TargetKind::Cuda:
    return "cuda";
  }
  return "cpu";
}

/// A winner is valid for the compiler that measured it, the exact target and the
/// candidate list it was chosen from: a change of any of them tunes again.
std::string tuningKey(const std::string &problem, const Target &target,
                      const std::vector<Config> &candidates) {
  std::string material = std::string("tuning\n") + compilerVersion() + "\n" + coreBuildId() +
                         "\n" + problem + "\n" + target.fullId() + "\n";
  for (const Config &candidate : candidates)
    material += configText(candidate) + "\n";
  return "tuned-" + sha256Hex(material);
}

std::optional<Config> parseWinner(const std::string &record) {
  auto parsed = llvm::json::parse(record);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *fields = parsed->getAsObject();
  const llvm::json::Object *winner = fields ? fields->getObject("winner") : nullptr;
  if (!winner || winner->empty())
    return std::nullopt;
  Config config;
  for (const auto &[name, value] : *winner) {
    auto number = value.getAsInteger();
    if (!number)
      return std::nullopt;
    config[name.str()] = *number;
  }
  return config;
}

/// "torch-tile: autotuning <problem> on <target>: 3/8 configs, best 1.20 ms" on stderr,
/// rewritten in place; only on a terminal, and only once tuning has taken long enough
/// for a user to wonder what the process is doing.
class Progress {
public:
  Progress(std::string what, size_t total, double after)
      : what_(std::move(what)), total_(total), after_(after), tty_(::isatty(STDERR_FILENO)) {}

  void update(size_t done, double bestSeconds) {
    if (!tty_ || secondsSince(start_) < after_)
      return;
    shown_ = true;
    std::fprintf(stderr, "\rtorch-tile: autotuning %s: %zu/%zu configs", what_.c_str(), done,
                 total_);
    if (bestSeconds > 0)
      std::fprintf(stderr, ", best %.3f ms", bestSeconds * 1e3);
    std::fflush(stderr);
  }

  void finish(const std::string &winner) {
    if (shown_)
      std::fprintf(stderr, "\rtorch-tile: autotuned %s in %.1f s: %s\n", what_.c_str(),
                   secondsSince(start_), winner.c_str());
  }

private:
  std::string what_;
  size_t total_;
  double after_;
  bool tty_;
  bool shown_ = false;
  Clock::time_point start_ = Clock::now();
};

} // namespace

std::string runtime::configText(const Config &config) {
  std::string text;
  for (const auto &[name, value] : config)
    text += (text.empty() ? "" : ",") + name + "=" + std::to_string(value);
  return text;
}

double runtime::measureSeconds(const std::function<void()> &run,
                               const std::function<void()> &sync) {
  run(); // warm-up: caches, page faults, the driver's first-launch work
  sync();
  auto start = Clock::now();
  run();
  sync();
  double once = std::max(secondsSince(start), 1e-7);
  int perBatch = static_cast<int>(std::clamp(2e-3 / once, 1.0, 1000.0));
  int batches = static_cast<int>(std::clamp(25e-3 / (once * perBatch), 3.0, 11.0));
  std::vector<double> samples;
  for (int batch = 0; batch < batches; ++batch) {
    start = Clock::now();
    for (int i = 0; i < perBatch; ++i)
      run();
    sync();
    samples.push_back(secondsSince(start) / perBatch);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

Autotuner &Autotuner::global() {
  static Autotuner tuner;
  return tuner;
}

// The launch plans were chosen under the tuning settings: they go when those change.
void Autotuner::setEnabled(bool enabled) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (enabled_ == enabled)
      return;
    enabled_ = enabled;
  }
  LaunchPlans::global().clear();
}

bool Autotuner::enabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enabled_;
}

void Autotuner::setProgressAfter(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  progressAfter_ = seconds;
}

void Autotuner::setCandidates(const std::string &op, const std::string &family,
                              std::vector<Config> candidates) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    candidates_[op + "@" + family] = std::move(candidates);
  }
  LaunchPlans::global().clear();
}

std::vector<Config> Autotuner::candidates(const std::string &op, const Target &target) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = candidates_.find(op + "@" + familyOf(target));
  return found == candidates_.end() ? std::vector<Config>() : found->second;
}

Autotuner::Stats Autotuner::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Autotuner::clear() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    winners_.clear();
    stats_ = {};
  }
  LaunchPlans::global().clear();
}

std::optional<Config> Autotuner::tuned(const std::string &op, const std::string &problem,
                                       const Target &target, const Measure &measure) {
  std::vector<Config> list = candidates(op, target);
  if (list.empty())
    return std::nullopt;
  std::string key = tuningKey(problem, target, list);
  // An empty winner remembers that no candidate ran: the default is used without
  // trying them all again on every call.
  auto remembered = [&]() -> std::optional<std::optional<Config>> {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = winners_.find(key);
    if (found == winners_.end())
      return std::nullopt;
    return found->second.empty() ? std::optional<Config>() : found->second;
  };
  if (auto winner = remembered())
    return *winner;
  // Another thread may be tuning this problem: wait for it rather than time beside it.
  std::lock_guard<std::mutex> tuning(tuning_);
  if (auto winner = remembered())
    return *winner;
  std::optional<Config> winner;
  bool fromDisk = false;
  if (auto record = DiskCache::global().loadRecord(key, target)) {
    winner = parseWinner(*record);
    fromDisk = winner.has_value();
  }
  std::string record;
  if (!winner) {
    if (!measure)
      return std::nullopt;
    winner = benchmark(problem, target, list, measure, record);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    winners_[key] = winner.value_or(Config());
    ++(fromDisk ? stats_.diskLoads : stats_.benchmarked);
  }
  if (winner && !fromDisk)
    DiskCache::global().storeRecord(key, target, record);
  return winner;
}

std::optional<Config> Autotuner::benchmark(const std::string &problem, const Target &target,
                                           const std::vector<Config> &candidates,
                                           const Measure &measure, std::string &record) {
  double after;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    after = progressAfter_;
  }
  Progress progress(problem + " on " + target.str(), candidates.size(), after);
  llvm::json::Array timings;
  std::optional<Config> best;
  double bestSeconds = 0;
  int64_t run = 0, rejected = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    progress.update(i, bestSeconds);
    const Config &candidate = candidates[i];
    try {
      double seconds = measure(candidate);
      ++run;
      timings.push_back(
          llvm::json::Object{{"config", configText(candidate)}, {"ms", seconds * 1e3}});
      if (!best || seconds < bestSeconds) {
        best = candidate;
        bestSeconds = seconds;
      }
    } catch (const std::exception &error) {
      ++rejected;
      timings.push_back(llvm::json::Object{{"config", configText(candidate)},
                                           {"rejected", std::string(error.what())}});
    }
  }
  progress.update(candidates.size(), bestSeconds);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.candidatesRun += run;
    stats_.candidatesRejected += rejected;
  }
  progress.finish(best ? configText(*best) : "no candidate compiled; using the default");
  if (!best)
    return std::nullopt;
  llvm::json::Object winner;
  for (const auto &[name, value] : *best)
    winner[name] = value;
  llvm::json::Object fields{{"problem", problem},
                            {"target", target.str()},
                            {"winner", std::move(winner)},
                            {"timings", std::move(timings)}};
  llvm::raw_string_ostream(record) << llvm::json::Value(std::move(fields));
  return best;
}
