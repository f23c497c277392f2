// GPU code generation without a GPU: every supported arch compiles vector_add, the
// ISA has the 16-byte global accesses, the HSACO is an amdgcn ELF for the right
// machine, and the PTX names its target.
#include "TestKernels.h"
#include "ops/MatmulConfig.h"
#include "tile/Compiler/Compile.h"
#include "tile/Compiler/ResourceReport.h"
#include "tile/Conversion/Passes.h"
#include "tile/Target/GpuArch.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/BinaryFormat/ELF.h"
#include "llvm/Object/ELFObjectFile.h"

#include <gtest/gtest.h>

#include <sstream>

#include <map>

using namespace tile;
using tile::testing::stage;
using tile::testing::vectorAddSpec;

namespace {

Binary compileVectorAdd(const std::string &target, const std::string &dtype) {
  auto context = createContext();
  // 2048 elements over 256 threads: 8 per thread, 16 bytes of f16 (two runs of f32).
  auto module = ops::buildKernel(*context, vectorAddSpec(dtype, 2048));
  CompileOptions options;
  options.keepStages = true;
  return compile(*module, Target::parse(target), options);
}

struct AmdArch {
  const char *name;
  unsigned mach;        // ELF e_flags machine of the HSACO
  const char *load16;   // the 16-byte global load: dwordx4 on CDNA, b128 on RDNA3+
  const char *store16;
};

class AmdVectorAdd : public ::testing::TestWithParam<AmdArch> {};

TEST_P(AmdVectorAdd, SixteenByteGlobalAccessesInAValidHsaco) {
  AmdArch arch = GetParam();
  for (const char *dtype : {"f32", "f16", "bf16"}) {
    Binary binary = compileVectorAdd(std::string("hip:") + arch.name, dtype);
    const std::string &isa = stage(binary, "asm");
    EXPECT_NE(isa.find(arch.load16), std::string::npos) << arch.name << " " << dtype;
    EXPECT_NE(isa.find(arch.store16), std::string::npos) << arch.name << " " << dtype;
    EXPECT_NE(isa.find(".amdhsa_private_segment_fixed_size 0"), std::string::npos)
        << arch.name << " " << dtype << " spills to scratch";

    auto buffer = llvm::MemoryBufferRef(binary.object, "hsaco");
    auto elf = llvm::object::ELF64LEObjectFile::create(buffer);
    ASSERT_TRUE(bool(elf)) << llvm::toString(elf.takeError());
    const auto &header = elf->getELFFile().getHeader();
    EXPECT_EQ(header.e_machine, llvm::ELF::EM_AMDGPU);
    EXPECT_EQ(header.e_type, llvm::ELF::ET_DYN) << "a HSACO is a shared object";
    EXPECT_EQ(header.e_flags & llvm::ELF::EF_AMDGPU_MACH, arch.mach) << arch.name;
    EXPECT_EQ(binary.entrySymbol, "vector_add");

    const ResourceReport &report = binary.resources;
    EXPECT_GT(report.vgprs, 0);
    EXPECT_GT(report.sgprs, 0);
    EXPECT_EQ(report.scratchBytes, 0);
    EXPECT_EQ(report.vgprSpills, 0);
    EXPECT_EQ(report.ldsBytes, 0);
    EXPECT_GE(report.wavesPerSimd, 1);
    EXPECT_NE(report.str().find("waves_per_simd: "), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Archs, AmdVectorAdd,
    ::testing::Values(
        AmdArch{"gfx90a", llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX90A, "global_load_dwordx4",
                "global_store_dwordx4"},
        AmdArch{"gfx942", llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX942, "global_load_dwordx4",
                "global_store_dwordx4"},
        AmdArch{"gfx950", llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX950, "global_load_dwordx4",
                "global_store_dwordx4"},
        AmdArch{"gfx1100", llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX1100, "global_load_b128",
                "global_store_b128"},
        AmdArch{"gfx1201", llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX1201, "global_load_b128",
                "global_store_b128"}),
    [](const ::testing::TestParamInfo<AmdArch> &info) { return std::string(info.param.name); });

TEST(GpuCodegen, OccupancyFollowsTheTritonGuideFormula) {
  auto gfx942 = *lookupGpuArch("gfx942");
  EXPECT_EQ(occupancyWavesPerSimd(gfx942, 128, 0, 0, 0), 4u); // 512 / 128
  EXPECT_EQ(occupancyWavesPerSimd(gfx942, 100, 28, 0, 0), 4u); // VGPRs and AGPRs share
  EXPECT_EQ(occupancyWavesPerSimd(gfx942, 14, 0, 0, 0), 8u);  // capped by wave slots
  EXPECT_EQ(occupancyWavesPerSimd(gfx942, 65, 0, 0, 0), 7u);  // 72 after the granule
  // 48 KiB of LDS per 4-wave group: one group per CU, one wave per SIMD.
  EXPECT_EQ(occupancyWavesPerSimd(gfx942, 32, 0, 48 * 1024, 4), 1u);
  auto gfx1100 = *lookupGpuArch("gfx1100");
  EXPECT_EQ(occupancyWavesPerSimd(gfx1100, 96, 0, 0, 0), 16u); // 1536 / 96
  EXPECT_EQ(occupancyWavesPerSimd(gfx1100, 192, 0, 0, 0), 8u); // 1536 / 192
}

TEST(GpuCodegen, RdnaSplitsAnAccumulatorThatWouldFillHalfOfAWave) {
  auto gfx942 = *lookupGpuArch("gfx942"), gfx1100 = *lookupGpuArch("gfx1100");
  // 128 x 256 f32 over 4 waves: 128 words per lane in wave64, 256 in wave32.
  EXPECT_EQ(wavesPerWorkgroup(gfx942, 4, 128 * 256), 4);
  EXPECT_EQ(wavesPerWorkgroup(gfx1100, 4, 128 * 256), 8);
  // 128 x 128 over 4 waves is 128 words per wave32 lane: half of the 256 a wave holds.
  EXPECT_EQ(wavesPerWorkgroup(gfx1100, 4, 128 * 128), 8);
  // 128 x 128 over 8 waves (64 words per lane) fits as configured.
  EXPECT_EQ(wavesPerWorkgroup(gfx1100, 8, 128 * 128), 8);
  // Never past 1024 threads, nor on NVIDIA, whose num_warps counts 32-lane warps.
  EXPECT_EQ(wavesPerWorkgroup(gfx1100, 32, 512 * 512), 32);
  EXPECT_EQ(wavesPerWorkgroup(*lookupGpuArch("sm_80"), 4, 128 * 256), 4);
}

TEST(GpuCodegen, RdnaLaunchesTheWavesItLoweredFor) {
  // The ROCm tutorial's 128x256x16 config, 4 waves, on row-major aligned operands.
  auto spec = tile::testing::matmulSpec("matmul", "f16", "f16", 128, 256, 16, 1);
  spec.config["num_stages"] = 2;
  spec.config["unit_strides"] = 0b101010;
  spec.config["divisibility_16"] = 0b111111; // pointers and strides
  CompileOptions options;
  options.numWarps = 4;
  options.numStages = 2;
  auto context = createContext();
  auto module = ops::buildKernel(*context, spec);
  Binary rdna = compile(*module, Target::parse("hip:gfx1100"), options);
  EXPECT_EQ(rdna.blockThreads, 256);
  EXPECT_EQ(rdna.resources.blockThreads, 256);
  EXPECT_EQ(rdna.resources.scratchBytes, 0);
  auto again = ops::buildKernel(*context, spec);
  Binary cdna = compile(*again, Target::parse("hip:gfx942"), options);
  EXPECT_EQ(cdna.blockThreads, 256);
}

TEST(GpuCodegen, WorkgroupsOverTheThreadLimitAreRejected) {
  auto context = createContext();
  auto module = ops::buildKernel(*context, vectorAddSpec("f32", 2048));
  CompileOptions options;
  options.numWarps = 32; // 32 x 64 = 2048 threads
  try {
    compile(*module, Target::parse("hip:gfx942"), options);
    FAIL() << "expected a CompileError";
  } catch (const CompileError &error) {
    EXPECT_NE(std::string(error.what()).find("1024"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("num_warps"), std::string::npos) << error.what();
  }
}

class NvidiaVectorAdd : public ::testing::TestWithParam<const char *> {};

TEST_P(NvidiaVectorAdd, VectorGlobalAccessesInPtx) {
  std::string arch = GetParam();
  Binary binary = compileVectorAdd("cuda:" + arch, "f32");
  EXPECT_NE(binary.object.find(".target " + arch), std::string::npos);
  EXPECT_NE(binary.object.find(".entry vector_add"), std::string::npos);
  EXPECT_NE(binary.object.find("ld.global.v4.b32"), std::string::npos) << binary.object;
  EXPECT_NE(binary.object.find("st.global.v4.b32"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Archs, NvidiaVectorAdd, ::testing::Values("sm_80", "sm_90"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           return std::string(info.param);
                         });

} // namespace

namespace {

struct MatrixCase {
  const char *target, *dtype, *instruction;
  int count;                    // per wave: 128 x 128 x 32 over 8 waves
  const char *load16, *store16; // 16-byte global load, 8- or 16-byte LDS store
  const char *barrier;
};

class MatmulOnMatrixUnits : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(MatmulOnMatrixUnits, MatrixInstructionsOnOperandsStagedThroughLds) {
  MatrixCase c = GetParam();
  auto context = createContext();
  bool int8 = std::string(c.dtype) == "i8";
  auto spec = int8 ? tile::testing::matmulSpec("matmul", "i8", "i32", 128, 128, 32)
                   : tile::testing::matmulSpec("matmul_leaky_relu", c.dtype, "f32", 128, 128, 32);
  auto module = ops::buildKernel(*context, spec);
  CompileOptions options;
  options.keepStages = true;
  options.numWarps = 8;
  Binary binary = compile(*module, Target::parse(c.target), options);
  const std::string &isa = stage(binary, "asm");
  int count = 0;
  for (size_t at = isa.find(c.instruction); at != std::string::npos; at = isa.find(c.instruction, at + 1))
    ++count;
  EXPECT_EQ(count, c.count) << c.target << " " << c.dtype << " " << c.instruction;
  EXPECT_NE(isa.find(c.load16), std::string::npos) << "16-byte loads of a and b";
  EXPECT_NE(isa.find(c.store16), std::string::npos) << "wide LDS stores";
  EXPECT_NE(isa.find(c.barrier), std::string::npos);
  int64_t bytes = std::string(c.dtype) == "f32" ? 4 : int8 ? 1 : 2;
  EXPECT_EQ(binary.resources.ldsBytes, (128 * 32 + 32 * 128) * bytes);
  if (std::string(c.target).rfind("hip:", 0) == 0) {
    EXPECT_EQ(binary.resources.scratchBytes, 0);
    EXPECT_GE(binary.resources.wavesPerSimd, 1);
  }
}

// LDS is written in units of the fragment read: 8 bytes for the 4 k of one MFMA lane.
constexpr const char *kCdnaLoad = "global_load_dwordx4", *kCdnaLds = "ds_write_b64";
constexpr const char *kRdnaLoad = "global_load_b128", *kRdnaLds = "ds_store_b128";
constexpr const char *kPtxLoad = "ld.global.v4", *kPtxLds = "st.shared.v4";

INSTANTIATE_TEST_SUITE_P(
    Targets, MatmulOnMatrixUnits,
    ::testing::Values(
        MatrixCase{"hip:gfx90a", "f16", "v_mfma_f32_16x16x16f16", 16, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx90a", "bf16", "v_mfma_f32_16x16x16bf16_1k", 16, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx90a", "f32", "v_mfma_f32_16x16x4f32", 64, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx90a", "i8", "v_mfma_i32_16x16x16i8", 16, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx942", "f16", "v_mfma_f32_16x16x16_f16", 16, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx942", "bf16", "v_mfma_f32_16x16x16_bf16", 16, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx942", "f32", "v_mfma_f32_16x16x4_f32", 64, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx942", "i8", "v_mfma_i32_16x16x32_i8", 8, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx950", "f16", "v_mfma_f32_16x16x16_f16", 16, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx950", "bf16", "v_mfma_f32_16x16x16_bf16", 16, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx950", "f32", "v_mfma_f32_16x16x4_f32", 64, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx950", "i8", "v_mfma_i32_16x16x32_i8", 8, kCdnaLoad, kCdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx1100", "f16", "v_wmma_f32_16x16x16_f16", 16, kRdnaLoad, kRdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx1100", "bf16", "v_wmma_f32_16x16x16_bf16", 16, kRdnaLoad, kRdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx1100", "i8", "v_wmma_i32_16x16x16_iu8", 16, kRdnaLoad, kRdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx1201", "f16", "v_wmma_f32_16x16x16_f16", 16, kRdnaLoad, kRdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx1201", "bf16", "v_wmma_f32_16x16x16_bf16", 16, kRdnaLoad, kRdnaLds, "s_barrier"},
        MatrixCase{"hip:gfx1201", "i8", "v_wmma_i32_16x16x16_iu8", 16, kRdnaLoad, "ds_store_b64", "s_barrier"},
        MatrixCase{"cuda:sm_80", "f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 32, kPtxLoad, kPtxLds, "bar.sync"},
        MatrixCase{"cuda:sm_80", "bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 32, kPtxLoad, kPtxLds, "bar.sync"},
        MatrixCase{"cuda:sm_90", "f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 32, kPtxLoad, kPtxLds, "bar.sync"},
        MatrixCase{"cuda:sm_90", "bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 32, kPtxLoad, kPtxLds, "bar.sync"},
        MatrixCase{"cuda:sm_90", "i8", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", 16, kPtxLoad, kPtxLds, "bar.sync"}),
    [](const ::testing::TestParamInfo<MatrixCase> &info) {
      std::string name = std::string(info.param.target).substr(std::string(info.param.target).find(':') + 1);
      return name + "_" + info.param.dtype;
    });

/// Compiling `module` for `target` fails with a CompileError that says every one of `parts`.
void expectCompileError(mlir::ModuleOp module, const std::string &target,
                        const CompileOptions &options, std::initializer_list<const char *> parts) {
  try {
    compile(module, Target::parse(target), options);
    FAIL() << "expected a CompileError for " << target;
  } catch (const CompileError &error) {
    for (const char *part : parts)
      EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
  }
}

TEST(GpuCodegen, LdsOverTheArchLimitIsRejected) {
  auto context = createContext();
  // 256 x 256 f32 a and b blocks: 2 * 256 KiB of LDS.
  auto module = ops::buildKernel(*context, tile::testing::matmulSpec("matmul", "f32", "f32", 256, 256, 256));
  CompileOptions options;
  options.numWarps = 16;
  expectCompileError(*module, "hip:gfx942", options, {"LDS", "65536"});
}

} // namespace

namespace {

// A kernel that calls into the ROCm device libraries (math.tan becomes __ocml_tan_f32).
constexpr const char *kExpKernel = R"mlir(
func.func @exp_kernel(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>) attributes {tile.kernel} {
  %r = tile.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
  %px = tile.splat %x : !tile.ptr<f32> -> tensor<1024x!tile.ptr<f32>>
  %ax = tile.addptr %px, %r : tensor<1024x!tile.ptr<f32>>, tensor<1024xi32>
  %py = tile.splat %y : !tile.ptr<f32> -> tensor<1024x!tile.ptr<f32>>
  %ay = tile.addptr %py, %r : tensor<1024x!tile.ptr<f32>>, tensor<1024xi32>
  %v = tile.load %ax : tensor<1024x!tile.ptr<f32>>
  %e = math.tan %v : tensor<1024xf32>
  tile.store %ay, %e : tensor<1024x!tile.ptr<f32>>
  return
}
)mlir";

TEST(GpuCodegen, DeviceLibrariesAreLinkedWhenCalled) {
  auto context = createContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kExpKernel, context.get());
  ASSERT_TRUE(module);
  CompileOptions options;
  options.keepStages = true;
  Binary binary = compile(*module, Target::parse("hip:gfx942"), options);
  // ocml.s tan is inlined: no call is left, and lld found no undefined symbol.
  EXPECT_EQ(stage(binary, "llvm").find("declare float @__ocml_tan_f32"), std::string::npos);
  EXPECT_NE(stage(binary, "tile-gpu").find("math.tan"), std::string::npos);
  EXPECT_EQ(stage(binary, "asm").find("s_swappc"), std::string::npos) << "no call left";
  EXPECT_EQ(binary.object.substr(0, 4), "\x7f" "ELF");
}

TEST(GpuCodegen, KernelsThatCallNothingLinkNoLibrary) {
  Binary binary = compileVectorAdd("hip:gfx942", "f32");
  EXPECT_EQ(stage(binary, "llvm").find("__oclc_"), std::string::npos);
  EXPECT_EQ(stage(binary, "llvm").find("__ocml_"), std::string::npos);
}

} // namespace

namespace {

Binary compileMatmul(const std::string &target, const std::string &dtype, int64_t nonKDim) {
  auto context = createContext();
  auto module = ops::buildKernel(*context, tile::testing::matmulSpec("matmul", dtype, dtype, 128, 128, 32));
  CompileOptions options;
  options.keepStages = true;
  options.numWarps = 8;
  options.matrixInstrNonKDim = nonKDim;
  return compile(*module, Target::parse(target), options);
}

int occurrences(const std::string &text, const std::string &what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++count;
  return count;
}

TEST(GpuCodegen, MatrixInstrNonKDimPicksTheMfmaShape) {
  // 128 x 128 over 8 waves is 2 tiles of 32 x 32 per wave; BLOCK_K 32 is 4 steps of 8.
  Binary f16 = compileMatmul("hip:gfx942", "f16", 32);
  EXPECT_EQ(occurrences(stage(f16, "asm"), "v_mfma_f32_32x32x8_f16"), 8);
  EXPECT_EQ(occurrences(stage(f16, "asm"), "v_mfma_f32_16x16"), 0);
  EXPECT_EQ(f16.resources.scratchBytes, 0);
  Binary f32 = compileMatmul("hip:gfx90a", "f32", 32);
  EXPECT_EQ(occurrences(stage(f32, "asm"), "v_mfma_f32_32x32x2f32"), 32);
  try {
    compileMatmul("hip:gfx942", "f16", 24);
    FAIL() << "expected a CompileError";
  } catch (const CompileError &error) {
    EXPECT_NE(std::string(error.what()).find("16 or 32"), std::string::npos) << error.what();
  }
  // Where no MFMA exists the knob has no second value to pick: 32 is refused, not ignored.
  for (const char *target : {"hip:gfx1100", "hip:gfx1201", "cuda:sm_90"}) {
    try {
      compileMatmul(target, "f16", 32);
      FAIL() << "expected a CompileError for " << target;
    } catch (const CompileError &error) {
      EXPECT_NE(std::string(error.what()).find("matrix_instr_nonkdim=16"), std::string::npos)
          << error.what();
    }
  }
}

TEST(GpuCodegen, WavesPerEuIsRefusedOnNvidia) {
  auto context = createContext();
  auto module = ops::buildKernel(*context, tile::testing::matmulSpec("matmul", "f16", "f16", 64, 64, 32));
  CompileOptions options;
  options.wavesPerEu = 2;
  expectCompileError(*module, "cuda:sm_90", options, {"AMD occupancy hint"});
}

TEST(GpuCodegen, DefaultMatmulConfigsUseNoScratchOnAnyAmdArch) {
  for (const char *arch : {"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"})
    for (const char *dtype : {"f16", "bf16", "f32", "i8"}) {
      Target target = Target::parse(std::string("hip:") + arch);
      auto config = ops::defaultMatmulConfig(target, 4096, 4096, 4096, dtype);
      config["index_bits"] = 32;
      std::string out = std::string(dtype) == "i8" ? "i32" : dtype;
      auto context = createContext();
      // leaky_relu has no int8 variant.
      const char *op = std::string(dtype) == "i8" ? "matmul" : "matmul_leaky_relu";
      auto module = ops::buildKernel(*context, {op, {dtype, out}, config});
      CompileOptions options;
      options.numWarps = config.at("num_warps");
      options.matrixInstrNonKDim = config.at("matrix_instr_nonkdim");
      Binary binary = compile(*module, target, options);
      EXPECT_EQ(binary.resources.scratchBytes, 0) << arch << " " << dtype;
      EXPECT_EQ(binary.resources.vgprSpills, 0) << arch << " " << dtype;
      EXPECT_GE(binary.resources.wavesPerSimd, 1) << arch << " " << dtype;
      if (std::string(dtype) == "i8")
        continue;
      // leaky_relu's backward reads an activation of c's shape in the epilogue, aligned,
      // rows contiguous (unit_strides bit 8, divisibility_16 bit 7).
      auto gatedConfig = config;
      gatedConfig["unit_strides"] = 0b100101010;
      gatedConfig["divisibility_16"] = 0b10111111;
      auto gatedModule = ops::buildKernel(
          *context, {"matmul_leaky_relu_backward", {dtype, out, dtype}, gatedConfig});
      Binary gated = compile(*gatedModule, target, options);
      EXPECT_EQ(gated.resources.scratchBytes, 0) << arch << " " << dtype << " leaky_relu backward";
      EXPECT_EQ(gated.resources.vgprSpills, 0) << arch << " " << dtype << " leaky_relu backward";
      EXPECT_GE(gated.resources.wavesPerSimd, 1) << arch << " " << dtype << " leaky_relu backward";
    }
}

} // namespace

namespace {

TEST(GpuCodegen, SixtyFourBitIndexingCompilesForEveryGpuArch) {
  // The binding picks index_bits = 64 once an element offset passes 2**31 (a 65536 x
  // 32800 f16 matrix): the kernel then forms every offset in i64.
  for (const auto &arch : supportedGpuArchs()) {
    std::string target = (arch.amd ? "hip:" : "cuda:") + arch.name;
    auto spec = tile::testing::matmulSpec("matmul_leaky_relu", "f16", "f16", 64, 64, 32);
    spec.config["index_bits"] = 64;
    auto context = createContext();
    auto module = ops::buildKernel(*context, spec);
    CompileOptions options;
    options.keepStages = true;
    Binary binary = compile(*module, Target::parse(target), options);
    EXPECT_FALSE(binary.object.empty()) << target;
    EXPECT_NE(stage(binary, "tile-gpu").find("i64"), std::string::npos) << target;
  }
}

} // namespace

namespace {

/// The binding's spec for row-major, 16-byte aligned operands (what torch allocates):
/// unit strides along K for a and along N for b and c, every tensor aligned.
std::map<std::string, int64_t> rowMajorAligned(std::map<std::string, int64_t> config) {
  config["index_bits"] = 32;
  config["unit_strides"] = 0b101010;
  config["divisibility_16"] = 0b111;
  return config;
}

/// A matmul (int8 to int32) for `target` at `config`, compiled with its stages kept.
Binary compileMatmul(const Target &target, const std::string &dtype,
                     const std::map<std::string, int64_t> &config) {
  auto context = createContext();
  auto module = ops::buildKernel(*context, {"matmul", {dtype, dtype == "i8" ? "i32" : dtype}, config});
  CompileOptions options;
  options.keepStages = true;
  options.numWarps = config.at("num_warps");
  options.numStages = config.at("num_stages");
  if (auto it = config.find("waves_per_eu"); it != config.end())
    options.wavesPerEu = it->second;
  return compile(*module, target, options);
}

TEST(GpuCodegen, NvidiaDefaultMatmulPipelinesWithAsyncCopies) {
  // The default pipeline copies tiles with cp.async into a ring of shared buffers. With
  // the alignment proven by the spec, no element-wise global load is left, B (n-major)
  // is read with ldmatrix.trans, and in the loop the copies of a later tile are issued
  // after the wait for this one and before its matrix instructions.
  for (const char *arch : {"sm_80", "sm_90"})
    for (const char *dtype : {"f16", "bf16", "i8", "f32"}) {
      Target target = Target::parse(std::string("cuda:") + arch);
      auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 4096, 4096, 4096, dtype));
      ASSERT_GE(config.at("num_stages"), 2) << arch << " " << dtype;
      bool int8 = std::string(dtype) == "i8";
      Binary binary = compileMatmul(target, dtype, config);
      const std::string &ptx = stage(binary, "asm");
      std::string where = std::string(arch) + " " + dtype;
      EXPECT_GT(occurrences(ptx, "cp.async.cg.shared.global"), 0) << where;
      EXPECT_EQ(occurrences(ptx, "ld.global.b16") + occurrences(ptx, "ld.global.u16") +
                    occurrences(ptx, "ld.global.b8") + occurrences(ptx, "ld.global.u8"),
                0)
          << where << ": element-wise loads of an aligned operand";
      if (!int8 && std::string(dtype) != "f32")
        EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans"), std::string::npos) << where;
      size_t wait = ptx.find("cp.async.wait_group");
      ASSERT_NE(wait, std::string::npos) << where;
      size_t copy = ptx.find("cp.async.cg.shared.global", wait);
      size_t multiply = ptx.find("mma.sync", wait);
      ASSERT_NE(copy, std::string::npos) << where;
      EXPECT_LT(copy, multiply) << where << ": the next tile's copies before this one's mma";
      int64_t bytes = std::string(dtype) == "f32" ? 4 : int8 ? 1 : 2;
      int64_t tile = (config.at("BLOCK_M") + config.at("BLOCK_N")) * config.at("BLOCK_K") * bytes;
      EXPECT_EQ(binary.resources.ldsBytes, config.at("num_stages") * tile) << where;
    }
}

TEST(GpuCodegen, NvidiaOperandsPromisedFourBytesCopyInPiecesWithoutRegisters) {
  // a and b with no 16-byte alignment (no tensor map, no 16-byte copy proven): where the
  // call promises 4 bytes (divisibility_16 bits 8 and 9) the copies are cp.async of 16
  // bytes (checked at run time), 8 (checked) or 4 bytes (proven), with no element-wise
  // load left; with no promise, 16-byte copies (checked) and the register path, element by
  // element, as before, and no pieces.
  for (const char *arch : {"sm_80", "sm_90a"})
    for (const char *dtype : {"f16", "bf16", "i8", "f32"})
      for (bool promised : {true, false}) {
        Target target = Target::parse(std::string("cuda:") + arch);
        auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 1000, 1000, 1000, dtype));
        config["divisibility_16"] = 0b100 | (promised ? 0b11 << 8 : 0);
        Binary binary = compileMatmul(target, dtype, config);
        const std::string &ptx = stage(binary, "asm");
        std::string where = std::string(arch) + " " + dtype + (promised ? " promised" : "");
        int elementLoads = occurrences(ptx, "ld.global.b16") + occurrences(ptx, "ld.global.u16") +
                           occurrences(ptx, "ld.global.b8") + occurrences(ptx, "ld.global.u8") +
                           occurrences(ptx, "ld.global.b32") + occurrences(ptx, "ld.global.f32");
        EXPECT_GT(occurrences(ptx, "cp.async.cg.shared.global"), 0) << where;
        EXPECT_EQ(occurrences(ptx, "cp.async.ca.shared.global [%r") > 0, promised) << where;
        if (promised) {
          EXPECT_GT(occurrences(ptx, "], 4, %r"), 0) << where;
          EXPECT_GT(occurrences(ptx, "], 8, %r"), 0) << where;
          EXPECT_EQ(elementLoads, 0) << where << ": a register path beside proven pieces";
        } else {
          EXPECT_GT(elementLoads, 0) << where;
        }
      }
}

TEST(GpuCodegen, AmdOperandsPromisedFourBytesLoadWholeWords) {
  // AMD loads tiles through registers: a run that is not 16-byte aligned at run time had
  // been loaded element by element (global_load_ushort for 16-bit elements); where the
  // call promises 4 bytes its pieces take one 32-bit load each, element by element only
  // at the matrix's edge.
  for (const char *arch : {"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"})
    for (bool promised : {true, false}) {
      Target target = Target::parse(std::string("hip:") + arch);
      auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 1000, 1000, 1000, "f16"));
      config["divisibility_16"] = 0b100 | (promised ? 0b11 << 8 : 0);
      Binary binary = compileMatmul(target, "f16", config);
      const std::string &isa = stage(binary, "asm");
      std::string where = std::string(arch) + (promised ? " promised" : "");
      int words = occurrences(isa, "global_load_dword ") + occurrences(isa, "global_load_b32 ");
      EXPECT_EQ(words > 0, promised) << where;
    }
}

TEST(GpuCodegen, TheConversionBuildsEachThreadsIndexArithmeticOnce) {
  // A first call's compile time follows the size of the module the GPU conversion
  // leaves: every later pass and LLVM's optimizer work through it. Built element by
  // element from the thread id, a 128x256 sm_90a matmul's index arithmetic took 58,000
  // ops (19,000 once folded as built and with each thread's element places shared; 5,600
  // once the addresses and masks that the bulk copies leave unread are swept right after
  // the conversion, and each wgmma's accumulators are gathered in one op). The bounds
  // leave half as much again of what each kernel takes now.
  struct Case {
    const char *target;
    std::map<std::string, int64_t> knobs;
    int64_t maxOps;
  };
  const Case cases[] = {
      {"cuda:sm_90a", {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"num_warps", 8}}, 8500},
      {"cuda:sm_80", {}, 13500},
      {"hip:gfx942", {}, 4200},
      {"hip:gfx1100", {}, 5500},
  };
  for (const Case &c : cases) {
    Target target = Target::parse(c.target);
    auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 2048, 2048, 2048, "f16"));
    config["warp_specialize"] = config["persistent"] = 0;
    for (const auto &[knob, value] : c.knobs)
      config[knob] = value;
    auto context = createContext();
    auto module = ops::buildKernel(*context, {"matmul", {"f16", "f16"}, config});
    mlir::tile::ConvertTileToGPUOptions options;
    options.chipset = lookupGpuArch(target.arch)->name;
    options.numWarps = config.at("num_warps");
    options.numStages = config.at("num_stages");
    mlir::PassManager conversion(context.get());
    conversion.addPass(mlir::tile::createConvertTileToGPU(options));
    ASSERT_TRUE(mlir::succeeded(conversion.run(*module))) << c.target;
    int64_t ops = 0;
    module->walk([&](mlir::Operation *) { ++ops; });
    EXPECT_LT(ops, c.maxOps) << c.target << ": the conversion built " << ops << " ops";
  }
}

TEST(GpuCodegen, NvidiaMatmulPtxAssemblesForEveryArch) {
  // PTX that declares an ISA version older than an instruction it uses is refused by
  // ptxas and by the driver's compiler alike; the copies of whole 16-byte runs (sizes the
  // caller proves multiples of 16) use cp.async's ignore-src, which needs PTX 7.5.
  // (sm_90a's kernels are assembled in the warpgroup MMA tests.)
  if (!ptxasOnPath())
    GTEST_SKIP() << "no ptxas on PATH";
  for (const char *arch : {"sm_80", "sm_90"})
    for (const char *dtype : {"f16", "bf16", "i8", "f32"})
      // Any alignment; aligned tensors; aligned tensors and sizes (whole 16-byte runs).
      for (int64_t divisibility : {0, 0b111, 0b111111}) {
        Target target = Target::parse(std::string("cuda:") + arch);
        auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 4096, 4096, 4096, dtype));
        config["divisibility_16"] = divisibility;
        Binary binary = compileMatmul(target, dtype, config);
        EXPECT_TRUE(assembleWithPtxas(stage(binary, "asm"), *lookupGpuArch(arch)))
            << arch << " " << dtype << " divisibility_16=" << divisibility
            << ": ptxas refused the PTX";
      }
}

} // namespace

