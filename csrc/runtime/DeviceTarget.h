#ifndef TILE_RUNTIME_DEVICETARGET_H
#define TILE_RUNTIME_DEVICETARGET_H

#include "tile/Compiler/Target.h"

#include <string>

namespace tile::runtime {

/// The target kernels for a GPU device are compiled for: $TILE_TARGET when set (of the
/// device's kind), else hip:<gcnArchName> with its features (gfx942:sramecc+:xnack-)
/// or cuda:sm_<major><minor>. Throws std::runtime_error for an arch torch-tile does not
/// compile for, naming the supported ones, and for a TILE_TARGET of the other kind.
Target deviceTarget(TargetKind kind, const std::string &gcnArchName, int major, int minor);

/// The target CPU kernels are compiled for: always the host, since they run in this
/// process. $TILE_TARGET is for GPU devices and may name any GPU target, or the host
/// itself; text that is no target, or another CPU, throws std::invalid_argument naming
/// the variable rather than being ignored (a kernel for another CPU could use
/// instructions this one lacks).
const Target &cpuTarget();

} // namespace tile::runtime

#endif
