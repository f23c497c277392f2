// tile_runtime::set_* ops: the settings of torch_tile.config that the C++ runtime acts
// on, pushed from Python whenever one changes (autotuning, its candidates, the cache
// and stage-dump folders), the autotuner's counters, and the result check its
// candidates pass.
#include "MatmulTuning.h"
#include "runtime/Autotuner.h"
#include "runtime/DiskCache.h"
#include "runtime/StageDump.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdlib>
#include <sstream>

namespace {

using tile::runtime::Autotuner;

void setAutotune(bool enabled, double progressAfterSeconds) {
  Autotuner::global().setEnabled(enabled);
  Autotuner::global().setProgressAfter(progressAfterSeconds);
}

/// Each candidate as "BLOCK_M=128,BLOCK_N=64,...": the knobs it sets (the others keep
/// the call's default).
void setAutotuneCandidates(std::string op, std::string family, std::vector<std::string> configs) {
  TORCH_CHECK(family == "cpu" || family == "hip" || family == "cuda",
              "set_autotune_candidates: no target family '", family, "' (cpu, hip, cuda)");
  std::vector<tile::runtime::Config> candidates;
  for (const std::string &text : configs) {
    tile::runtime::Config config;
    std::istringstream fields(text);
    std::string field;
    while (std::getline(fields, field, ',')) {
      size_t equals = field.find('=');
      char *end = nullptr;
      long long value =
          equals == std::string::npos ? 0 : std::strtoll(field.c_str() + equals + 1, &end, 10);
      TORCH_CHECK(equals != std::string::npos && equals > 0 && end && *end == '\0' &&
                      end != field.c_str() + equals + 1,
                  "set_autotune_candidates: '", field, "' in '", text, "' is not KNOB=integer");
      config[field.substr(0, equals)] = value;
    }
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
  m.def("set_autotune_candidates(str op, str family, str[] configs) -> ()",
        setAutotuneCandidates);
  m.def("autotune_stats() -> str", autotuneStats);
  m.def("clear_tuning() -> ()", clearTuning);
  // The check every autotuning candidate passes: "" when `out` matches `reference`.
  m.def("result_mismatch(Tensor out, Tensor reference) -> str",
        [](const at::Tensor &out, const at::Tensor &reference) {
          return tile::binding::resultMismatch(out, reference);
        });
  m.def("set_cache_dir(str? dir) -> ()", setCacheDir);
  m.def("set_dump_dir(str? dir) -> ()", setDumpDir);
}
