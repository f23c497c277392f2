// The matmul tile program on the CPU without torch: blocks of every shape class (full,
// ragged edges, K = 0, strided views) against a double-precision loop.
#include "TestKernels.h"
#include "ops/MatmulConfig.h"
#include "runtime/KernelKey.h"
#include "runtime/CompileAndLoad.h"
#include "runtime/CpuLauncher.h"
#include "tile/Compiler/Compile.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regex>

using namespace tile;
using tile::testing::matmulSpec;

namespace {

struct Shape {
  int32_t m, n, k;
};

/// Runs C = A @ B (with leaky_relu when `slope` is set) on row-major A (m x k, row
/// stride lda) and B (k x n), C (m x n); A may be read transposed through its strides.
void runMatmul(const runtime::LoadedKernel &kernel, const ops::KernelSpec &spec, const float *a,
               int32_t sam, int32_t sak, const float *b, float *c, Shape s, float *slope) {
  int32_t sbk = s.n, sbn = 1, scm = s.n, scn = 1;
  const void *aPtr = a, *bPtr = b;
  void *cPtr = c;
  void *args[] = {&aPtr, &bPtr, &cPtr, &s.m, &s.n, &s.k, &sam, &sak,
                  &sbk,  &sbn,  &scm,  &scn, slope};
  int64_t bm = spec.config.at("BLOCK_M"), bn = spec.config.at("BLOCK_N");
  int32_t programs = static_cast<int32_t>(((s.m + bm - 1) / bm) * ((s.n + bn - 1) / bn));
  runtime::launchCpu(kernel, args, runtime::Grid{programs, 1, 1}, 1);
}

class MatmulShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(MatmulShapes, Float32MatchesDoubleLoop) {
  Shape s = GetParam();
  // 8 x 16 f32 fits the accumulator check of every x86-64 host, AVX2 or AVX-512.
  auto spec = matmulSpec("matmul_leaky_relu", "f32", "f32", 8, 16, 16, 2);
  auto kernel = runtime::compileAndLoad(spec, Target::host());
  std::mt19937 rng(s.m * 131 + s.n * 7 + s.k);
  std::normal_distribution<float> dist;
  std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n);
  std::vector<float> c(size_t(s.m) * s.n + 16, NAN);
  for (auto &x : a)
    x = dist(rng);
  for (auto &x : b)
    x = dist(rng);
  float slope = 0.25f;
  // A is m x k, stored transposed (k x m, row-major): strides (1, m).
  std::vector<float> aT(a.size());
  for (int32_t i = 0; i < s.m; ++i)
    for (int32_t kk = 0; kk < s.k; ++kk)
      aT[size_t(kk) * s.m + i] = a[size_t(i) * s.k + kk];
  for (bool transposed : {false, true}) {
    std::fill(c.begin(), c.end(), NAN);
    if (transposed)
      runMatmul(*kernel, spec, aT.data(), 1, s.m, b.data(), c.data(), s, &slope);
    else
      runMatmul(*kernel, spec, a.data(), s.k, 1, b.data(), c.data(), s, &slope);
    for (int32_t i = 0; i < s.m; ++i)
      for (int32_t j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int32_t kk = 0; kk < s.k; ++kk)
          sum += double(a[size_t(i) * s.k + kk]) * b[size_t(kk) * s.n + j];
        double expected = sum > 0 ? sum : sum * slope;
        ASSERT_NEAR(c[size_t(i) * s.n + j], expected, 1e-4 * (1 + std::abs(expected)))
            << "at (" << i << ", " << j << ") transposed=" << transposed;
      }
    for (size_t i = size_t(s.m) * s.n; i < c.size(); ++i)
      ASSERT_TRUE(std::isnan(c[i])) << "kernel wrote past the end of C";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulShapes,
                         ::testing::Values(Shape{16, 32, 16}, Shape{64, 64, 64}, Shape{1, 1, 1},
                                           Shape{7, 13, 5}, Shape{33, 65, 47}, Shape{5, 7, 0},
                                           Shape{100, 3, 130}),
                         [](const ::testing::TestParamInfo<Shape> &info) {
                           const Shape &s = info.param;
                           return "M" + std::to_string(s.m) + "_N" + std::to_string(s.n) + "_K" +
                                  std::to_string(s.k);
                         });

