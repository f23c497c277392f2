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

} // namespace tile::runtime

#endif
