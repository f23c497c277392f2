#ifndef TILE_COMPILER_TARGET_H
#define TILE_COMPILER_TARGET_H

#include <string>

namespace tile {

enum class TargetKind { Cpu, Hip, Cuda };

/// What a kernel is compiled for. Textual forms: `cpu:<llvm cpu name>`, `hip:gfx942`,
/// `hip:gfx942:sramecc+:xnack-` (features kept, they change the binary), `cuda:sm_90`.
struct Target {
  TargetKind kind = TargetKind::Cpu;
  std::string arch;     ///< "znver3", "gfx942", "sm_90"
  std::string features; ///< LLVM feature string for the CPU, ":sramecc+:xnack-" for HIP

  /// The textual form, without the CPU's feature list (it is long; the key hashes it).
  std::string str() const;
  /// Everything that selects the machine code: str() plus the CPU features.
  std::string fullId() const;
  /// Whether the CPU feature string enables `feature` ("avx512f").
  bool hasFeature(const std::string &feature) const;

  /// Throws std::invalid_argument naming the accepted forms.
  static Target parse(const std::string &text);
  /// The machine this process runs on, with its CPU features.
  static const Target &host();
};

} // namespace tile

#endif
