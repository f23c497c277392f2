// The GPU launcher up to the driver call, against a fake driver table: what it loads,
// the function it asks for, the grid, block and arguments it launches with, and its
// errors. No GPU is needed, nor a driver library.
#include "TestKernels.h"
#include "runtime/CompileAndLoad.h"
#include "runtime/DeviceTarget.h"
#include "runtime/GpuLauncher.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace tile;
using namespace tile::runtime;

namespace {

/// What the fake driver saw, and the statuses it answers with.
struct FakeDriverState {
  std::string loadedImage;
  std::string function;
  int loads = 0, launches = 0;
  unsigned grid[3] = {}, block[3] = {};
  void *stream = nullptr;
  void **params = nullptr;
  unsigned sharedBytes = 0;
  int attribute = -1, attributeValue = -1, attributeSets = 0;
  int loadStatus = 0, launchStatus = 0, attributeStatus = 0;
} fake;

int fakeSetAttribute(void *function, int attribute, int value) {
  EXPECT_EQ(function, reinterpret_cast<void *>(0x2000));
  ++fake.attributeSets;
  fake.attribute = attribute;
  fake.attributeValue = value;
  return fake.attributeStatus;
}

int fakeLoad(void **module, const void *image) {
  ++fake.loads;
  fake.loadedImage = static_cast<const char *>(image);
  *module = reinterpret_cast<void *>(0x1000);
  return fake.loadStatus;
}

int fakeGetFunction(void **function, void *, const char *name) {
  fake.function = name;
  *function = reinterpret_cast<void *>(0x2000);
  return 0;
}

int fakeLaunch(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
               unsigned bz, unsigned sharedBytes, void *stream, void **params, void **) {
  EXPECT_EQ(function, reinterpret_cast<void *>(0x2000));
  ++fake.launches;
  fake.grid[0] = gx, fake.grid[1] = gy, fake.grid[2] = gz;
  fake.block[0] = bx, fake.block[1] = by, fake.block[2] = bz;
  fake.stream = stream;
  fake.params = params;
  fake.sharedBytes = sharedBytes;
  return fake.launchStatus;
}

std::string fakeDescribe(const GpuDriver &, int status) {
  return "fakeError " + std::to_string(status) + " (out of luck)";
}

GpuDriver fakeDriver() {
  GpuDriver driver;
  driver.name = "HIP";
  driver.moduleLoadData = fakeLoad;
  driver.moduleGetFunction = fakeGetFunction;
  driver.launchKernel = fakeLaunch;
  driver.describe = fakeDescribe;
  return driver;
}

LoadedKernel hipKernel(const std::string &target) {
  LoadedKernel kernel;
  kernel.key = "k1";
  kernel.spec = "vector_add[f32]{BLOCK_SIZE=2048}";
  kernel.binary.target = Target::parse(target);
  kernel.binary.kernelName = kernel.binary.entrySymbol = "vector_add";
  kernel.binary.object = "HSACO-BYTES";
  kernel.binary.blockThreads = 256;
  return kernel;
}

class GpuLauncherTest : public ::testing::Test {
protected:
  void SetUp() override { fake = FakeDriverState(); }
  GpuDriver driver = fakeDriver();
};

TEST_F(GpuLauncherTest, LoadsOnceAndLaunchesWithGridBlockStreamAndArguments) {
  GpuLauncher launcher(driver);
  LoadedKernel kernel = hipKernel("hip:gfx942");
  float *a = reinterpret_cast<float *>(0x10), *b = reinterpret_cast<float *>(0x20);
  int32_t n = 5000;
  void *args[] = {&a, &b, &n};
  void *stream = reinterpret_cast<void *>(0x77);
  launcher.launch(kernel, Target::parse("hip:gfx942:sramecc+:xnack-"), 0, args, Grid{3, 1, 1}, stream);
  launcher.launch(kernel, Target::parse("hip:gfx942:sramecc+:xnack-"), 0, args, Grid{5, 2, 1}, stream);
  EXPECT_EQ(fake.loads, 1) << "the module is loaded once per device";
  EXPECT_EQ(fake.loadedImage, "HSACO-BYTES");
  EXPECT_EQ(fake.function, "vector_add");
  EXPECT_EQ(fake.launches, 2);
  EXPECT_EQ(fake.grid[0], 5u);
  EXPECT_EQ(fake.grid[1], 2u);
  EXPECT_EQ(fake.block[0], 256u);
  EXPECT_EQ(fake.block[1], 1u);
  EXPECT_EQ(fake.stream, stream);
  ASSERT_EQ(fake.params, args);
  EXPECT_EQ(*static_cast<int32_t *>(fake.params[2]), 5000);
  // Another device loads its own module.
  launcher.launch(kernel, Target::parse("hip:gfx942"), 1, args, Grid{1, 1, 1}, stream);
  EXPECT_EQ(fake.loads, 2);
}

TEST_F(GpuLauncherTest, DynamicSharedMemoryIsOptedInOnceAndGivenAtEveryLaunch) {
  driver.name = "CUDA";
  driver.funcSetAttribute = fakeSetAttribute;
  GpuLauncher launcher(driver);
  LoadedKernel kernel = hipKernel("cuda:sm_90");
  kernel.binary.dynamicSharedBytes = 96 * 1024;
  launcher.launch(kernel, Target::parse("cuda:sm_90"), 0, nullptr, Grid{2, 1, 1}, nullptr);
  launcher.launch(kernel, Target::parse("cuda:sm_90"), 0, nullptr, Grid{2, 1, 1}, nullptr);
  EXPECT_EQ(fake.attributeSets, 1) << "the limit is raised when the function is loaded";
  EXPECT_EQ(fake.attribute, 8) << "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES";
  EXPECT_EQ(fake.attributeValue, 96 * 1024);
  EXPECT_EQ(fake.sharedBytes, 96u * 1024);
  // Within the default 48 KiB no opt-in is needed; the launch still provides the bytes.
  LoadedKernel small = hipKernel("cuda:sm_90");
  small.key = "k2";
  small.binary.dynamicSharedBytes = 16 * 1024;
  launcher.launch(small, Target::parse("cuda:sm_90"), 0, nullptr, Grid{1, 1, 1}, nullptr);
  EXPECT_EQ(fake.attributeSets, 1);
  EXPECT_EQ(fake.sharedBytes, 16u * 1024);
  // A refused opt-in is an error that names the call, not a failed launch later.
  LoadedKernel refused = hipKernel("cuda:sm_90");
  refused.key = "k3";
  refused.binary.dynamicSharedBytes = 200 * 1024;
  fake.attributeStatus = 1;
  try {
    launcher.launch(refused, Target::parse("cuda:sm_90"), 0, nullptr, Grid{1, 1, 1}, nullptr);
    FAIL() << "expected an error";
  } catch (const std::runtime_error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("raising the shared memory limit to 204800 bytes"), std::string::npos)
        << message;
  }
}

