// The compiler and the CPU launcher, end to end without torch: tile IR from ops/,
// compile(), load into the JIT, run, compare against a scalar loop.
#include "TestKernels.h"
#include "runtime/CompileAndLoad.h"
#include "runtime/CpuJit.h"
#include "runtime/CpuLauncher.h"
#include "tile/Compiler/Compile.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <mutex>

#include <cstring>
#include <random>
#include <thread>

using namespace tile;
using tile::testing::matmulSpec;
using tile::testing::stage;
using tile::testing::vectorAddSpec;
using tile::testing::withKnobs;

namespace {

uint16_t toBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits += 0x7fff + ((bits >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float fromBf16(uint16_t value) {
  uint32_t bits = uint32_t(value) << 16;
  float result;
  std::memcpy(&result, &bits, 4);
  return result;
}

/// A kernel of hand-written tile IR, compiled for this host and loaded into the JIT.
runtime::LoadedKernel hostKernelOf(mlir::ModuleOp module, const std::string &name) {
  runtime::LoadedKernel kernel;
  kernel.spec = name;
  kernel.setCpuCode(runtime::loadCpuObject(compile(module, Target::host()), name + "-test"));
  return kernel;
}

template <typename T>
void runVectorAdd(const runtime::LoadedKernel &kernel, const T *a, const T *b, T *out, int32_t n,
                  int64_t block) {
  const void *aPtr = a, *bPtr = b;
  void *outPtr = out;
  void *args[] = {&aPtr, &bPtr, &outPtr, &n};
  int32_t programs = static_cast<int32_t>((n + block - 1) / block);
  runtime::launchCpu(kernel, args, runtime::Grid{programs, 1, 1}, 1);
}

class VectorAddSizes : public ::testing::TestWithParam<int32_t> {};

TEST_P(VectorAddSizes, Float32MatchesScalarLoop) {
  int32_t n = GetParam();
  auto kernel = runtime::compileAndLoad(vectorAddSpec("f32"), Target::host());
  std::mt19937 rng(n);
  std::normal_distribution<float> dist;
  std::vector<float> a(n), b(n), out(n + 64, -7.0f);
  for (int32_t i = 0; i < n; ++i)
    a[i] = dist(rng), b[i] = dist(rng);
  runVectorAdd(*kernel, a.data(), b.data(), out.data(), n, 256);
  for (int32_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], a[i] + b[i]) << "at " << i;
  // Lanes past n are masked off: the poison beyond the end must survive.
  for (int32_t i = n; i < n + 64; ++i)
    ASSERT_EQ(out[i], -7.0f) << "kernel wrote past the end at " << i;
}

INSTANTIATE_TEST_SUITE_P(Sizes, VectorAddSizes, ::testing::Values(1, 255, 256, 257, 4099));

TEST(Compiler, Float16AndBFloat16RoundOnce) {
  const int32_t n = 1000;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-4, 4);
  {
    auto kernel = runtime::compileAndLoad(vectorAddSpec("f16"), Target::host());
    std::vector<_Float16> a(n), b(n), out(n);
    for (int32_t i = 0; i < n; ++i)
      a[i] = static_cast<_Float16>(dist(rng)), b[i] = static_cast<_Float16>(dist(rng));
    runVectorAdd(*kernel, a.data(), b.data(), out.data(), n, 256);
    for (int32_t i = 0; i < n; ++i)
      ASSERT_EQ(float(out[i]), float(_Float16(float(a[i]) + float(b[i])))) << "at " << i;
  }
  {
    auto kernel = runtime::compileAndLoad(vectorAddSpec("bf16"), Target::host());
    std::vector<uint16_t> a(n), b(n), out(n);
    for (int32_t i = 0; i < n; ++i)
      a[i] = toBf16(dist(rng)), b[i] = toBf16(dist(rng));
    runVectorAdd(*kernel, a.data(), b.data(), out.data(), n, 256);
    for (int32_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], toBf16(fromBf16(a[i]) + fromBf16(b[i]))) << "at " << i;
  }
}