TEST(Matmul, DotReadsOperandsFromMemory) {
  auto context = createContext();
  auto module = ops::buildKernel(*context, matmulSpec("matmul", "f16", "f16", 8, 32, 64));
  CompileOptions options;
  options.keepStages = true;
  Binary binary = compile(*module, Target::host(), options);
  const std::string &cpuStage = binary.stages.at(1).second;
  // The fused dot neither gathers its operands nor builds a vector.contract.
  EXPECT_EQ(cpuStage.find("vector.contract"), std::string::npos);
  EXPECT_NE(cpuStage.find("vector.fma"), std::string::npos);
  EXPECT_NE(binary.stages.at(3).second.find("vfmadd"), std::string::npos);
}

struct GroupedDotCase {
  std::string in, out, feature, instruction, interleave;
};

class GroupedDots : public ::testing::TestWithParam<GroupedDotCase> {};

/// An AVX-512 CPU named `arch` with the features `extra` ("a,+b"), and the same CPU with
/// them turned off.
std::pair<Target, Target> cpusWithAndWithout(const std::string &arch, const std::string &extra) {
  Target with;
  with.kind = TargetKind::Cpu;
  with.arch = arch;
  std::string common = "+avx2,+avx512bw,+avx512dq,+avx512f,+avx512vbmi,+avx512vl,+f16c,+fma";
  if (extra.find("amx") != std::string::npos)
    common += ",+avx512bf16,+avx512vnni";
  with.features = common + ",+" + extra;
  Target without = with;
  std::string off = extra;
  for (size_t at = 0; (at = off.find('+', at)) != std::string::npos;)
    off[at] = '-';
  without.features = common + ",-" + off;
  return {with, without};
}

/// A matmul of `c`'s dtypes in blocks of blockM x blockN x blockK, b in groups of k, a's k
/// and c's columns unit-stride.
/// A bias added in the epilogue: none, one read through its run-time stride, or a
/// contiguous one (unit_strides bit 6).
enum class Bias { None, Strided, Contiguous };

ops::KernelSpec groupedSpec(const GroupedDotCase &c, int64_t blockM, int64_t blockN, int64_t blockK,
                            Bias bias = Bias::None) {
  auto spec = matmulSpec("matmul", c.in, c.out, blockM, blockN, blockK);
  spec.config["packed_b"] = c.in == "bf16" ? 2 : 4;
  spec.config["unit_strides"] = 1 << 1 | 1 << 5; // a's k and c's columns
  if (bias != Bias::None)
    spec.dtypes.push_back(c.out);
  if (bias == Bias::Contiguous)
    spec.config["unit_strides"] |= 1 << 6;
  return spec;
}

/// The assembly of groupedSpec's kernel for `target`.
std::string groupedAssembly(const GroupedDotCase &c, const Target &target, int64_t blockM,
                            int64_t blockN, int64_t blockK, Bias bias = Bias::None) {
  CompileOptions options;
  options.keepStages = true;
  auto context = createContext();
  auto module = ops::buildKernel(*context, groupedSpec(c, blockM, blockN, blockK, bias));
  return compile(*module, target, options).stages.at(3).second;
}

/// The assembly of groupedSpec's 64 x 64 kernel on a CPU with AMX for its dtype.
std::string largeBlockOnTiles(const GroupedDotCase &c, Bias bias = Bias::None) {
  std::string amx = c.in == "bf16" ? "amx-bf16" : "amx-int8";
  return groupedAssembly(c, cpusWithAndWithout("sapphirerapids", "amx-tile,+" + amx).first, 64, 64,
                         1024, bias);
}

