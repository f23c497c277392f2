// The cubin that CUDA's linker makes of a kernel's PTX, kept on disk per driver version
// and device, against a fake driver table: a warm process loads the cubin and links
// nothing; another driver or device links again; a cubin the driver refuses is dropped.
#include "runtime/DriverCode.h"
#include "runtime/GpuLauncher.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

using namespace tile;
using namespace tile::runtime;

namespace {

struct FakeCuda {
  int driverVersion = 13000, major = 9, minor = 0;
  int links = 0, loads = 0, refusals = 0;
  std::string linkedPtx, loadedImage, cubin;
} fake;

int fakeLinkCreate(unsigned, int *, void **, void **state) {
  *state = &fake;
  return 0;
}
int fakeLinkAddData(void *state, int type, void *data, size_t size, const char *, unsigned, int *,
                    void **) {
  EXPECT_EQ(state, &fake);
  EXPECT_EQ(type, 1) << "CU_JIT_INPUT_PTX";
  EXPECT_EQ(static_cast<const char *>(data)[size - 1], '\0') << "PTX is passed with its NUL";
  fake.linkedPtx = static_cast<const char *>(data);
  return 0;
}
int fakeLinkComplete(void *, void **image, size_t *size) {
  ++fake.links;
  // Machine code has NULs in it: the image is taken by size, not as a C string.
  fake.cubin = std::string("CUBIN\0", 6) + fake.linkedPtx + " for sm_" +
               std::to_string(fake.major * 10 + fake.minor);
  *image = fake.cubin.data();
  *size = fake.cubin.size();
  return 0;
}
int fakeLinkDestroy(void *) { return 0; }
int fakeDriverVersion(int *version) {
  *version = fake.driverVersion;
  return 0;
}
int fakeCtxGetDevice(int *device) {
  *device = 0;
  return 0;
}
int fakeDeviceAttribute(int *value, int attribute, int) {
  *value = attribute == 75 ? fake.major : fake.minor;
  return 0;
}
int fakeLoad(void **module, const void *image) {
  ++fake.loads;
  const char *bytes = static_cast<const char *>(image);
  // A cubin stands for itself only when it is whole; a PTX load reads up to the NUL.
  fake.loadedImage = std::string(bytes, 5) == "CUBIN" ? "CUBIN:" + std::string(bytes + 6) : bytes;
  *module = reinterpret_cast<void *>(0x1000);
  if (fake.refusals > 0 && std::string(bytes, 5) == "CUBIN") {
    --fake.refusals;
    return 218; // CUDA_ERROR_INVALID_PTX-like: the driver does not take this image
  }
  return 0;
}
int fakeGetFunction(void **function, void *, const char *) {
  *function = reinterpret_cast<void *>(0x2000);
  return 0;
}
int fakeLaunch(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
               void **, void **) {
  return 0;
}

GpuDriver fakeCudaDriver() {
  GpuDriver driver;
  driver.name = "CUDA";
  driver.moduleLoadData = fakeLoad;
  driver.moduleGetFunction = fakeGetFunction;
  driver.launchKernel = fakeLaunch;
  driver.linkCreate = fakeLinkCreate;
  driver.linkAddData = fakeLinkAddData;
  driver.linkComplete = fakeLinkComplete;
  driver.linkDestroy = fakeLinkDestroy;
  driver.driverGetVersion = fakeDriverVersion;
  driver.ctxGetDevice = fakeCtxGetDevice;
  driver.deviceGetAttribute = fakeDeviceAttribute;
  return driver;
}

LoadedKernel ptxKernel() {
  LoadedKernel kernel;
  kernel.key = "0123abcd";
  kernel.spec = "matmul[f16,f16]{...}";
  kernel.binary.target = Target::parse("cuda:sm_90a");
  kernel.binary.kernelName = kernel.binary.entrySymbol = "matmul";
  kernel.binary.object = ".version 8.0\n.target sm_90a\n// the kernel";
  kernel.binary.blockThreads = 256;
  return kernel;
}

class DriverCodeTest : public ::testing::Test {
protected:
  void SetUp() override {
    fake = FakeCuda();
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tile-driver-code", dir));
    scratch = dir.str().str();
    DiskCache::setWarningHandler([this](const std::string &message) { warnings.push_back(message); });
  }
  void TearDown() override {
    DiskCache::setWarningHandler([](const std::string &) {});
    llvm::sys::fs::remove_directories(scratch);
  }
  /// A first launch in a new process: a new launcher over the same disk cache.
  void launchInNewProcess(DiskCache &disk) {
    GpuLauncher launcher(driver, disk);
    launcher.launch(kernel, Target::parse("cuda:sm_90a"), 0, nullptr, Grid{1, 1, 1}, nullptr);
  }
  std::string scratch;
  std::vector<std::string> warnings;
  GpuDriver driver = fakeCudaDriver();
  LoadedKernel kernel = ptxKernel();
};

TEST_F(DriverCodeTest, TheLinkedCubinIsLoadedAndAWarmProcessLinksNothing) {
  DiskCache disk(scratch + "/cache");
  launchInNewProcess(disk);
  EXPECT_EQ(fake.links, 1);
  EXPECT_EQ(fake.linkedPtx, kernel.binary.object);
  EXPECT_EQ(fake.loadedImage, "CUBIN:" + kernel.binary.object + " for sm_90")
      << "the cubin is loaded, not the PTX compiled a second time";
  launchInNewProcess(disk);
  EXPECT_EQ(fake.links, 1) << "the second process takes the cubin from the disk";
  EXPECT_EQ(fake.loadedImage, "CUBIN:" + kernel.binary.object + " for sm_90");
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DriverCodeTest, AnotherDriverVersionOrDeviceLinksAgain) {
  DiskCache disk(scratch + "/cache");
  launchInNewProcess(disk);
  fake.driverVersion = 13010;
  launchInNewProcess(disk);
  EXPECT_EQ(fake.links, 2) << "a driver update may compile PTX differently";
  fake.minor = 9; // an sm_89 device JIT-compiles sm_80 PTX to its own code
  launchInNewProcess(disk);
  EXPECT_EQ(fake.links, 3);
  EXPECT_EQ(fake.loadedImage, "CUBIN:" + kernel.binary.object + " for sm_99");
  launchInNewProcess(disk);
  EXPECT_EQ(fake.links, 3) << "each (driver, device) pair keeps its own cubin";
}

TEST_F(DriverCodeTest, ACubinTheDriverRefusesIsDroppedAndLinkedAgain) {
  DiskCache disk(scratch + "/cache");
  launchInNewProcess(disk);
  fake.refusals = 1;
  launchInNewProcess(disk);
  EXPECT_EQ(fake.links, 2);
  EXPECT_EQ(fake.loads, 3) << "the refused cubin, then the new one";
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("the driver refused it"), std::string::npos) << warnings[0];
  launchInNewProcess(disk);
  EXPECT_EQ(fake.links, 2) << "the new cubin was stored";
}

