"""torch_tile.config.backend_matmul: "auto" puts a GEMM on tile only where the verdict of its
bucket says tile is faster, times a bucket once and keeps the verdict on disk for the next
process, survives a damaged verdict file; "always" and "never" pin the choice; Inductor's
caches never serve a graph decided under another setting or other verdicts.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._dynamo.utils import counters
from torch._inductor.utils import run_and_get_code

import torch_tile
from torch_tile import backend_choice, config, runtime
from torch_tile.graph_rewrites import TileRewritePass

from test_backend import training_step

ROOT = Path(__file__).resolve().parents[2]
F32 = torch.float32


@pytest.fixture(autouse=True)
def cache(tmp_path):
    """A disk cache of the test's own, no verdict or compiled graph from another test, and
    "auto" whatever the environment says. Yields the cache folder."""
    torch._dynamo.reset()
    runtime.clear_backend_verdicts()
    folder = tmp_path / "cache"
    with config.patch(backend_matmul="auto", cache_dir=folder), \
            torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        yield folder
    runtime.clear_backend_verdicts()
    torch_tile.inductor.uninstall()
    torch._dynamo.reset()


def relative_error(got, want):
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


def tile_calls(fn, *args):
    """The tile ops `fn` runs, as sorted (name, input shapes) pairs; `fn` is compiled
    already (tracing calls the ops' fake kernels, which the profiler lists too)."""
    with torch.profiler.profile(record_shapes=True) as profile:
        fn(*args)
    return sorted((event.name, [tuple(s) for s in event.input_shapes[:2]])
                  for event in profile.events() if event.name.startswith("tile::"))


def run_python(code, **env):
    full_env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), **env)
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                          text=True, timeout=300)


def two_gemms(x, w, y, v):
    return x @ w, y @ v


@pytest.mark.parametrize("tile_bucket", [64, 128])
def test_forced_verdicts_decide_which_gemms_become_tile(tile_bucket):
    runtime.set_backend_verdict("matmul", F32, (tile_bucket,) * 3, "tile")
    runtime.set_backend_verdict("matmul", F32, (192 - tile_bucket,) * 3, "aten")
    x, w = torch.randn(64, 64), torch.randn(64, 64)
    y, v = torch.randn(100, 120), torch.randn(120, 128)  # bucket 128x128x128
    compiled = torch.compile(two_gemms, backend="tile", fullgraph=True)
    got, (code,) = run_and_get_code(compiled, x, w, y, v)
    for g, want in zip(got, two_gemms(x, w, y, v), strict=True):
        assert relative_error(g, want) < 1e-5
    assert code.count("torch.ops.tile.matmul.default(") == 1
    assert code.count("extern_kernels.mm(") == 1

    before = runtime.cache_stats()
    calls = tile_calls(compiled, x, w, y, v)
    after = runtime.cache_stats()
    operands = [(64, 64), (64, 64)] if tile_bucket == 64 else [(100, 120), (120, 128)]
    assert calls == [("tile::matmul", operands)]
    assert after["hits"] + after["misses"] == before["hits"] + before["misses"] + 1
    assert runtime.backend_verdict_stats()["timed"] == 0


@pytest.mark.parametrize("fusion", ["tile", "aten"])
def test_the_fusion_and_addmm_follow_verdicts_of_their_own(fusion):
    # The fused op has its own verdict: where it loses, the mm it would have fused is still
    # judged as a plain matmul. Linear's addmm reads its weight transposed (layout NT).
    runtime.set_backend_verdict("matmul_leaky_relu", F32, (32, 64, 48), fusion)
    runtime.set_backend_verdict("matmul", F32, (32, 64, 48), "tile")
    runtime.set_backend_verdict("matmul", F32, (32, 16, 64), "tile", layout="NT", bias=True)
    linear = nn.Linear(64, 16)

    def layer(x, w):
        return linear(F.leaky_relu(x @ w, 0.2))

    x, w = torch.randn(32, 48), torch.randn(48, 64)
    with torch.no_grad():
        compiled = torch.compile(layer, backend="tile", fullgraph=True)
        got, (code,) = run_and_get_code(compiled, x, w)
        assert relative_error(got, layer(x, w)) < 1e-5
        calls = tile_calls(compiled, x, w)
    assert "extern_kernels.mm(" not in code and "extern_kernels.addmm(" not in code
    first = ("tile::matmul_leaky_relu" if fusion == "tile" else "tile::matmul",
             [(32, 48), (48, 64)])
    assert calls == sorted([first, ("tile::matmul", [(32, 64), (64, 16)])])
    assert runtime.backend_verdict_stats()["timed"] == 0


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 128, bias=False)
        self.down = nn.Linear(128, 64)

    def forward(self, x):
        return self.down(F.leaky_relu(self.up(x), 0.1)) + x