/// Instructions in `assembly`: lines that are neither labels, directives nor comments.
size_t instructionCount(const std::string &assembly) {
  size_t count = 0, start = 0;
  while (start < assembly.size()) {
    size_t end = assembly.find('\n', start);
    if (end == std::string::npos)
      end = assembly.size();
    std::string line = assembly.substr(start, end - start);
    line = line.substr(0, line.find('#'));
    size_t first = line.find_first_not_of(" \t");
    size_t last = line.find_last_not_of(" \t");
    if (first != std::string::npos && line[first] != '.' && line[last] != ':')
      ++count;
    start = end + 1;
  }
  return count;
}

// Where the CPU has no instructions for a 16-bit float type (AVX512-BF16, AVX512-FP16),
// code generation promoted each lane of a load, phi, select or store of such a vector on
// its own: a 128-lane bfloat16 vector_add for skylake-avx512 came out as ~7,900
// instructions after 1.6 s of code generation. Those moves now carry i16 lanes, and
// without AVX512-BW the edge block's masked ones loop over the lanes. The kernels run
// here where this host has the target's features.
TEST(Compiler, SixteenBitFloatVectorsMoveWholeOnCpusWithoutTheirInstructions) {
  const int32_t n = 1000;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-4, 4);
  for (const char *cpu : {"cpu:skylake-avx512", "cpu:x86-64-v3"})
    for (const char *dtype : {"bf16", "f16"}) {
      SCOPED_TRACE(std::string(cpu) + " " + dtype);
      Target target = Target::parse(cpu);
      auto context = createContext();
      auto module = ops::buildKernel(*context, vectorAddSpec(dtype, 128));
      CompileOptions options;
      options.keepStages = true;
      Binary binary = compile(*module, target, options);
      const std::string &assembly = stage(binary, "asm");
      // AVX2 has no masked 16-bit moves: the edge block's are a loop over its lanes
      // there (a branch per lane had made ~3,500 instructions).
      EXPECT_LT(instructionCount(assembly), 800u);
      bool runsHere = true;
      for (const char *feature : {"avx512f", "avx512bw", "avx512vl", "avx2", "f16c", "fma"})
        runsHere &= !target.hasFeature(feature) || Target::host().hasFeature(feature);
      if (!runsHere)
        continue;
      runtime::LoadedKernel kernel;
      kernel.spec = std::string("vector_add-") + dtype;
      kernel.setCpuCode(runtime::loadCpuObject(binary, kernel.spec + "-" + cpu));
      std::vector<uint16_t> a(n), b(n), out(n + 8, 0x7777);
      auto toBits = [&](float value) {
        if (std::string(dtype) == "bf16")
          return toBf16(value);
        _Float16 half = static_cast<_Float16>(value);
        uint16_t bits;
        std::memcpy(&bits, &half, 2);
        return bits;
      };
      auto fromBits = [&](uint16_t bits) {
        if (std::string(dtype) == "bf16")
          return fromBf16(bits);
        _Float16 half;
        std::memcpy(&half, &bits, 2);
        return float(half);
      };
      for (int32_t i = 0; i < n; ++i)
        a[i] = toBits(dist(rng)), b[i] = toBits(dist(rng));
      runVectorAdd(kernel, a.data(), b.data(), out.data(), n, 128);
      for (int32_t i = 0; i < n; ++i)
        ASSERT_EQ(out[i], toBits(fromBits(a[i]) + fromBits(b[i]))) << "at " << i;
      for (int32_t i = n; i < n + 8; ++i)
        ASSERT_EQ(out[i], 0x7777) << "kernel wrote past the end at " << i;
    }
}

