// Default matmul configs per target family, chosen from the problem shape.
#include "ops/MatmulConfig.h"

#include "tile/Target/GpuArch.h"

#include <algorithm>

namespace tile::ops {

const std::vector<std::string> &matmulKnobNames() {
  static const std::vector<std::string> names = {
      "BLOCK_M",     "BLOCK_N",      "BLOCK_K",
      "GROUP_M",     "num_warps",    "num_stages",
      "waves_per_eu", "matrix_instr_nonkdim", "kpack",
      "warp_specialize", "persistent", "num_ctas", "stream_k"};
  return names;
}

namespace {

/// The smallest power of two at or above `x` (1 for x <= 1).
int64_t powerOfTwoAtLeast(int64_t x) {
  return x <= 1 ? 1 : int64_t(1) << (64 - __builtin_clzll(uint64_t(x - 1)));
}

/// `value` rounded up to a multiple of `multiple`.
int64_t roundUpTo(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

int64_t bytesOf(const std::string &dtype) { return dtype == "f32" ? 4 : dtype == "i8" ? 1 : 2; }

/// The CPU keeps the BLOCK_M x BLOCK_N accumulator in vector registers for the whole K
/// loop (see DotLowering.cpp): 4 x 64 (or 8 x 32) f32 is 16 of the 32 AVX-512 registers,
/// leaving room for the rows of b and the broadcasts; AVX2 has 16 registers of half the
/// width. 4 x 64 takes 4 loads of b and 4 broadcasts of a per 16 FMAs where 8 x 32 takes
/// 2 and 8: on a 2-core Xeon (f32, 2 threads, same runs) 1024^3 316 against 303 GFLOP/s,
/// 2048^3 309 against 298, 512^3 322 against 311, 4096^3 295 against 300.
///
/// A program reads its block column of b (K x BLOCK_N) whole, from L2 where the programs
/// before it read the same one, and only BLOCK_M rows of a: groups of 1024 rows of a keep
/// each block column in L2 while a streams past it. There (8 x 32 blocks, against groups
/// of 64 rows): 4096^3 305 against 230 GFLOP/s, 2048^3 301 against 290, 1024^3 300
/// against 288, 512^3 312 against 295; whole columns (4096 rows) were 2-4% faster still at
/// 4096^3 and 4096x256x4096 but 8% slower at 16384x1024x4096, where a column's rows of a
/// (256 MB) outgrow the L3.
///
///
/// BLOCK_K: the power of two at or below k, from 16 up to 256 (float32 under K = 16: see
/// defaultMatmulConfig, which also walks those blocks row by row). int8 takes all of k up to 1024
/// (the kilobyte of a's rows that float32's 256 k take) as one chunk, the power of two at or above
/// it: its vpdpbusd blocks then sum a's rows and store their results once (2-core znver5, against
/// _int_mm, interleaved, 256 -> 1024: 2048^3 0.915 -> 0.963x, 1024x1024x4096 0.942 -> 0.970x,
/// 1000^3 0.880 -> 0.929x, 768^3 0.903 -> 0.964x, 320^3 0.829 -> 0.871x, 500^3 0.997 -> 1.018x);
/// bfloat16 gained nothing from 512.
std::map<std::string, int64_t> cpuConfig(const Target &target, int64_t m, int64_t n, int64_t k,
                                         const std::string &inputDtype) {
  bool avx512 = target.hasFeature("avx512f");
  int64_t blockK = std::clamp<int64_t>(k, 16, 256);
  blockK = int64_t(1) << (63 - __builtin_clzll(uint64_t(blockK))); // a power of two <= k
  if (inputDtype == "i8")
    blockK = powerOfTwoAtLeast(std::clamp<int64_t>(k, 16, 1024));
  constexpr int64_t kRowsPerGroup = 1024;
  // AVX2 (16 registers of 8 float32 lanes): 4 x 16 float32 blocks keep 8 registers of
  // accumulators, leaving room for b's two vectors and the broadcasts of a; 8 x 16 had
  // taken all 16 and spilled in the K loop. 2 threads, znver3 (AVX2, no AVX-512), forced
  // configs in one process against MKL, 8 x 16 / 4 x 16: 1024^3 0.59-0.61 / 0.97-1.01x,
  // 2048^3 0.60-0.67 / 1.07x, 512^3 0.52-0.57 / 1.05x, 200^3 0.34 / 1.04x, 4096x1024x1024
  // 0.62 / 0.94x (4 x 32 and 8 x 8: 0.61-0.66x). int8 and bf16 keep 8 x 16 there: 4 x 32
  // gained at 256^3 and 1024^3 (int8 1024^3 24.7 -> 21.9 ms) but lost over a sweep of 60
  // ragged shapes (int8 geomean against torch 0.76 -> 0.46, bf16 nn / tn 7.7 / 1.24 ->
  // 3.9 / 0.70).
  bool avx2Words = !avx512 && (inputDtype == "i8" || inputDtype == "bf16");
  int64_t blockM = avx2Words ? 8 : 4, blockN = avx512 ? 64 : 16;
  // Where N leaves a 64-wide block column mostly past the matrix and 32-wide ones do not
  // (96, 160, 200 columns), 8 x 32 blocks: their multiply-adds past N cost more than the
  // 3-4% 8 x 32 gives up to 4 x 64 in whole blocks (2 threads, f32, against MKL: 96^3
  // 0.47 -> 0.68x, 160^3 0.52 -> 1.00x, 200^3 0.46 -> 0.68x). Not int8: there 8 x 32 ran
  // slower than 4 x 64 with its edge column (znver5, 2 threads, against _int_mm, three
  // alternations: 200^3 0.71-0.79 against 0.87-0.90x, 224^3 0.72-0.80 against 0.91-0.92x,
  // 256x200x256 0.70-0.73 against 0.84-0.87x), and the edge column's masked path was not
  // the cost (b's lanes masked in the whole blocks' loop changed nothing).
  if (avx512 && inputDtype != "i8" && roundUpTo(n, 32) * 100 < roundUpTo(n, 64) * 96) {
    blockM = 8;
    blockN = 32;
  }
  // 33 to 63 columns: one 64-wide block column takes them all, its masked edge path over
  // every row. float32 and float16 (on the float32 kernel) from 33 to 48 columns run 8 x 16
  // blocks, three columns of 16 (48 lanes where 32- and 64-wide blocks compute 64); bf16
  // runs 8 x 32 from 33 to 63. 2 threads, znver5, interleaved in one process, 4 x 64
  // against the new blocks: float32 65x33x2050 61 -> 47 us (MKL 70; 118-158 -> 46-52 in
  // the processes where 4 x 64 ran slow), 1000x40x1000 271 -> 233, 2048x40x2048 1149 ->
  // 1014, 512x33x512 75 -> 64; float16 1000x40x1000 304 -> 285, 512x48x512 92 -> 79;
  // bf16 1000x40x1000 161 -> 135 (oneDNN 142), 512x48x512 55 -> 40 (45), 1000x60x1000
  // 165 -> 143 (191). 8 x 16 lost where 32-wide blocks waste no more (1000x32x1000 128 ->
  // 158 us) and float32's 8 x 32 gained 0-5% at 49-63 columns (kept 4 x 64); int8 keeps its
  // blocks (see above).
  if (avx512 && n > 32 && n < 64) {
    if (inputDtype == "bf16") {
      blockM = 8;
      blockN = 32;
    } else if (n <= 48 && inputDtype != "i8") {
      blockM = 8;
      blockN = 16;
    }
  }
  // Narrow N (a classifier's few outputs): 16 x 16 blocks where N is 16 columns or fewer
  // (one vector a row), int8's 8 x 32 up to 32. 2 threads, znver5, b transposed (x @ W^T),
  // against the blocks before: float32 1000x16x512 72.9 -> 43.0 us, 2000x10x300 92.9 ->
  // 55.2, 256x16x256 20.7 -> 13.1; int8 4096x8x1024 301 -> 146 (_int_mm 133), 1000x16x512
  // 37.7 -> 21.6 (21.9), 512x32x512 21.3 -> 19.0 with 8 x 32 (19.0). bf16 keeps 8 x 32
  // (16 x 16: 1000x16x512 37.6 -> 49.6 us). Fewer rows than 16 take the rows there are (a
  // power of two): a 16-row block of one row ran float32 1x16x512 in 2.7 us, a 1-row one in
  // 1.8.
  constexpr int64_t kNarrowRows = 16;
  if (avx512 && n <= 16 && inputDtype != "bf16") {
    blockM = m > 0 ? std::min(kNarrowRows, powerOfTwoAtLeast(m)) : kNarrowRows;
    blockN = 16;
  } else if (avx512 && n <= 32 && inputDtype == "i8") {
    blockM = 8;
    blockN = 32;
  }
  // int8 on the vector kernel with K up to 256, past one group's rows: groups of 16 rows,
  // whose a (4 KB at most) stays in the L1 while the group walks every block column. In
  // groups of 1024 rows (two tasks of a group each) the programs of such a short K ran
  // 3-33% slower (2 threads, znver5, in one process, groups of 16 / 1024 rows against
  // _int_mm: 2048^2x32 419 / 622 us (440), 2048^2x64 471 / 627 (531), 2048^2x128 703 / 859
  // (581), 4096x1024x128 684-719 / 788 (573-601), 2048^2x256 1218 / 1276 (1163),
  // 1536^2x128 393 / 391, 2048x512x64 114 / 111). At K = 512 1024 rows won (2048^2x512
  // 2354 / 2270 us), and within one group (M up to 1024) the column-band launch of one
  // group did (1024^2x128 181 / 165 us), except past 512 rows with 4096 columns or more
  // (alternating processes, twice, one group / 16 rows: 1024x4096x64 646-712 / 457-468 us
  // (_int_mm 514-551), 1024x6144x64 1112-1171 / 777-833, 1024x4096x32 500-636 / 428-442,
  // 1024x4096x128 717-798 / 661-702, 900x4096x100 584-596 / 513-527, 1024x8192x64 10.3-10.5
  // / 9.6-9.8 ms; 640x4096x64 268-298 / 268-272 us; against 1024x3000x64 309-319 / 332-357,
  // 512x4096x64 188-197 / 198-202, 512x4096x256 596-610 / 626-632), where the one group's
  // column bands of c, 1024 rows at 16 KB or more apart, are the likely cost.
  constexpr int64_t kShortIntegerK = 256, kRowsPerShortGroup = 16, kHalfAGroup = 512,
                    kWideColumns = 4096;
  int64_t rowsPerGroup = avx512 && inputDtype == "i8" && blockM == 4 && k <= kShortIntegerK &&
                                 (m > kRowsPerGroup || (m > kHalfAGroup && n >= kWideColumns))
                             ? kRowsPerShortGroup
                             : kRowsPerGroup;
  return {{"BLOCK_M", blockM},
          {"BLOCK_N", blockN},
          {"BLOCK_K", blockK},
          {"GROUP_M", rowsPerGroup / blockM}};
}

/// A call of few rows of a (a batch of a few tokens through a layer's weight) does few
/// multiply-adds per byte of b: past the L2 it runs at the rate b streams in. Its blocks
/// then take all of a's rows they can, so that each row of b is read once or twice, and
/// whole cache lines of it (64 bytes) per row: BLOCK_M a power of two up to 8 (bfloat16:
/// 16), BLOCK_N the rest of 32 accumulator registers, up to 64 columns, and b is read in
/// place. Against torch on the 2-core znver5, 2 threads, K = N = 4096, where b had been
/// copied into panels (bf16, int8) or read in 4 x 64 blocks (float32): bf16 1 row 0.49 ->
/// 2.2x (1 x 64), 8 rows 0.52 -> 2.1x (8 x 64), 16 rows 0.58 -> 1.48x (16 x 32), 32 rows
/// 0.65 -> 0.93x; int8 1 row 1858 -> 618 us, 8 rows 1868 -> 591, 16 rows 2131 -> 1194
/// (`_int_mm` 1097); float32 1 row 0.54 -> 1.27x, 16 rows 1.75 -> 2.49x, 60 rows 1.13 ->
/// 1.41x. 16 x 32 blocks ran float32 and int8 slower than 8 x 64 (int8's 32 columns are
/// half a line).
///
/// A block row at M's edge takes the masked path. For float32 it costs about as much as
/// another pass over b, which pays where whole blocks would need two more passes (17 rows:
/// 8 x 64 with an edge 1.64x against 1 x 64's 0.50x; 12 rows: 4 x 64 1.88x against 8 x
/// 64's 1.19x). bf16 and int8 read in place interleave b's groups of k at every block:
/// there only whole blocks that read b once (1, 2, 4, 8 rows; bfloat16 16) read it in
/// place; 17 or 60 rows lost 1.5-2.3x so (measured while such edges still widened their
/// products element by element).
/// K = 11008 (a transformer's MLP): bf16 16 rows 0.46 -> 1.2x, 1 row 0.43 -> 2.0x, int8
/// 1 row 7013 -> 4458 us; int8 8 rows at K = 8192 5248 -> 1769 us. Other CPUs take one row
/// so (below).
struct FewRows {
  int64_t blockM = 0; ///< 0: not a call of few rows
};

FewRows fewRowsOf(const Target &target, int64_t m, int64_t n, int64_t k,
                  const std::string &inputDtype) {
  constexpr int64_t kFewRows = 64, kLineBytes = 64, kPastTheL2 = int64_t(4) << 20;
  // The shape first: the binding asks on every call, and most calls are not of few rows.
  // A result of one vector a row or less takes cpuConfig's narrow blocks, whatever its
  // rows (float32 33x16x200 10.9 -> 2.9 us, 8x16x512 4.4 -> 2.8: few rows' 64 columns had
  // been 48 lanes past N).
  constexpr int64_t kNarrowColumns = 16;
  if (m <= 0 || m >= kFewRows || n < kLineBytes / bytesOf(inputDtype) || n <= kNarrowColumns ||
      target.kind != TargetKind::Cpu || !target.hasFeature("avx512f"))
    return {};
  // bf16 and int8 on their dot-product instructions (vdpbf16ps, vpdpbusd), which take b's
  // k in groups; hosts without them widen the operands, a kernel not measured here.
  bool grouped = (inputDtype == "bf16" && target.hasFeature("avx512bf16")) ||
                 (inputDtype == "i8" && target.hasFeature("avx512vnni"));
  if (!grouped && inputDtype != "f32")
    return {};
  // Measured on AMD's Zen cores. On the AMX Xeon (the H100 machine's host, new blocks
  // against the rule before them, alternating) only one row gained in every dtype (bf16
  // 0.49-0.57 -> 1.54-1.61x of oneDNN, int8 1.0 -> 1.8x, float32 0.43-0.57 -> 0.85-0.93x
  // of MKL); from 8 rows bf16 lost (8 rows 0.52-0.56 -> 0.35x, 16 rows 0.41-0.49 ->
  // 0.23-0.32x), and at 16 rows int8 (0.71-0.75 -> 0.55x) and float32 (0.34-0.38 ->
  // 0.29-0.32x): Intel's prefetchers do not follow a block's walk down b's rows.
  if (m != 1 && target.arch.rfind("znver", 0) != 0)
    return {};
  int64_t cap = inputDtype == "bf16" ? 16 : 8;
  int64_t dividing = std::min<int64_t>(m & -m, cap); // the largest power of two dividing m
  if (grouped) {
    // b is read in place only where one block takes every row: a second pass lost to b's
    // panels once those were copied with the source rows asked for ahead, each task's own
    // right before its programs read them (2 threads, alternating: int8 16x4096x4096
    // 0.80-0.85x of _int_mm in place, 1.13-1.21x and then 1.88x on panels; bf16
    // 32x4096x4096 0.95-1.05x of oneDNN in place, 1.48x on panels). In one pass the two
    // tie or in place leads (int8 8x4096x4096 1.53-1.85x against 1.57-1.93x, bf16
    // 8x4096x4096 1.75-2.21x against 1.75-1.80x).
    bool inPlace = k * n * bytesOf(inputDtype) >= kPastTheL2 && m == dividing;
    return inPlace ? FewRows{dividing} : FewRows{};
  }
  int64_t below = std::min<int64_t>(cap, int64_t(1) << (63 - __builtin_clzll(uint64_t(m))));
  return {m / dividing > (m + below - 1) / below + 1 ? below : dividing};
}

/// GPU tiles from the Triton tutorials' candidates: large tiles for large problems,
/// smaller ones when large tiles would leave too few workgroups.
std::map<std::string, int64_t> gpuConfig(const Target &target, int64_t m, int64_t n, int64_t k,
                                         const std::string &inputDtype) {
  bool large = m >= 1024 && n >= 1024;
  bool hip = target.kind == TargetKind::Hip;
  bool wide = inputDtype == "f32";
  bool nvidia = target.kind == TargetKind::Cuda;
  // NVIDIA, 16-bit inputs: 128 x 128 x 32 over four warps (64 x 64 each) with four
  // cp.async stages won the H100 sweep of benchmarks/bench_matmul_configs.py (0.41-0.46x
  // cuBLAS, against 0.30-0.31 for eight warps at three stages). int8's larger fragments
  // spill at four warps (ptxas), and f32 multiplies with FMAs, whose 128 x 128
  // accumulator needs eight; BLOCK_K 16 keeps f32's ring small.
  bool sixteenBit = inputDtype == "f16" || inputDtype == "bf16";
  bool fourWarpsOnNvidia = nvidia && large && sixteenBit;
  int64_t blockK = hip ? 32 : wide ? (nvidia ? 16 : 32) : large ? 32 : 64;
  if (nvidia && inputDtype == "i8")
    blockK = 64; // one m16n8k32 pair per fragment load
  std::optional<GpuArch> arch = lookupGpuArch(target.arch);
  if (arch && arch->matrixUnit == MatrixUnit::Wgmma && sixteenBit) {
    // Hopper's warpgroup MMA: 128 x 256 x 64 over two warpgroups (m64n256k16 each,
    // 128-byte swizzle atoms) with a four-deep cp.async ring (192 KiB) led the H100
    // sweep of benchmarks/bench_matmul_configs.py at 4096^3 and 8192^3 (0.92-0.97x
    // cuBLAS, against 0.85-0.92 for 128 x 128 x 64 over one warpgroup). Where its
    // blocks would leave SMs idle (an H100 has 132), smaller ones: at 1024^3, 32 blocks
    // of 128 x 256 ran at 0.47x cuBLAS.
    auto blocks = [&](int64_t blockM, int64_t blockN) {
      return ((m + blockM - 1) / blockM) * ((n + blockN - 1) / blockN);
    };
    constexpr int64_t kBlocksToFill = 128;
    int64_t blockM = 64, blockN = 64, warps = 4;
    if (blocks(128, 256) >= kBlocksToFill) {
      blockM = 128;
      blockN = 256;
      warps = 8;
    } else if (blocks(128, 128) >= kBlocksToFill) {
      blockM = blockN = 128;
    } else if (blocks(64, 128) >= kBlocksToFill) {
      blockN = 128;
    }
    // Where 128 x 256 blocks make more than one wave, a persistent, warp-specialized
    // kernel: each SM's producer copies its next tile while the MMA warps store C (bulk
    // tensor stores), so the pipeline fills once per SM instead of once per block. That
    // saves a fixed cost per tile, which weighs most where tiles are few (4096^3: 512
    // blocks on 132 SMs; ahead of the plain kernel in 6 of 7 interleaved H100 pairs, by
    // 1-4%) or their K loops short. Past four waves it pays up to K = 4096 (fp16, against
    // cuBLAS, plain -> persistent in the same runs: 4096x16384x4096, a Linear's x @ W^T,
    // 0.976-0.978 -> 0.985-0.993, bf16 0.961 -> 0.985; 8192x8192x4096 0.971 -> 0.987;
    // 8192x8192x2048 0.934 -> 0.990), ties at 8192^3 (1.005 / 1.006) and loses at larger
    // K (9728x8192x65536 0.980 -> 0.969), where the plain kernel stays.
    int64_t tiles = blocks(blockM, blockN);
    constexpr int64_t kShortK = 4096;
    int64_t persistent = blockM == 128 && blockN == 256 && tiles > kBlocksToFill &&
                         (tiles <= 4 * kBlocksToFill || k <= kShortK);
    return {{"BLOCK_M", blockM},
            {"BLOCK_N", blockN},
            {"BLOCK_K", 64},
            {"GROUP_M", 8},
            {"num_warps", warps},
            {"num_stages", 4},
            {"waves_per_eu", 0},
            {"matrix_instr_nonkdim", 16},
            {"kpack", 1},
            {"warp_specialize", persistent},
            {"persistent", persistent},
            {"num_ctas", 1},
            {"stream_k", 0}};
  }
  return {{"BLOCK_M", large ? 128 : 64},
          {"BLOCK_N", large ? 128 : 64},
          {"BLOCK_K", blockK},
          {"GROUP_M", 8},
          {"num_warps", fourWarpsOnNvidia ? 4 : large ? 8 : 4},
          // NVIDIA: cp.async straight into a ring of num_stages shared buffers, sized at
          // launch; AMD: Triton's stream pipeliner (one tile in registers, one in LDS).
          {"num_stages", hip ? 2 : 4},
          {"waves_per_eu", hip ? 2 : 0},
          {"matrix_instr_nonkdim", 16},
          {"kpack", 1},
          {"warp_specialize", 0},
          {"persistent", 0},
          {"num_ctas", 1},
          {"stream_k", 0}};
}

} // namespace

std::map<std::string, int64_t> withMatrixTiles(std::map<std::string, int64_t> config, int64_t m,
                                               int64_t n, int64_t k, const std::string &inputDtype,
                                               bool aCopied, int64_t kernelK) {
  auto powerOfTwoAtMost = [](int64_t x) {
    return int64_t(1) << (63 - __builtin_clzll(uint64_t(std::max<int64_t>(x, 1))));
  };
  // 64 x 64 blocks (2 x 2 sub-blocks of 32 x 32, which share their rows of a and b in L1)
  // read half as much from L2 per multiply as 32 x 32 ones: on a 2-core AMX Xeon, bf16
  // 1024^3 went from 1.05-1.13 to 1.3-1.4x of oneDNN, 2048^3 from 0.84 to 0.93-0.98x,
  // 4096^3 from 0.84 to 0.88-0.92x. Their accumulator and epilogue are four times larger
  // (a first call of 115-140 ms where 32 x 32 takes 70-80), so smaller problems keep
  // 32 x 32. From 768 rows and columns they win there too (against torch: int8 768^3 0.76
  // -> 0.92x, 1000^3 0.58 -> 0.77x, 1024x960x1024 0.81 -> 1.18x; bf16 1000^3 1.12 ->
  // 1.36x); at 512^3 int8 lost (0.90 -> 0.78x: 64 programs on 2 threads).
  constexpr int64_t kLargeBlocksFrom = 768;
  int64_t blockM = m >= kLargeBlocksFrom && n >= kLargeBlocksFrom ? 64 : 32;
  config["BLOCK_M"] = blockM;
  config["BLOCK_N"] = blockM;
  config["BLOCK_K"] = powerOfTwoAtMost(std::clamp<int64_t>(k, 16, 1024));
  // Each BLOCK_K chunk of k stores the block's accumulator tiles to its buffer and loads
  // them back: for an int8 32 x 32 block that was a fifth of the samples at 384^3. Where k
  // is whole tile steps (64 bytes) the whole of it runs as one chunk. 2 threads against
  // _int_mm (M = N = 384, interleaved): K = 320 47.0 -> 40.6 us (44.4), 384 50.8 -> 43.2
  // (47.0), 448 50.6 -> 46.8 (50.3), 576 62.9 -> 55.6 (59.3). bfloat16 (twice the steps
  // per chunk) and 64 x 64 blocks (whose sub-blocks go through the buffer every 8 steps
  // anyway) gained nothing; a partial last step (K = 500 read in place) lost. A copy of a
  // pads k to whole steps (int8 500^3: K = 512).
  constexpr int64_t kTileStepBytes = 64;
  int64_t stepsK = kernelK > 0 ? kernelK : k;
  if (blockM == 32 && bytesOf(inputDtype) == 1 && stepsK % kTileStepBytes == 0 && stepsK <= 1024)
    config["BLOCK_K"] = powerOfTwoAtLeast(stepsK);
  // The programs of a group read the same panel of b, each its own rows of a, which
  // the next column of the group reads again: they stay in the core's L2 (2 MB on the
  // AMX Xeons) only where the group's rows of a take about half of it. 4096^3 bf16 ran at
  // 0.87 TFLOP/s with 8 rows of blocks (2 MB of a) on a 2-core Xeon.
  // Where a block row's band of a takes 512 KB or more (K >= 4096 in bf16), not even two
  // bands share the L2 with a panel of b: there whole block columns of up to 4096 rows
  // keep the panel (as large) in L2 for all their programs while a streams past it. On the
  // 2-core AMX Xeon, interleaved against the group of 2: bf16 4096^3 1521-1577 against
  // 1420 GFLOP/s, 2048x2048x4096 1691 against 1615, 1024x1024x4096 1709 against 1508;
  // at K = 2048 the groups stay (2048^3 with 32 rows of blocks 1578 against 1660).
  constexpr int64_t kRowsOfAInL2 = int64_t(1) << 20, kBandPastL2Share = int64_t(512) << 10;
  constexpr int64_t kColumnRows = 4096;
  int64_t bandBytes = blockM * std::max<int64_t>(k, 1) * bytesOf(inputDtype);
  // Where all of a fits in the core's L2 beside the panels, read in place, one group takes
  // every row of blocks: the launch's threads then split the programs by block columns,
  // each reading the panels it copied (see packPanels) and all of a from its own L2. In
  // groups of 8 rows a thread's programs also read panels the other thread had just
  // written. Against groups of 8 (2 threads, 2-core AMX Xeon): int8 320^3 37.0 -> 27.6 us,
  // 384^3 53.5 -> 45.4, 448^3 71.3 -> 62.4, 640^3 212 -> 160, 768^3 377 -> 321 (a of 576
  // KB); bf16 384^3 84 -> 71, 640^3 376 -> 301 (800 KB). int8 1024^3 (1 MB) lost, 735 ->
  // 795 us; so did calls whose a is a copy made in bands of rows, which whole columns then
  // read half from the other core's cache (int8 1000^3 788 -> 987, bf16 700^3 486 -> 580).
  constexpr int64_t kWholeAInL2 = int64_t(896) << 10;
  int64_t aBytes = std::max<int64_t>(m, 1) * std::max<int64_t>(k, 1) * bytesOf(inputDtype);
  bool wholeColumns = bandBytes >= kBandPastL2Share || (!aCopied && aBytes <= kWholeAInL2);
  config["GROUP_M"] = wholeColumns
                          ? kColumnRows / blockM
                          : std::clamp<int64_t>(powerOfTwoAtMost(kRowsOfAInL2 / bandBytes), 1, 8);
  return config;
}

std::map<std::string, int64_t> withCurrentSpellings(std::map<std::string, int64_t> config,
                                                    const Target &target) {
  if (auto stages = config.find("num_stages");
      target.kind == TargetKind::Hip && stages != config.end() && stages->second == 0)
    stages->second = 2;
  return config;
}

std::map<std::string, int64_t> withStagesThatFit(std::map<std::string, int64_t> config,
                                                 const Target &target,
                                                 const std::string &inputDtype) {
  std::optional<GpuArch> arch = lookupGpuArch(target.arch);
  if (target.kind == TargetKind::Cpu || !arch)
    return config;
  int64_t tile = (config.at("BLOCK_M") + config.at("BLOCK_N")) * config.at("BLOCK_K") *
                 bytesOf(inputDtype);
  int64_t &stages = config.at("num_stages");
  while (stages > 1 && pipelineBuffers(*arch, stages) * tile > int64_t(arch->ldsBytes))
    --stages;
  return config;
}

std::map<std::string, int64_t> defaultMatmulConfig(const Target &target, int64_t m, int64_t n,
                                                   int64_t k, const std::string &inputDtype) {
  if (target.kind == TargetKind::Cpu) {
    auto config = cpuConfig(target, m, n, k, inputDtype);
    if (int64_t blockM = fewRowsOf(target, m, n, k, inputDtype).blockM) {
      constexpr int64_t kAccumulatorLanes = 32 * 16;
      config["BLOCK_M"] = blockM;
      config["BLOCK_N"] = std::min<int64_t>(64, kAccumulatorLanes / blockM);
      // float32 results of 17 to 48 columns in blocks of 16 (32 columns: of 32) rather than
      // one of 64, as cpuConfig takes them, where blocks have 4 rows or more: 2 threads,
      // znver5, against 64 columns forced in one process: 8x20x4096 25.9 -> 7.9 us (MKL
      // 15.1), 40x17x512 10.4 -> 5.8 (9.5), 48x32x2048 38.4 -> 15.0 (36.8, 18.4 in blocks
      // of 16), 13x48x512 7.3 -> 5.0 (7.9), 8x40x4096 27.4 -> 13.8 (24.4), 32x48x2048
      // 28.1 -> 19.0 (40.9), 4x40x4096 19.8 -> 11.8 (24.9). One or two rows keep one pass
      // over b's rows (1x48x4096 6.3 against 13.8 us in blocks of 16, 2x36x2048 4.5
      // against 7.4).
      constexpr int64_t kRowsForNarrowerBlocks = 4, kNarrowerUpTo = 48, kWholeHalfBlock = 32;
      if (inputDtype == "f32" && n <= kNarrowerUpTo && blockM >= kRowsForNarrowerBlocks)
        config["BLOCK_N"] = n == kWholeHalfBlock ? kWholeHalfBlock : 16;
      config["GROUP_M"] = std::max<int64_t>(1, 1024 / blockM);
    }
    // float32 with K under 16 (an outer product, K = 1, is all stores): the K loop takes
    // the power of two at or above K, and the blocks run row by row (GROUP_M 1), so that
    // the launch's tasks write c in whole rows. With BLOCK_K 16 such a K ran the blocks'
    // masked edge path (the full blocks' loop takes K in steps of 4), and groups of 1024
    // rows wrote c in column bands, whose rows, where they lie a multiple of 4 KB apart,
    // share the caches' sets: 1024x2048x1 had run at 2.5-2.7x torch's time. Against
    // both (znver5, 2 threads, torch / tile in three alternating processes): 63x777x1
    // 0.61-0.65 -> 1.00-1.03, 8x4096x1 0.51-0.55 -> 0.93-0.97, 300x100x1 0.69-0.76 ->
    // 0.91-1.04, 200x777x1 0.97-0.99 -> 1.21-1.36, 1024^2x1 1.19-1.21 -> 1.75-2.09,
    // 4096x64x2 0.95-1.02 -> 2.05-2.26, 2048^2x3 1.57-1.63 -> 3.19-3.43, 1000^2x4 1.69-1.88
    // -> 1.94-2.06, 200x777x6 2.07-2.37 -> 3.06-3.57; at K = 8 512^2 and 1024^2 read 3-5%
    // lower (3.7-4.7 -> 3.1-4.3, 6.0-6.5 -> 5.7-6.1), where MKL's own small-K path is slow.
    constexpr int64_t kSmallFloatK = 16;
    if (k < kSmallFloatK && inputDtype == "f32") {
      config["BLOCK_K"] = powerOfTwoAtLeast(k);
      config["GROUP_M"] = 1;
    }
    // GPU-only knobs at their GPU defaults, ignored here but part of the key.
    for (const auto &[name, value] : gpuConfig(target, m, n, k, inputDtype))
      config.emplace(name, value);
    return config;
  }
  return withStagesThatFit(gpuConfig(target, m, n, k, inputDtype), target, inputDtype);
}

bool readsFewRowsInPlace(const Target &target, int64_t m, int64_t n, int64_t k,
                         const std::string &inputDtype) {
  return fewRowsOf(target, m, n, k, inputDtype).blockM != 0;
}

} // namespace tile::ops
