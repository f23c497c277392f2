// The on-disk kernel cache: round trip, atomic publication, validation of every entry
// before it is loaded, and degraded operation when the folder cannot be written.
#include "runtime/DiskCache.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace tile;
using namespace tile::runtime;

namespace {

class DiskCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tile-disk-cache", dir));
    scratch = dir.str().str();
    root = scratch + "/cache";
    DiskCache::setWarningHandler([this](const std::string &message) { warnings.push_back(message); });
  }
  void TearDown() override {
    DiskCache::setWarningHandler([](const std::string &) {});
    llvm::sys::fs::remove_directories(scratch);
  }

  Binary sampleBinary() const {
    Binary binary;
    binary.target = Target::host();
    binary.kernelName = "vector_add";
    binary.entrySymbol = "vector_add_cpu_entry";
    binary.object = std::string("\x7f" "ELF", 4) + std::string(1000, '\x42');
    return binary;
  }

  std::string entry(const std::string &key) const {
    std::string target = Target::host().str();
    for (char &c : target)
      if (c == ':')
        c = '-';
    return root + "/" + target + "/" + key;
  }

  std::string scratch, root;
  std::vector<std::string> warnings;
  const std::string key = std::string(64, 'a');
};

mode_t modeOf(const std::string &path) {
  struct stat info;
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 0777;
}

TEST_F(DiskCacheTest, StoresPrivatelyAndLoadsBack) {
  DiskCache cache(root);
  EXPECT_FALSE(cache.load(key, Target::host()));
  Binary binary = sampleBinary();
  cache.store(key, binary);
  auto loaded = cache.load(key, Target::host());
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->object, binary.object);
  EXPECT_EQ(loaded->entrySymbol, binary.entrySymbol);
  EXPECT_EQ(loaded->kernelName, binary.kernelName);
  EXPECT_TRUE(loaded->tensorMaps.empty());
  EXPECT_FALSE(loaded->persistent);
  EXPECT_EQ(loaded->clusterCtas, 1);
  EXPECT_EQ(loaded->streamKTileElements, 0);
  EXPECT_EQ(modeOf(root), 0700u);
  EXPECT_EQ(modeOf(entry(key)), 0700u);
  EXPECT_EQ(modeOf(entry(key) + "/binary"), 0600u);
  EXPECT_TRUE(warnings.empty());
  // Nothing temporary is left beside the entry.
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(llvm::sys::path::parent_path(entry(key)), ec), end;
       it != end && !ec; it.increment(ec))
    ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(DiskCacheTest, HoldsTellsWhetherABinaryIsStored) {
  // The hint a first call takes to know whether it will compile: a binary's entry, not a
  // record's, and nothing where there is no cache.
  DiskCache cache(root);
  EXPECT_FALSE(cache.holds(key, Target::host()));
  std::string recordKey(64, 'c');
  cache.storeRecord(recordKey, Target::host(), "a tuned config");
  EXPECT_FALSE(cache.holds(recordKey, Target::host())) << "a record is not a binary";
  cache.store(key, sampleBinary());
  EXPECT_TRUE(cache.holds(key, Target::host()));
  EXPECT_FALSE(cache.holds(std::string(64, 'b'), Target::host()));
  EXPECT_FALSE(cache.holds(key, Target::parse("cpu:znver4")));
  EXPECT_FALSE(DiskCache("").holds(key, Target::host()));
}

TEST_F(DiskCacheTest, KeepsTheTensorMapsAndTheLaunchShapeAKernelTakes) {
  DiskCache cache(root);
  Binary binary = sampleBinary();
  binary.tensorMaps = {{0, 1, 64, 128, 128, 6}, {1, 0, 32, 256, 64, 9}};
  binary.persistent = true;                // launched one program per multiprocessor
  binary.clusterCtas = 2;                  // in whole clusters of two
  binary.streamKTileElements = 128 * 256;  // with a stream-K workspace tile per program
  cache.store(key, binary);
  auto loaded = cache.load(key, Target::host());
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(loaded->persistent);
  EXPECT_EQ(loaded->clusterCtas, 2);
  EXPECT_EQ(loaded->streamKTileElements, 128 * 256);
  ASSERT_EQ(loaded->tensorMaps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const TensorMapParameter &want = binary.tensorMaps[i], &got = loaded->tensorMaps[i];
    EXPECT_EQ(std::vector<int64_t>({got.operand, got.contiguousDim, got.boxInner, got.boxOuter,
                                    got.swizzleBytes, got.dataType}),
              std::vector<int64_t>({want.operand, want.contiguousDim, want.boxInner, want.boxOuter,
                                    want.swizzleBytes, want.dataType}));
  }
}

