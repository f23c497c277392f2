#include "runtime/BuildId.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

namespace {

struct Search {
  const void *address;
  std::string hex;
};

/// The GNU build id note of a loaded module as hex, or "" without one.
std::string buildIdOf(const dl_phdr_info *info) {
  std::string hex;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto &header = info->dlpi_phdr[i];
    if (header.p_type != PT_NOTE)
      continue;
    auto *note = reinterpret_cast<const char *>(info->dlpi_addr + header.p_vaddr);
    auto *end = note + header.p_memsz;
    while (note + sizeof(ElfW(Nhdr)) <= end) {
      auto *nhdr = reinterpret_cast<const ElfW(Nhdr) *>(note);
      const char *name = note + sizeof(ElfW(Nhdr));
      const auto *desc =
          reinterpret_cast<const unsigned char *>(name + ((nhdr->n_namesz + 3) & ~3u));
      if (nhdr->n_type == NT_GNU_BUILD_ID && nhdr->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        char byte[3];
        for (unsigned j = 0; j < nhdr->n_descsz; ++j) {
          std::snprintf(byte, sizeof(byte), "%02x", desc[j]);
          hex += byte;
        }
        return hex;
      }
      note = reinterpret_cast<const char *>(desc) + ((nhdr->n_descsz + 3) & ~3u);
    }
  }
  return hex;
}

int visitModule(dl_phdr_info *info, size_t, void *data) {
  auto *search = static_cast<Search *>(data);
  bool containsAddress = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto &header = info->dlpi_phdr[i];
    auto begin = info->dlpi_addr + header.p_vaddr;
    auto address = reinterpret_cast<ElfW(Addr)>(search->address);
    if (header.p_type == PT_LOAD && address >= begin && address < begin + header.p_memsz)
      containsAddress = true;
  }
  if (!containsAddress)
    return 0;
  search->hex = buildIdOf(info);
  return 1;
}

/// Appends "<file name>=<build id>;" for the shared LLVM and MLIR libraries.
int visitToolchain(dl_phdr_info *info, size_t, void *data) {
  auto *ids = static_cast<std::string *>(data);
  std::string path = info->dlpi_name ? info->dlpi_name : "";
  std::string file = path.substr(path.find_last_of('/') + 1);
  if (file.rfind("libLLVM", 0) == 0 || file.rfind("libMLIR", 0) == 0) {
    std::string id = buildIdOf(info);
    *ids += file + "=" + (id.empty() ? "no-build-id" : id) + ";";
  }
  return 0;
}

} // namespace

const std::string &tile::runtime::coreBuildId() {
  static const std::string id = [] {
    Search search{reinterpret_cast<const void *>(&coreBuildId), {}};
    dl_iterate_phdr(visitModule, &search);
    // Without a note (a linker that does not emit one) every build looks alike; say so
    // in the key rather than pretending.
    return search.hex.empty() ? std::string("no-build-id") : search.hex;
  }();
  return id;
}

const std::string &tile::runtime::linkedToolchainIds() {
  static const std::string ids = [] {
    std::string found;
    dl_iterate_phdr(visitToolchain, &found);
    return found;
  }();
  return ids;
}
