// Hopper's warpgroup MMA (cuda:sm_90a), checked in the PTX without a GPU: the matmul's
// main loop issues wgmma.mma_async on shared-memory descriptors (no fragment reads),
// keeps one MMA group in flight while the next tile's copies go out, waits for it after
// the loop, and stores C through shared memory with bulk tensor stores. ptxas, where it is on PATH, assembles it
// without spills. What wgmma cannot take (int8, f32, tiles that are not whole
// warpgroups of 64 rows) keeps mma.sync on the same target.
#include "TestKernels.h"
#include "ops/MatmulConfig.h"
#include "tile/Compiler/Compile.h"
#include "tile/Compiler/ResourceReport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>

using namespace tile;

namespace {

const Target &hopper() {
  static const Target target = Target::parse("cuda:sm_90a");
  return target;
}

/// Row-major, 16-byte aligned a, b and c with 32-bit offsets (the binding's common case),
/// with `extraUnitStrides` or-ed into the unit-stride bits.
std::map<std::string, int64_t> alignedConfig(const std::string &dtype, int64_t unitStrides = 0b101010) {
  // 8192^3's default: 128x256x64 over 8 warps and 4 stages, one block per tile.
  auto config = ops::defaultMatmulConfig(hopper(), 8192, 8192, 8192, dtype);
  config["index_bits"] = 32;
  config["unit_strides"] = unitStrides;
  config["divisibility_16"] = 0b111111;
  return config;
}

/// `third`: the dtype of the bias (matmul) or of the activation (matmul_leaky_relu_backward).
Binary binaryOf(const std::string &dtype, const std::map<std::string, int64_t> &config,
                const std::string &out = "", bool assembleWithPtxas = false,
                const std::string &third = "", const std::string &op = "matmul") {
  ops::KernelSpec spec{op, {dtype, out.empty() ? (dtype == "i8" ? "i32" : dtype) : out}, config};
  if (!third.empty())
    spec.dtypes.push_back(third);
  auto context = createContext();
  auto module = ops::buildKernel(*context, spec);
  CompileOptions options = ops::compileOptionsFor(spec);
  options.keepStages = true;
  options.assembleWithPtxas = options.reportFromPtxas = assembleWithPtxas;
  return compile(*module, hopper(), options);
}

std::string asmOf(const Binary &binary) { return tile::testing::stage(binary, "asm"); }

std::string ptxOf(const std::string &dtype, const std::map<std::string, int64_t> &config,
                  const std::string &out = "") {
  return asmOf(binaryOf(dtype, config, out));
}

int occurrences(const std::string &text, const std::string &what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++count;
  return count;
}

/// The K loop: from the target of the PTX's first backward branch to the last branch
/// back to it (LLVM may place the loop's conditional copies after its latch).
std::string mainLoop(const std::string &ptx) {
  std::regex backward(R"(bra(?:\.uni)?\s+(\$L__BB\d+_\d+);)");
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), backward); it != std::sregex_iterator(); ++it) {
    std::string target = (*it)[1].str();
    size_t start = ptx.find(target + ":");
    if (start == std::string::npos || start >= size_t(it->position()))
      continue;
    size_t end = it->position();
    for (auto later = it; later != std::sregex_iterator(); ++later)
      if ((*later)[1].str() == target)
        end = later->position();
    return ptx.substr(start, end - start);
  }
  return {};
}

TEST(WarpgroupMma, DefaultConfigRunsTheMainLoopOnWgmma) {
  for (const char *dtype : {"f16", "bf16"}) {
    auto config = alignedConfig(dtype);
    std::string ptx = ptxOf(dtype, config);
    std::string where = dtype;
    ASSERT_NE(ptx.find(".target sm_90a"), std::string::npos) << where;
    int64_t blockM = config.at("BLOCK_M"), blockN = config.at("BLOCK_N"), blockK = config.at("BLOCK_K");
    int64_t warpgroups = config.at("num_warps") / 4;
    // One m64nNk16 per 64 rows of a warpgroup and 16 of k: BLOCK_M*BLOCK_N*BLOCK_K /
    // (64*N*16 * warpgroups) per thread, all in the loop.
    std::string mma = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(blockN) + "k16.f32." + dtype + "." + dtype;
    std::string loop = mainLoop(ptx);
    ASSERT_FALSE(loop.empty()) << where;
    EXPECT_EQ(occurrences(loop, mma), blockM * blockN * blockK / (64 * blockN * 16 * warpgroups)) << where;
    EXPECT_EQ(occurrences(ptx, mma), occurrences(loop, mma)) << where;
    // Row-major b is N-major in shared memory: the transpose bit of b, not of a.
    EXPECT_NE(loop.find(", 1, 1, 1, 0, 1;"), std::string::npos) << where;
    // No fragment reads and no warp-level MMA.
    EXPECT_EQ(occurrences(ptx, "ldmatrix"), 0) << where;
    EXPECT_EQ(occurrences(ptx, "ld.shared"), occurrences(ptx, "ld.shared.v4")) << where;
    EXPECT_EQ(occurrences(ptx, "mma.sync"), 0) << where;
    // In the loop: the MMAs, then the wait that leaves them in flight, then the copies
    // of the tile num_stages - 1 ahead.
    size_t lastMma = loop.rfind(mma), inFlight = loop.find("wgmma.wait_group.sync.aligned 1;");
    size_t firstCopy = loop.find("cp.async.bulk.tensor.2d");
    ASSERT_NE(inFlight, std::string::npos) << where;
    ASSERT_NE(firstCopy, std::string::npos) << where;
    EXPECT_LT(lastMma, inFlight) << where;
    EXPECT_LT(inFlight, firstCopy) << where;
    // After the loop, every group is waited for before C is read.
    size_t drained = ptx.find("wgmma.wait_group.sync.aligned 0;");
    ASSERT_NE(drained, std::string::npos) << where;
    EXPECT_GT(drained, ptx.find(loop) + loop.size()) << where;
    // C through shared memory (swizzled, fenced for the copy engine), then one bulk
    // tensor store per 64 columns, waited for (their reads) before the block leaves; no
    // thread stores to global memory.
    size_t fenced = ptx.find("fence.proxy.async.shared::cta;");
    size_t stored = ptx.find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group");
    ASSERT_NE(stored, std::string::npos) << where;
    EXPECT_LT(fenced, stored) << where;
    EXPECT_EQ(occurrences(ptx, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), blockN / 64) << where;
    EXPECT_GT(ptx.rfind("cp.async.bulk.wait_group.read 0;"), ptx.rfind("cp.async.bulk.commit_group;")) << where;
    EXPECT_EQ(occurrences(ptx, "st.global"), 0) << where;
  }
}