/// How many times `pattern` matches in `text`.
long matches(const std::string &text, const std::regex &pattern) {
  return std::distance(std::sregex_iterator(text.begin(), text.end(), pattern),
                       std::sregex_iterator());
}

TEST(Matmul, StoresOnlyRowsThatKeepALane) {
  // Each row of c's block is stored only where its mask keeps a lane: the rows of an edge
  // block past M may lie past c's allocation, and a masked store into an unmapped page
  // takes a microcode assist even with every lane off (float32 34x1024x5 ran 3-7 times
  // slower in processes where the page after c was unmapped).
  auto context = createContext();
  auto module = ops::buildKernel(*context, matmulSpec("matmul", "f32", "f32", 4, 64, 16));
  CompileOptions options;
  options.keepStages = true;
  Target target = cpusWithAndWithout("znver4", "avx512bf16").first;
  Binary binary = compile(*module, target, options);
  const std::string &cpuStage = binary.stages.at(1).second;
  auto stores = matches(cpuStage, std::regex(R"(llvm\.intr\.masked\.store)"));
  EXPECT_GE(stores, 4);
  EXPECT_EQ(matches(cpuStage, std::regex(R"(vector\.reduction <or>)")), stores);
}

TEST(Matmul, Float16DotsAlongKWidenAsLoaded) {
  // A few rows of float16 against a b whose k is contiguous (a float16 Linear's weight)
  // take dots along k on the float16 operands: each span of 16 k of a row or column is
  // widened as it is loaded (vcvtph2ps, F16C) and multiplied in float32 lanes; nothing is
  // gathered. Each column's lines are prefetched ahead of the steps that read them.
  auto spec = tile::testing::withKnobs(
      matmulSpec("matmul", "f16", "f16", 8, 8, 1024),
      {{"unit_strides", 1 << 1 | 1 << 2 | 1 << 5}}); // a's k, b's k, c's rows
  auto context = createContext();
  auto module = ops::buildKernel(*context, spec);
  CompileOptions options;
  options.keepStages = true;
  Target target = cpusWithAndWithout("znver4", "avx512bf16").first;
  std::string assembly = compile(*module, target, options).stages.at(3).second;
  // 16 halves to a zmm register at once (the kernel without dots along k widened b's
  // elements one at a time, from 16-bit inserts).
  EXPECT_GE(matches(assembly, std::regex(R"(\tvcvtph2ps\s[^\n]*%zmm)")), 16);
  EXPECT_NE(assembly.find("vfmadd"), std::string::npos);
  EXPECT_EQ(assembly.find("gather"), std::string::npos);
  EXPECT_GE(matches(assembly, std::regex(R"(\tprefetcht0\s)")), 8);
}

TEST_P(GroupedDots, TakeTheDotProductInstructionWhereTheCpuHasIt) {
  // On a CPU with AVX512-BF16 (AVX512-VNNI) the full blocks of a bf16 (int8) dot whose a
  // rows are unit-stride multiply pairs (quads) of k with vdpbf16ps (vpdpbusd); b's rows
  // are interleaved by a permute. Without the feature (here forced off on the same CPU)
  // every block widens. Other blocks (ragged edges, a strided a) widen either way.
  const GroupedDotCase &c = GetParam();
  auto [with, without] = cpusWithAndWithout("znver4", c.feature);
  CompileOptions options;
  options.keepStages = true;
  for (const Target &target : {with, without}) {
    auto context = createContext();
    auto module = ops::buildKernel(*context, matmulSpec("matmul", c.in, c.out, 8, 32, 64));
    Binary binary = compile(*module, target, options);
    const std::string &assembly = binary.stages.at(3).second;
    bool grouped = target.hasFeature(c.feature);
    EXPECT_EQ(assembly.find(c.instruction) != std::string::npos, grouped) << target.features;
    EXPECT_EQ(assembly.find(c.interleave) != std::string::npos, grouped) << target.features;
  }
}

