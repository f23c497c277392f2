#include "runtime/DiskCache.h"

#include "runtime/KernelKey.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <iostream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace tile;
using namespace tile::runtime;

namespace {

/// The file of an entry that holds a compiled kernel.
constexpr const char *kBinaryPayload = "binary";

std::mutex handlerMutex;
std::function<void(const std::string &)> &warningHandler() {
  static std::function<void(const std::string &)> handler = [](const std::string &message) {
    std::cerr << "torch-tile: warning: " << message << std::endl;
  };
  return handler;
}

/// Writes `data` to `path`. Not flushed to the disk (fsync): the rename that publishes an
/// entry makes it whole for every reader, and an entry that a crash of the OS left short
/// fails its size or checksum at the next load and is compiled again. The two flushes of
/// an entry had been 2 of a first call's 50-60 ms on the CPU.
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
  return ::close(fd) == 0;
}

/// Owned by this user and not writable by group or others.
bool trusted(const std::string &path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0)
    return false;
  return info.st_uid == ::geteuid() && (info.st_mode & (S_IWGRP | S_IWOTH)) == 0 &&
         !S_ISLNK(info.st_mode);
}

/// The contents of `path` if it is a regular file. Opened without following a symlink
/// and without blocking, and checked on the open descriptor, so that a FIFO or a device
/// in its place is refused instead of read (a FIFO would block the reader forever).
std::optional<std::string> readRegularFile(const std::string &path, std::string &why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = errno == ENOENT ? "incomplete" : std::string("unreadable (") + std::strerror(errno) + ")";
    return std::nullopt;
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    why = "not made of regular files";
    return std::nullopt;
  }
  std::string data(size_t(info.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    done += size_t(n);
  }
  ::close(fd);
  data.resize(done); // a file that shrank while read fails the size check
  return data;
}

/// Removes the temporary folders (<entry>.tmp.<pid>.<n>) and half-removed entries
/// (<entry>.removed.<pid>) that writers killed before their rename left in `folder`:
/// only ours, and only where process <pid> is gone.
void sweepDeadWriters(const std::string &folder) {
  std::error_code error;
  for (llvm::sys::fs::directory_iterator it(folder, error), end; it != end && !error; it.increment(error)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    for (llvm::StringRef marker : {".tmp.", ".removed."}) {
      size_t at = name.find(marker);
      unsigned long long pid = 0;
      if (at == llvm::StringRef::npos ||
          name.substr(at + marker.size()).split('.').first.getAsInteger(10, pid) || pid == 0)
        continue;
      bool gone = ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
      if (gone && trusted(it->path()))
        llvm::sys::fs::remove_directories(it->path());
      break;
    }
  }
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

std::string runtime::targetFolder(const Target &target) {
  std::string name = target.str();
  for (char &c : name)
    if (c == ':' || c == '/')
      c = '-';
  return name;
}

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

std::string DiskCache::root() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return root_;
}