TEST_F(GpuLauncherTest, EmptyGridLaunchesNothing) {
  GpuLauncher launcher(driver);
  LoadedKernel kernel = hipKernel("hip:gfx942");
  launcher.launch(kernel, Target::parse("hip:gfx942"), 0, nullptr, Grid{0, 1, 1}, nullptr);
  EXPECT_EQ(fake.loads, 0);
  EXPECT_EQ(fake.launches, 0);
}

TEST_F(GpuLauncherTest, WrongArchIsRefusedBeforeTheDriverSeesIt) {
  GpuLauncher launcher(driver);
  LoadedKernel kernel = hipKernel("hip:gfx90a");
  try {
    launcher.launch(kernel, Target::parse("hip:gfx942:sramecc+:xnack-"), 0, nullptr,
                    Grid{1, 1, 1}, nullptr);
    FAIL() << "expected an error";
  } catch (const std::runtime_error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("hip:gfx90a"), std::string::npos) << message;
    EXPECT_NE(message.find("hip:gfx942:sramecc+:xnack-"), std::string::npos) << message;
  }
  EXPECT_EQ(fake.loads, 0);
  // Features must match when the binary names them.
  LoadedKernel xnack = hipKernel("hip:gfx942:xnack+");
  EXPECT_THROW(launcher.launch(xnack, Target::parse("hip:gfx942:xnack-"), 0, nullptr,
                               Grid{1, 1, 1}, nullptr),
               std::runtime_error);
}

TEST_F(GpuLauncherTest, DriverErrorsNameTheCallTheKernelAndTheStatus) {
  GpuLauncher launcher(driver);
  LoadedKernel kernel = hipKernel("hip:gfx942");
  fake.loadStatus = 209;
  try {
    launcher.launch(kernel, Target::parse("hip:gfx942"), 0, nullptr, Grid{1, 1, 1}, nullptr);
    FAIL() << "expected an error";
  } catch (const std::runtime_error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("HIP module load failed"), std::string::npos) << message;
    EXPECT_NE(message.find("vector_add[f32]"), std::string::npos) << message;
    EXPECT_NE(message.find("fakeError 209 (out of luck)"), std::string::npos) << message;
  }
  fake.loadStatus = 0;
  fake.launchStatus = 1;
  EXPECT_THROW(launcher.launch(kernel, Target::parse("hip:gfx942"), 0, nullptr, Grid{1, 1, 1}, nullptr),
               std::runtime_error);
}

