"""GB/s of torch.ops.tile.vector_add against torch.add and against the device's copy
bandwidth (a tensor copy of the same bytes), on the same run and device.

    .venv/bin/python benchmarks/bench_vector_add.py [--device cuda] [--max-log2 28]

Prints a table, writes results/bench_vector_add_<device>.json and .png. Bytes moved per
call: three tensors (two reads, one write); a copy moves two (one read, one write).
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
    print(f"{'dtype':<9} {'elements':>10} {'tile GB/s':>10} {'torch GB/s':>11} {'copy GB/s':>10} "
          f"{'tile/torch':>10} {'tile/copy':>10}")
    for dtype in (torch.float32, torch.float16):
        for log2 in range(args.min_log2, args.max_log2 + 1, 2):
            n = 2**log2
            a = torch.randn(n, device=device).to(dtype)
            b = torch.randn(n, device=device).to(dtype)
            assert torch.equal(torch.ops.tile.vector_add(a, b), a + b)
            moved = 3 * n * a.element_size()
            tile_s = median_seconds(lambda: torch.ops.tile.vector_add(a, b), device)
            torch_s = median_seconds(lambda: torch.add(a, b), device)
            # The device's streaming ceiling: 1.5x the tensor, copied (3 tensors' bytes).
            src = torch.empty(3 * n * a.element_size() // 2, dtype=torch.uint8, device=device)
            dst = torch.empty_like(src)
            copy_s = median_seconds(lambda: dst.copy_(src), device)
            row = {"dtype": str(dtype).removeprefix("torch."), "elements": n,
                   "tile_gbps": moved / tile_s / 1e9, "torch_gbps": moved / torch_s / 1e9,
                   "copy_gbps": moved / copy_s / 1e9, "ratio": torch_s / tile_s,
                   "of_copy": copy_s / tile_s}
            rows.append(row)
            print(f"{row['dtype']:<9} {n:>10} {row['tile_gbps']:>10.1f} "
                  f"{row['torch_gbps']:>11.1f} {row['copy_gbps']:>10.1f} {row['ratio']:>9.2f}x "
                  f"{row['of_copy']:>9.2f}x")

    def plot(axis):
        for dtype in sorted({row["dtype"] for row in rows}):
            sizes = [row["elements"] for row in rows if row["dtype"] == dtype]
            axis.plot(sizes, [r["tile_gbps"] for r in rows if r["dtype"] == dtype], "o-",
                      label=f"tile {dtype}")
            axis.plot(sizes, [r["torch_gbps"] for r in rows if r["dtype"] == dtype], "x--",
                      label=f"torch {dtype}")
            axis.plot(sizes, [r["copy_gbps"] for r in rows if r["dtype"] == dtype], ":",
                      label=f"copy ceiling ({dtype} sizes)")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("elements")
        axis.set_ylabel("GB/s (2 reads + 1 write)")

    print(f"wrote {write_results(f'bench_vector_add_{device.type}', device, rows, plot)}")


if __name__ == "__main__":
    main()