TEST(WarpgroupMma, AlignedOperandsArriveByBulkTensorCopiesOnMbarriers) {
  for (const char *dtype : {"f16", "bf16"}) {
    auto config = alignedConfig(dtype);
    Binary binary = binaryOf(dtype, config);
    std::string ptx = asmOf(binary), loop = mainLoop(ptx), where = dtype;
    int64_t blockM = config.at("BLOCK_M"), blockN = config.at("BLOCK_N"), blockK = config.at("BLOCK_K");
    // Three tensor maps, a's, b's and c's, as 128-byte grid-constant parameters after
    // the others.
    ASSERT_EQ(binary.tensorMaps.size(), 3u) << where;
    int64_t dataType = std::string(dtype) == "bf16" ? 9 : 6;
    const TensorMapParameter &a = binary.tensorMaps[0], &b = binary.tensorMaps[1];
    EXPECT_EQ(a.operand, 0);
    EXPECT_EQ(a.contiguousDim, 1) << "row-major a is contiguous along k";
    EXPECT_EQ(a.boxInner, blockK);
    EXPECT_EQ(a.boxOuter, blockM);
    EXPECT_EQ(b.operand, 1);
    EXPECT_EQ(b.contiguousDim, 1) << "row-major b is contiguous along n";
    EXPECT_EQ(b.boxInner, 64) << "b's rows are cut into 128-byte swizzle atoms";
    EXPECT_EQ(b.boxOuter, blockK);
    const TensorMapParameter &c = binary.tensorMaps[2];
    EXPECT_EQ(c.operand, 2);
    EXPECT_EQ(c.contiguousDim, 1);
    EXPECT_EQ(c.boxInner, 64) << "c's rows are stored in 128-byte swizzle atoms";
    EXPECT_EQ(c.boxOuter, blockM);
    for (const TensorMapParameter &map : binary.tensorMaps) {
      EXPECT_EQ(map.swizzleBytes, 128) << where;
      EXPECT_EQ(map.dataType, dataType) << where;
    }
    EXPECT_EQ(occurrences(ptx, ".param .align 64 .b8 matmul_param_"), 3) << where;
    EXPECT_EQ(occurrences(ptx, "cvta.param.u64"), 3) << where;
    // Per iteration: a wait on the tile's barrier, one arrival with the stage's bytes, and
    // one copy per box: a's tile in one, b's in BLOCK_N / 64.
    EXPECT_EQ(occurrences(loop, "mbarrier.try_wait.parity.shared::cta.b64"), 1) << where;
    EXPECT_EQ(occurrences(loop, "mbarrier.arrive.expect_tx"), 1) << where;
    EXPECT_EQ(occurrences(loop, "cp.async.bulk.tensor.2d"), 1 + blockN / 64) << where;
    EXPECT_NE(loop.find(std::to_string((blockM + blockN) * blockK * 2) + ";"), std::string::npos)
        << "the stage's bytes: " << where;
    EXPECT_LT(loop.find("mbarrier.try_wait"), loop.find("wgmma.mma_async")) << where;
    // No thread copies through cp.async. The barriers sit in the dynamic array after the
    // ring (static shared memory would move the ring off its 1024-byte alignment) and are
    // invalidated after the loop, before the epilogue reuses the array.
    EXPECT_EQ(occurrences(ptx, "cp.async.cg"), 0) << where;
    EXPECT_EQ(occurrences(ptx, ".shared .align"), 1) << "only the dynamic array: " << where;
    EXPECT_EQ(occurrences(ptx, "mbarrier.init.shared::cta.b64"), config.at("num_stages")) << where;
    EXPECT_EQ(occurrences(ptx, "mbarrier.inval.shared::cta.b64"), config.at("num_stages")) << where;
    EXPECT_GT(ptx.find("mbarrier.inval"), ptx.find(loop) + loop.size()) << where;
  }
}

