#include "tile/Compiler/ResourceReport.h"

#include "tile/Compiler/Compile.h"
#include "tile/Target/GpuArch.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"

#include <fstream>
#include <regex>
#include <sstream>

using namespace tile;

namespace {

/// The integer after `key:` in the metadata block that starts at `from`, or -1.
int64_t metadataField(llvm::StringRef block, llvm::StringRef key) {
  size_t at = block.find("." + key.str() + ":");
  if (at == llvm::StringRef::npos)
    return -1;
  llvm::StringRef rest = block.drop_front(at + key.size() + 2).ltrim();
  int64_t value = -1;
  if (rest.consumeInteger(10, value))
    return -1;
  return value;
}

} // namespace

std::string ResourceReport::str() const {
  std::ostringstream out;
  auto field = [&](const char *name, int64_t value) {
    out << name << ": ";
    if (value < 0)
      out << "n/a";
    else
      out << value;
    out << "\n";
  };
  out << "arch: " << arch << "\n";
  field("vgprs", vgprs);
  field("agprs", agprs);
  field("sgprs", sgprs);
  field("lds_bytes", ldsBytes);
  field("scratch_bytes", scratchBytes);
  field("vgpr_spills", vgprSpills);
  field("sgpr_spills", sgprSpills);
  field("block_threads", blockThreads);
  field("waves_per_simd", wavesPerSimd);
  field("registers", registers);
  field("spill_bytes", spillBytes);
  field("blocks_per_sm", blocksPerSm);
  return out.str();
}

ResourceReport tile::amdResourcesFromAssembly(const std::string &assembly,
                                              const std::string &kernel, const GpuArch &arch,
                                              int64_t blockThreads) {
  llvm::StringRef text(assembly);
  size_t kernels = text.find("amdhsa.kernels:");
  if (kernels == llvm::StringRef::npos)
    throw CompileError("the " + arch.name + " assembly has no amdhsa.kernels metadata");
  // The metadata entry of the kernel runs from its `.name:` back to the entry's start
  // and on to the next entry; fields are looked up in that entry only.
  llvm::StringRef metadata = text.drop_front(kernels);
  size_t name = metadata.find((".name:           " + kernel).c_str());
  if (name == llvm::StringRef::npos)
    name = metadata.find((".name: " + kernel).c_str());
  if (name == llvm::StringRef::npos)
    throw CompileError("no metadata for kernel " + kernel + " in the " + arch.name + " assembly");
  // Entries of the kernel list start at "\n  - "; the argument lists nested in them
  // are indented further.
  size_t entryStart = metadata.take_front(name).rfind("\n  - ");
  size_t entryEnd = metadata.find("\n  - ", name);
  llvm::StringRef entry = metadata.slice(entryStart == llvm::StringRef::npos ? 0 : entryStart,
                                         entryEnd);
  ResourceReport report;
  report.arch = arch.name;
  report.vgprs = metadataField(entry, "vgpr_count");
  report.agprs = std::max<int64_t>(0, metadataField(entry, "agpr_count"));
  report.sgprs = metadataField(entry, "sgpr_count");
  report.ldsBytes = std::max<int64_t>(0, metadataField(entry, "group_segment_fixed_size"));
  report.scratchBytes = metadataField(entry, "private_segment_fixed_size");
  report.vgprSpills = metadataField(entry, "vgpr_spill_count");
  report.sgprSpills = metadataField(entry, "sgpr_spill_count");
  report.blockThreads = blockThreads;
  unsigned wavesPerGroup = (blockThreads + arch.waveSize - 1) / arch.waveSize;
  report.wavesPerSimd = occupancyWavesPerSimd(arch, unsigned(std::max<int64_t>(0, report.vgprs)),
                                              unsigned(report.agprs), unsigned(report.ldsBytes),
                                              wavesPerGroup);
  return report;
}

ResourceReport tile::nvidiaResourcesFromPtx(const std::string &ptx, const GpuArch &arch,
                                            int64_t blockThreads) {
  ResourceReport report;
  report.arch = arch.name;
  report.blockThreads = blockThreads;
  static const std::regex shared(R"(\.shared\s+\.align\s+\d+\s+\.b8\s+\w+\[(\d+)\])");
  for (std::sregex_iterator it(ptx.begin(), ptx.end(), shared), end; it != end; ++it)
    report.ldsBytes += std::stoll((*it)[1]);
  return report;
}

