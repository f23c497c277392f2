"""tile's matmul against torch over random ragged shapes: the search for cliffs.

    .venv/bin/python benchmarks/bench_matmul_shapes.py [--shapes 40] [--seed 1] [--threads 2]
        [--dtypes float32 bfloat16 int8 float16] [--layouts nn nt tn] [--tag NAME]
        [--device cpu|cuda]

The square and power-of-two shapes of bench_matmul.py miss the paths a ragged shape takes:
blocks at M's, N's and K's edges, a K shorter than one vector, a matrix times a vector. Each
(dtype, layout) draws `--shapes` shapes from sizes that cross those edges (1 to 2050) and
times torch_tile.matmul against torch in the same process, interleaved (ratio = torch's
time / tile's: above 1 tile is faster). torch's baseline is torch.matmul, and for int8
torch._int_mm where it takes the shape (M > 16, K and N multiples of 8), else torch.matmul
on float32 copies made outside the timing. Each shape's result is checked first: against
torch's (int8 exactly, against int64 products).

On CUDA the sizes reach 8192 (ragged ones around the GPU blocks' edges: 127, 255, 1000, 4097,
...), torch is cuBLAS (or `_int_mm`), and each shape is timed by common.cuda_interleaved_times
(GPU time of batches, L2 flushed between them, the two interleaved).

Prints every shape, worst first, and a summary per dtype and layout; writes
results/bench_matmul_shapes_<device>[_<tag>].json and .png (the ratio against the call's
multiply-adds).
"""

import argparse
import math
import random
import statistics

import torch

import torch_tile

from common import cuda_interleaved_times, interleaved_seconds, write_results

SIZES = [1, 2, 3, 5, 8, 9, 13, 16, 17, 24, 31, 33, 40, 48, 63, 64, 65, 96, 100, 127, 130, 200, 257,
         300, 320, 500, 512, 777, 1000, 1030, 2050]
# The GPU's blocks are 64-256 wide and its waves 132 blocks: sizes that cross those edges.
CUDA_SIZES = [1, 16, 64, 100, 127, 255, 500, 777, 1000, 1030, 1500, 2050, 3000, 4097, 5000,
              6144, 8192]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int8": torch.int8,
          "float16": torch.float16}


def takes_int_mm(m, n, k):
    return m > 16 and n % 8 == 0 and k % 8 == 0 and n >= 8 and k >= 8


def operands(dtype, layout, m, n, k, device):
    if dtype == torch.int8:
        a = torch.randint(-128, 128, (m, k), dtype=dtype, device=device)
        b = torch.randint(-128, 128, (k, n), dtype=dtype, device=device)
    else:
        a = torch.randn(m, k, device=device).to(dtype)
        b = (torch.randn(k, n, device=device) / math.sqrt(k)).to(dtype)
    if layout[0] == "t":
        a = a.t().contiguous().t()
    if layout[1] == "t":
        b = b.t().contiguous().t()
    return a, b


def calls(dtype, a, b):
    """(tile's call, torch's call, torch's baseline name)."""
    if dtype != torch.int8:
        return (lambda: torch_tile.matmul(a, b)), (lambda: torch.matmul(a, b)), "torch.matmul"
    tile = lambda: torch_tile.matmul(a, b, out_dtype=torch.int32)  # noqa: E731
    if takes_int_mm(a.shape[0], b.shape[1], a.shape[1]):
        return tile, (lambda: torch._int_mm(a, b)), "torch._int_mm"
    af, bf = a.float(), b.float()
    return tile, (lambda: torch.matmul(af, bf)), "torch.matmul (float32)"


def check(dtype, a, b, tile_out, torch_out):
    if dtype == torch.int8:
        # Exactly, against int64 products (float32 is inexact past 2^24).
        # On the CPU: CUDA has no int64 matmul.
        assert torch.equal(tile_out.cpu().long(), a.cpu().long() @ b.cpu().long()), \
            "int8 results differ"
        return
    error = (tile_out.double() - torch_out.double()).norm() / max(torch_out.double().norm().item(), 1e-30)
    assert error < (2e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-4), f"relative error {error:.3g}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=int, default=40, help="shapes per dtype and layout")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    parser.add_argument("--layouts", nargs="+", default=["nn", "nt", "tn"],
                        choices=["nn", "nt", "tn", "tt"])
    parser.add_argument("--budget", type=float, default=0.15, help="seconds of timing per shape")
    parser.add_argument("--threads", type=int, default=None, help="torch's and tile's threads")
    parser.add_argument("--tag", default="")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    rng = random.Random(args.seed)
    sizes = CUDA_SIZES if device.type == "cuda" else SIZES

    rows = []
    for name in args.dtypes:
        dtype = DTYPES[name]
        for layout in args.layouts:
            for _ in range(args.shapes):
                m, n, k = (rng.choice(sizes) for _ in range(3))
                a, b = operands(dtype, layout, m, n, k, device)
                tile, reference, baseline = calls(dtype, a, b)
                check(dtype, a, b, tile(), reference())
                if device.type == "cuda":
                    samples = cuda_interleaved_times({"tile": tile, "torch": reference}, device,
                                                     samples=5, batch_seconds=2e-3)["times"]
                else:
                    samples = interleaved_seconds({"tile": tile, "torch": reference}, device,
                                                  budget_s=args.budget, min_rounds=5)
                tile_s, torch_s = (statistics.median(samples[c]) for c in ("tile", "torch"))
                rows.append({"dtype": name, "layout": layout, "m": m, "n": n, "k": k,
                             "baseline": baseline, "tile_s": tile_s, "torch_s": torch_s,
                             "ratio": torch_s / tile_s, "threads": torch.get_num_threads()})

    print(f"{'dtype':<9} {'layout':<6} {'M x N x K':>18} {'tile us':>9} {'torch us':>9} "
          f"{'ratio':>6}  baseline")
    for row in sorted(rows, key=lambda r: r["ratio"]):
        shape = f"{row['m']}x{row['n']}x{row['k']}"
        print(f"{row['dtype']:<9} {row['layout']:<6} {shape:>18} {row['tile_s'] * 1e6:9.1f} "
              f"{row['torch_s'] * 1e6:9.1f} {row['ratio']:6.2f}  {row['baseline']}")
    print(f"\n{'dtype':<9} {'layout':<6} {'shapes':>6} {'worst':>6} {'median':>7} {'geomean':>8} "
          f"{'< 0.8':>6}")
    for name in args.dtypes:
        for layout in args.layouts:
            ratios = [r["ratio"] for r in rows if r["dtype"] == name and r["layout"] == layout]
            geomean = math.exp(statistics.fmean(math.log(x) for x in ratios))
            print(f"{name:<9} {layout:<6} {len(ratios):6d} {min(ratios):6.2f} "
                  f"{statistics.median(ratios):7.2f} {geomean:8.2f} "
                  f"{sum(x < 0.8 for x in ratios):6d}")

    def plot(axis):
        for name in args.dtypes:
            picked = [r for r in rows if r["dtype"] == name]
            axis.scatter([r["m"] * r["n"] * r["k"] for r in picked], [r["ratio"] for r in picked],
                         label=name, s=14, alpha=0.7)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("multiply-adds (M x N x K)")
        axis.set_ylabel("torch time / tile time")

    tag = f"_{args.tag}" if args.tag else ""
    path = write_results(f"bench_matmul_shapes_{device.type}{tag}", device, rows, plot)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