// A CPU kernel's optimizer leaves out O3's passes that changed nothing in the machine
// code of 236 kernels. These (AMX and AVX-512 bf16, AMX and VNNI int8, a bias row,
// leaky_relu on AVX2, 64-bit indices, a bf16 vector_add without AVX512-BF16) must still
// come out the same with every pass, or the list needs looking at again.
TEST(Compiler, CpuKernelOptimizerLeavesOutOnlyPassesThatChangeNothing) {
  ops::KernelSpec biasRow = matmulSpec("matmul", "bf16", "bf16", 32, 32, 256, 8);
  biasRow.dtypes.push_back("bf16");
  const std::pair<const char *, ops::KernelSpec> cases[] = {
      {"cpu:sapphirerapids", withKnobs(matmulSpec("matmul", "bf16", "bf16", 64, 64, 1024, 8),
                                       {{"packed_b", 2}, {"unit_strides", 42}})},
      {"cpu:sapphirerapids", withKnobs(biasRow, {{"packed_b", 2}, {"unit_strides", 106}})},
      {"cpu:sapphirerapids", withKnobs(matmulSpec("matmul", "i8", "i32", 32, 32, 64, 8),
                                       {{"packed_b", 4}, {"unit_strides", 42}})},
      {"cpu:znver4",
       withKnobs(matmulSpec("matmul", "i8", "i32", 4, 64, 256, 256), {{"unit_strides", 40}})},
      {"cpu:skylake-avx512",
       withKnobs(matmulSpec("matmul", "f32", "f32", 4, 64, 256, 256),
                 {{"index_bits", 64}, {"packed_b", 1}, {"unit_strides", 42}})},
      {"cpu:x86-64-v3", withKnobs(matmulSpec("matmul_leaky_relu", "f32", "f32", 4, 64, 64, 256),
                                  {{"unit_strides", 42}})},
      {"cpu:skylake-avx512", vectorAddSpec("bf16", 128)},
  };
  for (const auto &[target, spec] : cases) {
    SCOPED_TRACE(std::string(target) + " " + spec.str());
    auto assembly = [&](bool allPasses) {
      auto context = createContext();
      auto module = ops::buildKernel(*context, spec);
      CompileOptions options;
      options.keepStages = true;
      options.allOptimizerPasses = allPasses;
      return stage(compile(*module, Target::parse(target), options), "asm");
    };
    std::string lean = assembly(false);
    EXPECT_FALSE(lean.empty());
    EXPECT_EQ(lean, assembly(true));
  }
}

TEST(Compiler, SixtyFourBitIndexingKernelRuns) {
  auto kernel = runtime::compileAndLoad(vectorAddSpec("f32", 128, 64), Target::host());
  std::vector<float> a(300, 1.5f), b(300, 2.0f), out(300, 0.0f);
  const void *aPtr = a.data(), *bPtr = b.data();
  void *outPtr = out.data();
  int64_t n = 300;
  void *args[] = {&aPtr, &bPtr, &outPtr, &n};
  runtime::launchCpu(*kernel, args, runtime::Grid{3, 1, 1}, 1);
  for (float value : out)
    ASSERT_EQ(value, 3.5f);
}

TEST(Compiler, ParallelLaunchCoversTheGrid) {
  auto kernel = runtime::compileAndLoad(vectorAddSpec("f32"), Target::host());
  const int32_t n = 256 * 37 + 5;
  std::vector<float> a(n, 1.0f), b(n), out(n, 0.0f);
  for (int32_t i = 0; i < n; ++i)
    b[i] = float(i);
  const void *aPtr = a.data(), *bPtr = b.data();
  void *outPtr = out.data();
  int32_t count = n;
  void *args[] = {&aPtr, &bPtr, &outPtr, &count};
  auto threaded = [](int64_t begin, int64_t end, int64_t grain, const auto &body) {
    std::vector<std::thread> threads;
    for (int64_t start = begin; start < end; start += grain)
      threads.emplace_back(body, start, std::min(end, start + grain));
    for (auto &thread : threads)
      thread.join();
  };
  runtime::launchCpu(*kernel, args, runtime::Grid{38, 1, 1}, 4, threaded);
  for (int32_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], 1.0f + float(i)) << "at " << i;
}

// The programs a row-band launch ran, as (task, first, last) per call of the entry.
std::vector<std::array<int64_t, 3>> rowBandCalls;
int64_t rowBandTask = -1;

void recordRowBand(void **, int64_t begin, int64_t end, int32_t gx, int32_t gy, int32_t gz) {
  ASSERT_EQ(gx, 7 * 3);
  ASSERT_EQ(gy * gz, 1);
  rowBandCalls.push_back({rowBandTask, begin, end});
}