@pytest.mark.parametrize("fusion", ["tile", "aten"])
def test_the_backward_fusion_follows_a_verdict_of_its_own(fusion):
    # The gradient of leaky_relu's input, out_grad @ down's weight gated by the activation's
    # sign, is fused into one tile kernel only where its own verdict says so; otherwise its
    # GEMM is judged as a plain matmul (here tile's) and the gate stays Inductor's.
    runtime.set_backend_verdict("matmul_leaky_relu_backward", F32, (32, 128, 64), fusion)
    for shape, layout, bias in [((32, 128, 64), "NN", False), ((32, 64, 128), "NN", False),
                                ((32, 128, 64), "NT", False),
                                ((32, 64, 128), "NT", True), ((64, 128, 32), "TN", False),
                                ((128, 64, 32), "TN", False)]:
        runtime.set_backend_verdict("matmul", F32, shape, "tile", layout=layout, bias=bias)
    runtime.set_backend_verdict("matmul_leaky_relu", F32, (32, 128, 64), "tile", layout="NT")
    model = MLP()
    x, out_grad = torch.randn(32, 64), torch.randn(32, 64)
    compiled = torch.compile(model, backend="tile", fullgraph=True)
    got, (_, backward_code) = run_and_get_code(training_step, compiled, x, out_grad)
    for g, want in zip(got, training_step(model, x, out_grad), strict=True):
        assert relative_error(g, want) < 1e-4
    fused = backward_code.count("torch.ops.tile.matmul_leaky_relu_backward.default(")
    assert fused == (1 if fusion == "tile" else 0)
    assert backward_code.count("torch.ops.tile.matmul.default(") == (3 if fusion == "tile" else 4)
    assert "extern_kernels.mm(" not in backward_code
    assert runtime.backend_verdict_stats()["timed"] == 0


def test_a_gemm_with_a_bias_has_verdicts_of_its_own():
    # aten adds a Linear's bias inside its GEMM (addmm), which can run faster than its
    # plain mm: the verdict of the plain product of a bucket does not decide the Linear's.
    runtime.set_backend_verdict("matmul", F32, (32, 16, 64), "tile", layout="NT")
    runtime.set_backend_verdict("matmul", F32, (32, 16, 64), "aten", layout="NT", bias=True)
    linear = nn.Linear(64, 16)

    def both(x, w):
        return linear(x), x @ w.t()

    x, w = torch.randn(32, 64), torch.randn(16, 64)
    with torch.no_grad():
        compiled = torch.compile(both, backend="tile", fullgraph=True)
        got, (code,) = run_and_get_code(compiled, x, w)
        for g, want in zip(got, both(x, w), strict=True):
            assert relative_error(g, want) < 1e-5
    assert code.count("extern_kernels.addmm(") == 1
    assert code.count("torch.ops.tile.matmul.default(") == 1
    assert runtime.backend_verdict_stats()["timed"] == 0


def test_a_gemm_with_a_bias_is_timed_against_aten_addmm(monkeypatch):
    timed = []
    measure = backend_choice._time

    def spy(op, a, b, bias=None):
        timed.append((op, None if bias is None else tuple(bias.shape)))
        return measure(op, a, b, bias)

    monkeypatch.setattr(backend_choice, "_time", spy)
    linear = nn.Linear(64, 16)
    x = torch.randn(32, 64)
    with torch.no_grad():
        got = torch.compile(linear, backend="tile", fullgraph=True)(x)
        assert relative_error(got, linear(x)) < 1e-5
    assert timed == [("matmul", (16,))]
    (verdict,) = runtime.backend_verdicts()
    assert (verdict["bias"], verdict["layout"], verdict["source"]) == (True, "NT", "timed")
    assert verdict["tile_ms"] > 0 and verdict["aten_ms"] > 0