bool tile::ptxasOnPath() { return bool(llvm::sys::findProgramByName("ptxas")); }

std::optional<PtxasOutput> tile::assembleWithPtxas(const std::string &ptx, const GpuArch &arch) {
  llvm::ErrorOr<std::string> ptxas = llvm::sys::findProgramByName("ptxas");
  if (!ptxas)
    return std::nullopt;
  llvm::SmallString<128> ptxPath, cubinPath, logPath;
  if (llvm::sys::fs::createTemporaryFile("tile", "ptx", ptxPath) ||
      llvm::sys::fs::createTemporaryFile("tile", "cubin", cubinPath) ||
      llvm::sys::fs::createTemporaryFile("tile", "log", logPath))
    return std::nullopt;
  {
    std::ofstream(ptxPath.c_str()) << ptx;
  }
  std::string archFlag = "-arch=" + arch.name;
  llvm::StringRef args[] = {*ptxas, archFlag, "-v", ptxPath, "-o", cubinPath};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, logPath.str(), logPath.str()};
  int rc = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects);
  auto slurp = [](llvm::SmallString<128> &path) {
    std::ifstream file(path.c_str(), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  };
  PtxasOutput output{slurp(cubinPath), slurp(logPath)};
  for (const auto &path : {ptxPath, cubinPath, logPath})
    llvm::sys::fs::remove(path);
  if (rc != 0 || output.cubin.empty())
    return std::nullopt;
  return output;
}

void tile::addPtxasResources(ResourceReport &report, const PtxasOutput &assembled, const GpuArch &arch) {
  const std::string &log = assembled.log;
  std::smatch match;
  if (!std::regex_search(log, match, std::regex(R"(Used (\d+) registers)")))
    return;
  report.registers = std::stoll(match[1]);
  if (std::regex_search(log, match, std::regex(R"((\d+) bytes spill stores, (\d+) bytes spill loads)")))
    report.spillBytes = std::stoll(match[1]) + std::stoll(match[2]);
  // Registers go to warps in units of 256 (8 per thread); shared memory to blocks with
  // the system's reserve; threads and blocks have limits of their own.
  int64_t threads = std::max<int64_t>(1, report.blockThreads);
  int64_t warps = (threads + 31) / 32;
  int64_t perWarp = std::max<int64_t>(256, (report.registers * 32 + 255) / 256 * 256);
  int64_t blocks = std::min<int64_t>(arch.maxBlocksPerSm, arch.maxThreadsPerSm / threads);
  blocks = std::min<int64_t>(blocks, arch.registersPerSm / perWarp / warps);
  blocks = std::min<int64_t>(blocks, arch.sharedPerSm / (report.ldsBytes + arch.sharedReservedPerBlock));
  report.blocksPerSm = blocks;
}

void tile::checkResourceLimits(const ResourceReport &report, const GpuArch &arch) {
  if (report.blockThreads > 1024)
    throw CompileError("a workgroup of " + std::to_string(report.blockThreads) +
                       " threads exceeds the limit of 1024 threads per workgroup on " +
                       arch.name + "; lower num_warps");
  if (report.ldsBytes > arch.ldsBytes)
    throw CompileError("the kernel needs " + std::to_string(report.ldsBytes) +
                       " bytes of LDS per workgroup; " + arch.name + " has " +
                       std::to_string(arch.ldsBytes) + "; use smaller BLOCK_* or num_stages");
  if (arch.amd && report.vgprs > int64_t(arch.maxVgprsPerWave))
    throw CompileError("the kernel needs " + std::to_string(report.vgprs) + " VGPRs; " +
                       arch.name + " allows " + std::to_string(arch.maxVgprsPerWave) +
                       " per wave; use smaller BLOCK_* or more num_warps");
  if (arch.amd && report.wavesPerSimd == 0)
    throw CompileError("no wave of this kernel fits on a " + arch.name +
                       " SIMD (registers or LDS exhausted); use smaller BLOCK_*");
}
