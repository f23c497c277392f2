#include "tile/Compiler/Target.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <unordered_set>
#include <vector>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

using namespace tile;

namespace {

/// Linux enables the AMX tile data state per process on request (arch_prctl
/// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA): a process that has not asked gets SIGILL
/// at its first tile instruction. Asked once, for the whole process; a host whose OS
/// refuses has no AMX for its kernels.
bool osGrantsTileRegisters() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kRequestPermission = 0x1023, kTileData = 18;
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
#else
  return false;
#endif
}

} // namespace

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

namespace {

/// The features a comma-separated LLVM feature list enables (its "+" items), without the
/// sign.
std::vector<std::string_view> enabledItems(std::string_view list) {
  std::vector<std::string_view> enabled;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    if (!item.empty() && item.front() == '+')
      enabled.push_back(item.substr(1));
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
  }
  return enabled;
}

} // namespace

bool Target::hasFeature(const std::string &feature) const {
  // The CPU binding asks the host on every call, and the host's list holds a few hundred
  // items: walking it took half of the binding's host time for a 64^3 int8 matmul. The
  // host's enabled features are looked up in a set built once.
  if (this == &host()) {
    static const auto enabled = [] {
      std::unordered_set<std::string> names;
      for (std::string_view item : enabledItems(host().features))
        names.emplace(item);
      return names;
    }();
    return enabled.count(feature) != 0;
  }
  std::vector<std::string_view> items = enabledItems(features);
  return std::find(items.begin(), items.end(), feature) != items.end();
}

std::string Target::fullId() const {
  return kind == TargetKind::Cpu ? str() + "[" + features + "]" : str();
}

namespace {

/// The features LLVM gives a named x86 CPU (none for a name it does not know), in the
/// host's form: sorted, each with its sign. The lowering then picks that CPU's
/// instructions (vdpbf16ps where it has AVX512-BF16) as it does the host's.
std::string namedCpuFeatures(const std::string &cpu) {
  if (llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) == llvm::X86::CK_None)
    return ""; // the machine-code stage names the unknown CPU
  llvm::SmallVector<llvm::StringRef> named;
  llvm::X86::getFeaturesForCPU(cpu, named, /*NeedPlus=*/true);
  std::vector<std::string> features(named.begin(), named.end());
  std::sort(features.begin(), features.end());
  std::string joined;
  for (const auto &feature : features)
    joined += (joined.empty() ? "" : ",") + feature;
  return joined;
}

} // namespace

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
    } else {
      target.features = namedCpuFeatures(target.arch);
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
    auto hostFeatures = llvm::sys::getHostCPUFeatures();
    bool tileRegisters = hostFeatures.lookup("amx-tile") && osGrantsTileRegisters();
    for (const auto &feature : hostFeatures) {
      bool on = feature.second && (tileRegisters || !feature.first().starts_with("amx-"));
      features.push_back((on ? "+" : "-") + feature.first().str());
    }
    std::sort(features.begin(), features.end());
    for (const auto &feature : features)
      target.features += (target.features.empty() ? "" : ",") + feature;
    return target;
  }();
  return hostTarget;
}
