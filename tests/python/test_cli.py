"""`python -m torch_tile compile`: every target compiles offline, files land in --out.

Nothing here runs a kernel on a GPU; the HSACO and PTX are checked as files.
"""

import json
import os
import shutil
import struct
import subprocess
import sys

import torch

import pytest

AMD = {  # arch -> ELF e_flags machine (EF_AMDGPU_MACH_*)
    "gfx90a": 0x3F, "gfx942": 0x4C, "gfx950": 0x4F, "gfx1100": 0x41, "gfx1201": 0x4E,
}
EM_AMDGPU = 224


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "torch_tile", "compile", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("arch", sorted(AMD))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_vector_add_for_amd(tmp_path, arch, dtype):
    result = run_cli("--op", "vector_add", "--dtype", dtype, "--target", f"hip:{arch}",
                     "--emit", "asm", "bin", "report", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    hsaco = (tmp_path / "vector_add.hsaco").read_bytes()
    assert hsaco[:4] == b"\x7fELF"
    e_type, e_machine = struct.unpack_from("<HH", hsaco, 16)
    (e_flags,) = struct.unpack_from("<I", hsaco, 48)
    assert (e_type, e_machine) == (3, EM_AMDGPU)  # ET_DYN: HSACOs are shared objects
    assert e_flags & 0xFF == AMD[arch]
    isa = (tmp_path / "vector_add.amdgcn.s").read_text()
    assert f".amdgcn_target \"amdgcn-amd-amdhsa--{arch}" in isa
    assert ("global_load_b128" if arch.startswith("gfx1") else "global_load_dwordx4") in isa
    report = dict(line.split(": ", 1) for line in
                  (tmp_path / "vector_add.report.txt").read_text().splitlines()[1:])
    assert report["arch"] == arch
    assert int(report["vgprs"]) > 0 and int(report["scratch_bytes"]) == 0
    assert 1 <= int(report["waves_per_simd"]) <= 16


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
def test_vector_add_for_nvidia(tmp_path, arch):
    result = run_cli("--op", "vector_add", "--dtype", "float32", "--target", f"cuda:{arch}",
                     "--emit", "bin", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    ptx = (tmp_path / "vector_add.ptx").read_text()
    assert f".target {arch}" in ptx and ".entry vector_add" in ptx
    assert "ld.global.v4.b32" in ptx


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH: no NVIDIA register report")
def test_nvidia_report_reads_registers_and_occupancy_from_ptxas(tmp_path):
    # 128x256x64 over two warpgroups with four 48 KiB stages: over 200 registers and
    # 192 KiB of shared memory per block, so one block per SM.
    result = run_cli("--op", "matmul", "--dtype", "float16", "--target", "cuda:sm_90a",
                     "--config", '{"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, '
                     '"num_stages": 4}', "--emit", "report", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    report = dict(line.split(": ", 1) for line in
                  (tmp_path / "matmul.report.txt").read_text().splitlines()[1:])
    assert report["arch"] == "sm_90a"
    assert 128 < int(report["registers"]) <= 255
    assert int(report["spill_bytes"]) == 0
    assert int(report["lds_bytes"]) >= 4 * (128 + 256) * 64 * 2
    assert int(report["blocks_per_sm"]) == 1


def test_matmul_for_the_host_with_a_config(tmp_path):
    result = run_cli("--op", "matmul_leaky_relu", "--dtype", "float16", "--out-dtype", "float32",
                     "--config", '{"BLOCK_M": 8, "BLOCK_K": 32}', "--emit", "tile", "asm", "bin",
                     "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "tile.dot" in (tmp_path / "matmul_leaky_relu.tile.mlir").read_text()
    assert (tmp_path / "matmul_leaky_relu.o").read_bytes()[:4] == b"\x7fELF"
    assert "vfmadd" in (tmp_path / "matmul_leaky_relu.s").read_text()


@pytest.mark.parametrize("args, message", [
    (["--target", "hip:gfx803"], "gfx803"),
    (["--target", "hip:gfx942", "--config", '{"num_warps": 32}'], "1024"),
    (["--config", "{not json"], "not JSON"),
    (["--config", '{"BLOCK_SIZE": 100}'], "power of two"),
    # LLVM would end the process on an unknown CPU name: refused before it sees it.
    (["--target", "cpu:nonsense"], "unknown CPU 'nonsense'"),
    (["--config", '{"block_size": 64}'], "has no knob block_size"),
    (["--dtype", "int8"], "floating-point"),
])
def test_bad_requests_say_what_is_wrong(tmp_path, args, message):
    result = run_cli("--op", "vector_add", "--dtype", "float32", "--emit", "asm",
                     "--out", str(tmp_path), *args)
    assert result.returncode > 0, "an error exit, not a signal"
    assert message in result.stderr
    assert "LLVM ERROR" not in result.stderr


def test_unknown_cpu_is_an_exception_the_process_survives():
    import torch

    import torch_tile  # noqa: F401  (registers the ops)

    names, values = torch.ops.tile_runtime.default_config("vector_add", "cpu", "float32")
    with pytest.raises(RuntimeError, match="unknown CPU 'nonsense'"):
        torch.ops.tile_runtime.compile_offline("vector_add", ["f32"], names, values, "cpu:nonsense")
    # The next compile in the same process works.
    stages, texts, _, _ = torch.ops.tile_runtime.compile_offline("vector_add", ["f32"], names,
                                                                  values, "cpu:x86-64-v3")
    assert "asm" in stages


@pytest.mark.parametrize("target, instruction", [("hip:gfx942", "v_mfma"), ("hip:gfx1100", "v_wmma"),
                                                 ("cuda:sm_90a", "wgmma.mma_async"), ("cpu", "vfmadd")])
def test_leaky_relu_backward_compiles_offline(tmp_path, target, instruction):
    # The GEMM with leaky_relu's backward in its epilogue, its activation in float32 (the
    # output dtype of a float16 call with out_dtype=float32).
    result = run_cli("--op", "matmul_leaky_relu_backward", "--dtype", "float16", "--out-dtype",
                     "float32", "--activation-dtype", "float32", "--target", target, "--emit",
                     "tile", "asm", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    tile_ir = (tmp_path / "matmul_leaky_relu_backward.tile.mlir").read_text()
    assert "tile.dot" in tile_ir and "arith.select" in tile_ir
    asm = next(p for p in tmp_path.iterdir() if not p.name.endswith(".mlir")).read_text()
    assert instruction in asm


@pytest.mark.parametrize("args, message", [
    (["--bias-dtype", "float16"], "takes no bias"),
    (["--activation-dtype", "bfloat16"], "must be the input or the output dtype"),
])
def test_leaky_relu_backward_refuses_what_it_cannot_take(tmp_path, args, message):
    result = run_cli("--op", "matmul_leaky_relu_backward", "--dtype", "float16", "--emit", "tile",
                     "--out", str(tmp_path), *args)
    assert result.returncode > 0 and message in result.stderr


def test_int8_matmul_needs_an_out_dtype(tmp_path):
    result = run_cli("--op", "matmul", "--dtype", "int8", "--emit", "tile", "--out", str(tmp_path))
    assert result.returncode != 0
    assert "--out-dtype int32" in result.stderr


def test_env_reports_versions_targets_drivers_and_cache(tmp_path):
    env = dict(os.environ, TILE_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "-m", "torch_tile", "env"], capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"torch           : {torch.__version__}" in out
    assert "host target     : cpu:" in out
    assert "HIP runtime     : " in out and "CUDA driver     : " in out
    # Each driver line names the library it loaded or every place it looked.
    for line in out.splitlines():
        if line.startswith(("HIP runtime", "CUDA driver")):
            assert "/" in line or "tried:" in line, line
    assert f"kernel cache    : {tmp_path / 'cache'}" in out


@pytest.mark.parametrize("arch,instruction", [("gfx942", "v_mfma_f32_16x16x16_f16"),
                                               ("gfx1100", "v_wmma_f32_16x16x16_f16"),
                                               ("gfx1201", "v_wmma_f32_16x16x16_f16")])
def test_every_rocm_tutorial_candidate_compiles_for_amd(tmp_path, arch, instruction):
    # The hip autotuning list keeps the ROCm tutorial's configs as written, num_stages=0
    # included: older ROCm Triton's spelling of its stream pipeliner, compiled as
    # num_stages=2 (one LDS buffer per operand, the next tile prefetched into registers).
    from torch_tile import config

    for index, candidate in enumerate(config.autotune_configs["matmul"]["hip"]):
        out = tmp_path / str(index)
        result = run_cli("--op", "matmul", "--dtype", "float16", "--target", f"hip:{arch}",
                         "--config", json.dumps(candidate), "--emit", "asm", "report",
                         "--out", str(out))
        assert result.returncode == 0, (candidate, result.stderr)
        isa = (out / "matmul.amdgcn.s").read_text()
        assert instruction in isa
        report = dict(line.split(": ", 1) for line in
                      (out / "matmul.report.txt").read_text().splitlines()[1:])
        tile_bytes = (candidate["BLOCK_M"] + candidate["BLOCK_N"]) * candidate["BLOCK_K"] * 2
        assert int(report["lds_bytes"]) == tile_bytes, candidate  # one buffer per operand
        assert int(report["scratch_bytes"]) == 0, (arch, candidate)
        assert int(report["vgpr_spills"]) == 0, (arch, candidate)
        # The configs are written for CDNA's 64-lane waves. In RDNA's wave32, an f32
        # accumulator that would take half of a wave's 256 VGPRs runs on twice the waves.
        threads = candidate["num_warps"] * 64
        if arch != "gfx942":
            lanes = candidate["num_warps"] * 32
            splits = candidate["BLOCK_M"] * candidate["BLOCK_N"] // lanes >= 128
            threads = lanes * (2 if splits else 1)
        assert int(report["block_threads"]) == threads, (arch, candidate)


def test_help_works_before_the_native_library_is_built(tmp_path):
    # The package without its lib/ folder, as a fresh clone has it before `make`.
    import shutil

    import torch_tile
    package = tmp_path / "torch_tile"
    shutil.copytree(os.path.dirname(torch_tile.__file__), package,
                    ignore=shutil.ignore_patterns("lib", "__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    for args in (["--help"], ["compile", "--help"]):
        result = subprocess.run([sys.executable, "-m", "torch_tile", *args], capture_output=True,
                                text=True, timeout=120, env=env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        for word in ("compile", "env", "hip:", "gfx942", "cuda:sm_", "BLOCK_M", "BLOCK_SIZE"):
            assert word in result.stdout, (args, word)
    # Anything but the help still needs the library, and says so.
    result = subprocess.run([sys.executable, "-m", "torch_tile", "env"], capture_output=True,
                            text=True, timeout=120, env=env, cwd=tmp_path)
    assert result.returncode != 0 and "native library is missing" in result.stderr


def test_the_help_lists_the_librarys_own_knobs_and_targets():
    from torch_tile import cli
    listed = {op: set(names) for op, names in cli.KNOBS_HELP.items()}
    for op, key in (("matmul", cli.MATMULS), ("matmul_leaky_relu", cli.MATMULS),
                    ("matmul_leaky_relu_backward", cli.MATMULS), ("vector_add", "vector_add")):
        known = set()
        for target in ("cpu", "hip:gfx942", "cuda:sm_90"):
            known |= set(torch.ops.tile_runtime.default_config(op, target, "f16")[0])
        if op != "vector_add":
            known |= set(cli.EXTRA_MATMUL_KNOBS)
        assert listed[key] == known, (op, sorted(known))
    for arch in AMD:
        assert arch in cli.TARGETS_HELP
        torch.ops.tile_runtime.default_config("matmul", f"hip:{arch}", "f16")
    for arch in ("sm_80", "sm_90", "sm_90a"):
        assert arch in cli.TARGETS_HELP
        torch.ops.tile_runtime.default_config("matmul", f"cuda:{arch}", "f16")


def test_selftest_passes_and_writes_its_report(tmp_path):
    report = tmp_path / "selftest.json"
    result = subprocess.run([sys.executable, "-m", "torch_tile", "selftest", "--cases", "12",
                             "--json", str(report)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict: PASS" in result.stdout
    data = json.loads(report.read_text())
    assert data["verdict"] == "PASS" and data["failures"] == []
    # 12 random cases, the aligned shapes at each dtype pair drawn, 12 vector_adds.
    assert data["checks"] > 12 + 12
    assert data["environment"]["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert {row["op"] for row in data["speed"]} == {"matmul", "vector_add"}
    assert all(row["tile_over_torch"] > 0 for row in data["speed"])


def test_selftest_reports_a_mismatch_with_a_reproducer(tmp_path, monkeypatch):
    from torch_tile import selftest

    def wrong(case, a, b, bias=None):  # a kernel that is off by one everywhere
        from torch_tile.testing import run
        return run(case, a, b, bias) + 1
    monkeypatch.setattr(selftest, "run", wrong)
    report = tmp_path / "selftest.json"
    assert selftest.selftest(cases_count=3, json_path=str(report), speed=False) == 1
    data = json.loads(report.read_text())
    assert data["verdict"] == "FAIL"
    matmul_failures = [f for f in data["failures"] if f["case"].startswith("matmul")]
    assert matmul_failures and all("reproducer" in f for f in matmul_failures)
    # The reproducer runs on its own and fails the same way only with the broken kernel:
    # with the real one it passes.
    exec(matmul_failures[0]["reproducer"], {})