TEST(Compiler, RowBandLaunchRunsEachProgramOnceEachTaskItsRows) {
  // One group of the grouped order: program n * 7 + m is block row m of block column n.
  // Three bands of 7 block rows: 0-1, 2-3, 4-6, each over the 3 block columns.
  runtime::LoadedKernel kernel;
  kernel.cpuEntry = recordRowBand;
  rowBandCalls.clear();
  auto recordTasks = [](int64_t begin, int64_t end, int64_t grain,
                        const std::function<void(int64_t, int64_t)> &body) {
    ASSERT_EQ(grain, 1);
    for (int64_t task = begin; task < end; ++task) {
      rowBandTask = task;
      body(task, task + 1);
    }
  };
  runtime::launchCpuInRowBands(kernel, nullptr, 7, 3, 3, recordTasks);
  std::vector<int> runs(21, 0);
  const int64_t firstRow[] = {0, 2, 4, 7};
  for (auto [task, first, last] : rowBandCalls)
    for (int64_t program = first; program < last; ++program) {
      ++runs[program];
      int64_t row = program % 7;
      EXPECT_GE(row, firstRow[task]) << "program " << program << " in band " << task;
      EXPECT_LT(row, firstRow[task + 1]) << "program " << program << " in band " << task;
    }
  for (int64_t program = 0; program < 21; ++program)
    EXPECT_EQ(runs[program], 1) << "program " << program;
}

// What a column-band launch did: per block column, the writes that covered it, and per
// program, its runs and whether its column had been written before it ran.
std::mutex columnBandMutex;
std::vector<int> columnWrites, programRuns, programsBeforeTheirColumn;
constexpr int64_t kBandRows = 4, kBandColumns = 5;

void recordColumnBand(void **, int64_t begin, int64_t end, int32_t gx, int32_t gy, int32_t gz) {
  ASSERT_EQ(gx, kBandRows * kBandColumns);
  ASSERT_EQ(gy * gz, 1);
  std::lock_guard<std::mutex> lock(columnBandMutex);
  ASSERT_EQ(begin / kBandRows, (end - 1) / kBandRows) << "a call crossed a column";
  for (int64_t program = begin; program < end; ++program) {
    ++programRuns[size_t(program)];
    if (columnWrites[size_t(program / kBandRows)] == 0)
      ++programsBeforeTheirColumn[size_t(program)];
  }
}

TEST(Compiler, ColumnBandLaunchWritesEachColumnOnceBeforeItsPrograms) {
  // 5 block columns of 4 block rows in two tasks of 10 programs: the split falls inside
  // column 2, which one task writes and both run. Every program runs once, after its
  // column's one write, whether the tasks run on threads or on one thread, in either order,
  // and whether or not each task writes the columns it runs alone for itself.
  runtime::LoadedKernel kernel;
  kernel.cpuEntry = recordColumnBand;
  auto tasksOf = [](bool threads, bool reversed) {
    return [threads, reversed](int64_t begin, int64_t end, int64_t grain,
                               const std::function<void(int64_t, int64_t)> &body) {
      std::vector<std::pair<int64_t, int64_t>> tasks;
      for (int64_t start = begin; start < end; start += grain)
        tasks.push_back({start, std::min(end, start + grain)});
      if (reversed)
        std::reverse(tasks.begin(), tasks.end());
      std::vector<std::thread> running;
      for (auto [first, last] : tasks)
        if (threads)
          running.emplace_back(body, first, last);
        else
          body(first, last);
      for (auto &thread : running)
        thread.join();
    };
  };
  for (int64_t perWrite : {0, 2})
    for (bool threads : {false, true})
      for (bool reversed : {false, true}) {
        columnWrites.assign(kBandColumns, 0);
        programRuns.assign(kBandRows * kBandColumns, 0);
        programsBeforeTheirColumn.assign(kBandRows * kBandColumns, 0);
        int prepared = 0;
        void *args[runtime::kArgumentSlots] = {};
        runtime::launchCpuInColumnBands(
            kernel, args, kBandRows, kBandColumns, 10,
            [&](void **, int64_t, int64_t) {
              std::lock_guard<std::mutex> lock(columnBandMutex);
              ++prepared;
            },
            [&](int64_t first, int64_t last, void **) {
              std::lock_guard<std::mutex> lock(columnBandMutex);
              for (int64_t column = first; column < last; ++column)
                ++columnWrites[size_t(column)];
            },
            perWrite, tasksOf(threads, reversed));
        SCOPED_TRACE(std::string(threads ? "threads" : "one thread") +
                     (reversed ? ", reversed" : "") + ", columns per write " +
                     std::to_string(perWrite));
        EXPECT_EQ(prepared, 2);
        EXPECT_EQ(columnWrites, std::vector<int>(kBandColumns, 1));
        EXPECT_EQ(programRuns, std::vector<int>(kBandRows * kBandColumns, 1));
        EXPECT_EQ(programsBeforeTheirColumn, std::vector<int>(kBandRows * kBandColumns, 0));
      }
}

