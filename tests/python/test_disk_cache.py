"""The disk cache across processes: a second process loads what the first compiled; a
damaged entry (or one that does not load, or a FIFO, file or symlink in its place) is
recompiled and replaced, never loaded or read; concurrent first calls all succeed; an
unwritable folder only costs the disk cache.
"""

import hashlib
import json
import os
import shutil
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


def assert_one_entry_refused(cache, *phrases):
    """Runs a child on `cache`: it loads only the intact entry of two, and one warning holds
    every phrase. Returns the child's report."""
    report = run_child(cache)  # the child's own parity checks pass
    assert report["stats"]["disk_loads"] == 1
    assert any(all(phrase in w for phrase in phrases) for w in report["warnings"]), \
        report["warnings"]
    return report


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
    assert_one_entry_refused(cache, "recompiling")
    third = run_child(cache)  # the replacement entry is whole
    assert third["stats"]["disk_loads"] == 2


def entry_of(cache_dir, kernel_name):
    for entry in entries(cache_dir):
        if json.loads((entry / "meta.json").read_text())["kernel_name"] == kernel_name:
            return entry
    raise AssertionError(f"no entry of {kernel_name} in {cache_dir}")


def rewrite_payload(entry, payload):
    """Replaces the entry's binary with `payload`, its size and checksum made to match."""
    (entry / "binary").write_bytes(payload)
    meta = json.loads((entry / "meta.json").read_text())
    meta.update(size=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    (entry / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("name", ["binary", "meta.json"])
def test_fifo_in_an_entry_is_refused_not_read(tmp_path, name):
    # Reading a FIFO would block the process forever.
    cache = tmp_path / "cache"
    run_child(cache)
    victim = entries(cache)[0] / name
    victim.unlink()
    os.mkfifo(victim, 0o600)
    assert_one_entry_refused(cache, "not made of regular files")
    assert run_child(cache)["stats"]["disk_loads"] == 2  # replaced by a whole entry


@pytest.mark.parametrize("payload", ["garbage", "truncated_object", "other_kernel"])
def test_whole_entry_that_does_not_load_is_recompiled(tmp_path, payload):
    # Size and checksum match, so only loading the binary (or its names) can tell.
    cache = tmp_path / "cache"
    run_child(cache)
    victim = entry_of(cache, "matmul")
    if payload == "garbage":
        rewrite_payload(victim, os.urandom(4096))
    elif payload == "truncated_object":
        rewrite_payload(victim, (victim / "binary").read_bytes()[:200])
    else:
        other = entry_of(cache, "vector_add")
        rewrite_payload(victim, (other / "binary").read_bytes())
        meta = json.loads((victim / "meta.json").read_text())
        other_meta = json.loads((other / "meta.json").read_text())
        meta.update(kernel_name=other_meta["kernel_name"], entry_symbol=other_meta["entry_symbol"])
        (victim / "meta.json").write_text(json.dumps(meta))
    assert_one_entry_refused(cache, "does not load", "recompiling")
    third = run_child(cache)
    assert third["stats"]["disk_loads"] == 2, "the entry was stored again, whole"
    assert not third["warnings"]


@pytest.mark.parametrize("kind", ["file", "fifo", "symlink"])
def test_non_folder_in_place_of_an_entry_is_replaced(tmp_path, kind):
    cache = tmp_path / "cache"
    run_child(cache)
    victim = entries(cache)[0]
    shutil.rmtree(victim)
    outside = tmp_path / "outside"
    outside.write_text("not ours to remove")
    if kind == "file":
        victim.write_text("x")
    elif kind == "fifo":
        os.mkfifo(victim, 0o600)
    else:
        victim.symlink_to(outside)
    assert_one_entry_refused(cache, "is not a folder")
    assert outside.read_text() == "not ours to remove"
    assert run_child(cache)["stats"]["disk_loads"] == 2


def test_leftovers_of_killed_writers_are_swept(tmp_path):
    # A writer killed between its mkdir and its rename leaves <entry>.tmp.<pid>.<n> (or
    # <entry>.removed.<pid>); the next store in that folder removes those of dead pids.
    cache = tmp_path / "cache"
    run_child(cache)
    victim = entries(cache)[0]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    stale = [victim.parent / f"{victim.name}.tmp.{dead_pid}.1",
             victim.parent / f"{victim.name}.removed.{dead_pid}"]
    live = victim.parent / f"{victim.name}.tmp.{os.getpid()}.1"  # a writer still running
    for folder in stale + [live]:
        folder.mkdir(mode=0o700)
        (folder / "binary").write_bytes(b"half")
    shutil.rmtree(victim)  # the next child stores this entry again
    run_child(cache)
    assert not any(folder.exists() for folder in stale)
    assert live.exists()


def test_full_disk_warns_once_and_the_ops_still_work(tmp_path):
    # A tmpfs too small for the entries (one page: a kernel's binary and meta file take
    # two); needs the right to mount (skipped elsewhere).
    cache = tmp_path / "cache"
    cache.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(cache)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        report = run_child(cache)  # the child's own parity checks pass
        full = [w for w in report["warnings"] if "is full" in w]
        assert len(full) == 1, report["warnings"]
        assert not list(cache.glob("*/*.tmp.*")), "no temporary folder is left behind"
    finally:
        subprocess.run(["umount", str(cache)], check=True)


def test_entry_writable_by_others_is_not_loaded(tmp_path):
    cache = tmp_path / "cache"
    run_child(cache)
    victim = entries(cache)[0] / "binary"
    victim.chmod(0o666)
    assert_one_entry_refused(cache, "writable by others")


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