TEST(WarpgroupMma, WhatATensorMapCannotDescribeKeepsCpAsync) {
  // A K-major b (x @ w.t()) is still described, along its own contiguous dimension.
  Binary kMajor = binaryOf("f16", alignedConfig("f16", 0b100110));
  ASSERT_EQ(kMajor.tensorMaps.size(), 3u);
  EXPECT_EQ(kMajor.tensorMaps[1].contiguousDim, 0);
  EXPECT_EQ(kMajor.tensorMaps[1].boxOuter, alignedConfig("f16").at("BLOCK_N"));
  // Operands not proven 16-byte aligned, or offsets past 2^31 (coordinates are 32-bit):
  // the kernel takes no maps and copies with cp.async.
  auto unaligned = alignedConfig("f16");
  unaligned["divisibility_16"] = 0;
  auto wide = alignedConfig("f16");
  wide["index_bits"] = 64;
  for (const auto &config : {unaligned, wide}) {
    Binary binary = binaryOf("f16", config);
    std::string ptx = asmOf(binary);
    EXPECT_TRUE(binary.tensorMaps.empty());
    EXPECT_EQ(occurrences(ptx, "cp.async.bulk"), 0);
    EXPECT_EQ(occurrences(ptx, "mbarrier"), 0);
    EXPECT_GT(occurrences(ptx, "cp.async.cg.shared.global"), 0);
    EXPECT_EQ(occurrences(ptx, ".b8 matmul_param_"), 0) << "no unread map parameters";
  }
}

TEST(WarpgroupMma, TransposedOperandsSetTheirTransposeBits) {
  // a M-major (a = x.t(): unit stride along M, bit 0) and b K-major (b = w.t(): bit 2).
  struct Case {
    int64_t unitStrides;
    const char *bits;
  };
  for (auto [unitStrides, bits] : {Case{0b101010, "1, 0, 1;"}, Case{0b100110, "1, 0, 0;"},
                                   Case{0b101001, "1, 1, 1;"}, Case{0b100101, "1, 1, 0;"}}) {
    std::string loop = mainLoop(ptxOf("f16", alignedConfig("f16", unitStrides)));
    EXPECT_NE(loop.find(std::string(", 1, 1, ") + bits), std::string::npos) << "unit strides " << unitStrides;
  }
}

TEST(WarpgroupMma, WhatWgmmaCannotTakeStaysOnMmaSync) {
  auto small = alignedConfig("f16");
  small["BLOCK_M"] = 32; // not a whole warpgroup of 64 rows
  small["num_warps"] = 4;
  std::string ptx = ptxOf("f16", small);
  EXPECT_EQ(occurrences(ptx, "wgmma"), 0);
  EXPECT_GT(occurrences(ptx, "mma.sync.aligned.m16n8k16"), 0);
  std::string int8 = ptxOf("i8", alignedConfig("i8"));
  EXPECT_EQ(occurrences(int8, "wgmma"), 0);
  EXPECT_GT(occurrences(int8, "mma.sync.aligned.m16n8k32"), 0);
}

/// `config` with a producer warpgroup and, where `persistent`, a walk over tiles.
std::map<std::string, int64_t> specialized(std::map<std::string, int64_t> config, bool persistent) {
  config["warp_specialize"] = 1;
  config["persistent"] = persistent ? 1 : 0;
  return config;
}

TEST(WarpgroupMma, WarpSpecializationAddsAProducerWarpgroup) {
  // 128x256 over 8 consumer warps and 4 stages: a third warpgroup issues the copies with
  // 40 registers and hands the rest to the consumers (232 each); the consumers release
  // each stage and meet on barrier 1 of their 256 threads.
  auto config = alignedConfig("f16");
  ASSERT_EQ(config.at("num_warps"), 8);
  Binary binary = binaryOf("f16", specialized(config, false));
  std::string ptx = asmOf(binary);
  EXPECT_EQ(binary.blockThreads, 384);
  EXPECT_FALSE(binary.persistent);
  EXPECT_EQ(occurrences(ptx, "setmaxnreg.dec.sync.aligned.u32 40;"), 1);
  EXPECT_EQ(occurrences(ptx, "setmaxnreg.inc.sync.aligned.u32 232;"), 1);
  EXPECT_NE(ptx.find("mbarrier.arrive.shared::cta.b64"), std::string::npos);
  EXPECT_NE(ptx.find("bar.sync 1, 256;"), std::string::npos);
  EXPECT_GT(occurrences(ptx, "cp.async.bulk.tensor.2d"), 0);
  // 4 full and 4 empty barriers after the 192 KiB ring.
  EXPECT_EQ(binary.dynamicSharedBytes, 4 * (128 + 256) * 64 * 2 + 8 * 8);
}

/// The per-warpgroup epilogue of a persistent kernel whose ring of 4 stages of
/// `stageBytes` each (and its 8 barriers) comes first: two 64 x 64 f16 staging buffers per
/// consumer warpgroup from the next 1024-byte boundary, no barrier of all the consumers,
/// four bulk stores (64 x 64 boxes) each after a wait for the store before the newest.
/// Each warp writes a box's 16 rows of its own by four stmatrix x4 (16 columns each), no
/// lane by st.shared.
void expectWarpgroupEpilogue(const Binary &binary, const std::string &ptx, int64_t stageBytes) {
  EXPECT_EQ(binary.dynamicSharedBytes, (4 * stageBytes + 8 * 8 + 1023) / 1024 * 1024 + 2 * 2 * 64 * 64 * 2);
  EXPECT_EQ(occurrences(ptx, "stmatrix.sync.aligned.m8n8.x4.shared.b16"), 4 * 4);
  EXPECT_EQ(occurrences(ptx, "st.shared"), 0);
  EXPECT_EQ(occurrences(ptx, "bar.sync 1, 256;"), 0);
  EXPECT_EQ(occurrences(ptx, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), 4);
  EXPECT_EQ(occurrences(ptx, "cp.async.bulk.commit_group;"), 4);
  EXPECT_EQ(occurrences(ptx, "cp.async.bulk.wait_group.read 1;"), 4);
  EXPECT_EQ(occurrences(ptx, "cp.async.bulk.wait_group.read 0;"), 1);
  ASSERT_EQ(binary.tensorMaps.size(), 3u);
  EXPECT_EQ(binary.tensorMaps[2].operand, 2);
  EXPECT_EQ(binary.tensorMaps[2].boxInner, 64);
  EXPECT_EQ(binary.tensorMaps[2].boxOuter, 64);
}

