"""Autotuning: the first call of an (op, shape bucket, dtypes, target) benchmarks the
candidates, invalid ones are rejected by the compiler's resource check and wrong ones by
the check of their result against the default config's, the winner is kept in memory and
on disk, and another process reuses it without benchmarking."""

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torch_tile import config, runtime

ROOT = Path(__file__).resolve().parents[2]

# Two small candidates keep these tests fast; the default list has six.
TWO_CPU_CONFIGS = {"matmul": {"cpu": [{"BLOCK_M": 8, "BLOCK_N": 16, "BLOCK_K": 32},
                                      {"BLOCK_M": 4, "BLOCK_N": 32, "BLOCK_K": 64}]}}


def stats_delta(before):
    after = runtime.autotune_stats()
    return {name: after[name] - before[name] for name in after}


def poisoned_matmul_check(a, b, slope=None):
    reference = a.double() @ b.double()
    if slope is not None:
        reference = torch.nn.functional.leaky_relu(reference, slope)
        out = torch.ops.tile.matmul_leaky_relu(a, b, slope)
    else:
        out = torch.ops.tile.matmul(a, b)
    torch.testing.assert_close(out.double(), reference, rtol=1e-4, atol=1e-4)


@pytest.fixture
def tuning(tmp_path):
    """Autotuning on, with its own cache folder and nothing remembered in memory."""
    runtime.clear_tuning()
    with config.patch(autotune=True, cache_dir=tmp_path, autotune_configs=TWO_CPU_CONFIGS):
        yield tmp_path
    runtime.clear_tuning()


def test_first_call_benchmarks_then_the_winner_is_reused(tuning):
    a, b = torch.randn(100, 70), torch.randn(70, 90)
    before = runtime.autotune_stats()
    poisoned_matmul_check(a, b)
    assert stats_delta(before) == {"benchmarked": 1, "disk_loads": 0, "candidates_run": 2,
                                   "candidates_rejected": 0}
    # The same bucket (M, N, K each up to the next power of two): no new benchmark.
    before = runtime.autotune_stats()
    poisoned_matmul_check(torch.randn(128, 100), torch.randn(100, 128))
    assert stats_delta(before)["benchmarked"] == 0
    # Another bucket, and another op, are tuned on their own.
    poisoned_matmul_check(torch.randn(300, 70), b)
    poisoned_matmul_check(a, b, slope=0.2)
    assert stats_delta(before)["benchmarked"] == 2
    records = [json.loads(p.read_text()) for p in tuning.glob("cpu-*/tuned-*/record")]
    assert sorted(r["problem"] for r in records) == ["matmul[f32,f32] 128x128x128",
                                                     "matmul[f32,f32] 512x128x128",
                                                     "matmul_leaky_relu[f32,f32] 128x128x128"]
    for record in records:
        assert record["winner"] in TWO_CPU_CONFIGS["matmul"]["cpu"]
        assert all(t["ms"] > 0 for t in record["timings"])


def test_invalid_candidates_are_rejected_not_crashed_on(tuning):
    candidates = {"matmul": {"cpu": [
        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32},  # accumulator beyond the registers
        {"BLOCK_M": 3},                                   # not a power of two
        {"BLOCK_M": 8, "BLOCK_N": 16, "BLOCK_K": 16},
    ]}}
    before = runtime.autotune_stats()
    with config.patch(autotune_configs=candidates):
        poisoned_matmul_check(torch.randn(33, 17), torch.randn(17, 65))
    assert stats_delta(before) == {"benchmarked": 1, "disk_loads": 0, "candidates_run": 1,
                                   "candidates_rejected": 2}
    (record,) = [json.loads(p.read_text()) for p in tuning.glob("cpu-*/tuned-*/record")]
    reasons = [t.get("rejected", "") for t in record["timings"]]
    assert "bytes of vector registers" in reasons[0]
    assert "power of two" in reasons[1]
    assert record["winner"] == candidates["matmul"]["cpu"][2]


def test_no_valid_candidate_falls_back_to_the_default(tuning):
    before = runtime.autotune_stats()
    with config.patch(autotune_configs={"matmul": {"cpu": [{"BLOCK_M": 5}]}}):
        a, b = torch.randn(20, 30), torch.randn(30, 40)
        poisoned_matmul_check(a, b)
        poisoned_matmul_check(a, b)  # remembered: not tried again
    assert stats_delta(before) == {"benchmarked": 1, "disk_loads": 0, "candidates_run": 0,
                                   "candidates_rejected": 1}


def mismatch(out, reference):
    return torch.ops.tile_runtime.result_mismatch(out, reference)


@pytest.mark.parametrize("dtype,within", [(torch.float32, 5e-5), (torch.float16, 2e-3),
                                          (torch.bfloat16, 1e-2)])