namespace {

/// The text of the loop with the most matrix instructions (AMDGCN or PTX): from a label
/// to the last branch back to it.
std::string mainLoopOf(const std::string &isa) {
  std::map<std::string, size_t> labels;
  std::string best;
  int bestCount = 0;
  size_t at = 0;
  while (at < isa.size()) {
    size_t end = isa.find('\n', at);
    if (end == std::string::npos)
      end = isa.size();
    std::string line = isa.substr(at, end - at);
    if ((line.rfind(".LBB", 0) == 0 || line.rfind("$L__BB", 0) == 0) && line.back() == ':')
      labels[line.substr(0, line.size() - 1)] = at;
    size_t branch = line.find("s_cbranch");
    if (branch == std::string::npos)
      branch = line.find("s_branch");
    if (branch == std::string::npos)
      branch = line.find("bra");
    if (branch != std::string::npos) {
      std::string target = line.substr(line.find_last_of(" \t") + 1);
      if (!target.empty() && target.back() == ';')
        target.pop_back();
      if (auto label = labels.find(target); label != labels.end()) {
        std::string body = isa.substr(label->second, end - label->second);
        int count = occurrences(body, "v_mfma") + occurrences(body, "v_wmma") + occurrences(body, "mma.sync");
        if (count > bestCount)
          best = body, bestCount = count;
      }
    }
    at = end + 1;
  }
  return best;
}

TEST(GpuCodegen, NvidiaMatmulLoopReadsTheNextTilesFragmentsDuringTheLastStep) {
  // The default loop is one basic block (a tile past the end copies zero bytes instead
  // of branching around its copies): it issues the copies, runs the first k step's
  // matrix instructions on fragments carried from the previous iteration, then waits,
  // meets the other warps once, reads the next tile's first fragments and runs the last
  // k step.
  for (const char *dtype : {"f16", "bf16", "i8"}) {
    Target target = Target::parse("cuda:sm_90");
    auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 4096, 4096, 4096, dtype));
    bool int8 = std::string(dtype) == "i8";
    std::string loop = mainLoopOf(stage(compileMatmul(target, dtype, config), "asm"));
    ASSERT_FALSE(loop.empty()) << dtype;
    EXPECT_EQ(occurrences(loop, "bra"), 1) << dtype << ": branches inside the main loop\n" << loop;
    EXPECT_EQ(occurrences(loop, "bar.sync"), 1) << dtype;
    EXPECT_GT(occurrences(loop, "cp.async.cg.shared.global"), 0) << dtype;
    size_t barrier = loop.find("bar.sync");
    EXPECT_LT(loop.find("mma.sync"), loop.find("cp.async.wait_group")) << dtype << ": a k step before the wait";
    EXPECT_NE(loop.find("mma.sync", barrier), std::string::npos) << dtype << ": a k step after the barrier";
    if (!int8)
      EXPECT_NE(loop.find("ldmatrix", barrier), std::string::npos) << dtype << ": next fragments after it";
    // With M, N and K multiples of 16 as well, runs are whole: each copy is all or
    // nothing through its ignore-src predicate, with no byte count selected at run time
    // and the bounds compared in 32 bits.
    config["divisibility_16"] = 0b111111;
    std::string whole = mainLoopOf(stage(compileMatmul(target, dtype, config), "asm"));
    EXPECT_GT(occurrences(whole, "cp.async.cg.shared.global"), 0) << dtype;
    EXPECT_EQ(occurrences(whole, "cp.async.cg.shared.global"), occurrences(whole, ", 16, %p"))
        << dtype << ": copies without the ignore-src predicate\n" << whole;
    EXPECT_EQ(occurrences(whole, "selp.b32") + occurrences(whole, "setp.lt.s64") + occurrences(whole, "setp.lt.u64"), 0)
        << dtype << ": run-time byte counts or 64-bit bound checks in the loop\n" << whole;
  }
}

