"""First-call latency and per-call overhead of the tile ops, against torch's own ops.

For each op, in fresh processes:
  cold  : first call with an empty kernel cache (build the tile IR, compile, load, run);
  warm  : first call of a new process whose disk cache holds the kernel (read, load, run);
and in this process, after warm-up, the host's time per call on small inputs (16
elements, 64x64 matrices): batches of back-to-back calls with no synchronization inside a
batch, so that on a GPU it is the cost of issuing a call (binding, dispatcher, launch), not
the kernel, against the matching torch op on the same inputs, timed batch by batch,
interleaved. Each side is called both ways: tile's op as torch_tile.vector_add (a C
function that parses its arguments and calls the dispatcher, as torch.add's generated
binding does) and as torch.ops.tile.vector_add.default (an op overload: a Python frame and
a boxed call), torch's as torch.add and as torch.ops.aten.add.Tensor (an overload too; the
overload packet, torch.ops.tile.vector_add, first picks the overload by its schema). The
ratios pair like with like. On a GPU, the first calls of a 2048^3 fp16 matmul are timed
too (its default kernel is the largest of a mid-sized problem).

    python benchmarks/bench_compile.py [--device cpu|cuda] [--repeats 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_seconds, write_results  # noqa: E402

import torch_tile  # noqa: E402,F401

# One call in a new process, timed around the op alone (import and inputs excluded).
CHILD = r"""
import json, sys, time, torch
import torch_tile
op, device, size, dtype = sys.argv[1], sys.argv[2], int(sys.argv[3]), getattr(torch, sys.argv[4])
if op == "vector_add":
    a, b = torch.randn(size, device=device), torch.randn(size, device=device)
    call = lambda: torch.ops.tile.vector_add(a, b)
else:
    if dtype == torch.int8:
        a = torch.randint(-128, 128, (size, size), device=device, dtype=dtype)
        b = torch.randint(-128, 128, (size, size), device=device, dtype=dtype)
        kwargs = {"out_dtype": torch.int32}
    else:
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        kwargs = {}
    if op == "matmul_bias":  # Linear's addmm: a bias row in the epilogue
        kwargs["bias"] = torch.randn(size, device=device).to(b.dtype)
    call = (lambda: torch.ops.tile.matmul(a, b, **kwargs)) if op != "matmul_leaky_relu" else (
        lambda: torch.ops.tile.matmul_leaky_relu(a, b, 0.01))
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
sync()
start = time.perf_counter()
call()
sync()
print(json.dumps({"seconds": time.perf_counter() - start,
                  "disk_loads": torch_tile.runtime.cache_stats()["disk_loads"]}))
