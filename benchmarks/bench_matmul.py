"""TFLOP/s of torch.ops.tile.matmul against torch.matmul, and of the fused
torch.ops.tile.matmul_leaky_relu against torch.matmul followed by leaky_relu, on the same
run and device.

    .venv/bin/python benchmarks/bench_matmul.py [--dtype float32] [--max-size 4096]
                                                [--shape M N K ...] [--device cuda|cpu]

Square sizes 128 ... 4096 (which include the issue's (1024,)*3, (2048,)*3 and (4096,)*3);
--shape adds others, as (M, N, K): a is M x K, b is K x N. Runs on CUDA when torch sees a
GPU, else on the CPU. Prints a table, writes results/bench_matmul_<device>_<dtype>.json and
.png. FLOPs per call: 2*M*N*K (leaky_relu's M*N are not counted). The unfused baseline
applies leaky_relu in place, torch's cheapest way without fusion.

Before timing, each shape is checked once against torch, and the first call is timed after
clearing the kernel cache, so it includes the compile. Repetitions adapt to a time budget
(one timed call at the largest sizes), and a shape whose calls are predicted, from the
shapes before it, to take longer than --max-call-seconds each is skipped: the default run
takes a few minutes on two CPU cores.
"""

import argparse
import json
import time

import torch
import torch.nn.functional as F

import torch_tile

from common import median_seconds, write_results

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Largest ||tile - torch||_F / ||torch||_F accepted: both results carry their own rounding.
MAX_REL_ERROR = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2e-2}
SQUARE_SIZES = [128, 256, 512, 1024, 2048, 4096]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--max-size", type=int, default=4096,
                        help="skip shapes with a dimension above this")
    parser.add_argument("--shape", type=int, nargs=3, action="append", default=[],
                        metavar=("M", "N", "K"), help="an extra (M, N, K) shape; repeatable")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--negative-slope", type=float, default=0.01)
    parser.add_argument("--budget", type=float, default=0.5,
                        help="seconds of timed calls per measurement, at least one call")
    parser.add_argument("--max-call-seconds", type=float, default=15.0,
                        help="skip shapes predicted to need longer than this per call")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads before running")
    return parser.parse_args()


def timed_once(fn, device):
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    result = fn()
    sync()
    return result, time.perf_counter() - start


def relative_error(out, ref):
    ref = ref.double()
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def repeats_within(budget_s, seconds_per_call):
    return max(1, min(10, int(budget_s / max(seconds_per_call, 1e-9))))


def measure(shape, dtype, device, args):
    """Rows for one shape: the plain matmul against torch, then the fused leaky_relu."""
    m, n, k = shape
    a = torch.randn(m, k, device=device).to(dtype)
    # 1/sqrt(K) keeps the results near N(0, 1), far from float16's range.
    b = (torch.randn(k, n, device=device) / k**0.5).to(dtype)
    slope = args.negative_slope
    flops = 2 * m * n * k
    variants = [
        ("matmul", lambda: torch.ops.tile.matmul(a, b), lambda: torch.matmul(a, b)),
        ("matmul_leaky_relu", lambda: torch.ops.tile.matmul_leaky_relu(a, b, slope),
         lambda: F.leaky_relu(torch.matmul(a, b), slope, inplace=True)),
    ]
    rows = []
    for op, tile_fn, torch_fn in variants:
        torch_tile.runtime.clear_cache()
        out, first_call_s = timed_once(tile_fn, device)
        compiled = torch_tile.runtime.cache_stats()["misses"]
        ref, torch_once_s = timed_once(torch_fn, device)
        error = relative_error(out, ref)
        if not error <= MAX_REL_ERROR[dtype]:
            raise SystemExit(f"tile::{op} {m}x{n}x{k} {dtype}: relative error {error:.3g} "
                             f"against torch exceeds {MAX_REL_ERROR[dtype]:g}; not timing it")
        del out, ref
        tile_s = median_seconds(tile_fn, device, repeats_within(args.budget, first_call_s),
                                args.budget)
        torch_s = median_seconds(torch_fn, device, repeats_within(args.budget, torch_once_s),
                                 args.budget)
        rows.append({"op": op, "m": m, "n": n, "k": k, "dtype": str(dtype).removeprefix("torch."),
                     "tile_tflops": flops / tile_s / 1e12, "torch_tflops": flops / torch_s / 1e12,
                     "ratio": torch_s / tile_s, "tile_s": tile_s, "torch_s": torch_s,
                     "first_call_s": first_call_s, "kernels_compiled": compiled,
                     "rel_error": error})
    return rows