TEST_F(DriverCodeTest, PtxasCubinTakesTheLinkersPlaceUnlessTheDriverRefusesIt) {
  // A kernel compiled where ptxas was at hand comes with its cubin: it is loaded and kept
  // as the linker's would be, and nothing is linked.
  kernel.binary.cubin = std::string("CUBIN\0by ptxas", 14);
  DiskCache disk(scratch + "/cache");
  launchInNewProcess(disk);
  EXPECT_EQ(fake.links, 0);
  EXPECT_EQ(fake.loadedImage, "CUBIN:by ptxas");
  LoadedKernel warm = kernel;
  warm.binary.cubin.clear(); // a binary from the disk carries no cubin
  kernel = warm;
  launchInNewProcess(disk);
  EXPECT_EQ(fake.links, 0) << "a warm process takes ptxas's cubin from the disk";
  EXPECT_EQ(fake.loadedImage, "CUBIN:by ptxas");
  EXPECT_TRUE(warnings.empty());

  // A driver older than that ptxas refuses its cubin: the PTX is linked instead.
  DiskCache fresh(scratch + "/fresh");
  kernel.binary.cubin = std::string("CUBIN\0by ptxas", 14);
  fake.refusals = 1;
  launchInNewProcess(fresh);
  EXPECT_EQ(fake.links, 1);
  EXPECT_EQ(fake.loadedImage, "CUBIN:" + kernel.binary.object + " for sm_90");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("refused ptxas's cubin"), std::string::npos) << warnings[0];
  launchInNewProcess(fresh);
  EXPECT_EQ(fake.links, 1) << "the linked cubin was kept in its place";
  EXPECT_EQ(fake.loadedImage, "CUBIN:" + kernel.binary.object + " for sm_90");
}

TEST_F(DriverCodeTest, WithoutALinkerOrADiskThePtxIsLoadedAsBuilt) {
  DiskCache none("");
  launchInNewProcess(none);
  launchInNewProcess(none);
  EXPECT_EQ(fake.links, 2) << "no disk: each process links";
  driver.linkCreate = nullptr;
  DiskCache disk(scratch + "/cache");
  DriverImage image = driverImage(driver, kernel, disk);
  EXPECT_EQ(image.bytes, kernel.binary.object + std::string(1, '\0'));
  EXPECT_FALSE(image.fromDisk);
  LoadedKernel hip = kernel;
  hip.binary.target = Target::parse("hip:gfx942");
  hip.binary.object = std::string("\x7f" "ELF\0code", 9);
  driver = fakeCudaDriver();
  EXPECT_EQ(driverImage(driver, hip, disk).bytes, hip.binary.object)
      << "a HIP code object is machine code already";
}

} // namespace