TEST_P(GroupedDots, TakeTheInstructionAtTheEdgesOfBReadInPlace) {
  // b read in place (its columns unit-stride, the masks' other lanes zeros): blocks at
  // the row and column edges, and a last chunk of k that BLOCK_K does not divide, take
  // the instruction too, b's rows under the kept columns' mask. No block widens its
  // operands element by element (int8 by vpmulld, bf16 by vfmadd), which had made int8
  // 40x512x320 50 times slower than _int_mm.
  const GroupedDotCase &c = GetParam();
  auto spec = tile::testing::withKnobs(matmulSpec("matmul", c.in, c.out, 4, 64, 512),
                                       {{"unit_strides", 1 << 1 | 1 << 3 | 1 << 5}});
  auto context = createContext();
  auto module = ops::buildKernel(*context, spec);
  CompileOptions options;
  options.keepStages = true;
  Target target = cpusWithAndWithout("znver4", c.feature).first;
  std::string assembly = compile(*module, target, options).stages.at(3).second;
  EXPECT_NE(assembly.find(c.instruction), std::string::npos);
  EXPECT_EQ(assembly.find(c.in == "bf16" ? "vfmadd" : "vpmulld"), std::string::npos);
  EXPECT_EQ(assembly.find("gather"), std::string::npos);
}

TEST_P(GroupedDots, ReadBInGroupsOfKWithNoInterleave) {
  // b packed in groups of k (packed_b = 2 for bf16, 4 for int8) is the instruction's
  // operand as loaded: the kernel multiplies with it and permutes nothing, at full blocks
  // and edges alike. A target without the instruction refuses the layout.
  const GroupedDotCase &c = GetParam();
  auto [with, without] = cpusWithAndWithout("znver4", c.feature);
  std::string assembly = groupedAssembly(c, with, 8, 32, 64);
  EXPECT_NE(assembly.find(c.instruction), std::string::npos);
  EXPECT_EQ(assembly.find(c.interleave), std::string::npos);
  auto spec = groupedSpec(c, 8, 32, 64);
  auto context = createContext();
  auto module = ops::buildKernel(*context, spec);
  EXPECT_ANY_THROW(compile(*module, without, CompileOptions()))
      << "b in groups with no instruction to read them";
  spec.config["unit_strides"] = 0;
  EXPECT_THROW(ops::buildKernel(*context, spec), std::invalid_argument)
      << "a's k must be unit-stride";
}

TEST_P(GroupedDots, TakeTileRegistersWhereTheCpuHasAmx) {
  // With AMX (Sapphire Rapids and later) a 32 x 32 block of b in groups of k multiplies
  // on the tile registers: tdpbf16ps (tdpbssd for int8) on 16x16 tiles that stay in
  // registers through the K loop, after one ldtilecfg, its edges too (from zero-padded
  // copies). Without AMX the same block takes the vector instruction.
  const GroupedDotCase &c = GetParam();
  bool bf16 = c.in == "bf16";
  std::string amx = bf16 ? "amx-bf16" : "amx-int8", tileDot = bf16 ? "tdpbf16ps" : "tdpbssd";
  auto [with, without] = cpusWithAndWithout("sapphirerapids", "amx-tile,+" + amx);
  for (const Target &target : {with, without}) {
    std::string assembly = groupedAssembly(c, target, 32, 32, 256);
    bool tiles = target.hasFeature(amx);
    EXPECT_EQ(assembly.find(tileDot) != std::string::npos, tiles) << target.features;
    EXPECT_EQ(assembly.find("ldtilecfg") != std::string::npos, tiles) << target.features;
    EXPECT_EQ(assembly.find(c.instruction) != std::string::npos, !tiles) << target.features;
    // No call in a kernel on the tiles: the configuration does not outlive one, so each
    // program instance would load it again (the zeros of the accumulator's buffer had
    // become a call to memset).
    if (tiles)
      EXPECT_EQ(assembly.find("\tcall"), std::string::npos) << target.features;
    // The first k step's accumulator tiles are read from a constant row of zeros, not
    // from zeros just stored over the accumulator's buffer (a tile load waits for tile
    // stores to its lines to complete).
    EXPECT_EQ(assembly.find("tile_zero_row(%rip)") != std::string::npos, tiles) << target.features;
  }
}