TEST(WarpgroupMma, PersistentKernelsWalkTilesAndStageCBesideTheRing) {
  // The producer and the consumers each walk the tiles in a loop of their own (one
  // setmaxnreg each); C goes through shared memory after the ring and the barriers (from
  // the next 1024-byte boundary, where the store's swizzle period starts). Each consumer
  // warpgroup stages its own 64 rows, one box of 64 columns at a time, in two 64 x 64
  // buffers of its own, between two barriers of its 128 threads alone (named barrier 2 or
  // 3); its first thread stores each box and, before a buffer is written again, waits
  // only for the store before the newest. The consumers never meet in the epilogue, and
  // the block leaves once each warpgroup's last stores have read their buffers.
  Binary binary = binaryOf("f16", specialized(alignedConfig("f16"), true));
  std::string ptx = asmOf(binary);
  EXPECT_TRUE(binary.persistent);
  EXPECT_EQ(binary.blockThreads, 384);
  EXPECT_EQ(occurrences(ptx, "setmaxnreg.dec.sync.aligned.u32 40;"), 1);
  EXPECT_EQ(occurrences(ptx, "setmaxnreg.inc.sync.aligned.u32 232;"), 1);
  expectWarpgroupEpilogue(binary, ptx, (128 + 256) * 64 * 2);
  // Four boxes per warpgroup, each written between two warpgroup barriers.
  std::regex warpgroupBarrier(R"(bar\.sync %r\d+, 128;)");
  EXPECT_EQ(std::distance(std::sregex_iterator(ptx.begin(), ptx.end(), warpgroupBarrier), std::sregex_iterator()), 8);
}

TEST(WarpgroupMma, TheBiasIsReadWhileTheLastMmasRun) {
  // A tile's bias depends on its columns alone: its reads go out before the wait for the
  // K loop's last MMA group, so that their latency overlaps the MMAs instead of adding to
  // every tile's drain. The wait stays before the accumulator's first use and before
  // anything that writes or synchronizes.
  auto config = specialized(alignedConfig("f16"), true);
  config["unit_strides"] |= 1 << 6;
  std::string ptx = asmOf(binaryOf("f16", config, "", false, "f16"));
  size_t drain = ptx.find("wgmma.wait_group.sync.aligned 0;");
  ASSERT_NE(drain, std::string::npos);
  size_t firstRead = ptx.find("ld.global.b16");
  ASSERT_NE(firstRead, std::string::npos);
  EXPECT_LT(firstRead, drain);
  // 64 columns per thread, read at fixed offsets (whole blocks) or predicated (N's edge).
  EXPECT_EQ(occurrences(ptx.substr(0, drain), "ld.global.b16"), 2 * 64);
  // The accumulator is read (the bias added) only after the wait.
  size_t lastMma = ptx.rfind("wgmma.mma_async", drain);
  EXPECT_EQ(occurrences(ptx.substr(lastMma, drain - lastMma), "add.rn.f32"), 0);
  EXPECT_GT(occurrences(ptx.substr(drain), "add.rn.f32"), 0);
}

TEST(WarpgroupMma, AnAlignedContiguousBiasIsReadInPairs) {
  // A lane's two columns of each 8-column tile are adjacent: from a bias the binding
  // promises 16-byte aligned (bit 6 of divisibility_16), whole blocks read each pair as
  // one 32-bit load (32 a thread for a 64 x 256 band); blocks at N's edge read each
  // column on its own, predicated on it.
  auto config = specialized(alignedConfig("f16"), true);
  config["unit_strides"] |= 1 << 6;
  config["divisibility_16"] |= 1 << 6;
  std::string ptx = asmOf(binaryOf("f16", config, "", false, "f16"));
  size_t drain = ptx.find("wgmma.wait_group.sync.aligned 0;");
  ASSERT_NE(drain, std::string::npos);
  EXPECT_EQ(occurrences(ptx.substr(0, drain), "ld.global.b32"), 32);
  EXPECT_EQ(occurrences(ptx.substr(0, drain), "ld.global.b16"), 64);
}

