#ifndef TILE_RUNTIME_DISKCACHE_H
#define TILE_RUNTIME_DISKCACHE_H

#include "tile/Compiler/Compile.h"

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace tile::runtime {

/// A folder name for a target: "hip:gfx942:sramecc+:xnack-" -> "hip-gfx942-sramecc+-xnack-".
std::string targetFolder(const Target &target);

/// Compiled kernels on disk, one folder per target and key:
///   <root>/<target>/<key>/{binary, meta.json}
/// An entry is written into a private temporary folder and renamed into place, so a
/// reader sees a whole entry or none; two processes storing the same key both succeed.
/// On read it is validated (owner, permissions, key, target, size, sha256) and a
/// truncated, corrupt or foreign entry is removed and reported as a miss. Loading a
/// binary runs its code, so the root is created 0700 and entries that another user owns
/// or that others can write are never loaded.
class DiskCache {
public:
  /// `root` empty: no disk cache (every lookup misses, stores do nothing).
  explicit DiskCache(std::string root);

  /// $TILE_CACHE_DIR, else $XDG_CACHE_HOME/torch_tile, else ~/.cache/torch_tile.
  static std::string defaultRoot();
  /// The process-wide cache at defaultRoot().
  static DiskCache &global();

  std::optional<Binary> load(const std::string &key, const Target &target);
  /// Whether an entry of a binary for `key` is there, unchecked (load() checks it): a
  /// hint of whether a first call will compile.
  bool holds(const std::string &key, const Target &target) const;
  void store(const std::string &key, const Binary &binary);

  /// A small text record kept beside the kernels (a tuned config), as an entry of its
  /// own with the same guarantees: <root>/<target>/<key>/{record, meta.json}.
  std::optional<std::string> loadRecord(const std::string &key, const Target &target);
  void storeRecord(const std::string &key, const Target &target, const std::string &text);

  /// Machine code a GPU driver made of a kernel's portable code (CUDA's cubin of its
  /// PTX), under a key of its own that names the driver and device:
  /// <root>/<target>/<key>/{driver-code, meta.json}.
  std::optional<std::string> loadDriverCode(const std::string &key, const Target &target);
  void storeDriverCode(const std::string &key, const Target &target, const std::string &code);

  std::string root() const;
  /// Moves the cache to another folder (torch_tile.config.cache_dir); "" turns it off.
  /// Entries already stored stay where they are.
  void setRoot(std::string root);
  /// False once the root proved unwritable (stores are skipped from then on).
  bool writable() const;
  /// Binaries loaded from disk and used so far (counted by the caller, once the binary
  /// passed its checks).
  int64_t loads() const { return loads_; }
  void countLoad() { ++loads_; }
  /// A binary that load() returned whole but that would not load into the process (not
  /// an object file, a missing entry symbol): its entry is removed, with a warning that
  /// gives `why`, so that it is compiled and stored again.
  void discard(const std::string &key, const Target &target, const std::string &why);

  /// Where warnings go (once per kind of problem): stderr, as "torch-tile: warning: ...",
  /// unless a test captures them.
  static void setWarningHandler(std::function<void(const std::string &)> handler);

private:
  /// meta.json's text fields, beside the ones every entry has (key, target, size, sha256).
  using MetaFields = std::map<std::string, std::string>;
  struct Entry {
    std::string payload;
    MetaFields meta;
  };
  /// The entry if it is whole and trusted; a bad one is removed, with a warning that
  /// names the `remedy` ("recompiling it").
  std::optional<Entry> loadEntry(const std::string &key, const Target &target,
                                 const char *payloadName, const char *remedy);
  void storeEntry(const std::string &key, const Target &target, const char *payloadName,
                  const std::string &payload, MetaFields meta);
  std::string entryPath(const std::string &root, const std::string &key,
                        const Target &target) const;
  void warnOnce(const std::string &kind, const std::string &message);
  void removeEntry(const std::string &path);

  std::string root_;
  mutable std::mutex mutex_;
  bool writable_ = true;
  std::atomic<int64_t> loads_{0};
  std::vector<std::string> warned_;
};

} // namespace tile::runtime

#endif