TEST_P(GroupedDots, StoreEachRowOfALargeBlockAsItIsConverted) {
  // A 64 x 64 block on the tile registers leaves its accumulator in a 16 KB buffer; its
  // epilogue loads, converts and stores one row at a time, so no vector register is
  // spilled (the block's epilogue built whole had loaded every row first: 117 vector
  // stores to the stack for bf16).
  const GroupedDotCase &c = GetParam();
  std::string assembly = largeBlockOnTiles(c);
  auto stores = matches(assembly, std::regex(R"(\tvmov\w*\s+%[xyz]mm\d+, -?\d*\(%rsp\))"));
  EXPECT_LT(stores, 8) << "vector stores to the stack in the 64 x 64 " << c.in << " kernel";
}

TEST_P(GroupedDots, StoreTheRowsOfALargeBlockInOneLoop) {
  // The epilogue of a 64 x 64 block on the tile registers is one loop over its rows (the
  // first two, whose offsets fold, stay apart): unrolled, its 64 rows had been about half
  // of the kernel's compile. A row's mask is computed from the row's index, not read back
  // from a mask stored to the stack at every row.
  // So is the epilogue that adds a bias row: the rows' loads from the buffer pass the
  // bias's load (its contiguous, masked and gathered forms behind run-time checks) to
  // join their rows (they had stayed above it, all 64 loaded at once, and the rows had
  // stayed unrolled: a bf16 kernel with a bias compiled in 240 ms against 60).
  const GroupedDotCase &c = GetParam();
  for (Bias bias : {Bias::None, Bias::Strided, Bias::Contiguous}) {
    std::string assembly = largeBlockOnTiles(c, bias);
    auto stores = matches(assembly, std::regex(R"(\tvmov\w*\s+%zmm\d+, [^\n]*\{%k\d\})"));
    // 4 (int32) or 2 (bf16) stores a row: 3 rows' worth, where 64 rows unrolled had 64.
    EXPECT_LE(stores, 12) << "masked stores of c in the 64 x 64 " << c.in << " kernel, bias "
                          << static_cast<int>(bias);
    EXPECT_GE(stores, 2);
    std::regex byteFromStack(R"(\tmovzbl\s+-?\d*\(%rsp)");
    EXPECT_FALSE(std::regex_search(assembly, byteFromStack))
        << "a mask lane read through memory, bias " << static_cast<int>(bias);
  }
}

TEST_P(GroupedDots, MultiplyTheSubBlocksOfALargeBlockInOneLoop) {
  // A 64 x 64 block is 2 x 2 sub-blocks of 32 x 32, each a K loop of 4 tile dots per k
  // step: they run as one loop over the sub-blocks, which LLVM is told not to unroll
  // (unrolled, they had been a tenth of the kernel's first call: bf16 1024^3 83 -> 74 ms).
  const GroupedDotCase &c = GetParam();
  std::string assembly = largeBlockOnTiles(c);
  auto dots = matches(assembly, std::regex(c.in == "bf16" ? "\ttdpbf16ps" : "\ttdpbssd"));
  // One sub-block's 4, in each copy LLVM makes of the loops around them (it unrolls the
  // int8 kernel's loop over BLOCK_K by 2); the sub-blocks unrolled had 16 in each.
  EXPECT_GE(dots, 4);
  EXPECT_LT(dots, 16) << "tile dots in the 64 x 64 " << c.in << " kernel";
}

