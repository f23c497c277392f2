"""The disk cache's permission and ownership cases run as an unprivileged user (nobody, by
setpriv), where the checks that root passes trivially apply: a read-only cache folder, a
folder of another user holding entries, an entry writable by the group, and a FIFO in an
entry. None may crash or hang, none may load another user's bytes, and the ops stay right.

Skipped, with the reason, where the tests do not run as root, where setpriv is missing, or
where no Python an unprivileged user may run can import this one's packages (pyenv's
interpreter under /root, for one: another interpreter of the same version is tried).
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from test_disk_cache import CHILD, entries, run_child

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534


def _unprivileged_runner(home):
    """A function (cache folder) -> child report that runs CHILD as nobody, with `home` as
    its HOME; or the reason why none can."""
    if os.geteuid() != 0:
        return None, "not running as root: the other disk-cache tests run unprivileged already"
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None, "setpriv is not installed"
    path = os.pathsep.join([str(ROOT / "python"), sysconfig.get_paths()["purelib"]])
    version = f"{sys.version_info.major}.{sys.version_info.minor}"

    def command(python, code):
        return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, "-c", code]

    def environment(cache_dir):
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "PYTHONPATH": path,
                "TILE_CACHE_DIR": str(cache_dir)}

    tried = []
    for python in dict.fromkeys([sys.executable, f"/usr/bin/python{version}",
                                 f"/usr/local/bin/python{version}"]):
        if not os.path.exists(python):
            continue
        probe = subprocess.run(command(python, "import torch_tile"), env=environment(home),
                               capture_output=True, text=True, timeout=300)
        if probe.returncode == 0:
            def run(cache_dir, python=python):
                result = subprocess.run(command(python, CHILD), env=environment(cache_dir),
                                        capture_output=True, text=True, timeout=300)
                assert result.returncode == 0, result.stderr
                report = json.loads(result.stdout.strip().splitlines()[-1])
                report["warnings"] = [line for line in result.stderr.splitlines()
                                      if line.startswith("torch-tile: warning:")]
                return report
            return run, None
        tried.append(f"{python}: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    return None, "no Python an unprivileged user can run imports torch_tile (" + "; ".join(tried) + ")"


@pytest.fixture(scope="module")
def as_nobody():
    home = tempfile.mkdtemp(prefix="tile-nobody-home-")
    os.chmod(home, 0o777)
    run, why = _unprivileged_runner(home)
    if run is None:
        shutil.rmtree(home, ignore_errors=True)
        pytest.skip(why)
    yield run
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def base():
    """A folder nobody may enter (pytest's own tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="tile-cache-cases-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def cache_of_nobody(base):
    """An empty cache folder of nobody's (its parent is root's)."""
    cache = base / "cache"
    cache.mkdir(mode=0o700)
    os.chown(cache, NOBODY, NOBODY)
    return cache


def test_read_only_folder_of_ones_own_costs_only_the_disk_cache(as_nobody, base):
    cache = cache_of_nobody(base)
    cache.chmod(0o500)
    report = as_nobody(cache)  # the child checks its results against torch
    assert report["stats"]["disk_loads"] == 0
    assert [w for w in report["warnings"] if "not writable" in w], report["warnings"]
    assert not list(cache.iterdir())


def test_folder_of_another_user_is_neither_loaded_nor_written(as_nobody, base):
    cache = base / "cache"
    run_child(cache)  # root's entries
    for folder, dirs, files in os.walk(cache):  # readable by all, so that only ownership refuses them
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    before = {e: (e / "binary").read_bytes() for e in entries(cache)}
    report = as_nobody(cache)
    assert report["stats"]["disk_loads"] == 0
    assert [w for w in report["warnings"] if "not owned by this user" in w], report["warnings"]
    assert {e: (e / "binary").read_bytes() for e in entries(cache)} == before


def test_entry_writable_by_the_group_is_not_loaded(as_nobody, base):
    cache = cache_of_nobody(base)
    assert as_nobody(cache)["stats"]["disk_loads"] == 0  # nobody's own entries
    stored = entries(cache)
    assert len(stored) == 2 and all(e.stat().st_uid == NOBODY for e in stored)
    assert as_nobody(cache)["stats"]["disk_loads"] == 2
    victim = stored[0] / "binary"
    victim.chmod(0o660)
    report = as_nobody(cache)
    assert report["stats"]["disk_loads"] == 1
    assert [w for w in report["warnings"] if "writable by others" in w], report["warnings"]


def test_fifo_in_an_entry_is_refused_not_read(as_nobody, base):
    # Reading a FIFO would block the process forever (the child has a time limit).
    cache = cache_of_nobody(base)
    as_nobody(cache)
    victim = entries(cache)[0] / "binary"
    victim.unlink()
    os.mkfifo(victim, 0o600)
    os.chown(victim, NOBODY, NOBODY)
    report = as_nobody(cache)
    assert report["stats"]["disk_loads"] == 1
    assert [w for w in report["warnings"] if "not made of regular files" in w], report["warnings"]
    assert as_nobody(cache)["stats"]["disk_loads"] == 2  # replaced by a whole entry