TEST(WarpgroupMma, PtxasAssembledPersistentKernelsStageEachTileDuringTheNext) {
  // Where ptxas assembles the kernel (the runtime's first call, when one is on PATH), each
  // tile's staging moves into the next tile: after each of its first four K steps' MMAs
  // are issued, the warpgroups stage one of the previous tile's four boxes, and the last
  // tile's after the walk; the kernel holds both copies. ptxas
  // keeps the 64 registers of carried results without spilling. Without ptxas the
  // staging stays at the end of each tile (the driver's compiler spills them).
  if (!ptxasOnPath())
    GTEST_SKIP() << "ptxas is not on PATH";
  // leaky_relu's backward too: its activation's reads come before the staging, which still
  // moves into the next tile.
  for (const char *op : {"matmul", "matmul_leaky_relu_backward"})
    for (const char *dtype : {"f16", "bf16"})
      for (auto [blockM, blockN] : {std::pair<int64_t, int64_t>{128, 256}, {256, 128}}) {
        auto config = specialized(alignedConfig(dtype), true);
        config["BLOCK_M"] = blockM;
        config["BLOCK_N"] = blockN;
        bool gated = std::string(op) != "matmul";
        if (gated) {
          config["unit_strides"] |= 1 << 8;
          config["divisibility_16"] |= 1 << 7;
        }
        std::string where = std::string(op) + " " + dtype + " " + std::to_string(blockM) + "x" +
                            std::to_string(blockN);
        Binary binary =
            binaryOf(dtype, config, "", /*assembleWithPtxas=*/true, gated ? dtype : "", op);
        std::string ptx = asmOf(binary);
        ASSERT_GT(binary.cubin.size(), 4u) << where;
        EXPECT_EQ(binary.cubin.substr(0, 4), "\x7f"
                                             "ELF")
            << where;
        EXPECT_EQ(binary.resources.spillBytes, 0) << where;
        EXPECT_EQ(occurrences(ptx, "stmatrix.sync.aligned.m8n8.x4.shared.b16"), 2 * 4 * 4) << where;
        EXPECT_EQ(occurrences(ptx, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), 2 * 4)
            << where;
        EXPECT_EQ(occurrences(ptx, "cp.async.bulk.wait_group.read 0;"), 1) << where;
        // In the walk: MMAs and a box, four times, then the rest of the K loop.
        size_t firstMma = ptx.find("wgmma.mma_async");
        size_t firstBox = ptx.find("stmatrix.sync");
        size_t secondMma = ptx.find("wgmma.mma_async", ptx.find("wgmma.commit_group", firstMma));
        ASSERT_NE(firstBox, std::string::npos) << where;
        EXPECT_LT(firstMma, firstBox) << where;
        EXPECT_LT(firstBox, secondMma) << where;
        EXPECT_EQ(occurrences(ptx.substr(firstBox, secondMma - firstBox), "stmatrix.sync"), 4)
            << where;
        Binary plain = binaryOf(dtype, config, "", false, gated ? dtype : "", op);
        EXPECT_TRUE(plain.cubin.empty()) << where;
        EXPECT_EQ(occurrences(asmOf(plain), "stmatrix.sync.aligned.m8n8.x4.shared.b16"), 4 * 4)
            << where;
      }
}

