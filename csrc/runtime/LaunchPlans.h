// What a repeated kernel call needs, memoized by the call's signature, so that a call
// like one seen before does no string building, no hashing of strings and no allocation:
// the loaded kernel, the program instances and the CPU thread grain.
#ifndef TILE_RUNTIME_LAUNCHPLANS_H
#define TILE_RUNTIME_LAUNCHPLANS_H

#include "runtime/LoadedKernel.h"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace tile::runtime {

/// How one call is launched: everything that depends on its signature alone.
struct LaunchPlan {
  std::shared_ptr<const LoadedKernel> kernel;
  int64_t programs = 0;
  int64_t grain = 1; ///< program instances per CPU task at least
  int64_t bPanelWidth = 0; ///< b packed into panels this wide before each launch (CPU); 0: as given
  int64_t bPanelGroup = 1; ///< rows of b side by side in its panels (PanelLayout::group)
  /// Blocks along M where they all make one group of the grouped order (CPU; 0
  /// otherwise): the grid may then run in bands of rows (launchCpuInRowBands).
  int64_t rowBlocks = 0;
  int64_t blockM = 0; ///< rows of a per block (CPU): a band of rowBlocks is as many rows
  /// The kernel takes its block from a 2-D grid, (rowBlocks, block columns) (its grid_2d
  /// knob, CPU): its launches pass that grid.
  bool blockGrid = false;
};

/// A call's signature as plain numbers: the op, the dtypes, the device, the sizes and the
/// layout facts its kernel was specialized on. Whoever builds one puts in it everything
/// that chooses the kernel and the grid, and nothing else.
using CallSignature = std::array<int64_t, 12>;

/// Plans by signature, thread-safe and bounded. Emptied when the kernels or the tuning
/// they were chosen by change: KernelCache::clear() and the Autotuner's settings call
/// clear().
class LaunchPlans {
public:
  std::optional<LaunchPlan> find(const CallSignature &signature) const;
  void insert(const CallSignature &signature, LaunchPlan plan);
  void clear();
  size_t size() const;

  static LaunchPlans &global();

private:
  struct Hash {
    size_t operator()(const CallSignature &signature) const;
  };
  // A program with many shapes (dynamic batch sizes) would grow the memo without end:
  // past this many, it starts over.
  static constexpr size_t kCapacity = 4096;
  mutable std::mutex mutex_;
  std::unordered_map<CallSignature, LaunchPlan, Hash> plans_;
};

/// The plan of `signature` in LaunchPlans::global(), counted as a hit of
/// KernelCache::global(): a call it serves is one that cache would have served.
std::optional<LaunchPlan> reusePlan(const CallSignature &signature);

} // namespace tile::runtime

#endif
