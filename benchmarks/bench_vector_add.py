"""GB/s of torch.ops.tile.vector_add against torch.add, on the same run and device.

    .venv/bin/python benchmarks/bench_vector_add.py [--max-log2 26]

Prints a table, writes results/bench_vector_add.json and .png. Bytes moved per call:
three tensors (two reads, one write).
"""

import argparse

import torch

import torch_tile  # noqa: F401

from common import median_seconds, write_results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-log2", type=int, default=10)
    parser.add_argument("--max-log2", type=int, default=24)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)

    rows = []
    print(f"{'dtype':<9} {'elements':>10} {'tile GB/s':>10} {'torch GB/s':>11} {'tile/torch':>10}")
    for dtype in (torch.float32, torch.float16):
        for log2 in range(args.min_log2, args.max_log2 + 1, 2):
            n = 2**log2
            a = torch.randn(n, device=device).to(dtype)
            b = torch.randn(n, device=device).to(dtype)
            assert torch.equal(torch.ops.tile.vector_add(a, b), a + b)
            moved = 3 * n * a.element_size()
            tile_s = median_seconds(lambda: torch.ops.tile.vector_add(a, b), device)
            torch_s = median_seconds(lambda: torch.add(a, b), device)
            row = {"dtype": str(dtype).removeprefix("torch."), "elements": n,
                   "tile_gbps": moved / tile_s / 1e9, "torch_gbps": moved / torch_s / 1e9,
                   "ratio": torch_s / tile_s}
            rows.append(row)
            print(f"{row['dtype']:<9} {n:>10} {row['tile_gbps']:>10.1f} "
                  f"{row['torch_gbps']:>11.1f} {row['ratio']:>9.2f}x")

    def plot(axis):
        for dtype in sorted({row["dtype"] for row in rows}):
            sizes = [row["elements"] for row in rows if row["dtype"] == dtype]
            axis.plot(sizes, [r["tile_gbps"] for r in rows if r["dtype"] == dtype], "o-",
                      label=f"tile {dtype}")
            axis.plot(sizes, [r["torch_gbps"] for r in rows if r["dtype"] == dtype], "x--",
                      label=f"torch {dtype}")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("elements")
        axis.set_ylabel("GB/s (2 reads + 1 write)")

    print(f"wrote {write_results('bench_vector_add', device, rows, plot)}")


if __name__ == "__main__":
    main()