TEST(WarpgroupMma, APtxasThatCannotAssembleTheKernelLeavesItToTheDriver) {
  // A ptxas on PATH that fails (one older than the arch): the kernel comes without a
  // cubin and is built as the driver's compiler takes it, the staging at each tile's end.
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tile-old-ptxas", dir));
  std::string fake = (dir + "/ptxas").str();
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\necho \"ptxas fatal: Value 'sm_90a' is not defined\" >&2\nexit 1\n";
  }
  llvm::sys::fs::setPermissions(fake, llvm::sys::fs::all_read | llvm::sys::fs::all_exe | llvm::sys::fs::owner_write);
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", (dir.str().str() + ":" + path).c_str(), 1);
  Binary binary = binaryOf("f16", specialized(alignedConfig("f16"), true), "", /*assembleWithPtxas=*/true);
  setenv("PATH", path.c_str(), 1);
  llvm::sys::fs::remove_directories(dir);
  EXPECT_TRUE(binary.cubin.empty());
  EXPECT_EQ(occurrences(asmOf(binary), "stmatrix.sync.aligned.m8n8.x4.shared.b16"), 4 * 4);
  EXPECT_EQ(occurrences(asmOf(binary), "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), 4);
}

TEST(WarpgroupMma, PersistentEpilogueStoresTallBandsBoxByBox) {
  // 256x128: each consumer warpgroup holds 128 rows (two 64-row MMA tiles). It stages
  // them one 64x64 box at a time in the same two 8 KB buffers, four boxes per tile (two
  // row tiles by two column boxes), so the staging still fits beside the ring.
  auto config = specialized(alignedConfig("f16"), true);
  config["BLOCK_M"] = 256;
  config["BLOCK_N"] = 128;
  Binary binary = binaryOf("f16", config);
  std::string ptx = asmOf(binary);
  expectWarpgroupEpilogue(binary, ptx, (256 + 128) * 64 * 2);
}

/// `config` persistent and warp-specialized, its tiles' K steps shared out evenly.
std::map<std::string, int64_t> streamK(std::map<std::string, int64_t> config) {
  config = specialized(config, true);
  config["stream_k"] = 1;
  return config;
}

/// `config` with stream-K's mode 2: only the partly filled last wave's tiles split, their
/// first steps on programs of their own and their tails shared by the others.
std::map<std::string, int64_t> lastWaveStreamK(std::map<std::string, int64_t> config) {
  config = streamK(config);
  config["stream_k"] = 2;
  return config;
}

TEST(WarpgroupMma, StreamKSharesKStepsAndHandsPartialSumsOver) {
  // The kernel takes the workspace and the flags after its other parameters (and before
  // the tensor maps), records the tile it needs per program, and keeps the persistent
  // kernel's pipeline: the programs that start inside a tile store their f32 partial sum
  // and release a flag; the one that runs its first step acquires each flag (clearing it
  // for the next launch) and adds the sums before the bulk stores of C.
  Binary binary = binaryOf("f16", streamK(alignedConfig("f16")));
  std::string ptx = asmOf(binary);
  EXPECT_TRUE(binary.persistent);
  EXPECT_EQ(binary.streamKTileElements, 128 * 256);
  EXPECT_EQ(binary.blockThreads, 384);
  EXPECT_EQ(occurrences(ptx, "setmaxnreg.dec.sync.aligned.u32 40;"), 1);
  EXPECT_EQ(occurrences(ptx, "st.release.gpu.global.b32"), 1);
  EXPECT_EQ(occurrences(ptx, "ld.acquire.gpu.global.b32"), 1);
  EXPECT_EQ(occurrences(ptx, "st.relaxed.gpu.global.b32"), 1);
  EXPECT_GT(occurrences(ptx, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), 0);
  // The partial sums go out and come back as pairs of f32 (the workspace tile's base,
  // the workspace plus slot * tile elements, is known 16-byte aligned): 128 f32 per
  // thread, 64 accesses each way, none element by element and none behind a run-time
  // alignment test.
  EXPECT_EQ(occurrences(ptx, "st.global.v2.b32"), 64);
  EXPECT_EQ(occurrences(ptx, "ld.global.v2.b32"), 64);
  EXPECT_EQ(occurrences(ptx, "st.global.b32"), 0);
  EXPECT_EQ(occurrences(ptx, "ld.global.b32"), 0);
  // a, b, c, M, N, K, six strides, the workspace and the flags, then three maps.
  EXPECT_NE(ptx.find(".param .u64 .ptr .global .align 1 matmul_param_13"), std::string::npos);
  EXPECT_NE(ptx.find(".param .align 64 .b8 matmul_param_16[128]"), std::string::npos);
  ASSERT_EQ(binary.tensorMaps.size(), 3u);
  // Mode 2 splits the partly filled last wave alone: the same handover over other pieces.
  Binary last = binaryOf("f16", lastWaveStreamK(alignedConfig("f16")));
  EXPECT_EQ(last.streamKTileElements, 128 * 256);
  EXPECT_EQ(occurrences(asmOf(last), "st.release.gpu.global.b32"), 1);
  EXPECT_EQ(occurrences(asmOf(last), "ld.acquire.gpu.global.b32"), 1);
  EXPECT_NE(asmOf(last), ptx);
  // Without it, nothing of this.
  Binary plain = binaryOf("f16", specialized(alignedConfig("f16"), true));
  EXPECT_EQ(plain.streamKTileElements, 0);
  EXPECT_EQ(asmOf(plain).find("ld.acquire.gpu"), std::string::npos);
}

TEST(WarpgroupMma, StreamKNeedsThePersistentKernel) {
  // Its programs wait on each other: only the persistent launch keeps them all resident.
  auto refusedByBuilder = [](std::map<std::string, int64_t> config, const char *says) {
    ops::KernelSpec spec{"matmul", {"f16", "f16"}, config};
    auto context = createContext();
    try {
      ops::buildKernel(*context, spec);
      ADD_FAILURE() << "expected an invalid_argument";
    } catch (const std::invalid_argument &error) {
      EXPECT_NE(std::string(error.what()).find(says), std::string::npos) << error.what();
    }
  };
  auto config = alignedConfig("f16");
  auto alone = config;
  alone["stream_k"] = 1;
  refusedByBuilder(alone, "stream_k=1");
  auto clusters = streamK(config);
  clusters["num_ctas"] = 2;
  refusedByBuilder(clusters, "num_ctas=1");
  auto three = streamK(config);
  three["stream_k"] = 3;
  refusedByBuilder(three, "stream_k must be 0, 1 or 2");
  auto lastWaveAlone = config;
  lastWaveAlone["stream_k"] = 2;
  refusedByBuilder(lastWaveAlone, "stream_k=2");
  // The CPU has no resident-programs launch.
  ops::KernelSpec spec{"matmul", {"f32", "f32"}, streamK({{"BLOCK_M", 8}, {"BLOCK_N", 32}, {"BLOCK_K", 64},
                                                          {"GROUP_M", 8}, {"index_bits", 32}})};
  auto context = createContext();
  auto module = ops::buildKernel(*context, spec);
  try {
    compile(*module, Target::host(), ops::compileOptionsFor(spec));
    ADD_FAILURE() << "expected a CompileError on the CPU";
  } catch (const CompileError &error) {
    EXPECT_NE(std::string(error.what()).find("stream_k=1"), std::string::npos) << error.what();
  }
}

TEST(WarpgroupMma, TileSchedulingNeedsNo64BitDivision) {
  // A 64-bit division or remainder on NVIDIA is a call into a runtime helper, and a call
  // in a kernel makes the driver's compiler serialize its warpgroup MMAs (each wgmma
  // waited for before the next: 20% of the H100's 4224x4096x4096 time). The tile walk,
  // the grouped order and stream-K's shares count in 32 bits, whatever the index width.
  for (int64_t indexBits : {32, 64}) {
    auto config = alignedConfig("f16");
    config["index_bits"] = indexBits;
    for (const auto &kernel : {config, specialized(config, true), streamK(config), lastWaveStreamK(config)}) {
      std::string ptx = ptxOf("f16", kernel);
      for (const char *wide : {"div.s64", "div.u64", "rem.s64", "rem.u64"})
        EXPECT_EQ(ptx.find(wide), std::string::npos) << wide << " with index_bits=" << indexBits;
      EXPECT_EQ(ptx.find("call"), std::string::npos) << "index_bits=" << indexBits;
    }
  }
  // With 64-bit indices stream-K's share arithmetic would not stay in 32 bits: the
  // kernel walks whole tiles instead and takes no workspace.
  auto wide = streamK(alignedConfig("f16"));
  wide["index_bits"] = 64;
  Binary binary = binaryOf("f16", wide);
  EXPECT_TRUE(binary.persistent);
  EXPECT_EQ(binary.streamKTileElements, 0);
  EXPECT_EQ(asmOf(binary).find("ld.acquire.gpu"), std::string::npos);
}

/// `config` warp-specialized, in clusters of two blocks.
std::map<std::string, int64_t> clustered(std::map<std::string, int64_t> config, bool persistent) {
  config = specialized(config, persistent);
  config["num_ctas"] = 2;
  return config;
}

TEST(WarpgroupMma, ClustersOfTwoMulticastTheirShareOfB) {
  // 128x256x64 f16: b's tile is 4 boxes of 64 columns; each block of a pair copies 2 of
  // them to both (mask 0b11) and a with a plain copy of its own. A stage's empty barrier
  // counts the 8 consumer warps of both blocks, each arriving on both blocks' barriers
  // (mapa); the cluster meets after the barriers' initialization and before the
  // consumers give them up.
  for (bool persistent : {false, true}) {
    Binary binary = binaryOf("f16", clustered(alignedConfig("f16"), persistent));
    std::string ptx = asmOf(binary);
    EXPECT_EQ(binary.clusterCtas, 2);
    EXPECT_EQ(binary.persistent, persistent);
    EXPECT_NE(ptx.find(".reqnctapercluster 2, 1, 1"), std::string::npos);
    EXPECT_NE(ptx.find("%cluster_ctarank"), std::string::npos);
    EXPECT_GT(occurrences(ptx, ".multicast::cluster"), 0);
    EXPECT_EQ(occurrences(ptx, "mbarrier.init.shared::cta.b64"), 8);
    EXPECT_NE(ptx.find("mapa.shared::cluster.u32"), std::string::npos);
    EXPECT_EQ(occurrences(ptx, "barrier.cluster.arrive.release.aligned;"), 2);
    // b's map moves whole 64-column boxes.
    ASSERT_EQ(binary.tensorMaps.size(), 3u);
    EXPECT_EQ(binary.tensorMaps[1].boxOuter, 64);
  }
  // A transposed b (k contiguous) is one 64 x 256 box: each block copies 128 of its rows.
  Binary transposed = binaryOf("f16", clustered(alignedConfig("f16", 0b100110), false));
  ASSERT_EQ(transposed.tensorMaps.size(), 3u);
  EXPECT_EQ(transposed.tensorMaps[1].boxOuter, 128);
  EXPECT_GT(occurrences(asmOf(transposed), ".multicast::cluster"), 0);
}

TEST(WarpgroupMma, DefaultsWalkTilesWhereBlocksAreFewOrTheirLoopsShort) {
  // 4096^3 (512 blocks of 128x256): persistent and warp-specialized; 8192^3 (2048 with a
  // long K) and 2048^3 (128, one wave) keep one block per tile.
  auto config = [](int64_t size) { return ops::defaultMatmulConfig(hopper(), size, size, size, "f16"); };
  EXPECT_EQ(config(4096).at("persistent"), 1);
  EXPECT_EQ(config(4096).at("warp_specialize"), 1);
  EXPECT_EQ(config(4096).at("BLOCK_N"), 256);
  for (int64_t size : {2048, 8192}) {
    EXPECT_EQ(config(size).at("persistent"), 0) << size;
    EXPECT_EQ(config(size).at("warp_specialize"), 0) << size;
  }
  // Past four waves, tiles whose K loops are short walk too (a Linear's x @ W^T at
  // 4096x16384x4096: 2048 blocks); long ones keep one block per tile.
  auto shaped = [](int64_t m, int64_t n, int64_t k) {
    return ops::defaultMatmulConfig(hopper(), m, n, k, "f16");
  };
  EXPECT_EQ(shaped(4096, 16384, 4096).at("persistent"), 1);
  EXPECT_EQ(shaped(8192, 8192, 2048).at("warp_specialize"), 1);
  EXPECT_EQ(shaped(8192, 8192, 8192).at("persistent"), 0);
  EXPECT_EQ(shaped(9728, 8192, 65536).at("persistent"), 0);
  // Other targets keep their defaults.
  EXPECT_EQ(ops::defaultMatmulConfig(Target::parse("cuda:sm_90"), 4096, 4096, 4096, "f16").at("persistent"), 0);
}

TEST(WarpgroupMma, KnobsOnlyTheSpecializedPipelineHonoursAreRefused) {
  auto refused = [](const Target &target, std::map<std::string, int64_t> config, const char *says) {
    ops::KernelSpec spec{"matmul", {"f16", "f16"}, config};
    auto context = createContext();
    auto module = ops::buildKernel(*context, spec);
    try {
      compile(*module, target, ops::compileOptionsFor(spec));
      ADD_FAILURE() << "expected a CompileError for " << target.str();
    } catch (const CompileError &error) {
      EXPECT_NE(std::string(error.what()).find(says), std::string::npos) << target.str() << ": " << error.what();
    }
  };
  auto config = alignedConfig("f16");
  refused(Target::parse("cuda:sm_90"), specialized(config, false), "warp_specialize=1");
  refused(Target::parse("hip:gfx942"), specialized(config, false), "warp_specialize=1");
  auto walkAlone = config;
  walkAlone["persistent"] = 1;
  refused(hopper(), walkAlone, "persistent=1");
  auto clusterAlone = config;
  clusterAlone["num_ctas"] = 2;
  refused(hopper(), clusterAlone, "num_ctas=2");
  refused(Target::parse("hip:gfx942"), clusterAlone, "num_ctas=2");
}

TEST(WarpgroupMma, LeakyReluBackwardReadsTheActivationInPairs) {
  // The activation arrives in the accumulator's own layout, each lane's pairs of columns as
  // one 32-bit read: unchecked in blocks wholly inside M and N, predicated on the pair's
  // place at the edges (no branch per element). A 128 x 256 block over 256 threads holds
  // 128 elements per thread: 64 pairs on each path.
  auto config = specialized(alignedConfig("f16"), true);
  config["unit_strides"] |= 1 << 8;
  config["divisibility_16"] |= 1 << 7;
  std::string plain = asmOf(binaryOf("f16", config, "f16", false, "", "matmul"));
  std::string gated =
      asmOf(binaryOf("f16", config, "f16", false, "f16", "matmul_leaky_relu_backward"));
  auto reads = [](const std::string &ptx, const std::string &what) {
    return occurrences(ptx, what + " ") + occurrences(ptx, what + "\t");
  };
  EXPECT_EQ(reads(gated, "ld.global.b32") - reads(plain, "ld.global.b32"), 2 * 64);
  EXPECT_EQ(reads(gated, "@p ld.global.b32"), 64);
  EXPECT_EQ(reads(gated, "ld.global.b16"), reads(plain, "ld.global.b16"));
}

TEST(WarpgroupMma, PtxasAssemblesTheKernelsWithoutSpills) {
  auto ptxas = llvm::sys::findProgramByName("ptxas");
  if (!ptxas)
    GTEST_SKIP() << "ptxas is not on PATH: the sm_90a PTX is checked by its text only";
  // A bias (unit stride) in the epilogue too: its reads at the blocks on N's edge had
  // taken the 128 x 256 kernel from 154 registers to 255 and spills.
  auto withBias = [](std::map<std::string, int64_t> config) {
    config["unit_strides"] |= 1 << 6;
    return config;
  };
  // leaky_relu's backward reads an activation of c's shape in the epilogue (unit column
  // stride, aligned).
  auto withActivation = [](std::map<std::string, int64_t> config) {
    config["unit_strides"] |= 1 << 8;
    config["divisibility_16"] |= 1 << 7;
    return config;
  };
  struct Kernel {
    std::string dtype;
    std::map<std::string, int64_t> config;
    std::string bias;
    std::string op = "matmul";
  };
  std::vector<Kernel> kernels = {
      {"f16", alignedConfig("f16"), ""},
      {"bf16", alignedConfig("bf16"), ""},
      {"f16", specialized(alignedConfig("f16"), false), ""},
      {"f16", specialized(alignedConfig("f16"), true), ""},
      {"f16", clustered(alignedConfig("f16"), false), ""},
      {"bf16", clustered(alignedConfig("bf16"), true), ""},
      {"f16", streamK(alignedConfig("f16")), ""},
      {"bf16", streamK(alignedConfig("bf16")), ""},
      {"f16", lastWaveStreamK(alignedConfig("f16")), ""},
      {"f16", withBias(alignedConfig("f16")), "f16"},
      {"bf16", withBias(alignedConfig("bf16")), "bf16"},
      {"f16", withBias(specialized(alignedConfig("f16"), true)), "f16"},
      {"f16", withActivation(specialized(alignedConfig("f16"), true)), "f16",
       "matmul_leaky_relu_backward"},
      {"bf16", withActivation(specialized(alignedConfig("bf16"), true)), "bf16",
       "matmul_leaky_relu_backward"},
      {"f16", withActivation(alignedConfig("f16")), "f16", "matmul_leaky_relu_backward"},
  };
  for (const auto &[dtype, config, bias, op] : kernels) {
    llvm::SmallString<128> ptxPath, cubinPath, logPath;
    ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("wgmma", "ptx", ptxPath));
    ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("wgmma", "cubin", cubinPath));
    ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("wgmma", "log", logPath));
    std::ofstream(ptxPath.c_str()) << asmOf(binaryOf(dtype, config, "", false, bias, op));
    llvm::StringRef args[] = {*ptxas, "-arch=sm_90a", "-v", ptxPath, "-o", cubinPath};
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, logPath.str(), logPath.str()};
    int rc = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects);
    std::ifstream logFile(logPath.c_str());
    std::string log((std::istreambuf_iterator<char>(logFile)), std::istreambuf_iterator<char>());
    EXPECT_EQ(rc, 0) << log;
    EXPECT_NE(log.find("0 bytes spill stores, 0 bytes spill loads"), std::string::npos) << log;
    // ptxas serializes warpgroup MMAs whose registers other instructions touch in flight.
    EXPECT_EQ(log.find("serialized"), std::string::npos) << log;
    for (const auto &path : {ptxPath, cubinPath, logPath})
      llvm::sys::fs::remove(path);
  }
}

} // namespace
