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
  ::tile::testing::ScratchModule scratch;
  OpBuilder &b = scratch.b;
  Location loc = scratch.loc;
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

TEST(WarpgroupSharedLayouts, ChunksAreTheHardwareSwizzleAtoms) {
  // The PTX ISA's swizzle modes, on byte addresses of a 1024-byte aligned buffer: the
  // 16-byte unit (bits 4..6) is XORed with the 128-byte row (bits 7..9) for 128-byte
  // swizzling, bits 4..5 with 7..8 for 64-byte, bit 4 with bit 7 for 32-byte. Rows longer
  // than the atom are cut into chunks of it, each an [outer][chunk] array after the
  // last. Checked for every element of f16 tiles with each atom width and 2 chunks.
  ::tile::testing::ScratchModule scratch;
  OpBuilder &b = scratch.b;
  Location loc = scratch.loc;
  struct Tile {
    int64_t outer, inner, atomBytes;
  };
  for (auto [outer, inner, atomBytes] : {Tile{64, 64, 128}, Tile{128, 128, 128}, Tile{64, 32, 64},
                                         Tile{32, 16, 32}, Tile{64, 256, 128}}) {
    SharedLayout layout = warpgroupSharedLayout(outer, inner, 2);
    int64_t chunk = atomBytes / 2, bits = atomBytes == 128 ? 7 : atomBytes == 64 ? 3 : 1;
    std::set<int64_t> slots;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t linear = ((i / chunk) * outer * chunk + o * chunk + i % chunk) * 2;
        int64_t swizzled = linear ^ (((linear >> 7) & bits) << 4);
        int64_t offset = evaluate(layout.offset(b, loc, i32Constant(b, loc, o), i32Constant(b, loc, i)));
        EXPECT_EQ(offset * 2, swizzled) << outer << "x" << inner << " (" << o << ", " << i << ")";
        slots.insert(offset);
      }
    EXPECT_EQ(int64_t(slots.size()), outer * inner) << outer << "x" << inner;
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
