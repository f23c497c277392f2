// tile_runtime::set_* ops: the settings of torch_tile.config that the C++ runtime acts
// on, pushed from Python whenever one changes (autotuning, its candidates, the cache
// and stage-dump folders), and the autotuner's counters.
#include "runtime/Autotuner.h"
#include "runtime/DiskCache.h"
#include "runtime/StageDump.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <sstream>

namespace {

using tile::runtime::Autotuner;

void setAutotune(bool enabled, double progressAfterSeconds) {
  Autotuner::global().setEnabled(enabled);
  Autotuner::global().setProgressAfter(progressAfterSeconds);
}

/// `values` holds the candidates one after another, each as len(knob_names) values.
void setAutotuneCandidates(std::string op, std::string family, std::vector<std::string> knobNames,
                           std::vector<int64_t> values) {
  TORCH_CHECK(family == "cpu" || family == "hip" || family == "cuda",
              "set_autotune_candidates: no target family '", family, "' (cpu, hip, cuda)");
  TORCH_CHECK(!knobNames.empty() ? values.size() % knobNames.size() == 0 : values.empty(),
              "set_autotune_candidates: ", values.size(), " values do not make whole configs of ",
              knobNames.size(), " knobs");
  std::vector<tile::runtime::Config> candidates;
  for (size_t start = 0; start < values.size(); start += knobNames.size()) {
    tile::runtime::Config config;
    for (size_t i = 0; i < knobNames.size(); ++i)
      config[knobNames[i]] = values[start + i];
    candidates.push_back(std::move(config));
  }
  Autotuner::global().setCandidates(op, family, std::move(candidates));
}

/// {"benchmarked": B, "disk_loads": D, "candidates_run": R, "candidates_rejected": X}
std::string autotuneStats() {
  auto stats = Autotuner::global().stats();
  std::ostringstream json;
  json << "{\"benchmarked\": " << stats.benchmarked << ", \"disk_loads\": " << stats.diskLoads
       << ", \"candidates_run\": " << stats.candidatesRun
       << ", \"candidates_rejected\": " << stats.candidatesRejected << "}";
  return json.str();
}

void clearTuning() { Autotuner::global().clear(); }

/// None: $TILE_CACHE_DIR, else ~/.cache/torch_tile; "": no disk cache.
void setCacheDir(std::optional<std::string> dir) {
  tile::runtime::DiskCache::global().setRoot(dir ? *dir : tile::runtime::DiskCache::defaultRoot());
}

void setDumpDir(std::optional<std::string> dir) {
  tile::runtime::setStageDumpDir(dir.value_or(""));
}

} // namespace

TORCH_LIBRARY_FRAGMENT(tile_runtime, m) {
  m.def("set_autotune(bool enabled, float progress_after_seconds) -> ()", setAutotune);
  m.def("set_autotune_candidates(str op, str family, str[] knob_names, int[] values) -> ()",
        setAutotuneCandidates);
  m.def("autotune_stats() -> str", autotuneStats);
  m.def("clear_tuning() -> ()", clearTuning);
  m.def("set_cache_dir(str? dir) -> ()", setCacheDir);
  m.def("set_dump_dir(str? dir) -> ()", setDumpDir);
}
