#include "runtime/BuildId.h"

#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

namespace {

struct Search {
  const void *address;
  std::string hex;
};

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
          search->hex += byte;
        }
        return 1;
      }
      note = reinterpret_cast<const char *>(desc) + ((nhdr->n_descsz + 3) & ~3u);
    }
  }
  return 1;
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
