#ifndef TILE_RUNTIME_CPUJIT_H
#define TILE_RUNTIME_CPUJIT_H

#include "runtime/LoadedKernel.h"

namespace tile::runtime {

/// Links a CPU kernel's object (the bin stage) into the process with LLVM ORC and
/// returns its entry point. Each kernel gets its own JITDylib, so kernels of the same
/// name but different specs never collide. The JITDylib, with the code's memory, is
/// removed when the last copy of the returned owner goes (clear_cache() frees what it
/// loaded).
CpuCode loadCpuObject(const Binary &binary, const std::string &key);

} // namespace tile::runtime

#endif