def test_the_fused_op_on_the_cpu_is_timed_without_eagers_extra_call(monkeypatch):
    # On the CPU Inductor runs the leaky_relu after aten's GEMM in its own kernel, with no
    # dispatcher call: the cost of eager's leaky_relu_ call, timed alone on one element,
    # comes off aten's side. A plain GEMM is timed as it is.
    runs_seen = []

    def fixed(runs, device):
        runs_seen.append(len(runs))
        for run in runs:
            run()
        return [30e-6, 33e-6, 4e-6][:len(runs)]

    monkeypatch.setattr(backend_choice, "_median_seconds", fixed)
    a, b = torch.randn(64, 64), torch.randn(64, 128)
    assert backend_choice._time("matmul_leaky_relu", a, b) == pytest.approx((30e-6, 29e-6))
    assert backend_choice._time("matmul_leaky_relu_backward", a, b) == pytest.approx(
        (30e-6, 29e-6))
    assert backend_choice._time("matmul", a, b) == (30e-6, 33e-6)
    assert runs_seen == [3, 3, 2]


@pytest.mark.parametrize("setting", ["always", "never"])
def test_always_and_never_overrule_the_verdicts_and_match_eager(setting):
    # The forward's verdicts say the opposite of the setting; nothing is timed either way.
    contrary = "aten" if setting == "always" else "tile"
    runtime.set_backend_verdict("matmul_leaky_relu", F32, (32, 128, 64), contrary, layout="NT")
    runtime.set_backend_verdict("matmul", F32, (32, 128, 64), contrary, layout="NT")
    runtime.set_backend_verdict("matmul", F32, (32, 64, 128), contrary, layout="NT", bias=True)
    model = MLP()
    x, out_grad = torch.randn(32, 64), torch.randn(32, 64)
    with config.patch(backend_matmul=setting):
        compiled = torch.compile(model, backend="tile", fullgraph=True)
        got, (forward_code, backward_code) = run_and_get_code(training_step, compiled, x,
                                                              out_grad)
    for g, want in zip(got, training_step(model, x, out_grad), strict=True):
        assert relative_error(g, want) < 1e-4
    code = forward_code + backward_code
    if setting == "always":
        assert "extern_kernels.mm(" not in code and "extern_kernels.addmm(" not in code
        assert forward_code.count("torch.ops.tile.matmul_leaky_relu.default(") == 1
        assert backward_code.count("torch.ops.tile.matmul_leaky_relu_backward.default(") == 1
        assert code.count("torch.ops.tile.matmul.default(") == 4
    else:
        assert "torch.ops.tile" not in code
        assert code.count("extern_kernels.mm(") + code.count("extern_kernels.addmm(") == 6
    assert runtime.backend_verdict_stats()["timed"] == 0
    assert {v["source"] for v in runtime.backend_verdicts()} == {"set"}


def test_the_backward_is_compiled_under_the_forwards_setting():
    model = MLP()
    x, out_grad = torch.randn(32, 64).requires_grad_(), torch.randn(32, 64)
    compiled = torch.compile(model, backend="tile", fullgraph=True)
    with config.patch(backend_matmul="never"):
        out, (forward_code,) = run_and_get_code(compiled, x)
    # AOTAutograd compiles the backward at its first call, here under "auto".
    _, (backward_code,) = run_and_get_code(out.backward, out_grad)
    assert "torch.ops.tile" not in forward_code + backward_code
    assert runtime.backend_verdict_stats()["timed"] == 0 and runtime.backend_verdicts() == []


# A child process: compiles leaky_relu(x @ w) @ v for inference under backend="tile", with
# Inductor's caches off so that the rewrites run, and reports what the graph calls and
# which verdicts it knows.
CHILD = r"""
import json, torch, torch.nn.functional as F
import torch_tile
from torch_tile import config, runtime
from torch._inductor.utils import run_and_get_code
torch._inductor.config.fx_graph_cache = False
torch._functorch.config.enable_autograd_cache = False
def layer(x, w, v):
    return F.leaky_relu(x @ w, 0.2) @ v
x, w, v = torch.randn(32, 48), torch.randn(48, 64), torch.randn(64, 16)
got, (code,) = run_and_get_code(torch.compile(layer, backend="tile", fullgraph=True), x, w, v)
want = layer(x, w, v)
print(json.dumps({"setting": config.backend_matmul,
                  "error": ((got - want).norm() / want.norm()).item(),
                  "tile_ops": code.count("torch.ops.tile.matmul.default(")
                              + code.count("torch.ops.tile.matmul_leaky_relu.default("),
                  "aten_gemms": code.count("extern_kernels.mm("),
                  "verdicts": runtime.backend_verdicts(),
                  "stats": runtime.backend_verdict_stats()}))
"""