void runNothing(void **, int64_t, int64_t, int32_t, int32_t, int32_t) {}

TEST(Compiler, ColumnBandLaunchTellsEachTaskTheBlockRowsItRuns) {
  // 8 block rows: a task whose programs lie inside one column is told their rows (so it
  // copies only those rows of a); one that covers a whole column, or wraps from one
  // column into the next, every row.
  runtime::LoadedKernel kernel;
  kernel.cpuEntry = runNothing;
  struct Case {
    int64_t columns, grain;
    std::vector<std::pair<int64_t, int64_t>> rows;
  };
  for (const Case &c : {Case{1, 4, {{0, 4}, {4, 8}}}, Case{1, 3, {{0, 3}, {3, 6}, {6, 8}}},
                        Case{2, 6, {{0, 6}, {0, 8}, {4, 8}}}, Case{2, 8, {{0, 8}, {0, 8}}}}) {
    std::vector<std::pair<int64_t, int64_t>> told;
    void *args[runtime::kArgumentSlots] = {};
    runtime::launchCpuInColumnBands(
        kernel, args, 8, c.columns, c.grain,
        [&](void **, int64_t first, int64_t last) { told.push_back({first, last}); },
        [](int64_t, int64_t, void **) {}, 0,
        [](int64_t begin, int64_t end, int64_t grain,
           const std::function<void(int64_t, int64_t)> &body) {
          for (int64_t start = begin; start < end; start += grain)
            body(start, std::min(end, start + grain));
        });
    EXPECT_EQ(told, c.rows) << c.columns << " columns, tasks of " << c.grain;
  }
}

// Per program, the first argument it ran with (a column's own marker, or none).
std::vector<const void *> programArgument;

void recordColumnArgument(void **args, int64_t begin, int64_t end, int32_t gx, int32_t gy,
                          int32_t gz) {
  recordColumnBand(args, begin, end, gx, gy, gz);
  std::lock_guard<std::mutex> lock(columnBandMutex);
  for (int64_t program = begin; program < end; ++program)
    programArgument[size_t(program)] = args[0];
}

TEST(Compiler, ColumnBandLaunchWritesTheColumnsATaskRunsAloneForItself) {
  // 5 block columns of 4 block rows in two tasks of 10 programs: columns 0, 1 and 3, 4
  // lie whole in one task's programs, column 2 in both. With columns per write, each task
  // writes its whole columns that many at a time for itself (given its own arguments,
  // which it points at its own data) and runs them with those arguments; column 2 is
  // written once where both read it, and run with the launch's arguments.
  runtime::LoadedKernel kernel;
  kernel.cpuEntry = recordColumnArgument;
  std::vector<int> markers(kBandColumns);
  for (int64_t perWrite : {1, 2}) {
    columnWrites.assign(kBandColumns, 0);
    programRuns.assign(kBandRows * kBandColumns, 0);
    programsBeforeTheirColumn.assign(kBandRows * kBandColumns, 0);
    programArgument.assign(kBandRows * kBandColumns, nullptr);
    std::vector<std::pair<int64_t, int64_t>> ownWrites;
    void *args[runtime::kArgumentSlots] = {};
    runtime::launchCpuInColumnBands(
        kernel, args, kBandRows, kBandColumns, 10, [](void **, int64_t, int64_t) {},
        [&](int64_t first, int64_t last, void **own) {
          std::lock_guard<std::mutex> lock(columnBandMutex);
          for (int64_t column = first; column < last; ++column)
            ++columnWrites[size_t(column)];
          if (!own)
            return;
          ownWrites.push_back({first, last});
          own[0] = &markers[size_t(first)];
        },
        perWrite,
        [](int64_t begin, int64_t end, int64_t grain,
           const std::function<void(int64_t, int64_t)> &body) {
          for (int64_t start = begin; start < end; start += grain)
            body(start, std::min(end, start + grain));
        });
    SCOPED_TRACE("columns per write " + std::to_string(perWrite));
    EXPECT_EQ(columnWrites, std::vector<int>(kBandColumns, 1));
    EXPECT_EQ(programRuns, std::vector<int>(kBandRows * kBandColumns, 1));
    EXPECT_EQ(programsBeforeTheirColumn, std::vector<int>(kBandRows * kBandColumns, 0));
    std::sort(ownWrites.begin(), ownWrites.end());
    std::vector<std::pair<int64_t, int64_t>> expected =
        perWrite == 1 ? std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {3, 4}, {4, 5}}
                      : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {3, 5}};
    EXPECT_EQ(ownWrites, expected);
    for (int64_t program = 0; program < kBandRows * kBandColumns; ++program) {
      int64_t column = program / kBandRows;
      const void *want = nullptr;
      for (auto [first, last] : expected)
        if (column >= first && column < last)
          want = &markers[size_t(first)];
      EXPECT_EQ(programArgument[size_t(program)], want) << "program " << program;
    }
  }
}

