#ifndef TILE_TORCH_DTYPES_H
#define TILE_TORCH_DTYPES_H

#include <c10/core/ScalarType.h>

#include <string>

namespace tile::binding {

/// The KernelSpec element type name of a torch dtype ("f32", "f16", "bf16", "i8", "i32").
inline std::string specDtype(c10::ScalarType type) {
  switch (type) {
  case c10::ScalarType::Float:
    return "f32";
  case c10::ScalarType::Half:
    return "f16";
  case c10::ScalarType::BFloat16:
    return "bf16";
  case c10::ScalarType::Char:
    return "i8";
  case c10::ScalarType::Int:
    return "i32";
  default:
    return "";
  }
}

} // namespace tile::binding

#endif