def run_child(cache_dir, setting):
    result = run_python(CHILD, TILE_CACHE_DIR=str(cache_dir), TILE_BACKEND_MATMUL=setting)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["setting"] == setting and report["error"] < 1e-5
    return report


@pytest.mark.parametrize("setting", ["always", "never"])
def test_the_environment_variable_sets_always_and_never(cache, setting):
    report = run_child(cache, setting)
    if setting == "always":
        assert (report["tile_ops"], report["aten_gemms"]) == (2, 0)
    else:
        assert (report["tile_ops"], report["aten_gemms"]) == (0, 2)
    assert report["verdicts"] == [] and report["stats"]["timed"] == 0


def test_a_second_process_reuses_the_verdicts_without_timing(cache):
    first = run_child(cache, "auto")
    # One verdict per GEMM the rewrites considered: the fusion, the mm it leaves where
    # it loses, and the last mm; each GEMM became tile exactly where its verdict said.
    verdicts = first["verdicts"]
    assert len(verdicts) in (2, 3) and first["stats"]["timed"] == len(verdicts)
    assert {v["source"] for v in verdicts} == {"timed"}
    for v in verdicts:
        assert v["tile_ms"] > 0 and v["aten_ms"] > 0
        faster = v["tile_ms"] < v["aten_ms"] * (1 - backend_choice.margin(v["device_type"]))
        assert (v["choice"] == "tile") == faster
    assert first["tile_ops"] == sum(v["choice"] == "tile" for v in verdicts)
    files = sorted((cache / "backend-verdicts").glob("*.json"))
    assert len(files) == len(verdicts)

    # Turn the plain matmuls' verdicts around on disk (their times, from which a verdict
    # read from the disk is decided): the second process follows the disk, where timing
    # again would have found the first process's choice.
    flipped = {"tile": "aten", "aten": "tile"}
    for path in files:
        record = json.loads(path.read_text())
        if record["key"]["op"] == "matmul":
            record["choice"] = flipped[record["choice"]]
            fast, slow = 1.0, 2.0
            record["tile_ms"], record["aten_ms"] = ((fast, slow) if record["choice"] == "tile"
                                                    else (slow, fast))
            path.write_text(json.dumps(record))
    second = run_child(cache, "auto")
    assert second["stats"] == {"timed": 0, "disk_loads": len(verdicts), "disk_rejected": 0}
    assert {v["source"] for v in second["verdicts"]} == {"disk"}

    def choices(report, turn=False):
        return sorted((v["op"], v["bucket"], v["choice"] if not turn or v["op"] != "matmul"
                       else flipped[v["choice"]]) for v in report["verdicts"])

    assert choices(second) == choices(first, turn=True)
    assert second["tile_ops"] == sum(v["choice"] == "tile" for v in second["verdicts"])


def replace_with_a_link(path, cache):
    # To a verdict that would be valid where it lies: the link itself is not trusted.
    target = path.with_name("elsewhere")
    path.rename(target)
    path.symlink_to(target)


def damage_with_another_key(path, cache):
    # A whole verdict of this user's, but of another bucket (copied under this name).
    other = torch.randn(16, 16)
    backend_choice.tile_wins("matmul", other, other)
    donor = [p for p in (cache / "backend-verdicts").glob("*.json") if p != path]
    path.write_bytes(donor[0].read_bytes())


@pytest.mark.parametrize("damage, why", [
    (lambda path, cache: path.write_bytes(b"\x00{not json"), "does not read as JSON"),
    (lambda path, cache: path.write_bytes(b""), "does not read as JSON"),
    (lambda path, cache: path.write_text(json.dumps({"format": backend_choice.FORMAT})),
     "written for another key"),
    (damage_with_another_key, "written for another key"),
    (lambda path, cache: path.chmod(0o666), "another user owns it or may write it"),
    (replace_with_a_link, "cannot be opened"),
], ids=["garbage", "empty", "no key", "another key", "writable by others", "link"])
def test_a_damaged_verdict_file_is_ignored_and_timed_again(cache, damage, why):
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    with torch.no_grad():
        torch.compile(torch.mm, backend="tile", fullgraph=True)(a, b)
    [path] = (cache / "backend-verdicts").glob("*.json")
    good = json.loads(path.read_text())
    damage(path, cache)
    runtime.clear_backend_verdicts()
    torch._dynamo.reset()

    with pytest.warns(UserWarning, match=f"ignoring the backend verdict file .*{why}"):
        with torch.no_grad():
            got = torch.compile(torch.mm, backend="tile", fullgraph=True)(a, b)
    assert relative_error(got, a @ b) < 1e-5
    stats = runtime.backend_verdict_stats()
    assert stats["disk_rejected"] == 1 and stats["timed"] == 1
    # Replaced by a whole verdict of its own key, private again.
    assert not path.is_symlink()
    replaced = json.loads(path.read_text())
    assert replaced["key"] == good["key"] and replaced["choice"] in ("tile", "aten")
    assert path.stat().st_mode & 0o077 == 0


