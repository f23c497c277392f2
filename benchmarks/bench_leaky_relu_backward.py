"""tile.matmul_leaky_relu_backward (leaky_relu's backward in the GEMM's epilogue: a @ b where
the activation > 0, else (a @ b) * slope) against what a training step runs without it:
torch.mm followed by aten.leaky_relu_backward (eager's pair; Inductor's gate is one pointwise
kernel of the same traffic), on the same run and device.

    .venv/bin/python benchmarks/bench_leaky_relu_backward.py [--device cuda] [--dtype float16]
        [--size M N K ...] [--samples 7] [--warm-seconds 3]

M x N x K: the GEMM's; in a Linear + leaky_relu layer's backward M is the batch, N the
hidden width and K the next layer's width (4096 x 16384 x 4096: bench_backend's largest MLP).
Also timed: tile.matmul + the same gate, and each GEMM alone, so that the table shows what the
gate costs inside the epilogue and as a kernel of its own. On CUDA the candidates are timed in
interleaved samples, the L2 flushed before each batch (benchmarks/common.py); on the CPU in
interleaved rounds. Prints a table, writes results/bench_leaky_relu_backward_<device>_<dtype>
.json and .png; ratios above 1: the fused op is faster.
"""

import argparse
import statistics

import torch

import torch_tile  # noqa: F401

from common import cuda_interleaved_times, interleaved_seconds, spread, write_results

aten = torch.ops.aten
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
CUDA_SIZES = [(1024, 4096, 1024), (4096, 4096, 4096), (4096, 16384, 4096), (8192, 8192, 8192)]
CPU_SIZES = [(256, 1024, 256), (512, 2048, 512), (1024, 4096, 1024)]
SLOPE = 0.01
# Largest ||tile - float32 reference||_F / ||reference||_F accepted, as in bench_matmul.py.
MAX_REL_ERROR = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2e-2}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                        help="default: float16 on CUDA, float32 on the CPU")
    parser.add_argument("--size", type=int, nargs=3, action="append", metavar=("M", "N", "K"),
                        help="replaces the default sizes; repeatable")
    parser.add_argument("--samples", type=int, default=7, help="interleaved samples (CUDA)")
    parser.add_argument("--warm-seconds", type=float, default=3.0,
                        help="untimed load before the samples (CUDA): sustained clocks")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="seconds of interleaved rounds per size (CPU)")
    return parser.parse_args()


def candidates(a, b, activation):
    return {
        "tile fused": lambda: torch.ops.tile.matmul_leaky_relu_backward(a, b, activation, SLOPE),
        "torch.mm + gate": lambda: aten.leaky_relu_backward(torch.mm(a, b), activation, SLOPE, False),
        "tile.matmul + gate": lambda: aten.leaky_relu_backward(torch.ops.tile.matmul(a, b),
                                                               activation, SLOPE, False),
        "torch.mm": lambda: torch.mm(a, b),
        "tile.matmul": lambda: torch.ops.tile.matmul(a, b),
    }


def measure(shape, dtype, device, args):
    m, n, k = shape
    generator = torch.Generator(device).manual_seed(0)
    a = torch.randn(m, k, device=device, generator=generator).to(dtype)
    b = (torch.randn(k, n, device=device, generator=generator) / k**0.5).to(dtype)
    activation = torch.randn(m, n, device=device, generator=generator).to(dtype)
    fns = candidates(a, b, activation)
    reference = aten.leaky_relu_backward(a.float() @ b.float(), activation.float(), SLOPE, False)
    got = fns["tile fused"]().float()
    error = ((got - reference).norm() / reference.norm()).item()
    assert error <= MAX_REL_ERROR[dtype], f"{m}x{n}x{k}: relative error {error:.2e}"
    for fn in fns.values():  # compile, autotune, load libraries
        fn()
    if device.type == "cuda":
        times = cuda_interleaved_times(fns, device, args.samples,
                                       warm_seconds=args.warm_seconds)["times"]
    else:
        times = interleaved_seconds(fns, device, budget_s=args.budget)
    median = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    return {"m": m, "n": n, "k": k, "dtype": str(dtype).removeprefix("torch."),
            "ms": median, "iqr": {name: spread(t) for name, t in times.items()},
            "fused_vs_torch": median["torch.mm + gate"] / median["tile fused"],
            "gate_in_epilogue_ms": median["tile fused"] - median["tile.matmul"],
            "gate_as_kernel_ms": median["torch.mm + gate"] - median["torch.mm"],
            "relative_error": error}


def main():
    args = parse_args()
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype or ("float16" if device.type == "cuda" else "float32")]
    sizes = [tuple(s) for s in args.size] if args.size else (
        CUDA_SIZES if device.type == "cuda" else CPU_SIZES)
    names = list(candidates(None, None, None))
    print(f"{str(dtype)[6:]} on {device.type}: medians in ms; fused/torch above 1: the fused op "
          "is faster; gate: its cost over the GEMM alone, in the epilogue (tile) and as a kernel")
    header = f"{'M x N x K':>18} " + " ".join(f"{name:>18}" for name in names)
    print(header + f" {'torch/fused':>11} {'gate tile':>9} {'gate torch':>10} {'IQR':>5}")
    rows = []
    for shape in sizes:
        row = measure(shape, dtype, device, args)
        rows.append(row)
        print(f"{'x'.join(map(str, shape)):>18} "
              + " ".join(f"{row['ms'][name]:18.4f}" for name in names)
              + f" {row['fused_vs_torch']:10.3f}x {row['gate_in_epilogue_ms']:+9.4f}"
              f" {row['gate_as_kernel_ms']:+10.4f} {max(row['iqr'].values()):5.0%}")

    def plot(axis):
        labels = ["x".join(map(str, (r["m"], r["n"], r["k"]))) for r in rows]
        axis.plot(labels, [r["fused_vs_torch"] for r in rows], "o-",
                  label="tile fused vs torch.mm + leaky_relu_backward")
        axis.plot(labels, [r["ms"]["torch.mm + gate"] / r["ms"]["tile.matmul + gate"] for r in rows],
                  "s--", label="tile.matmul + gate vs torch.mm + gate")
        axis.axhline(1.0, color="grey", linewidth=1)
        axis.set_xlabel("M x N x K")
        axis.set_ylabel("speed relative to torch (above 1: faster)")

    path = write_results(f"bench_leaky_relu_backward_{device.type}_{str(dtype)[6:]}", device,
                         rows, plot)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