"""

OPS = ["vector_add", "matmul", "matmul_leaky_relu"]
# First calls only: on a GPU, the largest kernel the default configs compile for a
# mid-sized problem (a 2048^3 fp16 matmul takes 128 x 256 blocks over 8 warps); on the
# CPU, the kernels of the other dtypes: where the host has AMX, bfloat16 and int8 take
# 32 x 32 blocks on its tile registers at 256^3 and 64 x 64 ones at 1024^3, and a
# 1024^3 float16 matmul runs as bfloat16 terms on them (elsewhere the vector kernels);
# `matmul_bias` adds a bias row in the epilogue (Linear's addmm).
FIRST_CALL_ONLY = {"cuda": [("matmul", 2048, "float16")],
                   "cpu": [("matmul", 256, "bfloat16"), ("matmul", 1024, "bfloat16"),
                           ("matmul_bias", 1024, "bfloat16"), ("matmul", 256, "int8"),
                           ("matmul", 1024, "int8"), ("matmul", 1024, "float16")]}


def first_call(op, device, cache_dir, size=None, dtype="float32"):
    env = dict(os.environ, TILE_CACHE_DIR=cache_dir)
    size = size or (4096 if op == "vector_add" else 64)
    out = subprocess.run([sys.executable, "-c", CHILD, op, device, str(size), dtype], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def steady_call(op, device):
    """Seconds per call on tiny inputs of tile's op and torch's, each called directly and
    through torch.ops, timed interleaved."""
    aten = torch.ops.aten
    if op == "vector_add":
        a, b = torch.randn(16, device=device), torch.randn(16, device=device)
        calls = {"tile": lambda: torch_tile.vector_add(a, b), "torch": lambda: torch.add(a, b),
                 "tile_ops": lambda: torch.ops.tile.vector_add.default(a, b),
                 "torch_ops": lambda: aten.add.Tensor(a, b)}
    else:
        a, b = torch.randn(64, 64, device=device), torch.randn(64, 64, device=device)
        if op == "matmul":
            calls = {"tile": lambda: torch_tile.matmul(a, b), "torch": lambda: torch.matmul(a, b),
                     "tile_ops": lambda: torch.ops.tile.matmul.default(a, b),
                     "torch_ops": lambda: aten.mm.default(a, b)}
        else:
            calls = {"tile": lambda: torch_tile.matmul_leaky_relu(a, b, 0.01),
                     "torch": lambda: torch.nn.functional.leaky_relu(torch.matmul(a, b), 0.01),
                     "tile_ops": lambda: torch.ops.tile.matmul_leaky_relu.default(a, b, 0.01),
                     "torch_ops": lambda: aten.leaky_relu.default(aten.mm.default(a, b), 0.01)}
    samples = interleaved_seconds(calls, torch.device(device), budget_s=1.5, min_rounds=25,
                                  host_only=True)
    return {name: statistics.median(times) for name, times in samples.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per measure")
    parser.add_argument("--tag", help="appended to the record's name, to keep the records of "
                        "several machines apart")
    args = parser.parse_args()

    rows = []
    print(f"{'op':<18} {'cold first call':>16} {'warm-disk first':>16} "
          f"{'tile per call':>14} {'torch per call':>15} {'ratio':>6} "
          f"{'tile.ops per call':>18} {'aten.ops per call':>18} {'ratio':>6}")
    def first_calls(op, size=None, dtype="float32"):
        """Median cold and warm-disk first calls, in seconds."""
        cold, warm = [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                cold.append(first_call(op, args.device, cache, size, dtype)["seconds"])
                result = first_call(op, args.device, cache, size, dtype)
                assert result["disk_loads"] == 1, result
                warm.append(result["seconds"])
        return statistics.median(cold), statistics.median(warm)

    for op in OPS:
        cold, warm = first_calls(op)
        per_call = steady_call(op, args.device)
        row = {"op": op, "cold_first_call_ms": cold * 1e3, "warm_disk_first_call_ms": warm * 1e3,
               "tile_per_call_us": per_call["tile"] * 1e6, "torch_per_call_us": per_call["torch"] * 1e6,
               "tile_ops_per_call_us": per_call["tile_ops"] * 1e6,
               "torch_ops_per_call_us": per_call["torch_ops"] * 1e6}
        rows.append(row)
        print(f"{op:<18} {row['cold_first_call_ms']:>13.1f} ms {row['warm_disk_first_call_ms']:>13.1f} ms "
              f"{row['tile_per_call_us']:>11.1f} us {row['torch_per_call_us']:>12.1f} us "
              f"{per_call['tile'] / per_call['torch']:>5.2f}x {row['tile_ops_per_call_us']:>15.1f} us "
              f"{row['torch_ops_per_call_us']:>15.1f} us {per_call['tile_ops'] / per_call['torch_ops']:>5.2f}x")
    for op, size, dtype in FIRST_CALL_ONLY.get(args.device, []):
        cold, warm = first_calls(op, size, dtype)
        row = {"op": f"{op} {size}^3 {dtype}", "cold_first_call_ms": cold * 1e3,
               "warm_disk_first_call_ms": warm * 1e3}
        rows.append(row)
        print(f"{row['op']:<24} {row['cold_first_call_ms']:>7.1f} ms {row['warm_disk_first_call_ms']:>13.1f} ms")
    print("cold/warm: median of fresh processes; per call: host time, median of interleaved batches;")
    print("per call: torch_tile.<op> against torch.add / torch.matmul (first ratio), and")
    print("torch.ops.tile.<op>.default against torch.ops.aten.<op>.<overload> (second); above 1: tile costs more.")

    def plot(axis):
        xs = range(len(rows))
        axis.bar([x - 0.2 for x in xs], [r["cold_first_call_ms"] for r in rows], 0.4, label="cold first call")
        axis.bar([x + 0.2 for x in xs], [r["warm_disk_first_call_ms"] for r in rows], 0.4,
                 label="warm-disk first call")
        axis.set_xticks(list(xs), [r["op"] for r in rows], rotation=30, ha="right", fontsize=7)
        axis.set_ylabel("ms")

    tag = f"_{args.tag}" if args.tag else ""
    path = write_results(f"bench_compile_{args.device}{tag}", torch.device(args.device), rows, plot)
    print(f"wrote {path} and {path.with_suffix('.png').name}")


if __name__ == "__main__":
    main()
