// The cache key: every input that changes the binary changes the key.
#include "TestKernels.h"
#include "runtime/BuildId.h"
#include "runtime/KernelKey.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

using namespace tile;
using namespace tile::runtime;
using tile::testing::vectorAddSpec;

namespace {

TEST(KernelKey, IsStableSha256Hex) {
  std::string key = kernelKey(vectorAddSpec("f32"), Target::host());
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(key, kernelKey(vectorAddSpec("f32"), Target::host()));
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(KernelKey, ChangesWithEveryInput) {
  std::string base = kernelKey(vectorAddSpec("f32"), Target::host());
  EXPECT_NE(base, kernelKey(vectorAddSpec("f16"), Target::host()));
  EXPECT_NE(base, kernelKey(vectorAddSpec("f32", 512), Target::host()));
  EXPECT_NE(base, kernelKey(vectorAddSpec("f32", 256, 64), Target::host()));
  EXPECT_NE(kernelKey(vectorAddSpec("f32"), Target::parse("hip:gfx942")),
            kernelKey(vectorAddSpec("f32"), Target::parse("hip:gfx942:sramecc+:xnack-")));
  EXPECT_NE(kernelKey(vectorAddSpec("f32"), Target::parse("hip:gfx942")),
            kernelKey(vectorAddSpec("f32"), Target::parse("hip:gfx90a")));
  Target otherFeatures = Target::host();
  otherFeatures.features += ",-avx512f";
  EXPECT_NE(base, kernelKey(vectorAddSpec("f32"), otherFeatures));
}

TEST(KernelKey, HashesTheCodegenEnvironment) {
  // The target override and the ROCm device libraries (linked ocml/ockl) both change
  // the binary.
  for (const char *name : {"TILE_TARGET", "TILE_ROCM_DEVICE_LIBS"}) {
    ASSERT_NE(std::find(codegenEnvironment().begin(), codegenEnvironment().end(), name),
              codegenEnvironment().end())
        << name;
    const char *saved = std::getenv(name);
    std::string savedValue = saved ? saved : "";
    unsetenv(name);
    std::string unset = kernelKey(vectorAddSpec("f32"), Target::host());
    setenv(name, "hip:gfx942", 1);
    std::string set = kernelKey(vectorAddSpec("f32"), Target::host());
    if (saved)
      setenv(name, savedValue.c_str(), 1);
    else
      unsetenv(name);
    EXPECT_NE(unset, set) << name;
  }
}

TEST(KernelKey, NamesTheSharedLlvmAndMlirLibraries) {
  // Debian's LLVM and MLIR are shared libraries: an update of either changes codegen
  // under the same core build, so their build ids are part of every key.
  const std::string &ids = linkedToolchainIds();
  EXPECT_NE(ids.find("libLLVM"), std::string::npos) << ids;
  EXPECT_NE(ids.find("libMLIR"), std::string::npos) << ids;
  EXPECT_EQ(ids.find("no-build-id"), std::string::npos) << ids;
}

TEST(KernelKey, BuildIdComesFromTheLibrary) {
  // Debian's toolchain and our link flags always emit a GNU build id (sha1: 40 hex).
  EXPECT_EQ(coreBuildId().size(), 40u) << coreBuildId();
}

} // namespace