INSTANTIATE_TEST_SUITE_P(Cpu, GroupedDots,
                         ::testing::Values(GroupedDotCase{"bf16", "bf16", "avx512bf16", "vdpbf16ps", "vpermt2w"},
                                           GroupedDotCase{"i8", "i32", "avx512vnni", "vpdpbusd", "vpermt2b"}),
                         [](const ::testing::TestParamInfo<GroupedDotCase> &info) { return info.param.in; });

TEST(Matmul, UnsignedATakesVpdpbusdWithNoSumsOfRows) {
  // unsigned_a: the int8 dot reads a + 128 as vpdpbusd's unsigned side, and the bias
  // (b's column sums times -128, the caller's) takes off what that adds. The kernel flips
  // a's sign bits and sums no rows of a (the shifts that split a's bytes into 16-bit
  // lanes are gone). It stays on vpdpbusd where the host has AMX (the tiles multiply
  // signed bytes), and a target without vpdpbusd refuses it, as do a spec without b in
  // quads or without an int32 bias to carry the sums.
  GroupedDotCase c{"i8", "i32", "avx512vnni", "vpdpbusd", "vpermt2b"};
  auto [with, without] = cpusWithAndWithout("znver4", c.feature);
  auto context = createContext();
  CompileOptions options;
  options.keepStages = true;
  auto assemblyOf = [&](const ops::KernelSpec &spec, const Target &target) {
    auto module = ops::buildKernel(*context, spec);
    return compile(*module, target, options).stages.at(3).second;
  };
  auto flipped = groupedSpec(c, 4, 64, 128, Bias::Contiguous);
  std::string sumsOfRows = assemblyOf(flipped, with);
  EXPECT_GT(matches(sumsOfRows, std::regex(R"(\tvpsraw\s)")), 0) << "the row sums' shifts";
  auto unsignedA = tile::testing::withKnobs(flipped, {{"unsigned_a", 1}});
  std::string assembly = assemblyOf(unsignedA, with);
  EXPECT_NE(assembly.find("vpdpbusd"), std::string::npos);
  EXPECT_EQ(matches(assembly, std::regex(R"(\tvpsraw\s)")), 0);
  EXPECT_EQ(assembly.find("vpmulld"), std::string::npos);

  auto onTiles =
      tile::testing::withKnobs(groupedSpec(c, 32, 32, 256, Bias::Contiguous), {{"unsigned_a", 1}});
  std::string amx =
      assemblyOf(onTiles, cpusWithAndWithout("sapphirerapids", "amx-tile,+amx-int8").first);
  EXPECT_EQ(amx.find("tdpbssd"), std::string::npos);
  EXPECT_NE(amx.find("vpdpbusd"), std::string::npos);

  auto module = ops::buildKernel(*context, unsignedA);
  EXPECT_ANY_THROW(compile(*module, without, CompileOptions())) << "no vpdpbusd";
  EXPECT_THROW(ops::buildKernel(*context, tile::testing::withKnobs(groupedSpec(c, 4, 64, 128),
                                                                   {{"unsigned_a", 1}})),
               std::invalid_argument)
      << "no bias to carry the column sums";
  auto inPlace = unsignedA;
  inPlace.config.erase("packed_b");
  EXPECT_THROW(ops::buildKernel(*context, inPlace), std::invalid_argument) << "b not in quads";
}