TEST(Compiler, KeepsEveryStageInOrder) {
  auto context = createContext();
  auto module = ops::buildKernel(*context, vectorAddSpec("f16"));
  CompileOptions options;
  options.keepStages = true;
  Binary binary = compile(*module, Target::host(), options);
  std::vector<std::string> names;
  for (const auto &[name, text] : binary.stages) {
    names.push_back(name);
    EXPECT_FALSE(text.empty()) << name;
  }
  std::vector<std::string> expected = stageNames(Target::host());
  expected.pop_back(); // bin is Binary::object
  EXPECT_EQ(names, expected);
  EXPECT_NE(binary.stages[0].second.find("tile.load"), std::string::npos);
  EXPECT_NE(binary.stages[1].second.find("llvm.intr.masked.load"), std::string::npos);
  EXPECT_NE(binary.stages[3].second.find("vector_add_cpu_entry"), std::string::npos);
  EXPECT_EQ(binary.entrySymbol, "vector_add_cpu_entry");
  ASSERT_GE(binary.object.size(), 4u);
  EXPECT_EQ(binary.object.substr(0, 4), "\x7f" "ELF");
}

TEST(Compiler, RejectsModuleWithoutKernel) {
  auto context = createContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>("func.func @f() { return }", context.get());
  ASSERT_TRUE(module);
  EXPECT_THROW(compile(*module, Target::host()), CompileError);
}

TEST(Compiler, ReportsInvalidIrWithDiagnostics) {
  auto context = createContext();
  // A load whose mask has the wrong shape is caught by the op verifier at parse time,
  // so build a kernel the parser accepts but a later stage rejects: a returned value.
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      "func.func @k() -> i32 attributes {tile.kernel} {"
      "  %0 = tile.program_id 0 : i32\n return %0 : i32 }",
      context.get());
  ASSERT_TRUE(module);
  try {
    compile(*module, Target::host());
    FAIL() << "expected a CompileError";
  } catch (const CompileError &error) {
    EXPECT_NE(std::string(error.what()).find("returns nothing"), std::string::npos) << error.what();
  }
}

