#ifndef TILE_OPS_MATMULCONFIG_H
#define TILE_OPS_MATMULCONFIG_H

#include "tile/Compiler/Target.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tile::ops {

/// The knobs of a matmul kernel, named as Triton and Inductor name them. The CPU reads
/// BLOCK_M, BLOCK_N, BLOCK_K and GROUP_M and ignores the GPU-only ones (num_warps,
/// num_stages, waves_per_eu, matrix_instr_nonkdim, kpack), which still take part in
/// the cache key.
const std::vector<std::string> &matmulKnobNames();

/// The default config of a target family for an (m, n, k) problem with `inputDtype`
/// elements ("f32", "f16", "bf16", "i8"): every knob of matmulKnobNames().
std::map<std::string, int64_t> defaultMatmulConfig(const Target &target, int64_t m, int64_t n,
                                                   int64_t k, const std::string &inputDtype);

/// Whether the CPU's default config for an m x n x k call of `inputDtype` takes its few
/// rows of a (under 64) in blocks that read b as given, each row of b once or twice (see
/// matmul_config.cpp): such a call copies b into panels only where its rows are not
/// contiguous.
bool readsFewRowsInPlace(const Target &target, int64_t m, int64_t n, int64_t k,
                         const std::string &inputDtype);

/// The CPU `config` with the blocks of the tile-register kernel for an m x n x k problem
/// of `inputDtype`: 32 x 32 (2 x 2 accumulator tiles of 16 x 16, with a tile of a and of
/// b per band and chunk: all eight tile registers), 64 x 64 for large problems, BLOCK_K
/// as long as K allows, up to 1024, and GROUP_M by the L2. `aCopied`: the call reads a from
/// a copy it makes (a's rows moved onto whole cache lines or whole blocks), written by the
/// launch's threads in bands of rows. `kernelK`: the k the kernel runs where it differs from
/// K (a copy's rows end in zeros up to a whole cache line, which the kernel takes as k).
std::map<std::string, int64_t> withMatrixTiles(std::map<std::string, int64_t> config, int64_t m,
                                               int64_t n, int64_t k, const std::string &inputDtype,
                                               bool aCopied, int64_t kernelK = 0);

/// `config` with the spellings of older tools mapped to what they meant: on AMD,
/// num_stages=0 was older ROCm Triton's default (its stream pipeliner, num_stages=2 today),
/// as the ROCm tutorial's candidates still write it.
std::map<std::string, int64_t> withCurrentSpellings(std::map<std::string, int64_t> config,
                                                    const Target &target);

/// `config` (every knob set) with num_stages lowered, where its shared-memory ring would
/// not fit the target's static shared memory, to the deepest one that does (at least 1):
/// what a config that leaves num_stages out gets, so that a tile size chosen alone keeps
/// working at every dtype.
std::map<std::string, int64_t> withStagesThatFit(std::map<std::string, int64_t> config,
                                                 const Target &target,
                                                 const std::string &inputDtype);

} // namespace tile::ops

#endif
