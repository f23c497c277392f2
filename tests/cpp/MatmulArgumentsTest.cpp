// The plain-data side of a matmul call, without torch: index width at the 2^31 edge, the
// layout bits a kernel is specialized on, program counts, tuning buckets, and the
// kernel's arguments in the order ops/matmul.cpp declares them.
#include "runtime/MatmulArguments.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

using namespace tile::runtime;

namespace {

StridedOperand matrix(const void *data, int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride,
                      int64_t elementBytes) {
  StridedOperand operand;
  operand.data = data;
  operand.sizes[0] = rows;
  operand.sizes[1] = cols;
  operand.strides[0] = rowStride;
  operand.strides[1] = colStride;
  operand.elementBytes = elementBytes;
  return operand;
}

alignas(16) char storage[64];

TEST(MatmulArguments, IndexBitsWidenAtTwoToThe31) {
  StridedOperand a = matrix(storage, 4, 8, 8, 1, 2), b = matrix(storage, 8, 4, 4, 1, 2);
  StridedOperand c = matrix(storage, 4, 4, 4, 1, 2);
  EXPECT_EQ(matmulIndexBits(4, 4, 8, a, b, c, nullptr), 32);
  // The last element of a 65536 x 32768 view sits at 2^31 - 1, the largest int32, and
  // takes 64-bit indices; one column fewer stays 32-bit.
  StridedOperand large = matrix(storage, 65536, 32768, 32768, 1, 2);
  EXPECT_EQ(large.maxOffset(), (int64_t(1) << 31) - 1);
  EXPECT_EQ(matmulIndexBits(4, 4, 8, large, b, c, nullptr), 64);
  StridedOperand justBelow = matrix(storage, 65536, 32767, 32768, 1, 2);
  EXPECT_EQ(matmulIndexBits(4, 4, 8, justBelow, b, c, nullptr), 32);
  // A bias far out along its stride widens the indices too; so does a size.
  StridedOperand bias;
  bias.data = storage;
  bias.dims = 1;
  bias.sizes[0] = 4;
  bias.strides[0] = int64_t(1) << 30;
  EXPECT_EQ(matmulIndexBits(4, 4, 8, a, b, c, &bias), 64);
  EXPECT_EQ(matmulIndexBits(int64_t(1) << 31, 4, 8, a, b, c, nullptr), 64);
}

TEST(MatmulArguments, LayoutBitsFollowStridesAndAlignment) {
  StridedOperand rowMajor = matrix(storage, 16, 32, 32, 1, 2);
  StridedOperand transposed = matrix(storage, 16, 32, 1, 16, 2);
  StridedOperand oneRow = matrix(storage, 1, 32, 7, 1, 2);
  // a row-major (bit 1), b transposed (bit 2), c with one row: both of its bits.
  EXPECT_EQ(unitStrideBits({&rowMajor, &transposed, &oneRow}), 0b110110);
  // 16-byte aligned data with strides of 64 and 32 bytes; then a start 2 bytes in, and a
  // row stride of 14 bytes.
  StridedOperand offset = matrix(storage + 2, 16, 32, 32, 1, 2);
  StridedOperand oddStride = matrix(storage, 16, 7, 7, 1, 2);
  EXPECT_EQ(divisibility16Bits({&rowMajor, &transposed, &offset}), 0b011);
  EXPECT_EQ(divisibility16Bits({&oddStride, &rowMajor, &oneRow}), 0b110);
  // A broadcast row (stride 0) and rows that overlap: aligned, but no tensor map reads them.
  StridedOperand broadcast = matrix(storage, 16, 32, 0, 1, 2);
  StridedOperand overlapping = matrix(storage, 16, 32, 8, 1, 2);
  EXPECT_EQ(divisibility16Bits({&broadcast, &overlapping, &rowMajor}), 0b100);
  // K = 0: an empty a (even one broadcast along its rows) and an empty b have nothing a
  // tensor map could describe; the kernel takes them by its masked copies.
  StridedOperand emptyBroadcast = matrix(storage, 60, 0, 0, 1, 2);
  StridedOperand emptyRows = matrix(storage, 0, 32, 32, 1, 2);
  EXPECT_EQ(divisibility16Bits({&emptyBroadcast, &emptyRows, &rowMajor}), 0b100);
}

TEST(MatmulArguments, AlignedBitsTakeTheNarrowerPiecesAsynchronousCopiesMayUse) {
  // 16-bit elements: rows of 1500 (3000 bytes: 8-byte aligned), 1030 (2060: 4-byte
  // aligned) and 777 (1554: 2-byte aligned); a start 4 bytes in and one 2 bytes in.
  StridedOperand rows1500 = matrix(storage, 8, 1500, 1500, 1, 2);
  StridedOperand rows1030 = matrix(storage, 8, 1030, 1030, 1, 2);
  StridedOperand rows777 = matrix(storage, 8, 777, 777, 1, 2);
  StridedOperand fourIn = matrix(storage + 4, 8, 64, 64, 1, 2);
  StridedOperand twoIn = matrix(storage + 2, 8, 64, 64, 1, 2);
  EXPECT_EQ(alignedBits({&rows1500, &rows1030, &rows777}, 8), 0b001);
  EXPECT_EQ(alignedBits({&rows1500, &rows1030, &rows777}, 4), 0b011);
  EXPECT_EQ(alignedBits({&fourIn, &twoIn, &rows1500}, 4), 0b101);
  EXPECT_EQ(alignedBits({&fourIn, &twoIn, &rows1500}, 16), 0);
  // A transposed view takes its column stride's bytes (1030 rows of 2 bytes apart).
  StridedOperand transposed1030 = matrix(storage, 64, 8, 1, 1030, 2);
  EXPECT_EQ(alignedBits({&transposed1030}, 4), 0b1);
  EXPECT_EQ(alignedBits({&transposed1030}, 8), 0);
  // 4-byte elements are always 4-byte aligned where their tensor's storage is.
  StridedOperand floats = matrix(storage + 4, 8, 33, 33, 1, 4);
  EXPECT_EQ(alignedBits({&floats}, 4), 0b1);
  EXPECT_EQ(alignedBits({&floats}, 8), 0);
}

TEST(MatmulArguments, ProgramsAndTuningBuckets) {
  std::map<std::string, int64_t> config{{"BLOCK_M", 128}, {"BLOCK_N", 256}};
  EXPECT_EQ(matmulPrograms(config, 4096, 4096), 32 * 16);
  EXPECT_EQ(matmulPrograms(config, 129, 1), 2);
  // Clusters of two take two block rows each: an odd count rounds up.
  config["num_ctas"] = 2;
  EXPECT_EQ(matmulPrograms(config, 4096, 4096), 32 * 16);
  EXPECT_EQ(matmulPrograms(config, 3 * 128, 257), 4 * 2);
  EXPECT_EQ(matmulTuningBucket("matmul_leaky_relu", {"f16", "f32"}, 1000, 512, 4097),
            "matmul_leaky_relu[f16,f32] 1024x512x8192");
}

TEST(MatmulArguments, PackedInTheKernelsOrder) {
  alignas(16) static char a[16], b[16], c[16], bias[16];
  StridedOperand aOperand = matrix(a, 3, 5, 5, 1, 4), bOperand = matrix(b, 5, 7, 1, 5, 4);
  StridedOperand biasOperand;
  biasOperand.data = bias;
  biasOperand.dims = 1;
  biasOperand.sizes[0] = 7;
  biasOperand.strides[0] = 2;
  int64_t cStrides[2] = {7, 1};
  MatmulArguments packed;
  packed.pack(aOperand, bOperand, c, cStrides, &biasOperand, 0.25f, 32);
  EXPECT_EQ(*static_cast<const void **>(packed.args[0]), a);
  EXPECT_EQ(*static_cast<const void **>(packed.args[1]), b);
  EXPECT_EQ(*static_cast<void **>(packed.args[2]), c);
  int32_t expected[9] = {3, 7, 5, 5, 1, 1, 5, 7, 1}; // M, N, K, then a's, b's and c's strides
  for (int i = 0; i < 9; ++i)
    EXPECT_EQ(*static_cast<int32_t *>(packed.args[3 + i]), expected[i]) << "index argument " << i;
  EXPECT_EQ(*static_cast<float *>(packed.args[12]), 0.25f);
  EXPECT_EQ(*static_cast<const void **>(packed.args[13]), bias);
  EXPECT_EQ(*static_cast<int32_t *>(packed.args[14]), 2);

  // 64-bit indices, no slope (matmul) and no bias: the strides end the list.
  MatmulArguments plain;
  plain.pack(aOperand, bOperand, c, cStrides, nullptr, std::nullopt, 64);
  EXPECT_EQ(*static_cast<int64_t *>(plain.args[3]), 3);
  EXPECT_EQ(*static_cast<int64_t *>(plain.args[11]), 1);
  EXPECT_EQ(plain.args[12], nullptr);
}

int encodes = 0;
int countingEncoder(void *map, int, unsigned, void *address, const uint64_t *, const uint64_t *,
                    const uint32_t *, const uint32_t *, int, int, int, int) {
  ++encodes;
  std::memcpy(map, &address, sizeof(void *)); // a map that names its matrix
  return 0;
}

TEST(MatmulArguments, TensorMapsFollowTheOtherArguments) {
  alignas(16) static char a[16], b[16], c[16];
  // f16 a 256x128 and b 128x512, row-major.
  StridedOperand aOperand = matrix(a, 256, 128, 128, 1, 2), bOperand = matrix(b, 128, 512, 512, 1, 2);
  int64_t cStrides[2] = {512, 1};
  MatmulArguments packed;
  packed.pack(aOperand, bOperand, c, cStrides, nullptr, 0.5f, 32);
  ASSERT_EQ(packed.count, 13) << "a, b, c, 9 indices, the slope";
  tile::runtime::GpuDriver driver;
  driver.name = "CUDA";
  driver.tensorMapEncodeTiled = countingEncoder;
  TensorMapCache cache(driver);
  // a's, b's, and c's (which the epilogue's bulk stores write; its width is its map's).
  std::vector<tile::TensorMapParameter> maps = {
      {0, 1, 64, 128, 128, 6}, {1, 1, 64, 64, 128, 6}, {2, 1, 64, 128, 128, 6}};
  encodes = 0;
  void **args = packed.withTensorMaps(maps, cache);
  EXPECT_EQ(args, packed.args);
  const void *operands[] = {a, b, c};
  for (int i = 0; i < 3; ++i) {
    const void *named = nullptr;
    std::memcpy(&named, args[13 + i], sizeof(void *));
    EXPECT_EQ(named, operands[i]);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(args[13 + i]) % 64, 0u) << "a map parameter is 64-byte aligned";
  }
  EXPECT_EQ(*static_cast<float *>(args[12]), 0.5f) << "the maps come after the slope";
  packed.withTensorMaps(maps, cache);
  EXPECT_EQ(encodes, 3) << "the second call finds all three maps";
  // A stream-K kernel takes its workspace and flags between the packed arguments and the
  // maps; a launch of another kernel with the same call's arguments drops them again.
  alignas(16) static char workspace[16], flags[16];
  packed.setStreamKWorkspace(workspace, flags);
  args = packed.withTensorMaps(maps, cache);
  ASSERT_EQ(packed.count, 15);
  EXPECT_EQ(*static_cast<void **>(args[13]), static_cast<void *>(workspace));
  EXPECT_EQ(*static_cast<void **>(args[14]), static_cast<void *>(flags));
  const void *firstMap = nullptr;
  std::memcpy(&firstMap, args[15], sizeof(void *));
  EXPECT_EQ(firstMap, static_cast<const void *>(a));
  packed.setStreamKWorkspace(workspace, flags); // again, for the next launch of the call
  EXPECT_EQ(packed.count, 15);
  packed.setStreamKWorkspace(nullptr, nullptr);
  EXPECT_EQ(packed.count, 13);
  // A view the kernel's specialization promised a map for, but that none describes.
  MatmulArguments misaligned;
  misaligned.pack(matrix(a + 2, 256, 128, 128, 1, 2), bOperand, c, cStrides, nullptr, std::nullopt, 32);
  try {
    misaligned.withTensorMaps(maps, cache);
    FAIL() << "expected an error";
  } catch (const std::runtime_error &error) {
    EXPECT_NE(std::string(error.what()).find("operand a: its data starts at"), std::string::npos) << error.what();
  }
}

} // namespace
