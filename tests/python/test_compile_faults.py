"""Compiler faults stay inside the compile. At each stage, a fault injected by the test hook
TILE_TEST_INJECT_FAULT becomes a Python exception that names the kernel and what failed;
the process goes on, nothing of the failed compile is cached, and the same call without the
fault compiles and runs. LLVM's fatal errors (report_fatal_error) included."""

import pytest
import torch

from torch_tile import config, runtime

# What each stage's failure says, on the CPU and on a GPU target compiled offline.
CPU_FAILURES = {
    "verify": "invalid tile IR",
    "lowering": "lowering tile -> tile-cpu failed",
    "translation": "translation to LLVM IR failed",
    "resources": "bytes of registers",
    "backend": "backend rejected the kernel",
    "fatal": "LLVM fatal error at the code generation stage",
}
GPU_FAILURES = dict(CPU_FAILURES, lowering="lowering tile -> tile-gpu failed",
                    resources="bytes of LDS per workgroup")


def cached_kernels(root):
    return sorted(path.parent for path in root.rglob("binary"))


@pytest.mark.parametrize("stage", list(CPU_FAILURES))
def test_a_fault_at_each_stage_is_an_exception_and_the_next_call_heals(tmp_path, monkeypatch, stage):
    a, b = torch.randn(37, 29), torch.randn(29, 41)
    with config.patch(cache_dir=tmp_path):
        runtime.clear_cache()
        monkeypatch.setenv("TILE_TEST_INJECT_FAULT", stage)
        with pytest.raises(RuntimeError) as raised:
            torch.ops.tile.matmul(a, b)
        message = str(raised.value)
        assert CPU_FAILURES[stage] in message, message
        assert "cannot compile matmul[" in message, message
        assert f"TILE_TEST_INJECT_FAULT={stage}" in message or stage == "resources", message
        assert cached_kernels(tmp_path) == [], "the failed compile left a cache entry"

        monkeypatch.delenv("TILE_TEST_INJECT_FAULT")
        out = torch.ops.tile.matmul(a, b)
        torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
        assert len(cached_kernels(tmp_path)) == 1
    runtime.clear_cache()


@pytest.mark.parametrize("stage", list(GPU_FAILURES))
def test_gpu_compiles_contain_their_faults_too(monkeypatch, stage):
    # Offline, as for an AMD GPU this machine does not have.
    names, values = torch.ops.tile_runtime.default_config("matmul", "hip:gfx942", "f16")

    def compile_gfx942():
        return torch.ops.tile_runtime.compile_offline("matmul", ["f16", "f16"], names, values,
                                                      "hip:gfx942")

    monkeypatch.setenv("TILE_TEST_INJECT_FAULT", stage)
    with pytest.raises(RuntimeError, match="cannot compile matmul") as raised:
        compile_gfx942()
    assert GPU_FAILURES[stage] in str(raised.value), str(raised.value)
    monkeypatch.delenv("TILE_TEST_INJECT_FAULT")
    assert compile_gfx942() is not None


def test_faults_outside_the_named_stages_are_not_injected(monkeypatch):
    monkeypatch.setenv("TILE_TEST_INJECT_FAULT", "nowhere")
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    torch.testing.assert_close(torch.ops.tile.matmul(a, b), a @ b, rtol=1e-4, atol=1e-4)