TEST(Matmul, ABlockGridGivesEachProgramItsBlock) {
  // grid_2d: program (x, y) of a (block rows, block columns) grid computes block (x, y),
  // the same product as the grouped order of one group, with no division per program.
  Shape s{37, 70, 19};
  auto plain = matmulSpec("matmul_leaky_relu", "f32", "f32", 8, 16, 16, 8);
  auto blocks = plain;
  blocks.config["grid_2d"] = 1;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n);
  for (auto &x : a)
    x = dist(rng);
  for (auto &x : b)
    x = dist(rng);
  float slope = 0.5f;
  std::vector<float> want(size_t(s.m) * s.n, NAN), got(size_t(s.m) * s.n, NAN);
  runMatmul(*runtime::compileAndLoad(plain, Target::host()), plain, a.data(), s.k, 1, b.data(),
            want.data(), s, &slope);
  int32_t sbk = s.n, sbn = 1, scm = s.n, scn = 1, sam = s.k, sak = 1;
  const void *aPtr = a.data(), *bPtr = b.data();
  void *cPtr = got.data();
  void *args[] = {&aPtr, &bPtr, &cPtr, &s.m, &s.n, &s.k,  &sam,
                  &sak,  &sbk,  &sbn,  &scm, &scn, &slope};
  runtime::launchCpu(*runtime::compileAndLoad(blocks, Target::host()), args,
                     runtime::Grid{(s.m + 7) / 8, (s.n + 15) / 16, 1}, 1);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "element " << i;

  auto persistent = blocks;
  persistent.config["persistent"] = 1;
  auto context = createContext();
  EXPECT_THROW(ops::buildKernel(*context, persistent), std::invalid_argument);
}

TEST(Matmul, RejectsBadConfigs) {
  auto context = createContext();
  EXPECT_THROW(ops::buildKernel(*context, matmulSpec("matmul", "f32", "f32", 24, 32, 16)),
               std::invalid_argument);
  EXPECT_THROW(ops::buildKernel(*context, matmulSpec("matmul", "i8", "f32", 16, 32, 16)),
               std::invalid_argument);
  EXPECT_THROW(ops::buildKernel(*context, matmulSpec("matmul_leaky_relu", "i8", "i32", 16, 32, 16)),
               std::invalid_argument);
}

TEST(MatmulConfig, EveryTargetFamilySetsEveryKnob) {
  for (const char *target : {"cpu", "hip:gfx942", "hip:gfx1100", "cuda:sm_90"}) {
    auto config = ops::defaultMatmulConfig(Target::parse(target), 1024, 1024, 1024, "f16");
    for (const auto &name : ops::matmulKnobNames())
      EXPECT_EQ(config.count(name), 1u) << target << " has no default " << name;
  }
  auto cpu = ops::defaultMatmulConfig(Target::host(), 7, 13, 20, "f32");
  EXPECT_EQ(cpu.at("BLOCK_K"), 16) << "BLOCK_K is a power of two no larger than needed";
  // float32 with K under 16: the power of two at or above K, the blocks row by row.
  auto smallK = ops::defaultMatmulConfig(Target::host(), 700, 1300, 5, "f32");
  EXPECT_EQ(smallK.at("BLOCK_K"), 8);
  EXPECT_EQ(smallK.at("GROUP_M"), 1);
  EXPECT_EQ(ops::defaultMatmulConfig(Target::host(), 700, 1300, 1, "f32").at("BLOCK_K"), 1);
}

TEST(MatmulConfig, Avx2BlocksLeaveRegistersBesideTheAccumulator) {
  // AVX2's 16 vector registers: float32 blocks of 4 x 16 (8 accumulator registers, where
  // 8 x 16 had taken all 16); int8 and bf16 keep 8 x 16; AVX-512 takes 4 x 64.
  // BLOCK_M x BLOCK_N, as "MxN".
  auto blocks = [](const char *target, const char *dtype) {
    auto config = ops::defaultMatmulConfig(Target::parse(target), 1024, 1024, 1024, dtype);
    return std::to_string(config.at("BLOCK_M")) + "x" + std::to_string(config.at("BLOCK_N"));
  };
  for (const char *avx2 : {"cpu:znver3", "cpu:x86-64-v3"}) {
    EXPECT_EQ(blocks(avx2, "f32"), "4x16") << avx2;
    EXPECT_EQ(blocks(avx2, "f16"), "4x16") << avx2;
    EXPECT_EQ(blocks(avx2, "i8"), "8x16") << avx2;
    EXPECT_EQ(blocks(avx2, "bf16"), "8x16") << avx2;
  }
  EXPECT_EQ(blocks("cpu:znver4", "f32"), "4x64");
}