TEST(GpuCodegen, AmdDefaultMatmulReadsFragmentsAndGlobalMemoryWide) {
  // Row-major a and b, as torch allocates them: b is n-contiguous, so its copy into LDS
  // transposes it in registers and every fragment is read along k with 64- or 128-bit
  // LDS reads; with the alignment and the sizes proven by the spec, every global load is
  // 16 bytes and every store at least 8. No scratch.
  for (const char *arch : {"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"})
    for (const char *dtype : {"f16", "bf16"}) {
      Target target = Target::parse(std::string("hip:") + arch);
      auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 4096, 4096, 4096, dtype));
      config["divisibility_16"] = 0b111111; // M, N, K multiples of 16 as well
      Binary binary = compileMatmul(target, dtype, config);
      const std::string &isa = stage(binary, "asm");
      std::string where = std::string(arch) + " " + dtype;
      for (const char *narrow : {"ds_read_u16", "ds_read_u8", "ds_read_i8", "ds_load_u16",
                                 "ds_load_u8", "ds_load_i8", "ds_read_b32", "ds_load_b32"})
        EXPECT_EQ(occurrences(isa, narrow), 0) << where << ": " << narrow;
      for (const char *narrow : {"global_load_ushort", "global_load_u16", "global_load_dword ",
                                 "global_load_dwordx2", "global_load_b32", "global_load_b64"})
        EXPECT_EQ(occurrences(isa, narrow), 0) << where << ": " << narrow;
      // C leaves in accesses of at least 8 bytes per lane (gfx11's lanes trade columns
      // first to hold runs of four).
      for (const char *narrow : {"global_store_short", "global_store_b16", "global_store_d16_hi_b16",
                                 "global_store_dword ", "global_store_b32"})
        EXPECT_EQ(occurrences(isa, narrow), 0) << where << ": " << narrow;
      EXPECT_EQ(binary.resources.scratchBytes, 0) << where;
      // In the K loop, the global loads of the next tile are issued before this tile's
      // matrix instructions (Triton's stream pipeliner order).
      std::string loop = mainLoopOf(isa);
      ASSERT_FALSE(loop.empty()) << where;
      size_t load = loop.find("global_load");
      size_t multiply = std::min(loop.find("v_mfma"), loop.find("v_wmma"));
      ASSERT_NE(multiply, std::string::npos) << where;
      EXPECT_LT(load, multiply) << where << ": the next tile's loads before this tile's MFMAs";
    }
}

