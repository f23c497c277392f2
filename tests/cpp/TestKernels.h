#ifndef TILE_TESTS_CPP_TESTKERNELS_H
#define TILE_TESTS_CPP_TESTKERNELS_H

#include "ops/KernelBuilders.h"
#include "tile/Compiler/Compile.h"

#include <map>
#include <stdexcept>
#include <string>

namespace tile::testing {

inline ops::KernelSpec vectorAddSpec(const std::string &dtype, int64_t block = 256,
                                     int64_t indexBits = 32) {
  return {"vector_add", {dtype}, {{"BLOCK_SIZE", block}, {"index_bits", indexBits}}};
}

inline ops::KernelSpec matmulSpec(const std::string &op, const std::string &in,
                                  const std::string &out, int64_t blockM, int64_t blockN,
                                  int64_t blockK, int64_t groupM = 4) {
  return {op,
          {in, out},
          {{"BLOCK_M", blockM},
           {"BLOCK_N", blockN},
           {"BLOCK_K", blockK},
           {"GROUP_M", groupM},
           {"index_bits", 32}}};
}

/// `spec` with `knobs` set in its config (added or replaced).
inline ops::KernelSpec withKnobs(ops::KernelSpec spec,
                                 const std::map<std::string, int64_t> &knobs) {
  for (const auto &[name, value] : knobs)
    spec.config[name] = value;
  return spec;
}

/// The text of the stage `name` ("tile", "tile-cpu", "llvm", "asm", ...) of a binary
/// compiled with CompileOptions::keepStages.
inline const std::string &stage(const Binary &binary, const std::string &name) {
  for (const auto &[stageName, text] : binary.stages)
    if (stageName == name)
      return text;
  throw std::runtime_error("no stage " + name);
}

} // namespace tile::testing

#endif
