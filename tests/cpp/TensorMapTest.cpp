// Tensor maps for bulk tensor copies: which operands one describes (and why not the
// others), and the cache that encodes each shape once, against a fake driver encoder.
#include "runtime/TensorMap.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace tile::runtime;

namespace {

/// A row-major rows x cols f16 matrix at `address`.
StridedOperand rowMajor(uintptr_t address, int64_t rows, int64_t cols, int64_t rowStride) {
  StridedOperand operand;
  operand.data = reinterpret_cast<const void *>(address);
  operand.sizes[0] = rows;
  operand.sizes[1] = cols;
  operand.strides[0] = rowStride;
  operand.strides[1] = 1;
  operand.elementBytes = 2;
  return operand;
}

const uint32_t kBox[2] = {64, 128}; // 64 contiguous f16 (128 bytes) x 128 rows

TEST(TensorMapPlan, DescribesARowMajorMatrixInTheDriversOrder) {
  TensorMapPlan plan = planTensorMap(rowMajor(0x10000, 4096, 1000, 1024), 1, TensorMapElement::F16, kBox, 128);
  ASSERT_EQ(plan.refusal, "");
  EXPECT_EQ(plan.shape.sizes[0], 1000u) << "dimension 0 is the contiguous one";
  EXPECT_EQ(plan.shape.sizes[1], 4096u);
  EXPECT_EQ(plan.shape.outerStrideBytes, 2048u);
  EXPECT_EQ(plan.shape.box[0], 64u);
  EXPECT_EQ(plan.shape.box[1], 128u);
  // A column-major view is described along its other dimension.
  StridedOperand columnMajor = rowMajor(0x10000, 1000, 4096, 1);
  columnMajor.strides[1] = 1024;
  plan = planTensorMap(columnMajor, 0, TensorMapElement::F16, kBox, 128);
  ASSERT_EQ(plan.refusal, "");
  EXPECT_EQ(plan.shape.sizes[0], 1000u);
  EXPECT_EQ(plan.shape.sizes[1], 4096u);
}

TEST(TensorMapPlan, RefusesWhatAMapCannotDescribeAndSaysWhy) {
  auto refusal = [](const StridedOperand &operand, int contiguousDim = 1, const uint32_t *box = kBox,
                    int swizzle = 128) {
    return planTensorMap(operand, contiguousDim, TensorMapElement::F16, box, swizzle).refusal;
  };
  EXPECT_NE(refusal(rowMajor(0x10002, 64, 64, 64)).find("not on a 16-byte boundary"), std::string::npos);
  // The transpose of a row-major matrix, asked for along its rows.
  StridedOperand transposed = rowMajor(0x10000, 64, 64, 1);
  transposed.strides[1] = 64;
  EXPECT_NE(refusal(transposed).find("has stride 64, not 1"), std::string::npos) << refusal(transposed);
  EXPECT_NE(refusal(rowMajor(0x10000, 64, 60, 60)).find("120 bytes, not a multiple of 16"), std::string::npos)
      << "rows of 60 f16 are 120 bytes apart";
  EXPECT_NE(refusal(rowMajor(0x10000, 64, 64, 32)).find("overlap"), std::string::npos);
  const uint32_t wide[2] = {128, 64};
  EXPECT_NE(refusal(rowMajor(0x10000, 64, 256, 256), 1, wide).find("wider than the 128-byte swizzle"),
            std::string::npos);
  const uint32_t tall[2] = {64, 512};
  EXPECT_NE(refusal(rowMajor(0x10000, 1024, 64, 64), 1, tall).find("1 to 256"), std::string::npos);
  EXPECT_NE(refusal(rowMajor(0x10000, 0, 64, 64)).find("empty"), std::string::npos);
  StridedOperand f32 = rowMajor(0x10000, 64, 64, 64);
  f32.elementBytes = 4;
  EXPECT_NE(refusal(f32).find("element type"), std::string::npos);
  // One row: its stride never moves an address, so any stride is fine.
  EXPECT_EQ(refusal(rowMajor(0x10000, 1, 64, 7)), "");
}

/// What the fake encoder saw.
struct FakeEncoder {
  int calls = 0, status = 0;
  int dataType = -1, swizzle = -1, fill = -1;
  unsigned rank = 0;
  uint64_t sizes[2] = {}, stride = 0;
  uint32_t box[2] = {};
  void *address = nullptr;
} encoder;

int fakeEncode(void *map, int dataType, unsigned rank, void *address, const uint64_t *sizes,
               const uint64_t *strides, const uint32_t *box, const uint32_t *elementStrides, int,
               int swizzle, int, int fill) {
  ++encoder.calls;
  encoder.dataType = dataType, encoder.rank = rank, encoder.address = address;
  encoder.sizes[0] = sizes[0], encoder.sizes[1] = sizes[1], encoder.stride = strides[0];
  encoder.box[0] = box[0], encoder.box[1] = box[1];
  encoder.swizzle = swizzle, encoder.fill = fill;
  EXPECT_EQ(elementStrides[0], 1u);
  EXPECT_EQ(elementStrides[1], 1u);
  // The map's bytes name the call, so a test can tell maps apart.
  std::memset(map, 0, 128);
  std::memcpy(map, &encoder.calls, sizeof(int));
  std::memcpy(static_cast<char *>(map) + 8, &address, sizeof(void *));
  return encoder.status;
}

class TensorMapCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    encoder = FakeEncoder();
    driver.name = "CUDA";
    driver.tensorMapEncodeTiled = fakeEncode;
  }
  TensorMapShape shapeAt(uintptr_t address, int64_t rows = 4096, int64_t cols = 4096) {
    TensorMapPlan plan = planTensorMap(rowMajor(address, rows, cols, cols), 1, TensorMapElement::F16, kBox, 128);
    EXPECT_EQ(plan.refusal, "");
    return plan.shape;
  }
  GpuDriver driver;
};

