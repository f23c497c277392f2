#ifndef TILE_TESTS_CPP_TESTKERNELS_H
#define TILE_TESTS_CPP_TESTKERNELS_H

#include "ops/KernelSpec.h"

#include <string>

namespace tile::testing {

inline ops::KernelSpec vectorAddSpec(const std::string &dtype, int64_t block = 256,
                                     int64_t indexBits = 32) {
  return {"vector_add", {dtype}, {{"BLOCK_SIZE", block}, {"index_bits", indexBits}}};
}

} // namespace tile::testing

#endif