def main():
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    shapes = sorted({(s, s, s) for s in SQUARE_SIZES} | {tuple(s) for s in args.shape},
                    key=lambda s: (s[0] * s[1] * s[2], s))
    shapes = [s for s in shapes if max(s) <= args.max_size]

    print(f"{args.dtype} on {device}, {torch.get_num_threads()} threads, "
          f"negative_slope {args.negative_slope}")
    print(f"{'M x N x K':<16} {'op':<18} {'tile TFLOP/s':>12} {'torch TFLOP/s':>13} "
          f"{'tile/torch':>10} {'first call':>10} {'rel err':>8}")
    rows, skipped = [], []
    seconds_per_flop = 0.0
    for shape in shapes:
        flops = 2 * shape[0] * shape[1] * shape[2]
        predicted = seconds_per_flop * flops
        if predicted > args.max_call_seconds:
            skipped.append(list(shape))
            print(f"{'x'.join(map(str, shape)):<16} skipped: about {predicted:.0f} s per call "
                  f"(--max-call-seconds {args.max_call_seconds:g})")
            continue
        for row in measure(shape, dtype, device, args):
            rows.append(row)
            seconds_per_flop = max(row["tile_s"], row["torch_s"]) / flops
            print(f"{'x'.join(map(str, shape)):<16} {row['op']:<18} {row['tile_tflops']:>12.3f} "
                  f"{row['torch_tflops']:>13.3f} {row['ratio']:>9.2f}x "
                  f"{row['first_call_s']:>9.3f}s {row['rel_error']:>8.1e}")

    labels = sorted({(r["m"], r["n"], r["k"]) for r in rows}, key=lambda s: (s[0] * s[1] * s[2], s))

    def plot(axis):
        positions = range(len(labels))
        for op, marker in (("matmul", "o"), ("matmul_leaky_relu", "s")):
            by_shape = {(r["m"], r["n"], r["k"]): r for r in rows if r["op"] == op}
            baseline = "torch.matmul" if op == "matmul" else "torch.matmul + leaky_relu"
            axis.plot(positions, [by_shape[s]["tile_tflops"] for s in labels], f"{marker}-",
                      label=f"tile {op}")
            axis.plot(positions, [by_shape[s]["torch_tflops"] for s in labels], f"{marker}--",
                      label=baseline)
        axis.set_xticks(list(positions), ["x".join(map(str, s)) for s in labels], rotation=30)
        axis.set_xlabel(f"M x N x K ({args.dtype})")
        axis.set_ylabel("TFLOP/s (2*M*N*K per call)")

    # TILE_AUTOTUNE=1 (torch_tile.config.autotune) times the tuned configs: its own file.
    tuned = "_autotuned" if torch_tile.config.autotune else ""
    name = f"bench_matmul_{device.type}_{args.dtype}{tuned}"
    json_path = write_results(name, device, rows, plot)
    # What common.write_results does not record: the settings that shaped the rows.
    record = json.loads(json_path.read_text())
    record.update(threads=torch.get_num_threads(), dtype=args.dtype,
                  autotune=torch_tile.config.autotune,
                  autotune_stats=torch_tile.runtime.autotune_stats(),
                  negative_slope=args.negative_slope, skipped_shapes=skipped)
    json_path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {json_path} and {json_path.with_suffix('.png').name}")


if __name__ == "__main__":
    main()
