#include "runtime/StageDump.h"

#include "runtime/DiskCache.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>
#include <mutex>

using namespace tile;

namespace {

std::mutex dumpMutex;
std::string dumpDir;
bool warned = false;

std::string extensionOf(const std::string &stage, TargetKind kind) {
  if (stage == "llvm")
    return "ll";
  if (stage == "asm")
    return kind == TargetKind::Hip ? "amdgcn.s" : kind == TargetKind::Cuda ? "ptx" : "s";
  return "mlir"; // tile, tile-cpu, tile-gpu
}

bool writeText(const std::string &path, const std::string &text) {
  std::error_code error;
  llvm::raw_fd_ostream out(path, error);
  if (error)
    return false;
  out << text;
  return !out.has_error();
}

} // namespace

void runtime::setStageDumpDir(std::string dir) {
  std::lock_guard<std::mutex> lock(dumpMutex);
  dumpDir = std::move(dir);
  warned = false;
}

std::string runtime::stageDumpDir() {
  std::lock_guard<std::mutex> lock(dumpMutex);
  return dumpDir;
}

void runtime::dumpStages(const std::string &dir, const ops::KernelSpec &spec,
                         const std::string &key, const Binary &binary) {
  llvm::SmallString<256> folder(dir);
  llvm::sys::path::append(folder, targetFolder(binary.target), spec.op + "-" + key.substr(0, 16));
  bool ok = !llvm::sys::fs::create_directories(folder);
  auto file = [&](const std::string &name) {
    llvm::SmallString<256> path(folder);
    llvm::sys::path::append(path, name);
    return path.str().str();
  };
  ok = ok && writeText(file("spec.txt"), spec.str() + "\n");
  for (const auto &[stage, text] : binary.stages)
    ok = ok && writeText(file(stage + "." + extensionOf(stage, binary.target.kind)), text);
  if (ok && binary.target.kind != TargetKind::Cpu)
    ok = writeText(file("report.txt"), binary.resources.str() + "\n");
  std::lock_guard<std::mutex> lock(dumpMutex);
  if (!ok && !warned) {
    warned = true;
    std::cerr << "torch-tile: warning: cannot write kernel stages to " << folder.str().str()
              << "; set torch_tile.config.dump_dir (TILE_DUMP_DIR) to a writable folder"
              << std::endl;
  }
}