def test_verdicts_here_leave_out_other_builds(cache):
    # The disk cache keeps the verdicts of earlier builds beside this one's; all are listed,
    # and here=True lists only those that apply in this process.
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    with torch.no_grad():
        torch.compile(torch.mm, backend="tile", fullgraph=True)(a, b)
    [path] = (cache / "backend-verdicts").glob("*.json")
    record = json.loads(path.read_text())
    record["key"]["build"] = "an-earlier-build"
    key_text = backend_choice._key_text(record["key"])
    other = path.with_name(backend_choice._file_name(key_text))
    other.write_text(json.dumps(record))
    other.chmod(0o600)
    runtime.clear_backend_verdicts()
    backend_choice.fingerprint()  # reads every verdict on disk, as each compile does
    assert runtime.backend_verdict_stats()["disk_loads"] == 2
    builds = sorted(v["build"] for v in runtime.backend_verdicts())
    assert builds == sorted([runtime.core_build_id(), "an-earlier-build"])
    [here] = runtime.backend_verdicts(here=True)
    assert here["build"] == runtime.core_build_id() and here["source"] == "disk"


def test_a_verdict_on_disk_is_decided_again_from_its_times(cache):
    # A verdict stored under another margin (an earlier version's): tile 3% ahead is a tie
    # now, aten's; 20% ahead is tile's.
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    with torch.no_grad():
        torch.compile(torch.mm, backend="tile", fullgraph=True)(a, b)
    [path] = (cache / "backend-verdicts").glob("*.json")
    for tile_ms, stored, decided in ((1.0, "tile", "aten"), (0.8, "aten", "tile")):
        record = json.loads(path.read_text())
        record.update(tile_ms=tile_ms, aten_ms=1.03 if decided == "aten" else 1.0,
                      choice=stored, margin=0.02)
        path.write_text(json.dumps(record))
        runtime.clear_backend_verdicts()
        backend_choice.fingerprint()
        [verdict] = runtime.backend_verdicts(here=True)
        assert (verdict["source"], verdict["choice"]) == ("disk", decided)


def test_a_gpu_verdict_takes_a_smaller_lead_than_a_cpu_one():
    # On the CPU tile's costs around the kernel (panels of an evicted weight) call for a
    # 5% lead; on a GPU the kernel's time is what the graph pays, and 2% covers the
    # timing's spread.
    assert backend_choice.margin("cpu") == 0.05
    assert backend_choice.margin("cuda") == 0.02
    assert backend_choice.margin(None) == 0.05  # a record without a device type
    for tile_ms, cpu, gpu in ((0.99, "aten", "aten"), (0.97, "aten", "tile"), (0.94, "tile", "tile")):
        assert backend_choice._choice(tile_ms, 1.0, "cpu") == cpu
        assert backend_choice._choice(tile_ms, 1.0, "cuda") == gpu


def test_without_a_disk_cache_the_verdicts_stay_in_memory(cache):
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    torch.manual_seed(7)
    with config.patch(cache_dir=""), torch.no_grad():
        assert runtime.cache_dir() == ""
        for _ in range(2):
            torch._dynamo.reset()
            got = torch.compile(torch.mm, backend="tile", fullgraph=True)(a, b)
            assert relative_error(got, a @ b) < 1e-5
        # The operands timed come from a generator of their own, not the user's.
        drawn = torch.rand(4)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.rand(4))
    assert runtime.backend_verdict_stats() == {"timed": 1, "disk_loads": 0, "disk_rejected": 0}
    assert [v["source"] for v in runtime.backend_verdicts()] == ["timed"]
    assert not cache.exists()