void DiskCache::setRoot(std::string root) {
  std::lock_guard<std::mutex> lock(mutex_);
  root_ = std::move(root);
  // A new folder gets its own chance to be writable, and its own warnings.
  writable_ = !root_.empty();
  warned_.clear();
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

std::string DiskCache::entryPath(const std::string &root, const std::string &key,
                                 const Target &target) const {
  llvm::SmallString<256> path(root);
  llvm::sys::path::append(path, targetFolder(target), key);
  return path.str().str();
}

void DiskCache::removeEntry(const std::string &path) {
  // Renamed away first, so no reader sees a half-deleted entry.
  std::string trash = path + ".removed." + std::to_string(::getpid());
  if (::rename(path.c_str(), trash.c_str()) == 0)
    llvm::sys::fs::remove_directories(trash);
}

bool DiskCache::holds(const std::string &key, const Target &target) const {
  std::string root = this->root();
  if (root.empty())
    return false;
  std::string binary = entryPath(root, key, target) + "/" + kBinaryPayload;
  struct stat info;
  return ::stat(binary.c_str(), &info) == 0;
}

std::optional<DiskCache::Entry> DiskCache::loadEntry(const std::string &key, const Target &target,
                                                     const char *payloadName,
                                                     const char *remedy) {
  std::string root = this->root();
  if (root.empty())
    return std::nullopt;
  std::string entry = entryPath(root, key, target);
  auto untrusted = [&]() -> std::optional<Entry> {
    warnOnce("untrusted", "cache entry " + entry + " is not owned by this user or is writable "
                          "by others; it is not loaded and the kernel is compiled in memory");
    return std::nullopt;
  };
  struct stat entryInfo;
  if (::lstat(entry.c_str(), &entryInfo) != 0)
    return std::nullopt;
  if (!S_ISDIR(entryInfo.st_mode)) {
    // A file, FIFO or symlink where the entry's folder goes would block every store of
    // it. Ours is removed (unlinking a symlink leaves its target alone); another user's
    // is left, and the kernel is compiled in memory.
    if (entryInfo.st_uid != ::geteuid())
      return untrusted();
    warnOnce("not-a-folder", "cache entry " + entry + " is not a folder; " + remedy);
    ::unlink(entry.c_str());
    return std::nullopt;
  }
  llvm::SmallString<256> payloadPath(entry), metaPath(entry);
  llvm::sys::path::append(payloadPath, payloadName);
  llvm::sys::path::append(metaPath, "meta.json");
  for (const std::string &path : {root, entry, std::string(payloadPath), std::string(metaPath)})
    if (llvm::sys::fs::exists(path) && !trusted(path))
      return untrusted();
  auto reject = [&](const std::string &why) -> std::optional<Entry> {
    warnOnce("invalid:" + why, "cache entry " + entry + " is " + why + "; " + remedy);
    removeEntry(entry);
    return std::nullopt;
  };
  std::string why;
  std::optional<std::string> metaText = readRegularFile(metaPath.str().str(), why);
  std::optional<std::string> payloadText;
  if (metaText)
    payloadText = readRegularFile(payloadPath.str().str(), why);
  if (!metaText || !payloadText)
    return reject(why);
  auto meta = llvm::json::parse(*metaText);
  if (!meta)
    return reject("corrupt (meta.json: " + llvm::toString(meta.takeError()) + ")");
  const llvm::json::Object *fields = meta->getAsObject();
  if (!fields)
    return reject("corrupt (meta.json is not an object)");
  Entry loaded;
  for (const auto &[name, value] : *fields)
    if (auto text = value.getAsString())
      loaded.meta[name.str()] = text->str();
  loaded.payload = std::move(*payloadText);
  if (loaded.meta["key"] != key || loaded.meta["target"] != target.fullId())
    return reject("for another kernel or target");
  if (fields->getInteger("size").value_or(-1) != int64_t(loaded.payload.size()))
    return reject("truncated");
  if (loaded.meta["sha256"] != sha256Hex(loaded.payload))
    return reject("corrupt (checksum mismatch)");
  return loaded;
}

void DiskCache::discard(const std::string &key, const Target &target, const std::string &why) {
  std::string root = this->root();
  if (root.empty())
    return;
  std::string entry = entryPath(root, key, target);
  warnOnce("unloadable", "cache entry " + entry + " does not load (" + why + "); recompiling it");
  if (trusted(entry))
    removeEntry(entry);
}

std::optional<Binary> DiskCache::load(const std::string &key, const Target &target) {
  auto entry = loadEntry(key, target, kBinaryPayload, "recompiling it");
  if (!entry)
    return std::nullopt;
  Binary binary;
  binary.target = target;
  binary.kernelName = entry->meta["kernel_name"];
  binary.entrySymbol = entry->meta["entry_symbol"];
  binary.blockThreads = std::atoi(entry->meta["block_threads"].c_str());
  binary.dynamicSharedBytes = std::atoll(entry->meta["dynamic_shared_bytes"].c_str());
  binary.persistent = entry->meta["persistent"] == "1";
  binary.clusterCtas = std::max(1, std::atoi(entry->meta["cluster_ctas"].c_str()));
  binary.streamKTileElements = std::max<int64_t>(0, std::atoll(entry->meta["stream_k_tile_elements"].c_str()));
  binary.object = std::move(entry->payload);
  // "operand,contiguous_dim,box_inner,box_outer,swizzle_bytes,data_type;..."
  std::istringstream maps(entry->meta["tensor_maps"]);
  for (std::string map; std::getline(maps, map, ';');) {
    TensorMapParameter parameter;
    char comma[5];
    std::istringstream fields(map);
    fields >> parameter.operand >> comma[0] >> parameter.contiguousDim >> comma[1] >> parameter.boxInner >>
        comma[2] >> parameter.boxOuter >> comma[3] >> parameter.swizzleBytes >> comma[4] >> parameter.dataType;
    if (!fields || std::string(comma, 5) != ",,,,,") {
      discard(key, target, "its tensor maps read \"" + entry->meta["tensor_maps"] + "\"");
      return std::nullopt;
    }
    binary.tensorMaps.push_back(parameter);
  }
  return binary;
}

std::optional<std::string> DiskCache::loadRecord(const std::string &key, const Target &target) {
  auto entry = loadEntry(key, target, "record", "making it again");
  if (!entry)
    return std::nullopt;
  return std::move(entry->payload);
}

std::optional<std::string> DiskCache::loadDriverCode(const std::string &key, const Target &target) {
  auto entry = loadEntry(key, target, "driver-code", "compiling it again");
  if (!entry)
    return std::nullopt;
  return std::move(entry->payload);
}

void DiskCache::storeEntry(const std::string &key, const Target &target, const char *payloadName,
                           const std::string &payload, MetaFields fields) {
  if (!writable())
    return;
  std::string root = this->root();
  std::string entry = entryPath(root, key, target);
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
    warnOnce("unwritable", "the kernel cache directory " + root + " is not writable (" + what +
                               ": " + std::strerror(errno) +
                               "); kernels are compiled in memory only (set TILE_CACHE_DIR to "
                               "a writable folder to keep them)");
  };
  if (!makePrivateDirs(parent))
    return unwritable("creating " + parent);
  sweepDeadWriters(parent);
  if (::mkdir(tmp.c_str(), 0700) != 0)
    return unwritable("creating " + tmp);
  llvm::json::Object meta{{"key", key},
                          {"target", target.fullId()},
                          {"size", int64_t(payload.size())},
                          {"sha256", sha256Hex(payload)},
                          {"compiler", compilerVersion()}};
  for (auto &[name, value] : fields)
    meta[name] = std::move(value);
  std::string metaText;
  llvm::raw_string_ostream(metaText) << llvm::json::Value(std::move(meta));
  bool written = writeFile(tmp + "/" + payloadName, payload) &&
                 writeFile(tmp + "/meta.json", metaText);
  if (!written && (errno == ENOSPC || errno == EDQUOT))
    warnOnce("full", "the disk of the kernel cache " + root + " is full (" + std::strerror(errno) +
                         "); kernels that do not fit are compiled in memory, and again by each "
                         "process, until space is freed");
  // A rename onto an existing entry fails: another process stored the same entry first,
  // and its entry is as good as ours.
  if (!written || ::rename(tmp.c_str(), entry.c_str()) != 0)
    llvm::sys::fs::remove_directories(tmp);
}

