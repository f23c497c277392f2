#ifndef TILE_RUNTIME_AUTOTUNER_H
#define TILE_RUNTIME_AUTOTUNER_H

#include "tile/Compiler/Target.h"

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tile::runtime {

/// The knobs of one kernel config: {"BLOCK_M": 128, "num_warps": 8, ...}.
using Config = std::map<std::string, int64_t>;

/// Picks the fastest config of a problem by running each candidate once on it, and keeps
/// the winner in memory and in the disk cache, so later calls and later processes run it
/// without benchmarking. Settings (on/off, candidates per op and target family) come from
/// torch_tile.config; off, or with no candidates, callers use their heuristic default.
class Autotuner {
public:
  /// Seconds one candidate takes on the problem; throws to reject the candidate (a config
  /// the compiler's resource check refuses, a launch that fails).
  using Measure = std::function<double(const Config &)>;

  struct Stats {
    int64_t benchmarked = 0; ///< problems tuned by running candidates
    int64_t diskLoads = 0;   ///< problems whose winner came from the disk cache
    int64_t candidatesRun = 0;
    int64_t candidatesRejected = 0;
  };

  static Autotuner &global();

  void setEnabled(bool enabled);
  bool enabled() const;
  /// Progress is printed on a terminal once tuning has taken this long.
  void setProgressAfter(double seconds);
  /// Candidates of an op ("matmul") for a target family ("cpu", "hip", "cuda").
  void setCandidates(const std::string &op, const std::string &family,
                     std::vector<Config> candidates);
  std::vector<Config> candidates(const std::string &op, const Target &target) const;

  /// The winner for `problem` (op, dtypes and shape bucket as text, e.g.
  /// "matmul[f32,f32] 512x512x512") on `target`: from memory, else from disk, else by
  /// measuring every candidate with `measure` (none given: lookup only, as under CUDA
  /// graph capture). nullopt when nothing is known and no candidate ran.
  std::optional<Config> tuned(const std::string &op, const std::string &problem,
                              const Target &target, const Measure &measure);

  Stats stats() const;
  /// Forgets the winners held in memory (not those on disk); for tests.
  void clear();

private:
  std::optional<Config> benchmark(const std::string &problem, const Target &target,
                                  const std::vector<Config> &candidates, const Measure &measure,
                                  std::string &record);

  mutable std::mutex mutex_;
  std::mutex tuning_; ///< one problem is benchmarked at a time: timings must not overlap
  bool enabled_ = false;
  double progressAfter_ = 1.0;
  std::map<std::string, std::vector<Config>> candidates_; ///< by "op@family"
  std::map<std::string, Config> winners_;                 ///< by tuning key
  Stats stats_;
};

/// Median seconds of `run` over repeated batches, after one warm-up; `sync` waits for
/// the device (nothing on the CPU). Batches of ~2 ms keep launch noise out of short
/// kernels; about 25 ms in all per candidate.
double measureSeconds(const std::function<void()> &run, const std::function<void()> &sync);

/// Text of a config, "BLOCK_K=32,BLOCK_M=128,...": part of tuning keys and records.
std::string configText(const Config &config);

} // namespace tile::runtime

#endif
