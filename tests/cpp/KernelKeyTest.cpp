// The cache key: every input that changes the binary changes the key.
#include "TestKernels.h"
#include "runtime/BuildId.h"
#include "runtime/KernelKey.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace tile;
using namespace tile::runtime;
using tile::testing::vectorAddSpec;

namespace {

const char *kIr = "func.func @vector_add() attributes {tile.kernel} { return }";

TEST(KernelKey, IsStableSha256Hex) {
  std::string key = kernelKey(vectorAddSpec("f32"), Target::host(), kIr);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(key, kernelKey(vectorAddSpec("f32"), Target::host(), kIr));
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(KernelKey, ChangesWithEveryInput) {
  std::string base = kernelKey(vectorAddSpec("f32"), Target::host(), kIr);
  EXPECT_NE(base, kernelKey(vectorAddSpec("f16"), Target::host(), kIr));
  EXPECT_NE(base, kernelKey(vectorAddSpec("f32", 512), Target::host(), kIr));
  EXPECT_NE(base, kernelKey(vectorAddSpec("f32", 256, 64), Target::host(), kIr));
  EXPECT_NE(base, kernelKey(vectorAddSpec("f32"), Target::host(), std::string(kIr) + " "));
  EXPECT_NE(kernelKey(vectorAddSpec("f32"), Target::parse("hip:gfx942"), kIr),
            kernelKey(vectorAddSpec("f32"), Target::parse("hip:gfx942:sramecc+:xnack-"), kIr));
  EXPECT_NE(kernelKey(vectorAddSpec("f32"), Target::parse("hip:gfx942"), kIr),
            kernelKey(vectorAddSpec("f32"), Target::parse("hip:gfx90a"), kIr));
  Target otherFeatures = Target::host();
  otherFeatures.features += ",-avx512f";
  EXPECT_NE(base, kernelKey(vectorAddSpec("f32"), otherFeatures, kIr));
}

TEST(KernelKey, HashesTheCodegenEnvironment) {
  ASSERT_FALSE(codegenEnvironment().empty());
  const std::string &name = codegenEnvironment().front();
  const char *saved = std::getenv(name.c_str());
  std::string savedValue = saved ? saved : "";
  unsetenv(name.c_str());
  std::string unset = kernelKey(vectorAddSpec("f32"), Target::host(), kIr);
  setenv(name.c_str(), "hip:gfx942", 1);
  std::string set = kernelKey(vectorAddSpec("f32"), Target::host(), kIr);
  if (saved)
    setenv(name.c_str(), savedValue.c_str(), 1);
  else
    unsetenv(name.c_str());
  EXPECT_NE(unset, set);
}

TEST(KernelKey, BuildIdComesFromTheLibrary) {
  // Debian's toolchain and our link flags always emit a GNU build id (sha1: 40 hex).
  EXPECT_EQ(coreBuildId().size(), 40u) << coreBuildId();
}

} // namespace
