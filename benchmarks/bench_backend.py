"""An MLP (Linear -> leaky_relu -> Linear -> + residual) in eager, under
torch.compile(backend="inductor") and under torch.compile(backend="tile"): forward time
(inference, no grad) and training-step time (forward + backward), on the same run and device.

    .venv/bin/python benchmarks/bench_backend.py [--device cuda] [--dtype float32]
                                                 [--size BATCH DIM HIDDEN ...]
                                                 [--no-first-bias]

--no-first-bias drops the first layer's bias: its mm and the leaky_relu fuse into
tile.matmul_leaky_relu either way (with the bias in the kernel's epilogue when it is there).
--backend-matmul is torch_tile.config.backend_matmul for the tile variant: "always" (the
default, every GEMM on tile: tile's kernels against Inductor's), or "auto" (tile only where
its verdict says it wins) and "never", written with a suffix of their own. Prints a
table, writes results/bench_backend_<device>_<dtype>.json and .png; speed-ups are eager's
time over each compiled one. Each compiled variant is checked against eager first, and its
first call (the compile) is timed apart. Eager and the two backends are then timed round by
round, interleaved (common.interleaved_seconds, at least 20 rounds), so that a busy moment
of the machine falls on all three alike; medians are reported, and IQR is the interquartile
range of tile/inductor over the rounds, relative to its median.
"""

import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tile

from common import interleaved_seconds, spread, write_results

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Largest ||compiled - eager||_F / ||eager||_F accepted, as in bench_matmul.py.
MAX_REL_ERROR = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2e-2}
SIZES = [(64, 64, 128), (256, 256, 1024), (512, 512, 2048), (1024, 1024, 4096)]
BACKENDS = ("inductor", "tile")


class MLP(nn.Module):
    def __init__(self, dim, hidden, first_bias):
        super().__init__()
        self.up = nn.Linear(dim, hidden, bias=first_bias)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(F.leaky_relu(self.up(x), 0.01)) + x


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--size", type=int, nargs=3, action="append", metavar=("BATCH", "DIM",
                        "HIDDEN"), help="replaces the default sizes; repeatable")
    parser.add_argument("--no-first-bias", action="store_true")
    parser.add_argument("--backend-matmul", choices=torch_tile.config.BACKEND_MATMUL_CHOICES,
                        default="always")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="seconds of timed calls per measurement, at least 10 calls")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads before running")
    parser.add_argument("--tag", help="appended to the record's name, to keep the records of "
                        "several machines apart")
    return parser.parse_args()


def relative_error(out, ref):
    ref = ref.double()
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def workloads(model, x, out_grad):
    """{"forward": fn, "train": fn}, each returning what to check against eager."""
    def forward():
        with torch.no_grad():
            return model(x)

    def train():
        model.zero_grad(set_to_none=True)
        model(x).backward(out_grad)
        # Not the first layer's gradients: they pass through leaky_relu's step at 0, where
        # a pre-activation within float rounding of 0 may fall on either side in two
        # correct computations; one such element moves its row of the gradient by ~1e-4.
        return model.down.weight.grad

    return {"forward": forward, "train": train}


def compiler(backend):
    """The backend by name, or for "tile" where torch_tile is not pip-installed (a GPU
    machine running it from the source tree, whose entry point is not registered) the
    function the entry point names."""
    if backend == "tile" and "tile" not in torch._dynamo.list_backends():
        from torch_tile.backend import tile_backend

        return tile_backend
    return backend


def timed_first_call(fn, device):
    start = time.perf_counter()
    result = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return result, time.perf_counter() - start