TEST(GpuCodegen, AmdMatmulLoadsFromAScalarBaseWithThirtyTwoBitIndices) {
  // With 32-bit indices every offset from a tensor's pointer fits in 32 bits: the K
  // loop's global loads take the pointer in SGPRs and one VGPR of offset per lane
  // (global_load ... vN, s[..]), where a 64-bit address would take two VGPRs and 64-bit
  // adds. With 64-bit indices they keep 64-bit addresses.
  for (const char *arch : {"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"})
    for (int64_t indexBits : {32, 64}) {
      Target target = Target::parse(std::string("hip:") + arch);
      auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 4096, 4096, 4096, "f16"));
      config["divisibility_16"] = 0b111111;
      config["index_bits"] = indexBits;
      Binary binary = compileMatmul(target, "f16", config);
      std::string where = std::string(arch) + " index_bits=" + std::to_string(indexBits);
      std::string loop = mainLoopOf(stage(binary, "asm"));
      ASSERT_FALSE(loop.empty()) << where;
      std::istringstream lines(loop);
      int loads = 0, scalarBase = 0;
      for (std::string line; std::getline(lines, line);)
        if (line.find("global_load") != std::string::npos) {
          ++loads;
          scalarBase += line.find(", s[") != std::string::npos;
        }
      EXPECT_GT(loads, 0) << where;
      EXPECT_EQ(scalarBase, indexBits == 32 ? loads : 0) << where << "\n" << loop;
      // The ROCm tutorial's 128x128x32 config (gfx942's default) at Triton 3.9's
      // occupancy for it, 7 waves per SIMD, compiled offline.
      if (std::string(arch) == "gfx942" && indexBits == 32)
        EXPECT_GE(binary.resources.wavesPerSimd, 7) << where << " VGPRs " << binary.resources.vgprs;
    }
}

} // namespace

