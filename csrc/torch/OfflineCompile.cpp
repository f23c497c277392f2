// tile_runtime::compile_offline and default_config: compile any op for any target
// without its device (AMD and NVIDIA code from a machine that has neither), for the
// `python -m torch_tile compile` CLI.
#include "ops/KernelSpec.h"
#include "ops/MatmulConfig.h"
#include "ops/VectorAddConfig.h"
#include "runtime/CompileAndLoad.h"
#include "tile/Compiler/Compile.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstring>
#include <stdexcept>
#include <tuple>

namespace {

using StageTexts = std::tuple<std::vector<std::string>, std::vector<std::string>, at::Tensor,
                              std::string>;

/// (stage names, stage texts, the bin stage as uint8, the resource report).
StageTexts compileOffline(std::string op, std::vector<std::string> dtypes,
                          std::vector<std::string> knobNames, std::vector<int64_t> knobValues,
                          std::string target) {
  TORCH_CHECK(knobNames.size() == knobValues.size(), "compile_offline: ", knobNames.size(),
              " knob names but ", knobValues.size(), " values");
  tile::ops::KernelSpec spec{op, dtypes, {}};
  for (size_t i = 0; i < knobNames.size(); ++i)
    spec.config[knobNames[i]] = knobValues[i];
  tile::Binary binary;
  try {
    tile::Target parsed = tile::Target::parse(target);
    spec.config = tile::ops::withCurrentSpellings(spec.config, parsed);
    binary = tile::runtime::compileWithStages(spec, parsed);
  } catch (const std::exception &error) {
    TORCH_CHECK(false, "cannot compile ", spec.str(), " for ", target, ": ", error.what());
  }
  std::vector<std::string> names, texts;
  for (auto &[name, text] : binary.stages) {
    names.push_back(name);
    texts.push_back(std::move(text));
  }
  at::Tensor bin = at::empty({int64_t(binary.object.size())}, at::kByte);
  std::memcpy(bin.data_ptr(), binary.object.data(), binary.object.size());
  std::string report = binary.target.kind == tile::TargetKind::Cpu ? std::string()
                                                                    : binary.resources.str();
  return {names, texts, bin, report};
}

/// The default knobs of an op for a target family (the shape is a representative
/// 1024^3 problem for matmul).
std::tuple<std::vector<std::string>, std::vector<int64_t>>
defaultConfig(std::string op, std::string target, std::string dtype) {
  tile::Target parsed = tile::Target::parse(target);
  std::map<std::string, int64_t> config;
  bool gated = op == "matmul_leaky_relu_backward";
  if (op == "matmul" || op == "matmul_leaky_relu" || gated) {
    config = tile::ops::defaultMatmulConfig(parsed, 1024, 1024, 1024, dtype);
    // Row-major a, b and c, as torch.matmul's operands mostly are: the unit strides of
    // a along K, b along N and c along N (bits 1, 3 and 5) are compile-time constants.
    config.emplace("unit_strides", 0b101010);
    // ... with 16-byte aligned data and strides, as fresh allocations of whole rows of
    // 16 bytes are, M, N, K multiples of 16 like the representative problem, and an
    // aligned bias where there is one (bit 6).
    config.emplace("divisibility_16", 0b1111111);
    // ... and an activation of c's layout and alignment (bits 8 and 7) for leaky_relu's
    // backward.
    if (gated) {
      config["unit_strides"] |= 1 << 8;
      config["divisibility_16"] |= 1 << 7;
    }
  } else if (op == "vector_add") {
    config = tile::ops::defaultVectorAddConfig(parsed, 1 << 20);
  } else {
    TORCH_CHECK(false, "no op named '", op,
                "'; ops: vector_add, matmul, matmul_leaky_relu, matmul_leaky_relu_backward");
  }
  config.emplace("index_bits", 32);
  std::vector<std::string> names;
  std::vector<int64_t> values;
  for (const auto &[name, value] : config) {
    names.push_back(name);
    values.push_back(value);
  }
  return {names, values};
}

} // namespace

TORCH_LIBRARY_FRAGMENT(tile_runtime, m) {
  m.def("compile_offline(str op, str[] dtypes, str[] knob_names, int[] knob_values, str target)"
        " -> (str[], str[], Tensor, str)",
        compileOffline);
  m.def("default_config(str op, str target, str dtype) -> (str[], int[])", defaultConfig);
}