def test_a_value_outside_the_three_is_refused():
    for value in ("sometimes", "AUTO", True, None):
        with pytest.raises(ValueError, match="must be one of 'auto', 'always', 'never'"):
            config.backend_matmul = value
    assert config.backend_matmul == "auto"
    assert "backend_matmul = 'auto'" in config.describe()
    with pytest.raises(ValueError, match="'auto', 'always', 'never'"):
        TileRewritePass(matmul=True, backend_matmul="fast")
    result = run_python("import torch_tile", TILE_BACKEND_MATMUL="fastest")
    assert result.returncode != 0
    assert "TILE_BACKEND_MATMUL='fastest'" in result.stderr
    assert "'auto', 'always', 'never'" in result.stderr


def test_the_pass_uuid_keys_on_the_setting_and_the_verdicts(cache):
    def uuid(setting=None):
        return TileRewritePass(matmul=True, backend_matmul=setting).uuid()

    empty = {setting: uuid(setting) for setting in config.BACKEND_MATMUL_CHOICES}
    assert len(set(empty.values())) == 3
    assert uuid() == empty["auto"] == uuid("auto")
    with config.patch(backend_matmul="never"):
        assert uuid() == empty["never"]

    runtime.set_backend_verdict("matmul", F32, (64, 64, 64), "tile")
    tile = uuid("auto")
    runtime.set_backend_verdict("matmul", F32, (64, 64, 64), "aten")
    aten = uuid("auto")
    assert len({tile, aten, empty["auto"]}) == 3
    assert uuid("always") == empty["always"] and uuid("never") == empty["never"]

    # A verdict on disk, from this process or another, counts as one in memory.
    runtime.clear_backend_verdicts()
    x = torch.randn(64, 64)
    backend_choice.tile_wins("matmul", x, x)
    measured = uuid("auto")
    runtime.clear_backend_verdicts()
    assert uuid("auto") == measured != empty["auto"]


@pytest.mark.parametrize("steps", [
    [("always", None, True), ("never", None, False), ("always", None, True)],
    [("auto", "tile", True), ("auto", "aten", False), ("auto", "tile", True)],
], ids=["settings", "verdicts"])
def test_inductor_caches_serve_no_graph_of_another_setting_or_verdict(steps):
    fresh_cache = getattr(torch._inductor.utils, "fresh_cache", None) or \
        torch._inductor.utils.fresh_inductor_cache
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    counters.clear()
    with fresh_cache(), torch._inductor.config.patch(fx_graph_cache=True), torch.no_grad():
        for setting, verdict, on_tile in steps:
            torch._dynamo.reset()
            if verdict is not None:
                runtime.set_backend_verdict("matmul", F32, (64, 64, 64), verdict)
            with config.patch(backend_matmul=setting):
                compiled = torch.compile(torch.mm, backend="tile", fullgraph=True)
                assert relative_error(compiled(a, b), a @ b) < 1e-5
                calls = tile_calls(compiled, a, b)
            assert calls == ([("tile::matmul", [(64, 64), (64, 64)])] if on_tile else [])
    # The third compile is the first one's graph, from the cache.
    assert counters["inductor"]["fxgraph_cache_miss"] == 2
    assert counters["inductor"]["fxgraph_cache_hit"] == 1


@pytest.mark.parametrize("setting, verdict, fused", [
    ("auto", "tile", True), ("auto", "aten", False), ("never", "tile", False)])
def test_the_inductor_hook_fuses_only_where_tile_is_chosen(setting, verdict, fused):
    torch_tile.inductor.install()
    runtime.set_backend_verdict("matmul_leaky_relu", F32, (32, 64, 48), verdict)

    def layer(x, w):
        return F.leaky_relu(x @ w, 0.2)

    x, w = torch.randn(32, 48), torch.randn(48, 64)
    with config.patch(backend_matmul=setting), torch.no_grad():
        got, (code,) = run_and_get_code(torch.compile(layer), x, w)
    assert relative_error(got, layer(x, w)) < 1e-5
    assert code.count("torch.ops.tile.matmul_leaky_relu.default(") == (1 if fused else 0)
    # Outside max-autotune the hook puts no plain mm on tile, whatever its verdict.
    assert "torch.ops.tile.matmul.default(" not in code
    assert runtime.backend_verdict_stats()["timed"] == 0
