#include "MatmulTuning.h"

#include "runtime/Autotuner.h"

#include <string>

namespace {

int64_t nextPowerOfTwo(int64_t value) {
  int64_t power = 1;
  while (power < value)
    power <<= 1;
  return power;
}

/// "matmul_leaky_relu[f16,f32] 1024x512x4096": shapes share a winner within a
/// power-of-two bucket of each of M, N and K, as Inductor buckets its autotuning.
std::string problemText(const tile::binding::MatmulCall &call) {
  std::string text = call.spec.op + "[";
  for (size_t i = 0; i < call.spec.dtypes.size(); ++i)
    text += (i ? "," : "") + call.spec.dtypes[i];
  return text + "] " + std::to_string(nextPowerOfTwo(call.c.size(0))) + "x" +
         std::to_string(nextPowerOfTwo(call.c.size(1))) + "x" +
         std::to_string(nextPowerOfTwo(call.a.size(1)));
}

} // namespace

std::pair<tile::ops::KernelSpec, int64_t>
tile::binding::chooseMatmulConfig(const MatmulCall &call, const Target &target,
                                  const MatmulLaunch &launch, const std::function<void()> &sync,
                                  bool mayBenchmark) {
  auto &tuner = runtime::Autotuner::global();
  if (!tuner.enabled())
    return {call.spec, call.programs};
  runtime::Autotuner::Measure measure;
  if (mayBenchmark)
    measure = [&](const runtime::Config &candidate) {
      auto [spec, programs] = call.withConfig(candidate);
      return runtime::measureSeconds([&] { launch(spec, programs); }, sync);
    };
  // Candidates are listed for "matmul"; the fused epilogue shares them.
  auto winner = tuner.tuned("matmul", problemText(call), target, measure);
  if (!winner)
    return {call.spec, call.programs};
  return call.withConfig(*winner);
}
