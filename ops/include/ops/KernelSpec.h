#ifndef TILE_OPS_KERNELSPEC_H
#define TILE_OPS_KERNELSPEC_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tile::ops {

/// Everything that selects one kernel of an op, short of the target: the op, its
/// element types ("f32", "f16", "bf16", ...) and its config knobs (BLOCK_SIZE, ...).
/// No MLIR here, so the torch binding builds without MLIR headers; the generators are
/// declared in ops/KernelBuilders.h.
struct KernelSpec {
  std::string op;
  std::vector<std::string> dtypes;
  std::map<std::string, int64_t> config;

  /// Canonical text, e.g. "vector_add[f16]{BLOCK_SIZE=1024,index_bits=32}".
  std::string str() const;
  int64_t knob(const std::string &name) const;
};

} // namespace tile::ops

#endif
