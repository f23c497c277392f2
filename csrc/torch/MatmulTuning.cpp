#include "MatmulTuning.h"

#include "runtime/Autotuner.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>
#include <string>

namespace {

double toleranceFor(at::ScalarType type) {
  switch (type) {
  case at::kHalf:
    return 4e-3;
  case at::kBFloat16:
    return 2e-2;
  default:
    return 1e-4;
  }
}

/// Fills an output so that an element a kernel fails to write cannot pass for a result.
void poison(at::Tensor &out) {
  if (at::isFloatingType(out.scalar_type()))
    out.fill_(std::numeric_limits<double>::quiet_NaN());
  else
    out.fill_(std::numeric_limits<int32_t>::min());
}

} // namespace

std::string tile::binding::resultMismatch(const at::Tensor &out, const at::Tensor &reference) {
  if (out.sizes() != reference.sizes())
    return "its result has another shape";
  int64_t total = out.numel();
  if (!at::isFloatingType(out.scalar_type())) {
    int64_t differ = out.ne(reference).sum().item<int64_t>();
    if (differ == 0)
      return {};
    return std::to_string(differ) + " of " + std::to_string(total) +
           " elements differ from the default config's result (integer results must be exact)";
  }
  at::Tensor o = out.to(at::kFloat), r = reference.to(at::kFloat);
  at::Tensor finite = r.isfinite();
  double scale = at::where(finite, r.abs(), at::zeros_like(r)).max().item<double>();
  double allowed = toleranceFor(out.scalar_type()) * std::max(scale, 1e-30);
  at::Tensor difference = (o - r).abs();
  at::Tensor ok = o.eq(r) | (o.isnan() & r.isnan()) | difference.le(allowed);
  int64_t bad = total - ok.sum().item<int64_t>();
  if (bad == 0)
    return {};
  double worst = at::where(ok, at::zeros_like(difference), difference.nan_to_num(INFINITY)).max().item<double>();
  return std::to_string(bad) + " of " + std::to_string(total) +
         " elements differ from the default config's result by more than " +
         std::to_string(allowed) + " (max |difference| " + std::to_string(worst) + ")";
}

std::pair<tile::ops::KernelSpec, int64_t>
tile::binding::chooseMatmulConfig(const MatmulCall &call, const Target &target,
                                  const MatmulLaunch &launch, const std::function<void()> &sync,
                                  bool mayBenchmark) {
  auto &tuner = runtime::Autotuner::global();
  if (!tuner.enabled())
    return {call.spec, call.programs};
  runtime::Autotuner::Measure measure;
  // The default config's result, made when the first candidate is measured: each
  // candidate's result must match it before its time counts.
  at::Tensor reference;
  bool referenceMade = false;
  if (mayBenchmark)
    measure = [&](const runtime::Config &candidate) {
      at::Tensor out = call.c;
      if (!referenceMade) {
        referenceMade = true;
        try {
          poison(out);
          launch(call.spec, call.programs);
          sync();
          reference = out.clone();
        } catch (const std::exception &) {
          reference = at::Tensor(); // the default itself fails: times alone decide
        }
      }
      auto [spec, programs] = call.withConfig(candidate);
      if (reference.defined()) {
        poison(out);
        launch(spec, programs);
        sync();
        if (std::string mismatch = resultMismatch(out, reference); !mismatch.empty())
          throw std::runtime_error("wrong result: " + mismatch);
      }
      return runtime::measureSeconds([&] { launch(spec, programs); }, sync);
    };
  // Candidates are listed for "matmul"; the fused epilogue shares them.
  auto winner = tuner.tuned("matmul",
                            runtime::matmulTuningBucket(call.spec.op, call.spec.dtypes, call.c.size(0),
                                                        call.c.size(1), call.a.size(1)),
                            target, measure);
  if (!winner)
    return {call.spec, call.programs};
  return call.withConfig(*winner);
}