def measure(size, dtype, device, args):
    batch, dim, hidden = size
    model = MLP(dim, hidden, first_bias=not args.no_first_bias).to(device, dtype)
    x = torch.randn(batch, dim, device=device).to(dtype)
    out_grad = torch.randn(batch, dim, device=device).to(dtype)
    # One compile per backend and workload; a reset keeps earlier sizes' graphs from
    # counting against Dynamo's recompile limit.
    torch._dynamo.reset()
    variants = {"eager": model} | {backend: torch.compile(model, backend=compiler(backend),
                                                          dynamic=False)
                                   for backend in BACKENDS}
    rows = []
    for workload in ("forward", "train"):
        eager_fn = workloads(model, x, out_grad)[workload]
        reference = eager_fn()
        row = {"batch": batch, "dim": dim, "hidden": hidden, "workload": workload}
        fns = {"eager": eager_fn}
        for backend in BACKENDS:
            fn = workloads(variants[backend], x, out_grad)[workload]
            out, first_call_s = timed_first_call(fn, device)
            error = relative_error(out, reference)
            if not error <= MAX_REL_ERROR[dtype]:
                raise SystemExit(f"{backend} {workload} {size}: relative error {error:.3g} "
                                 f"against eager exceeds {MAX_REL_ERROR[dtype]:g}")
            row.update({f"{backend}_first_call_s": first_call_s, f"{backend}_rel_error": error})
            fns[backend] = fn
        # Eager and both backends timed round by round, interleaved.
        samples = interleaved_seconds(fns, device, budget_s=args.budget * len(fns))
        for name, times in samples.items():
            row.update({f"{name}_s": statistics.median(times), f"{name}_spread": spread(times),
                        f"{name}_rounds": len(times)})
        for backend in BACKENDS:
            row[f"{backend}_speedup"] = row["eager_s"] / row[f"{backend}_s"]
        # tile against Inductor round by round: the spread of the ratio itself.
        ratios = [i / t for i, t in zip(samples["inductor"], samples["tile"])]
        row["tile_over_inductor"] = statistics.median(ratios)
        row["tile_over_inductor_spread"] = spread(ratios)
        rows.append(row)
    return rows


def main():
    args = parse_args()
    torch_tile.config.backend_matmul = args.backend_matmul
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    sizes = [tuple(s) for s in args.size] if args.size else SIZES

    print(f"{args.dtype} on {device}, {torch.get_num_threads()} threads, first layer "
          f"{'without' if args.no_first_bias else 'with'} bias, backend_matmul="
          f"{args.backend_matmul}")
    print(f"{'batch x dim x hidden':<22} {'workload':<8} {'eager ms':>9} {'inductor ms':>12} "
          f"{'tile ms':>9} {'inductor x':>10} {'tile x':>7} {'tile/inductor':>13} {'IQR':>6}")
    rows = []
    for size in sizes:
        for row in measure(size, dtype, device, args):
            rows.append(row)
            print(f"{'x'.join(map(str, size)):<22} {row['workload']:<8} "
                  f"{row['eager_s'] * 1e3:>9.3f} {row['inductor_s'] * 1e3:>12.3f} "
                  f"{row['tile_s'] * 1e3:>9.3f} {row['inductor_speedup']:>9.2f}x "
                  f"{row['tile_speedup']:>6.2f}x {row['tile_over_inductor']:>12.2f}x "
                  f"{row['tile_over_inductor_spread']:>5.0%}")

    def plot(axis):
        labels = ["x".join(map(str, s)) for s in sizes]
        positions = range(len(sizes))
        for workload, marker in (("forward", "o"), ("train", "s")):
            picked = [r for r in rows if r["workload"] == workload]
            for backend, style in (("inductor", "--"), ("tile", "-")):
                axis.plot(positions, [r[f"{backend}_speedup"] for r in picked], marker + style,
                          label=f"{backend}, {workload}")
        axis.axhline(1.0, color="grey", linestyle=":")
        axis.set_xticks(list(positions), labels, rotation=15)
        axis.set_xlabel(f"batch x dim x hidden ({args.dtype})")
        axis.set_ylabel("speed-up over eager")

    suffix = "_no_first_bias" if args.no_first_bias else ""
    if args.backend_matmul != "always":
        suffix += f"_{args.backend_matmul}"
    if args.tag:
        suffix += f"_{args.tag}"
    json_path = write_results(f"bench_backend_{device.type}_{args.dtype}{suffix}", device,
                              rows, plot)
    record = json.loads(json_path.read_text())
    record.update(dtype=args.dtype, first_bias=not args.no_first_bias,
                  negative_slope=0.01, backend_matmul=args.backend_matmul)
    if args.backend_matmul == "auto":
        record["verdicts"] = torch_tile.runtime.backend_verdicts()
    json_path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {json_path} and {json_path.with_suffix('.png').name}")


if __name__ == "__main__":
    main()
