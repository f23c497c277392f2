// The swizzled shared-memory layouts, evaluated as data: every element of a staged tile
// has its own slot, and the form of the offset that lets consecutive rows share their
// per-lane terms gives the same slots as the plain one.
#include "EvaluateArith.h"
#include "GpuLowering.h"

#include "tile/Compiler/Compile.h"

#include "mlir/IR/Builders.h"

#include <gtest/gtest.h>

#include <set>

using namespace mlir;
using namespace mlir::tile::gpu_lowering;
using ::tile::testing::evaluate;

namespace {

struct Shape {
  int64_t outer, inner, elementBytes, accessBytes;
};

class SwizzledLayouts : public ::testing::TestWithParam<Shape> {};

TEST_P(SwizzledLayouts, OffsetFromARunStartIsThePlainOffset) {
  Shape shape = GetParam();
  auto context = ::tile::createContext();
  OpBuilder b(context.get());
  Location loc = b.getUnknownLoc();
  SharedLayout layout = swizzledLayout(shape.outer, shape.inner, shape.elementBytes, shape.accessBytes);
  std::set<int64_t> slots;
  for (int64_t outer = 0; outer < shape.outer; ++outer)
    for (int64_t inner = 0; inner < shape.inner; ++inner) {
      int64_t plain = evaluate(layout.offset(b, loc, i32Constant(b, loc, outer), i32Constant(b, loc, inner)));
      EXPECT_TRUE(slots.insert(plain).second) << "two elements in slot " << plain;
      EXPECT_GE(plain, 0);
      EXPECT_LT(plain, shape.outer * shape.inner);
      // Every run start (power-of-two multiples) and step within the run.
      for (int64_t multiple = 1; multiple <= shape.outer; multiple *= 2) {
        int64_t step = outer % multiple;
        Value base = i32Constant(b, loc, outer - step);
        int64_t split = evaluate(layout.offsetFrom(b, loc, base, multiple, step, i32Constant(b, loc, inner)));
        EXPECT_EQ(split, plain) << "(" << outer << ", " << inner << ") from a run of " << multiple;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Tiles, SwizzledLayouts,
    ::testing::Values(Shape{128, 32, 2, 8},  // a 128x32 f16 tile read 8 bytes at a time
                      Shape{128, 32, 2, 16}, // the same, 16 bytes at a time
                      Shape{64, 64, 2, 16},  // 128-byte rows
                      Shape{32, 16, 4, 16},  // f32
                      Shape{64, 128, 1, 16}, // i8
                      Shape{16, 8, 2, 8}));  // rows shorter than one unit per phase

} // namespace
