#include "runtime/DiskCache.h"

#include "runtime/KernelKey.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <sys/stat.h>
#include <unistd.h>

using namespace tile;
using namespace tile::runtime;

namespace {

std::mutex handlerMutex;
std::function<void(const std::string &)> &warningHandler() {
  static std::function<void(const std::string &)> handler = [](const std::string &message) {
    std::cerr << "torch-tile: warning: " << message << std::endl;
  };
  return handler;
}

/// A folder name for a target: "hip:gfx942:sramecc+:xnack-" -> "hip-gfx942-sramecc+-xnack-".
std::string targetFolder(const Target &target) {
  std::string name = target.str();
  for (char &c : name)
    if (c == ':' || c == '/')
      c = '-';
  return name;
}

/// Writes `data` to `path` and flushes it to disk before the rename publishes it.
bool writeFile(const std::string &path, const std::string &data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return false;
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n <= 0) {
      ::close(fd);
      return false;
    }
    written += size_t(n);
  }
  bool ok = ::fsync(fd) == 0;
  return ::close(fd) == 0 && ok;
}

/// Owned by this user and not writable by group or others.
bool trusted(const std::string &path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0)
    return false;
  return info.st_uid == ::geteuid() && (info.st_mode & (S_IWGRP | S_IWOTH)) == 0 &&
         !S_ISLNK(info.st_mode);
}

bool makePrivateDirs(const std::string &path) {
  if (llvm::sys::fs::is_directory(path))
    return true;
  if (llvm::sys::fs::exists(path)) {
    errno = ENOTDIR;
    return false;
  }
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (!parent.empty() && !makePrivateDirs(parent.str()))
    return false;
  return ::mkdir(path.c_str(), 0700) == 0 || (errno == EEXIST && llvm::sys::fs::is_directory(path));
}

} // namespace

DiskCache::DiskCache(std::string root) : root_(std::move(root)) {
  if (root_.empty())
    writable_ = false;
}

std::string DiskCache::defaultRoot() {
  if (const char *dir = std::getenv("TILE_CACHE_DIR"))
    return dir;
  llvm::SmallString<256> path;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    path = xdg;
  } else if (const char *home = std::getenv("HOME"); home && *home) {
    path = home;
    llvm::sys::path::append(path, ".cache");
  } else {
    return {};
  }
  llvm::sys::path::append(path, "torch_tile");
  return path.str().str();
}

DiskCache &DiskCache::global() {
  static DiskCache cache(defaultRoot());
  return cache;
}

void DiskCache::setWarningHandler(std::function<void(const std::string &)> handler) {
  std::lock_guard<std::mutex> lock(handlerMutex);
  warningHandler() = std::move(handler);
}

bool DiskCache::writable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return writable_;
}

void DiskCache::warnOnce(const std::string &kind, const std::string &message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(warned_.begin(), warned_.end(), kind) != warned_.end())
      return;
    warned_.push_back(kind);
  }
  std::lock_guard<std::mutex> lock(handlerMutex);
  warningHandler()(message);
}

std::string DiskCache::entryPath(const std::string &key, const Target &target) const {
  llvm::SmallString<256> path(root_);
  llvm::sys::path::append(path, targetFolder(target), key);
  return path.str().str();
}

void DiskCache::removeEntry(const std::string &path) {
  // Renamed away first, so no reader sees a half-deleted entry.
  std::string trash = path + ".removed." + std::to_string(::getpid());
  if (::rename(path.c_str(), trash.c_str()) == 0)
    llvm::sys::fs::remove_directories(trash);
}

std::optional<Binary> DiskCache::load(const std::string &key, const Target &target) {
  if (root_.empty())
    return std::nullopt;
  std::string entry = entryPath(key, target);
  if (!llvm::sys::fs::is_directory(entry))
    return std::nullopt;
  llvm::SmallString<256> binaryPath(entry), metaPath(entry);
  llvm::sys::path::append(binaryPath, "binary");
  llvm::sys::path::append(metaPath, "meta.json");
  for (const std::string &path : {root_, entry, std::string(binaryPath), std::string(metaPath)})
    if (llvm::sys::fs::exists(path) && !trusted(path)) {
      warnOnce("untrusted", "cache entry " + entry + " is not owned by this user or is writable "
                            "by others; it is not loaded and the kernel is compiled in memory");
      return std::nullopt;
    }
  auto reject = [&](const std::string &why) -> std::optional<Binary> {
    warnOnce("invalid:" + why, "cache entry " + entry + " is " + why + "; recompiling it");
    removeEntry(entry);
    return std::nullopt;
  };
  auto metaText = llvm::MemoryBuffer::getFile(metaPath);
  auto binaryText = llvm::MemoryBuffer::getFile(binaryPath, /*IsText=*/false,
                                                /*RequiresNullTerminator=*/false);
  if (!metaText || !binaryText)
    return reject("incomplete");
  auto meta = llvm::json::parse((*metaText)->getBuffer());
  if (!meta)
    return reject("corrupt (meta.json: " + llvm::toString(meta.takeError()) + ")");
  const llvm::json::Object *fields = meta->getAsObject();
  if (!fields)
    return reject("corrupt (meta.json is not an object)");
  auto text = [&](const char *name) { return fields->getString(name).value_or("").str(); };
  std::string object = (*binaryText)->getBuffer().str();
  if (text("key") != key || text("target") != target.fullId())
    return reject("for another kernel or target");
  if (fields->getInteger("size").value_or(-1) != int64_t(object.size()))
    return reject("truncated");
  if (text("sha256") != sha256Hex(object))
    return reject("corrupt (checksum mismatch)");
  Binary binary;
  binary.target = target;
  binary.kernelName = text("kernel_name");
  binary.entrySymbol = text("entry_symbol");
  binary.blockThreads = fields->getInteger("block_threads").value_or(0);
  binary.object = std::move(object);
  ++loads_;
  return binary;
}

void DiskCache::store(const std::string &key, const Binary &binary) {
  if (!writable())
    return;
  std::string entry = entryPath(key, binary.target);
  if (llvm::sys::fs::is_directory(entry))
    return;
  std::string parent = llvm::sys::path::parent_path(entry).str();
  static std::atomic<uint64_t> counter{0};
  std::string tmp = entry + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++counter);
  auto unwritable = [&](const std::string &what) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      writable_ = false;
    }
    warnOnce("unwritable", "the kernel cache directory " + root_ + " is not writable (" + what +
                               ": " + std::strerror(errno) +
                               "); kernels are compiled in memory only (set TILE_CACHE_DIR to "
                               "a writable folder to keep them)");
  };
  if (!makePrivateDirs(parent))
    return unwritable("creating " + parent);
  if (::mkdir(tmp.c_str(), 0700) != 0)
    return unwritable("creating " + tmp);
  llvm::json::Object meta{{"key", key},
                          {"target", binary.target.fullId()},
                          {"kernel_name", binary.kernelName},
                          {"entry_symbol", binary.entrySymbol},
                          {"block_threads", binary.blockThreads},
                          {"size", int64_t(binary.object.size())},
                          {"sha256", sha256Hex(binary.object)},
                          {"compiler", compilerVersion()}};
  std::string metaText;
  llvm::raw_string_ostream(metaText) << llvm::json::Value(std::move(meta));
  bool written = writeFile(tmp + "/binary", binary.object) &&
                 writeFile(tmp + "/meta.json", metaText);
  // A rename onto an existing entry fails: another process stored the same kernel first,
  // and its entry is as good as ours.
  if (!written || ::rename(tmp.c_str(), entry.c_str()) != 0)
    llvm::sys::fs::remove_directories(tmp);
}
