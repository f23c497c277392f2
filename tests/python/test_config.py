"""torch_tile.config: options, TILE_* environment overrides, patch() scoping, and the
settings the C++ runtime acts on (cache and dump folders)."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_tile
from torch_tile import config, runtime

ROOT = Path(__file__).resolve().parents[2]


def run_python(code, **env):
    """Runs `code` in a fresh interpreter with extra environment variables."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), **env)
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                          text=True, timeout=300)


def test_defaults_and_the_amd_candidates_of_the_rocm_tutorial():
    assert config.autotune is False
    hip = config.autotune_configs["matmul"]["hip"]
    assert {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 16, "GROUP_M": 1, "waves_per_eu": 2,
            "num_warps": 4, "num_stages": 0, "matrix_instr_nonkdim": 16, "kpack": 1} in hip
    assert any(c["BLOCK_M"] == 256 and c["BLOCK_N"] == 256 and c["GROUP_M"] == 4
               and c["num_warps"] == 8 for c in hip)
    assert set(config.autotune_configs["matmul"]) == {"cpu", "hip", "cuda"}
    assert "autotune" in dir(config) and "autotune = False" in config.describe()


def test_patch_scopes_a_with_block_and_restores_on_error():
    with config.patch(autotune=True):
        assert config.autotune is True
        with config.patch({"autotune": False, "autotune_progress_after": 3}):
            assert config.autotune is False and config.autotune_progress_after == 3.0
        assert config.autotune is True and config.autotune_progress_after == 1.0
    assert config.autotune is False
    with pytest.raises(RuntimeError, match="inside"):
        with config.patch(autotune=True):
            raise RuntimeError("inside")
    assert config.autotune is False


def test_patch_as_a_decorator():
    @config.patch(autotune=True)
    def inside():
        return config.autotune

    assert inside() is True and inside() is True
    assert config.autotune is False


def test_bad_options_are_named():
    configs_before = copy.deepcopy(config.autotune_configs)
    with pytest.raises(AttributeError, match="no option 'autotnue'"):
        config.autotnue = True
    with pytest.raises(AttributeError, match="no option 'nope'"):
        config.patch(nope=1)
    with pytest.raises(TypeError, match="autotune must be a bool"):
        config.autotune = "yes"
    with pytest.raises(ValueError, match="unknown knob 'BLOCK_Q'"):
        config.autotune_configs = {"matmul": {"cpu": [{"BLOCK_Q": 8}]}}
    with pytest.raises(ValueError, match="no target family 'tpu'"):
        config.autotune_configs = {"matmul": {"tpu": [{"BLOCK_M": 8}]}}
    with pytest.raises(ValueError, match="no tunable op 'conv'"):
        config.autotune_configs = {"conv": {}}
    # A failed set leaves the option as it was.
    assert config.autotune is False
    assert config.autotune_configs == configs_before


def test_a_failed_patch_restores_what_it_had_set():
    with pytest.raises(TypeError):
        with config.patch(autotune=True, autotune_progress_after="soon"):
            pass
    assert config.autotune is False


def test_environment_overrides():
    configs = '{"matmul": {"cpu": [{"BLOCK_M": 4, "BLOCK_N": 16}]}}'
    result = run_python(
        "import torch_tile; c = torch_tile.config;"
        "print(c.autotune, c.autotune_progress_after, c.autotune_configs['matmul']['cpu'])",
        TILE_AUTOTUNE="1", TILE_AUTOTUNE_PROGRESS_AFTER="2.5", TILE_AUTOTUNE_CONFIGS=configs)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True 2.5 [{'BLOCK_M': 4, 'BLOCK_N': 16}]"


@pytest.mark.parametrize("variable, text", [
    ("TILE_AUTOTUNE", "maybe"), ("TILE_AUTOTUNE_PROGRESS_AFTER", "nan"),
    ("TILE_AUTOTUNE_PROGRESS_AFTER", "-1"), ("TILE_AUTOTUNE_PROGRESS_AFTER", "soon"),
])
def test_a_bad_environment_value_names_the_variable(variable, text):
    result = run_python("import torch_tile", **{variable: text})
    assert result.returncode != 0
    assert f"{variable}={text!r}" in result.stderr