TEST_F(DiskCacheTest, CorruptEntryIsRemovedNotLoaded) {
  DiskCache cache(root);
  cache.store(key, sampleBinary());
  {
    std::fstream file(entry(key) + "/binary", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(500);
    file.put('\x43');
  }
  EXPECT_FALSE(cache.load(key, Target::host()));
  EXPECT_FALSE(llvm::sys::fs::exists(entry(key))) << "the corrupt entry is removed";
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("checksum"), std::string::npos) << warnings[0];
  // And the next store replaces it.
  cache.store(key, sampleBinary());
  EXPECT_TRUE(cache.load(key, Target::host()));
}

TEST_F(DiskCacheTest, TruncatedEntryIsRemovedNotLoaded) {
  DiskCache cache(root);
  cache.store(key, sampleBinary());
  ASSERT_EQ(::truncate((entry(key) + "/binary").c_str(), 100), 0);
  EXPECT_FALSE(cache.load(key, Target::host()));
  EXPECT_FALSE(llvm::sys::fs::exists(entry(key)));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("truncated"), std::string::npos) << warnings[0];
}

TEST_F(DiskCacheTest, EntryOfAnotherKeyOrTargetIsNotLoaded) {
  DiskCache cache(root);
  cache.store(key, sampleBinary());
  std::string otherKey(64, 'b');
  ASSERT_EQ(::rename(entry(key).c_str(), entry(otherKey).c_str()), 0);
  EXPECT_FALSE(cache.load(otherKey, Target::host()));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("another kernel or target"), std::string::npos) << warnings[0];
}

TEST_F(DiskCacheTest, EntryWritableByOthersIsNeverLoaded) {
  DiskCache cache(root);
  cache.store(key, sampleBinary());
  ASSERT_EQ(::chmod((entry(key) + "/binary").c_str(), 0666), 0);
  EXPECT_FALSE(cache.load(key, Target::host()));
  EXPECT_TRUE(llvm::sys::fs::exists(entry(key))) << "someone else's file is left alone";
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("writable by others"), std::string::npos) << warnings[0];
  EXPECT_FALSE(cache.load(key, Target::host()));
  EXPECT_EQ(warnings.size(), 1u) << "warned once";
}

TEST_F(DiskCacheTest, EntryOwnedByAnotherUserIsNeverLoaded) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "changing an owner needs root";
  DiskCache cache(root);
  cache.store(key, sampleBinary());
  ASSERT_EQ(::chown((entry(key) + "/meta.json").c_str(), 12345, 12345), 0);
  EXPECT_FALSE(cache.load(key, Target::host()));
  EXPECT_EQ(warnings.size(), 1u);
}

TEST_F(DiskCacheTest, UnwritableFolderWarnsOnceAndCachesNothing) {
  // A regular file where the cache folder should be: nothing can be created under it,
  // whoever runs the test (root ignores permission bits).
  std::ofstream(scratch + "/file") << "x";
  DiskCache cache(scratch + "/file/cache");
  cache.store(key, sampleBinary());
  cache.store(std::string(64, 'c'), sampleBinary());
  EXPECT_FALSE(cache.writable());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("not writable"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("TILE_CACHE_DIR"), std::string::npos) << warnings[0];
  EXPECT_FALSE(cache.load(key, Target::host()));
}

TEST_F(DiskCacheTest, ConcurrentWritersOfOneKeyBothSucceed) {
  // Two caches on one folder stand for two processes.
  DiskCache first(root), second(root);
  Binary binary = sampleBinary();
  std::thread a([&] {
    for (int i = 0; i < 20; ++i)
      first.store(std::string(64, char('a' + i % 6)), binary);
  });
  std::thread b([&] {
    for (int i = 0; i < 20; ++i)
      second.store(std::string(64, char('a' + i % 6)), binary);
  });
  a.join();
  b.join();
  for (int i = 0; i < 6; ++i) {
    auto loaded = first.load(std::string(64, char('a' + i)), Target::host());
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->object, binary.object);
  }
  EXPECT_TRUE(warnings.empty());
}

} // namespace