namespace {

TEST(GpuCodegen, NvidiaFloat32FollowsTheTf32Setting) {
  // allow_tf32 (the binding's copy of torch's float32 matmul precision) picks TF32
  // mma.sync m16n8k8 with inputs rounded by cvt.rna; without it f32 stays exact FMAs.
  for (const char *arch : {"sm_80", "sm_90"})
    for (int64_t tf32 : {0, 1}) {
      Target target = Target::parse(std::string("cuda:") + arch);
      auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 4096, 4096, 4096, "f32"));
      config["allow_tf32"] = tf32;
      auto context = createContext();
      auto module = ops::buildKernel(*context, {"matmul", {"f32", "f32"}, config});
      CompileOptions options = ops::compileOptionsFor({"matmul", {"f32", "f32"}, config});
      options.keepStages = true;
      Binary binary = compile(*module, target, options);
      const std::string &ptx = stage(binary, "asm");
      std::string where = std::string(arch) + (tf32 ? " tf32" : " ieee");
      int mma = occurrences(ptx, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
      int rounding = occurrences(ptx, "cvt.rna.tf32.f32");
      if (tf32) {
        // 128 x 128 x 16 over 8 warps (64 x 32 each): 4 x 4 tiles of m16n8, 2 k steps.
        EXPECT_EQ(mma, 32) << where;
        EXPECT_GT(rounding, 0) << where;
      } else {
        EXPECT_EQ(mma, 0) << where;
        EXPECT_EQ(rounding, 0) << where;
        EXPECT_NE(ptx.find("fma.rn.f32"), std::string::npos) << where;
      }
    }
}

} // namespace