TEST_F(TensorMapCacheTest, AHitEncodesNothingAndANewPointerOrShapeEncodesOnce) {
  TensorMapCache cache(driver);
  EncodedTensorMap first = cache.get(shapeAt(0x100000));
  EXPECT_EQ(encoder.calls, 1);
  EXPECT_EQ(encoder.dataType, 6) << "CU_TENSOR_MAP_DATA_TYPE_FLOAT16";
  EXPECT_EQ(encoder.rank, 2u);
  EXPECT_EQ(encoder.address, reinterpret_cast<void *>(0x100000));
  EXPECT_EQ(encoder.sizes[0], 4096u);
  EXPECT_EQ(encoder.stride, 8192u);
  EXPECT_EQ(encoder.box[0], 64u);
  EXPECT_EQ(encoder.box[1], 128u);
  EXPECT_EQ(encoder.swizzle, 3) << "CU_TENSOR_MAP_SWIZZLE_128B";
  EXPECT_EQ(encoder.fill, 0) << "zeros past the matrix's edges";

  EncodedTensorMap hit = cache.get(shapeAt(0x100000));
  EXPECT_EQ(encoder.calls, 1) << "a repeated call does no host work";
  EXPECT_EQ(std::memcmp(hit.bytes, first.bytes, 128), 0);

  EncodedTensorMap moved = cache.get(shapeAt(0x200000));
  EXPECT_EQ(encoder.calls, 2) << "a new pointer is a new map";
  EXPECT_NE(std::memcmp(moved.bytes, first.bytes, 128), 0);

  cache.get(shapeAt(0x100000, 2048, 4096));
  EXPECT_EQ(encoder.calls, 3) << "a new shape is a new map";
  EXPECT_EQ(encoder.sizes[1], 2048u);
  cache.get(shapeAt(0x100000));
  cache.get(shapeAt(0x200000));
  EXPECT_EQ(cache.encodes(), 3);
  EXPECT_EQ(alignof(EncodedTensorMap), 64u) << "kernel parameters of tensor maps are 64-byte aligned";
}

TEST_F(TensorMapCacheTest, AFullCacheStartsOverAndDriverErrorsAreNamed) {
  TensorMapCache cache(driver, 2);
  cache.get(shapeAt(0x100000));
  cache.get(shapeAt(0x200000));
  cache.get(shapeAt(0x300000)); // starts over: holds only this one
  cache.get(shapeAt(0x300000));
  EXPECT_EQ(encoder.calls, 3);
  cache.get(shapeAt(0x100000));
  EXPECT_EQ(encoder.calls, 4);

  encoder.status = 1;
  try {
    cache.get(shapeAt(0x400000));
    FAIL() << "expected an error";
  } catch (const std::runtime_error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("tensor map encoding failed for a 4096x4096 matrix with box 128x64"),
              std::string::npos)
        << message;
  }
  encoder.status = 0;
  cache.get(shapeAt(0x400000));
  EXPECT_EQ(encoder.calls, 6) << "a refused map is not cached";

  driver.tensorMapEncodeTiled = nullptr;
  TensorMapCache old(driver);
  EXPECT_THROW(old.get(shapeAt(0x100000)), std::runtime_error);
}

} // namespace