TEST(Compiler, UnknownGpuArchsAreRefusedWithAMessage) {
  auto context = createContext();
  auto module = ops::buildKernel(*context, vectorAddSpec("f32"));
  try {
    compile(*module, Target::parse("hip:gfx803"));
    FAIL() << "expected a CompileError";
  } catch (const CompileError &error) {
    EXPECT_NE(std::string(error.what()).find("hip:gfx803"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("hip:gfx942"), std::string::npos)
        << "the message lists the supported archs";
  }
}

TEST(Target, ParsesEveryForm) {
  EXPECT_EQ(Target::parse("hip:gfx942:sramecc+:xnack-").str(), "hip:gfx942:sramecc+:xnack-");
  EXPECT_EQ(Target::parse("hip:gfx942").arch, "gfx942");
  EXPECT_EQ(Target::parse("cuda:sm_90").kind, TargetKind::Cuda);
  EXPECT_EQ(Target::parse("cpu").fullId(), Target::host().fullId());
  EXPECT_FALSE(Target::host().arch.empty());
  EXPECT_THROW(Target::parse("rocm:gfx942"), std::invalid_argument);
  EXPECT_THROW(Target::parse("hip:"), std::invalid_argument);
}

TEST(Target, NamedCpusCarryTheirFeatures) {
  // A CPU other than the host (an offline compile, TILE_TARGET) gets the features LLVM
  // knows it by, so the lowering picks its instructions as for the host's.
  Target sapphireRapids = Target::parse("cpu:sapphirerapids");
  EXPECT_TRUE(sapphireRapids.hasFeature("avx512bf16"));
  EXPECT_TRUE(sapphireRapids.hasFeature("amx-bf16"));
  Target skylake = Target::parse("cpu:skylake-avx512");
  EXPECT_TRUE(skylake.hasFeature("avx512f"));
  EXPECT_FALSE(skylake.hasFeature("avx512bf16"));
  EXPECT_NE(sapphireRapids.fullId(), skylake.fullId());
  EXPECT_EQ(Target::parse("cpu:nonsense").features, "");
}

TEST(Target, FeaturesAreWholeEnabledItems) {
  Target target;
  target.features = "+avx512f,-avx512bw,+amx-tile";
  EXPECT_TRUE(target.hasFeature("avx512f"));
  EXPECT_TRUE(target.hasFeature("amx-tile")) << "the last item";
  EXPECT_FALSE(target.hasFeature("avx512bw")) << "disabled";
  EXPECT_FALSE(target.hasFeature("avx512")) << "a prefix of an item";
  EXPECT_FALSE(target.hasFeature("tile")) << "a suffix of an item";
  EXPECT_FALSE(target.hasFeature(""));
  target.features = "";
  EXPECT_FALSE(target.hasFeature("avx512f"));
}

TEST(Target, HostAnswersAsItsList) {
  // The host answers from a set built once; a copy of it walks the list.
  const Target &host = Target::host();
  Target copy = host;
  std::string_view list(host.features);
  int asked = 0;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string item(list.substr(0, comma));
    std::string name = item.substr(1);
    EXPECT_EQ(host.hasFeature(name), item.front() == '+') << item;
    EXPECT_EQ(copy.hasFeature(name), host.hasFeature(name)) << item;
    ++asked;
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
  }
  EXPECT_GT(asked, 0);
  EXPECT_FALSE(host.hasFeature("")) << "no empty item";
  EXPECT_FALSE(host.hasFeature("no-such-feature"));
}

TEST(Ops, RejectBadSpecs) {
  auto context = createContext();
  EXPECT_THROW(ops::buildKernel(*context, vectorAddSpec("f32", 100)), std::invalid_argument);
  EXPECT_THROW(ops::buildKernel(*context, vectorAddSpec("f64")), std::invalid_argument);
  EXPECT_THROW(ops::buildKernel(*context, {"conv", {"f32"}, {}}), std::invalid_argument);
  EXPECT_THROW(ops::buildKernel(*context, {"vector_add", {"f32"}, {}}), std::invalid_argument);
}

} // namespace

namespace {

// Every program instance of a 3-D grid writes its coordinates into its own slot; run
// in chunks that start mid-row, so the entry point's carry from x to y to z is checked.
TEST(Compiler, ThreeDimensionalGridVisitsEveryProgramOnce) {
  auto context = createContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @coords(%out: !tile.ptr<i32>) attributes {tile.kernel} {
      %x = tile.program_id 0 : i32
      %y = tile.program_id 1 : i32
      %z = tile.program_id 2 : i32
      %gx = tile.num_programs 0 : i32
      %gy = tile.num_programs 1 : i32
      %gz = tile.num_programs 2 : i32
      %row = arith.muli %z, %gy : i32
      %plane = arith.addi %row, %y : i32
      %rows = arith.muli %plane, %gx : i32
      %linear = arith.addi %rows, %x : i32
      %c100 = arith.constant 100 : i32
      %c10000 = arith.constant 10000 : i32
      %y100 = arith.muli %y, %c100 : i32
      %z10000 = arith.muli %z, %c10000 : i32
      %xy = arith.addi %x, %y100 : i32
      %code = arith.addi %xy, %z10000 : i32
      %slot = tile.addptr %out, %linear : !tile.ptr<i32>, i32
      tile.store %slot, %code : !tile.ptr<i32>
      return
    })mlir",
                                                        context.get());
  ASSERT_TRUE(module);
  runtime::LoadedKernel kernel = hostKernelOf(*module, "coords");
  runtime::Grid grid{5, 3, 4};
  std::vector<int32_t> out(grid.count(), -1);
  void *outPtr = out.data();
  void *args[] = {&outPtr};
  auto chunked = [](int64_t begin, int64_t end, int64_t grain, const auto &body) {
    for (int64_t start = begin; start < end; start += grain)
      body(start, std::min(end, start + grain));
  };
  runtime::launchCpu(kernel, args, grid, 7, chunked);
  for (int32_t z = 0; z < grid.z; ++z)
    for (int32_t y = 0; y < grid.y; ++y)
      for (int32_t x = 0; x < grid.x; ++x)
        ASSERT_EQ(out[(z * grid.y + y) * grid.x + x], x + 100 * y + 10000 * z)
            << "x=" << x << " y=" << y << " z=" << z;
}