@pytest.mark.parametrize("seconds", [float("nan"), -0.5])
def test_progress_after_takes_seconds_not_nan(seconds):
    with pytest.raises(ValueError, match="seconds >= 0"):
        config.autotune_progress_after = seconds
    assert config.autotune_progress_after == 1.0
    config.autotune_progress_after = float("inf")  # never
    config.autotune_progress_after = 1.0


def test_cache_dir_moves_the_disk_cache(tmp_path):
    a, b = torch.randn(24, 40), torch.randn(40, 8)
    before = runtime.cache_dir()
    with config.patch(cache_dir=tmp_path / "cache"):
        assert runtime.cache_dir() == str(tmp_path / "cache")
        runtime.clear_cache()
        torch.testing.assert_close(torch.ops.tile.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
        entries = list((tmp_path / "cache").glob("*/*/binary"))
        assert entries, "no kernel was stored in the patched cache_dir"
    assert runtime.cache_dir() == before


def test_dump_dir_writes_every_stage(tmp_path):
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    with config.patch(dump_dir=tmp_path):
        runtime.clear_cache()
        torch.testing.assert_close(torch.ops.tile.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
    folders = [p for p in tmp_path.glob("cpu-*/matmul-*") if p.is_dir()]
    assert folders, list(tmp_path.rglob("*"))
    names = {p.name for p in folders[0].iterdir()}
    assert {"spec.txt", "tile.mlir", "tile-cpu.mlir", "llvm.ll", "asm.s"} <= names
    assert "tile.dot" in (folders[0] / "tile.mlir").read_text()
    assert "matmul[f32,f32]" in (folders[0] / "spec.txt").read_text()
    # Off again: nothing more is written.
    runtime.clear_cache()
    torch.ops.tile.matmul(a, b)
    assert len([p for p in tmp_path.glob("cpu-*/matmul-*")]) == len(folders)


def test_torch_tile_exports_config():
    assert torch_tile.config is config


def test_leaving_an_op_out_of_autotune_configs_drops_its_candidates(tmp_path):
    before = runtime.autotune_stats()
    with config.patch(autotune=True, cache_dir=tmp_path, autotune_configs={}):
        a = torch.randn(48, 48)
        torch.testing.assert_close(torch.ops.tile.matmul(a, a), a @ a, rtol=1e-5, atol=1e-5)
    assert runtime.autotune_stats()["benchmarked"] == before["benchmarked"]


@pytest.mark.parametrize("text, problem", [("garbage", "unknown target"),
                                           ("cpu:nonsense", "a CPU other than this host")])
def test_tile_target_that_is_no_target_or_another_cpu_is_refused_on_the_cpu(monkeypatch, text,
                                                                           problem):
    # CPU kernels always run on the host: TILE_TARGET is for GPU devices, and text that
    # cannot apply is named rather than ignored.
    monkeypatch.setenv("TILE_TARGET", text)
    a, b = torch.randn(5, 3), torch.randn(3, 4)
    with pytest.raises(ValueError, match=f"TILE_TARGET={text}.*{problem}"):
        torch.ops.tile.matmul(a, b)
    with pytest.raises(ValueError, match=f"TILE_TARGET={text}"):
        torch.ops.tile.vector_add(a, a)


@pytest.mark.parametrize("text", ["hip:gfx942", "cuda:sm_90", "cpu", "cpu:native", "host"])
def test_tile_target_of_a_gpu_or_of_the_host_leaves_cpu_ops_working(monkeypatch, text):
    monkeypatch.setenv("TILE_TARGET", runtime.host_target() if text == "host" else text)
    a, b = torch.randn(5, 3), torch.randn(3, 4)
    torch.testing.assert_close(torch.ops.tile.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.ops.tile.vector_add(a, a), a + a)
