// The CPU kernels' optimizer pipeline (the passes of O3 they need) against LLVM's whole
// O3: the same machine code for kernels of every CPU path, so that a pass it leaves out
// and a later LLVM starts to need shows here, not as a slower kernel.
#include "TestKernels.h"
#include "ops/KernelBuilders.h"
#include "tile/Compiler/Compile.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace tile;

namespace {

/// `assembly` without comments and directives other than labels: what runs.
std::string instructions(const std::string &assembly) {
  std::istringstream lines(assembly);
  std::string line, kept;
  while (std::getline(lines, line)) {
    line = line.substr(0, line.find('#'));
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || (line[first] == '.' && line.back() != ':'))
      continue;
    kept += line + "\n";
  }
  return kept;
}

struct PipelineCase {
  const char *target;
  ops::KernelSpec spec;
};

std::string assemblyOf(const PipelineCase &c, bool wholeO3) {
  auto context = createContext();
  auto module = ops::buildKernel(*context, c.spec);
  CompileOptions options = ops::compileOptionsFor(c.spec);
  options.keepStages = true;
  options.wholeO3 = wholeO3;
  for (const auto &[name, text] : compile(*module, Target::parse(c.target), options).stages)
    if (name == "asm")
      return instructions(text);
  throw std::runtime_error("no asm stage");
}

ops::KernelSpec matmul(const std::string &op, std::vector<std::string> dtypes,
                       std::map<std::string, int64_t> config) {
  config.emplace("GROUP_M", 8);
  config.emplace("index_bits", 32);
  config.emplace("unit_strides", 0b101010);
  return {op, std::move(dtypes), std::move(config)};
}

TEST(CpuOptimizer, LeanPipelineGivesO3sMachineCode) {
  const std::map<std::string, int64_t> vector4x64{
      {"BLOCK_M", 4}, {"BLOCK_N", 64}, {"BLOCK_K", 256}};
  const std::map<std::string, int64_t> avx2{{"BLOCK_M", 8}, {"BLOCK_N", 16}, {"BLOCK_K", 256}};
  auto tiles = [](int64_t block, int64_t group) {
    return std::map<std::string, int64_t>{
        {"BLOCK_M", block}, {"BLOCK_N", block}, {"BLOCK_K", 1024}, {"packed_b", group}};
  };
  auto wide = vector4x64;
  wide["index_bits"] = 64;
  auto contiguousBias = tiles(64, 2);
  contiguousBias["unit_strides"] = 0b1101010;
  std::vector<PipelineCase> cases = {
      {"cpu:skylake-avx512", matmul("matmul", {"f32", "f32"}, vector4x64)},
      {"cpu:skylake-avx512", matmul("matmul_leaky_relu", {"f32", "f32", "f32"}, vector4x64)},
      {"cpu:skylake-avx512", matmul("matmul", {"f32", "f32"}, wide)},
      {"cpu:x86-64-v3", matmul("matmul", {"f32", "f32"}, avx2)},
      {"cpu:x86-64-v3", matmul("matmul", {"bf16", "bf16"}, avx2)},
      {"cpu:znver4", matmul("matmul", {"bf16", "bf16"}, tiles(32, 2))},
      {"cpu:znver4", matmul("matmul", {"i8", "i32"}, tiles(32, 4))},
      {"cpu:sapphirerapids", matmul("matmul", {"bf16", "bf16"}, tiles(32, 2))},
      {"cpu:sapphirerapids", matmul("matmul", {"bf16", "bf16", "bf16"}, contiguousBias)},
      {"cpu:sapphirerapids", matmul("matmul_leaky_relu", {"bf16", "f32", "f32"}, tiles(64, 2))},
      {"cpu:sapphirerapids", matmul("matmul", {"i8", "i32", "i32"}, tiles(64, 4))},
      {"cpu:sapphirerapids", {"vector_add", {"f32"}, {{"BLOCK_SIZE", 1024}, {"index_bits", 32}}}},
  };
  for (const PipelineCase &c : cases) {
    std::string lean = assemblyOf(c, false), whole = assemblyOf(c, true);
    EXPECT_GT(lean.size(), 1000u) << c.target << " " << c.spec.str();
    EXPECT_EQ(lean, whole) << c.target << " " << c.spec.str();
  }
}

} // namespace
