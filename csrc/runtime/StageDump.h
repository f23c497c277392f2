#ifndef TILE_RUNTIME_STAGEDUMP_H
#define TILE_RUNTIME_STAGEDUMP_H

#include "ops/KernelSpec.h"
#include "tile/Compiler/Compile.h"

#include <string>

namespace tile::runtime {

/// Where every kernel the runtime compiles writes its stages (torch_tile.config.dump_dir,
/// TILE_DUMP_DIR); "" (the default) writes nothing.
void setStageDumpDir(std::string dir);
std::string stageDumpDir();

/// Writes <dir>/<target>/<op>-<key prefix>/{spec.txt, <stage files>, report.txt}, with the
/// extensions of `python -m torch_tile compile`. Failures warn once and are otherwise
/// ignored: a dump must never fail the op.
void dumpStages(const std::string &dir, const ops::KernelSpec &spec, const std::string &key,
                const Binary &binary);

} // namespace tile::runtime

#endif
