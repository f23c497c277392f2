#ifndef TILE_TESTS_CPP_TESTKERNELS_H
#define TILE_TESTS_CPP_TESTKERNELS_H

#include "ops/KernelBuilders.h"

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

} // namespace tile::testing

#endif
