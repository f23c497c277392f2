"""The disk cache across processes: a second process loads what the first compiled; a
damaged entry is recompiled, never loaded; concurrent first calls all succeed; an
unwritable folder only costs the disk cache.
"""

import json
import os
import stat
import subprocess
import sys

import pytest

# One child process: runs the ops on fresh inputs, checks them against torch, and
# prints the cache counters. The cache's warnings go to its stderr.
CHILD = r"""
import json, torch
import torch_tile
from torch_tile import runtime
a, b = torch.randn(5000), torch.randn(5000)
assert torch.equal(torch.ops.tile.vector_add(a, b), a + b)
x, w = torch.randn(33, 17), torch.randn(17, 9)
ref = (x.double() @ w.double())
err = ((torch.ops.tile.matmul(x, w).double() - ref).norm() / ref.norm()).item()
assert err < 1e-5, err
print(json.dumps({"stats": runtime.cache_stats(), "dir": runtime.cache_dir()}))
"""


def run_child(cache_dir):
    env = dict(os.environ, TILE_CACHE_DIR=str(cache_dir))
    result = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    report["warnings"] = [line for line in result.stderr.splitlines()
                          if line.startswith("torch-tile: warning:")]
    return report


def entries(cache_dir):
    return sorted(p for p in cache_dir.glob("*/*") if p.is_dir())


def test_second_process_loads_what_the_first_compiled(tmp_path):
    cache = tmp_path / "cache"
    first = run_child(cache)
    assert first["dir"] == str(cache)
    assert first["stats"]["disk_loads"] == 0
    stored = entries(cache)
    assert len(stored) == 2  # vector_add and matmul, one host target folder
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    for entry in stored:
        assert (entry / "binary").stat().st_size > 0
        meta = json.loads((entry / "meta.json").read_text())
        assert meta["key"] == entry.name and meta["size"] == (entry / "binary").stat().st_size
    mtimes = [(e / "binary").stat().st_mtime_ns for e in stored]

    second = run_child(cache)
    assert second["stats"]["disk_loads"] == 2
    assert [(e / "binary").stat().st_mtime_ns for e in entries(cache)] == mtimes
    assert not second["warnings"]


@pytest.mark.parametrize("damage", ["corrupt", "truncate", "drop_meta"])
def test_damaged_entry_is_recompiled_not_loaded(tmp_path, damage):
    cache = tmp_path / "cache"
    run_child(cache)
    victim = entries(cache)[0]
    binary = victim / "binary"
    if damage == "corrupt":
        data = bytearray(binary.read_bytes())
        data[len(data) // 2] ^= 0xFF
        binary.write_bytes(bytes(data))
    elif damage == "truncate":
        binary.write_bytes(binary.read_bytes()[:100])
    else:
        (victim / "meta.json").unlink()
    again = run_child(cache)  # the child's own parity checks pass
    assert again["stats"]["disk_loads"] == 1  # only the intact entry was loaded
    assert any("recompiling" in w for w in again["warnings"]), again["warnings"]
    third = run_child(cache)  # the replacement entry is whole
    assert third["stats"]["disk_loads"] == 2


def test_entry_writable_by_others_is_not_loaded(tmp_path):
    cache = tmp_path / "cache"
    run_child(cache)
    victim = entries(cache)[0] / "binary"
    victim.chmod(0o666)
    again = run_child(cache)
    assert again["stats"]["disk_loads"] == 1
    assert any("writable by others" in w for w in again["warnings"]), again["warnings"]


def test_concurrent_first_calls_all_succeed(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, TILE_CACHE_DIR=str(cache))
    children = [subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
    assert len(entries(cache)) == 2
    assert not list(cache.glob("*/*.tmp.*")), "no temporary folder is left behind"
    assert run_child(cache)["stats"]["disk_loads"] == 2


def test_unwritable_folder_costs_only_the_disk_cache(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run_child(blocker / "cache")
    assert result["stats"]["disk_loads"] == 0
    warned = [w for w in result["warnings"] if "not writable" in w]
    assert len(warned) == 1, result["warnings"]
    assert "TILE_CACHE_DIR" in warned[0]