def test_the_result_check_accepts_rounding_and_rejects_a_wrong_element(dtype, within):
    # Every candidate's result must pass this check against the default config's before
    # its time counts: differences a tiling makes (rounding, within the dtype's share of
    # max|reference|) pass, one wrong element, a NaN the reference lacks or an unwritten
    # element (the poison) does not.
    reference = torch.randn(64, 48).to(dtype)
    scale = reference.float().abs().max().item()
    assert mismatch(reference.clone(), reference) == ""
    close = (reference.float() + within * scale * torch.rand(64, 48)).to(dtype)
    assert mismatch(close, reference) == ""
    wrong = reference.clone()
    wrong[17, 5] += 0.25 * scale
    assert mismatch(wrong, reference).startswith("1 of 3072 elements differ")
    wrong = reference.clone()
    wrong[3, 3] = float("nan")
    assert "1 of 3072" in mismatch(wrong, reference)
    both_nan = reference.clone()
    both_nan[0, 0] = float("nan")
    assert mismatch(both_nan.clone(), both_nan) == ""
    infinite = reference.clone()
    infinite[1, 1] = float("inf")
    assert mismatch(infinite.clone(), infinite) == ""


def test_the_result_check_is_exact_for_integers():
    reference = torch.randint(-1000, 1000, (32, 16), dtype=torch.int32)
    assert mismatch(reference.clone(), reference) == ""
    wrong = reference.clone()
    wrong[5, 7] += 1
    assert mismatch(wrong, reference).startswith("1 of 512 elements differ")
    poisoned = reference.clone()
    poisoned[0, 0] = torch.iinfo(torch.int32).min
    assert "must be exact" in mismatch(poisoned, reference)


def test_autotune_off_uses_the_default_at_once(tmp_path):
    before = runtime.autotune_stats()
    with config.patch(autotune=False, cache_dir=tmp_path):
        poisoned_matmul_check(torch.randn(64, 64), torch.randn(64, 64))
    assert stats_delta(before) == {"benchmarked": 0, "disk_loads": 0, "candidates_run": 0,
                                   "candidates_rejected": 0}
    assert not list(tmp_path.glob("*/tuned-*"))


def test_a_changed_candidate_list_tunes_again(tuning):
    a, b = torch.randn(40, 40), torch.randn(40, 40)
    poisoned_matmul_check(a, b)
    before = runtime.autotune_stats()
    with config.patch(autotune_configs={"matmul": {"cpu": [{"BLOCK_M": 8, "BLOCK_N": 32}]}}):
        poisoned_matmul_check(a, b)
    assert stats_delta(before)["benchmarked"] == 1


TUNE_IN_A_PROCESS = """
import json, torch, torch_tile
from torch_tile import config, runtime
config.autotune_configs = json.loads({configs!r})
torch.manual_seed(0)
a, b = torch.randn(200, 96), torch.randn(96, 160)
out = torch.ops.tile.matmul(a, b)
assert torch.allclose(out, a @ b, rtol=1e-4, atol=1e-4)
print(json.dumps(runtime.autotune_stats()))
"""


def run_tuning_process(cache, stderr=subprocess.PIPE):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), TILE_CACHE_DIR=str(cache),
               TILE_AUTOTUNE="1")
    code = TUNE_IN_A_PROCESS.format(configs=json.dumps(TWO_CPU_CONFIGS))
    return subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          stderr=stderr, text=True, timeout=300)


def test_a_second_process_reuses_the_tuned_config(tmp_path):
    first = run_tuning_process(tmp_path)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["benchmarked"] == 1
    second = run_tuning_process(tmp_path)
    assert second.returncode == 0, second.stderr
    stats = json.loads(second.stdout)
    assert stats["benchmarked"] == 0 and stats["disk_loads"] == 1
    assert stats["candidates_run"] == 0


def test_a_corrupt_record_is_replaced(tmp_path):
    assert run_tuning_process(tmp_path).returncode == 0
    (record,) = tmp_path.glob("cpu-*/tuned-*/record")
    record.write_text(record.read_text()[:-10])
    again = run_tuning_process(tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["benchmarked"] == 1
    assert "truncated" in again.stderr or "corrupt" in again.stderr
    (record,) = tmp_path.glob("cpu-*/tuned-*/record")
    assert json.loads(record.read_text())["winner"]


def test_progress_shows_on_a_terminal_only(tmp_path):
    configs = json.dumps(TWO_CPU_CONFIGS)
    code = TUNE_IN_A_PROCESS.format(configs=configs)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), TILE_CACHE_DIR=str(tmp_path / "tty"),
               TILE_AUTOTUNE="1", TILE_AUTOTUNE_PROGRESS_AFTER="0")
    # stderr on a pseudo-terminal, as in an interactive shell.
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                               stderr=follower, text=True)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    process.wait(timeout=300)
    os.close(leader)
    assert process.returncode == 0
    text = shown.decode(errors="replace")
    assert "torch-tile: autotuning matmul[f32,f32] 256x256x128 on cpu:" in text
    assert "2/2 configs" in text and "torch-tile: autotuned" in text
    # Through a pipe (a log file, CI): silent.
    piped = subprocess.run([sys.executable, "-c", code],
                           env=dict(env, TILE_CACHE_DIR=str(tmp_path / "pipe")),
                           capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and "autotun" not in piped.stderr