namespace {

/// Scalar global loads of `bits` in an AMDGCN or PTX listing.
int scalarLoads(const std::string &isa, bool nvidia, int bits) {
  if (nvidia)
    return occurrences(isa, "ld.global.b" + std::to_string(bits) + " ") +
           occurrences(isa, "ld.global.b" + std::to_string(bits) + "\t");
  if (bits == 16)
    return occurrences(isa, "global_load_ushort") + occurrences(isa, "global_load_u16") +
           occurrences(isa, "global_load_short_d16") + occurrences(isa, "global_load_d16_b16") +
           occurrences(isa, "global_load_d16_hi_b16");
  return occurrences(isa, "global_load_dword ") + occurrences(isa, "global_load_b32 ");
}

TEST(GpuCodegen, BiasIsReadOncePerColumnOfEachThread) {
  // The bias block's rows all point at the same N entries. Each thread reads each of its
  // distinct columns once and shares it between the row tiles it owns (a gather would
  // read all of its accumulator's elements: 128 per thread at 128 x 128 over 4 warps):
  // - NVIDIA, 4 warps of 64 x 64: 8 column tiles of m16n8, 2 columns each per thread;
  // - gfx942, 8 waves as 4 x 2: 4 column tiles of 16, and a lane's 4 MFMA accumulator
  //   elements of a tile are in 4 columns (the instruction computes C^T);
  // - gfx1201, the same waves: 4 column tiles, 8 WMMA elements in 8 columns each.
  // Blocks whose columns are all inside N read at fixed offsets from one address, the
  // others check each column (on NVIDIA by a predicated load): each path once.
  struct Expect {
    const char *target;
    int64_t warps;
    int loads;
  };
  for (auto [targetName, warps, loads] :
       {Expect{"cuda:sm_90", 4, 2 * 8 * 2}, Expect{"hip:gfx942", 8, 4 * 4},
        Expect{"hip:gfx1201", 8, 4 * 8}}) {
    Target target = Target::parse(targetName);
    bool nvidia = target.kind == TargetKind::Cuda;
    auto config = rowMajorAligned(ops::defaultMatmulConfig(target, 4096, 4096, 4096, "f16"));
    config["num_warps"] = warps;
    config["unit_strides"] |= 1 << 6; // the bias's stride
    auto scalarLoadsOf = [&](const std::vector<std::string> &dtypes, int bits) {
      ops::KernelSpec spec{"matmul_leaky_relu", dtypes, config};
      auto context = createContext();
      auto module = ops::buildKernel(*context, spec);
      CompileOptions options = ops::compileOptionsFor(spec);
      options.keepStages = true;
      return scalarLoads(stage(compile(*module, target, options), "asm"), nvidia, bits);
    };
    for (const char *bias : {"f16", "f32"}) {
      int bits = std::string(bias) == "f16" ? 16 : 32;
      // The operands' edge paths have scalar loads of their own: count the bias's.
      int added = scalarLoadsOf({"f16", "f32", bias}, bits) - scalarLoadsOf({"f16", "f32"}, bits);
      EXPECT_EQ(added, loads) << targetName << " bias " << bias;
    }
  }
}

} // namespace
