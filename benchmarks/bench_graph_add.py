"""A standalone same-shape add inside a compiled graph: Inductor's generated kernel against
torch.ops.tile.vector_add called from the same Inductor graph, on the same run and device.

    .venv/bin/python benchmarks/bench_graph_add.py [--device cuda] [--max-log2 24]
                                                   [--threads N]

Both sides run as torch.compile(backend="inductor") functions of two inputs, so each time
includes the same guard and wrapper overhead and the comparison is the one the "tile"
backend faces when it decides whether to rewrite an add that nothing fuses with
(torch_tile/graph_rewrites.py). Prints a table, writes results/bench_graph_add_<device>.json
and .png; ratio > 1 means tile.vector_add is faster.

Each side is timed --rounds times, alternating with the other, and keeps its fastest
median: on a shared machine, another process's bursts only ever slow a round down.
"""

import argparse

import torch

import torch_tile  # noqa: F401

from common import median_seconds, write_results

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def compiled(fn):
    return torch.compile(fn, backend="inductor", dynamic=False, fullgraph=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-log2", type=int, default=10)
    parser.add_argument("--max-log2", type=int, default=24)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads before running")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    # One compile per dtype and size: more than Dynamo's default recompile limit.
    torch._dynamo.config.recompile_limit = 1024
    inductor_add = compiled(lambda a, b: a + b)
    tile_add = compiled(torch.ops.tile.vector_add)

    rows = []
    print(f"{'dtype':<9} {'elements':>10} {'inductor us':>12} {'tile us':>9} {'ratio':>7}")
    for dtype in DTYPES:
        for log2 in range(args.min_log2, args.max_log2 + 1, 2):
            n = 2**log2
            # 2-D, as the adds of a linear layer's outputs are.
            shape = (max(1, n // 256), min(n, 256))
            a = torch.randn(shape, device=device).to(dtype)
            b = torch.randn(shape, device=device).to(dtype)
            assert torch.equal(tile_add(a, b), inductor_add(a, b))
            inductor_s = tile_s = float("inf")
            for _ in range(args.rounds):
                inductor_s = min(inductor_s, median_seconds(lambda: inductor_add(a, b), device))
                tile_s = min(tile_s, median_seconds(lambda: tile_add(a, b), device))
            row = {"dtype": str(dtype).removeprefix("torch."), "elements": n,
                   "inductor_s": inductor_s, "tile_s": tile_s, "ratio": inductor_s / tile_s}
            rows.append(row)
            print(f"{row['dtype']:<9} {n:>10} {inductor_s * 1e6:>12.1f} {tile_s * 1e6:>9.1f} "
                  f"{row['ratio']:>6.2f}x")

    def plot(axis):
        for dtype in sorted({row["dtype"] for row in rows}):
            picked = [row for row in rows if row["dtype"] == dtype]
            axis.plot([r["elements"] for r in picked], [r["ratio"] for r in picked], "o-",
                      label=f"{dtype}: Inductor add time / tile.vector_add time")
        axis.axhline(1.0, color="grey", linestyle=":")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("elements")
        axis.set_ylabel("speed-up of tile.vector_add (> 1: tile faster)")

    json_path = write_results(f"bench_graph_add_{device.type}", device, rows, plot)
    print(f"wrote {json_path} and {json_path.with_suffix('.png').name}")


if __name__ == "__main__":
    main()