TEST(GpuDriver, HipSearchOrderStartsWithTheOverride) {
  setenv("TILE_LIBHIP_PATH", "/custom/libamdhip64.so", 1);
  auto candidates = hipLibraryCandidates("/torch/lib");
  unsetenv("TILE_LIBHIP_PATH");
  std::vector<std::string> expected = {"/custom/libamdhip64.so", "libamdhip64.so",
                                       "/torch/lib/libamdhip64.so", "/opt/rocm/lib/libamdhip64.so"};
  EXPECT_EQ(candidates, expected);
}

TEST(GpuDriver, MissingHipLibraryNamesEveryPlaceItLooked) {
  try {
    loadHipDriver({"/nonexistent/libamdhip64.so", "/also/not/there/libamdhip64.so"});
    FAIL() << "expected an error";
  } catch (const std::runtime_error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("/nonexistent/libamdhip64.so"), std::string::npos) << message;
    EXPECT_NE(message.find("/also/not/there/libamdhip64.so"), std::string::npos) << message;
    EXPECT_NE(message.find("TILE_LIBHIP_PATH"), std::string::npos) << message;
  }
}

TEST(GpuDriver, InstalledHipRuntimeResolvesEveryEntryPoint) {
  // Debian's libamdhip64 (a dependency of the build) loads without a GPU.
  GpuDriver driver;
  try {
    driver = loadHipDriver({"libamdhip64.so", "libamdhip64.so.5"});
  } catch (const std::runtime_error &error) {
    GTEST_SKIP() << "no HIP runtime library here: " << error.what();
  }
  EXPECT_NE(driver.moduleLoadData, nullptr);
  EXPECT_NE(driver.moduleGetFunction, nullptr);
  EXPECT_NE(driver.launchKernel, nullptr);
  EXPECT_FALSE(driver.path.empty());
  EXPECT_NE(driver.describe(driver, 1).find("hipError 1"), std::string::npos);
}

TEST(DeviceTarget, FromTheDeviceKeepingRocmFeatures) {
  unsetenv("TILE_TARGET");
  EXPECT_EQ(deviceTarget(TargetKind::Hip, "gfx942:sramecc+:xnack-", 0, 0).str(),
            "hip:gfx942:sramecc+:xnack-");
  EXPECT_EQ(deviceTarget(TargetKind::Hip, "gfx1100", 0, 0).str(), "hip:gfx1100");
  // Hopper gets its arch-specific target (warpgroup MMA); Ampere has none.
  EXPECT_EQ(deviceTarget(TargetKind::Cuda, "", 9, 0).str(), "cuda:sm_90a");
  EXPECT_EQ(deviceTarget(TargetKind::Cuda, "", 8, 0).str(), "cuda:sm_80");
  try {
    deviceTarget(TargetKind::Hip, "gfx908:sramecc+:xnack-", 0, 0);
    FAIL() << "expected an error";
  } catch (const std::runtime_error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("gfx908"), std::string::npos) << message;
    EXPECT_NE(message.find("gfx942"), std::string::npos) << "names the supported archs";
  }
}

TEST(DeviceTarget, TileTargetOverridesButOnlyWithinTheDeviceKind) {
  setenv("TILE_TARGET", "hip:gfx90a", 1);
  EXPECT_EQ(deviceTarget(TargetKind::Hip, "gfx942:sramecc+:xnack-", 0, 0).str(), "hip:gfx90a");
  EXPECT_THROW(deviceTarget(TargetKind::Cuda, "", 9, 0), std::runtime_error);
  unsetenv("TILE_TARGET");
}

TEST(GpuKernels, CompiledThroughTheRuntimeWithTheSpecsWarpsAndKeptOnDisk) {
  // The ctest environment points TILE_CACHE_DIR at a folder of the build.
  auto spec = tile::testing::matmulSpec("matmul", "f16", "f16", 128, 128, 32);
  spec.config["num_warps"] = 8;
  spec.config["kpack"] = 1; // a knob no other test uses: a fresh key in a shared cache
  spec.config["waves_per_eu"] = 7;
  auto first = compileAndLoad(spec, Target::parse("hip:gfx942"));
  EXPECT_EQ(first->binary.blockThreads, 512) << "num_warps 8 of wave64";
  EXPECT_EQ(first->binary.entrySymbol, "matmul");
  EXPECT_EQ(first->cpuEntry, nullptr);
  auto second = compileAndLoad(spec, Target::parse("hip:gfx942"));
  EXPECT_TRUE(second->fromDisk);
  EXPECT_EQ(second->binary.object, first->binary.object);
  EXPECT_EQ(second->binary.blockThreads, 512);
}

} // namespace
