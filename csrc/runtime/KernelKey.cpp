#include "runtime/KernelKey.h"

#include "runtime/BuildId.h"
#include "tile/Compiler/Compile.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

#include <cstdlib>

using namespace tile;

const std::vector<std::string> &runtime::codegenEnvironment() {
  // TILE_TARGET picks the target of offline compiles; TILE_ROCM_DEVICE_LIBS the ocml and
  // ockl bitcode linked into AMD kernels. Any variable that later changes code generation
  // belongs here too, or two different binaries would share a key.
  static const std::vector<std::string> names = {"TILE_TARGET", "TILE_ROCM_DEVICE_LIBS"};
  return names;
}

std::string runtime::sha256Hex(std::string_view data) {
  auto digest = llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(data.data()), data.size()));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

std::string runtime::kernelKey(const ops::KernelSpec &spec, const Target &target) {
  // Length-prefixed fields, so no two field lists hash the same text.
  std::string material;
  auto field = [&](std::string_view name, std::string_view value) {
    material += std::string(name) + ":" + std::to_string(value.size()) + ":";
    material += value;
    material += "\n";
  };
  field("compiler", compilerVersion());
  field("build", coreBuildId());
  field("toolchain", linkedToolchainIds());
  field("op", spec.op);
  field("spec", spec.str());
  field("target", target.fullId());
  for (const auto &name : codegenEnvironment()) {
    const char *value = std::getenv(name.c_str());
    field("env " + name, value ? value : "<unset>");
  }
  return sha256Hex(material);
}