namespace {

std::string tensorMapsText(const std::vector<TensorMapParameter> &maps) {
  std::string text;
  for (const TensorMapParameter &map : maps) {
    if (!text.empty())
      text += ";";
    for (int64_t field : {map.operand, map.contiguousDim, map.boxInner, map.boxOuter, map.swizzleBytes, map.dataType})
      text += std::to_string(field) + ",";
    text.pop_back();
  }
  return text;
}

} // namespace

void DiskCache::store(const std::string &key, const Binary &binary) {
  storeEntry(key, binary.target, kBinaryPayload, binary.object,
             {{"kernel_name", binary.kernelName},
              {"entry_symbol", binary.entrySymbol},
              {"block_threads", std::to_string(binary.blockThreads)},
              {"dynamic_shared_bytes", std::to_string(binary.dynamicSharedBytes)},
              {"persistent", binary.persistent ? "1" : "0"},
              {"cluster_ctas", std::to_string(binary.clusterCtas)},
              {"stream_k_tile_elements", std::to_string(binary.streamKTileElements)},
              {"tensor_maps", tensorMapsText(binary.tensorMaps)}});
}

void DiskCache::storeRecord(const std::string &key, const Target &target,
                            const std::string &text) {
  storeEntry(key, target, "record", text, {{"kind", "record"}});
}

void DiskCache::storeDriverCode(const std::string &key, const Target &target,
                                const std::string &code) {
  storeEntry(key, target, "driver-code", code, {{"kind", "driver-code"}});
}
