#include "tile/Compiler/Target.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

using namespace tile;

std::string Target::str() const {
  switch (kind) {
  case TargetKind::Cpu:
    return "cpu:" + arch;
  case TargetKind::Hip:
    return "hip:" + arch + features;
  case TargetKind::Cuda:
    return "cuda:" + arch;
  }
  return arch;
}

bool Target::hasFeature(const std::string &feature) const {
  return ("," + features + ",").find(",+" + feature + ",") != std::string::npos;
}

std::string Target::fullId() const {
  return kind == TargetKind::Cpu ? str() + "[" + features + "]" : str();
}

Target Target::parse(const std::string &text) {
  llvm::StringRef rest(text);
  auto [kindName, tail] = rest.split(':');
  Target target;
  if (kindName == "cpu") {
    target.kind = TargetKind::Cpu;
    target.arch = tail.str();
    if (target.arch.empty() || target.arch == "native" || target.arch == host().arch) {
      target.arch = host().arch;
      target.features = host().features;
    }
  } else if (kindName == "hip") {
    target.kind = TargetKind::Hip;
    auto [arch, features] = tail.split(':');
    target.arch = arch.str();
    target.features = features.empty() ? "" : ":" + features.str();
  } else if (kindName == "cuda") {
    target.kind = TargetKind::Cuda;
    target.arch = tail.str();
  }
  if (target.arch.empty() || (kindName != "cpu" && kindName != "hip" && kindName != "cuda"))
    throw std::invalid_argument("unknown target '" + text +
                                "': expected cpu[:<llvm cpu>], hip:<gfx arch>[:features] "
                                "(e.g. hip:gfx942:sramecc+:xnack-) or cuda:sm_<NN>");
  return target;
}

const Target &Target::host() {
  static const Target hostTarget = [] {
    Target target;
    target.kind = TargetKind::Cpu;
    target.arch = llvm::sys::getHostCPUName().str();
    std::vector<std::string> features;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      features.push_back((feature.second ? "+" : "-") + feature.first().str());
    std::sort(features.begin(), features.end());
    for (const auto &feature : features)
      target.features += (target.features.empty() ? "" : ",") + feature;
    return target;
  }();
  return hostTarget;
}