TEST(MatmulConfig, MatrixTilesTakeEveryRowInOneGroupWhereAFitsTheL2) {
  // An a read in place that fits the L2 (int8 384^3: 144 KB, bf16 640^3: 800 KB) makes one
  // group of every row of blocks, so that the launch's threads split the programs by
  // block columns. A copy of a (written in bands of rows), or an a of 1 MB, keeps groups
  // of rows whose bands take about half of the L2; long K keeps whole columns.
  auto groupM = [](int64_t m, int64_t k, const char *dtype, bool copied) {
    auto config = ops::defaultMatmulConfig(Target::parse("cpu:sapphirerapids"), m, m, k, dtype);
    config = ops::withMatrixTiles(config, m, m, k, dtype, copied);
    return config.at("GROUP_M") * config.at("BLOCK_M");
  };
  EXPECT_GE(groupM(384, 384, "i8", false), 4096);
  EXPECT_GE(groupM(640, 640, "bf16", false), 4096);
  EXPECT_EQ(groupM(384, 384, "i8", true), 8 * 32);
  EXPECT_EQ(groupM(1024, 1024, "i8", false), 8 * 64);
  EXPECT_EQ(groupM(2048, 2048, "bf16", false), 4 * 64);
  EXPECT_GE(groupM(4096, 4096, "bf16", false), 4096) << "K of 4096: whole block columns";
}

TEST(MatmulConfig, GpuOnlyKnobsStillChangeTheCpuKey) {
  // Ignored by the CPU code generator, but a different config is a different kernel.
  auto spec = matmulSpec("matmul", "f32", "f32", 8, 32, 64);
  std::string base = runtime::kernelKey(spec, Target::host());
  for (const char *knob : {"GROUP_M", "num_warps", "num_stages", "waves_per_eu",
                           "matrix_instr_nonkdim", "kpack"}) {
    auto changed = spec;
    changed.config[knob] = 3;
    EXPECT_NE(base, runtime::kernelKey(changed, Target::host())) << knob;
  }
}

} // namespace

namespace {

TEST(Matmul, SixtyFourBitIndexingComputesTheSameProduct) {
  // index_bits = 64 is what the binding picks when an element offset passes 2**31; the
  // kernel then takes i64 sizes and strides. Small sizes check its arithmetic.
  auto spec = matmulSpec("matmul", "f32", "f32", 8, 32, 16);
  spec.config["index_bits"] = 64;
  auto kernel = runtime::compileAndLoad(spec, Target::host());
  const int64_t m = 21, n = 45, k = 19;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> a(m * k), b(k * n), c(m * n + 8, NAN);
  for (auto &x : a)
    x = dist(rng);
  for (auto &x : b)
    x = dist(rng);
  int64_t sizes[9] = {m, n, k, k, 1, n, 1, n, 1};
  const void *aPtr = a.data(), *bPtr = b.data();
  void *cPtr = c.data();
  void *args[12] = {&aPtr, &bPtr, &cPtr};
  for (int i = 0; i < 9; ++i)
    args[3 + i] = &sizes[i];
  int32_t programs = int32_t(((m + 7) / 8) * ((n + 31) / 32));
  runtime::launchCpu(*kernel, args, runtime::Grid{programs, 1, 1}, 1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t kk = 0; kk < k; ++kk)
        sum += double(a[i * k + kk]) * b[kk * n + j];
      ASSERT_NEAR(c[i * n + j], sum, 1e-4 * (1 + std::abs(sum))) << i << "," << j;
    }
  for (int64_t i = m * n; i < m * n + 8; ++i)
    ASSERT_TRUE(std::isnan(c[i]));
}

} // namespace