TEST(Compiler, PartialSixteenBitBlocksCopyByMaskedRowsOrLaneByLane) {
  // A 4x32 bf16 block at run-time strides, its columns past n masked off. At column
  // stride 1 the partial block moves as one masked load and store per row; at stride 2 it
  // goes lane by lane in a loop (x86 has no 16-bit gather or scatter). Both copy exactly
  // the lanes that are on and write nothing else.
  auto context = createContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @copy(%in: !tile.ptr<bf16>, %out: !tile.ptr<bf16>, %ld: i32, %cs: i32, %n: i32) attributes {tile.kernel} {
      %rows = tile.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32>
      %cols = tile.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
      %ldS = tile.splat %ld : i32 -> tensor<4xi32>
      %rowOff = arith.muli %rows, %ldS : tensor<4xi32>
      %csS = tile.splat %cs : i32 -> tensor<32xi32>
      %colOff = arith.muli %cols, %csS : tensor<32xi32>
      %r2 = tile.expand_dims %rowOff {axis = 1 : i32} : tensor<4xi32> -> tensor<4x1xi32>
      %rB = tile.broadcast %r2 : tensor<4x1xi32> -> tensor<4x32xi32>
      %c2 = tile.expand_dims %colOff {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
      %cB = tile.broadcast %c2 : tensor<1x32xi32> -> tensor<4x32xi32>
      %off = arith.addi %rB, %cB : tensor<4x32xi32>
      %inBase = tile.splat %in : !tile.ptr<bf16> -> tensor<4x32x!tile.ptr<bf16>>
      %inPtrs = tile.addptr %inBase, %off : tensor<4x32x!tile.ptr<bf16>>, tensor<4x32xi32>
      %outBase = tile.splat %out : !tile.ptr<bf16> -> tensor<4x32x!tile.ptr<bf16>>
      %outPtrs = tile.addptr %outBase, %off : tensor<4x32x!tile.ptr<bf16>>, tensor<4x32xi32>
      %nS = tile.splat %n : i32 -> tensor<32xi32>
      %on = arith.cmpi slt, %cols, %nS : tensor<32xi32>
      %m2 = tile.expand_dims %on {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
      %mask = tile.broadcast %m2 : tensor<1x32xi1> -> tensor<4x32xi1>
      %x = tile.load %inPtrs, %mask : tensor<4x32x!tile.ptr<bf16>>
      tile.store %outPtrs, %x, %mask : tensor<4x32x!tile.ptr<bf16>>
      return
    })mlir",
                                                        context.get());
  ASSERT_TRUE(module);
  runtime::LoadedKernel kernel = hostKernelOf(*module, "copy");
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  for (int32_t colStride : {1, 2})
    for (int32_t n : {32, 20, 1, 0}) {
      int32_t ld = 32 * colStride + 3;
      std::vector<uint16_t> in(4 * ld), out(4 * ld, 0xdead);
      for (uint16_t &value : in)
        value = toBf16(dist(rng));
      const void *inPtr = in.data();
      void *outPtr = out.data();
      void *args[] = {&inPtr, &outPtr, &ld, &colStride, &n};
      runtime::launchCpu(kernel, args, runtime::Grid{1, 1, 1}, 1);
      for (int32_t i = 0; i < 4 * ld; ++i) {
        int32_t row = i / ld, col = i % ld;
        bool copied = col % colStride == 0 && col / colStride < n;
        ASSERT_EQ(out[i], copied ? in[i] : uint16_t(0xdead))
            << "stride " << colStride << ", n " << n << ", row " << row << ", element " << col;
      }
    }
}

} // namespace
