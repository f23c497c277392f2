"""Runs tile.matmul (default config) on one CUDA shape a few times after a warm-up, for a
profiler to attach to:

    ncu --clock-control none -k regex:matmul -s 2 -c 1 --section SpeedOfLight \
        python3 benchmarks/profile_matmul.py [--shape M N K] [--dtype float16|bfloat16]

Prints nothing but the config it ran; the profiler's report is the output.
"""

import argparse

import torch

import torch_tile


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[4096, 4096, 4096])
    parser.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    parser.add_argument("--calls", type=int, default=4)
    args = parser.parse_args()
    m, n, k = args.shape
    dtype = getattr(torch, args.dtype)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    for _ in range(args.calls):
        torch.ops.tile.matmul(a, b)
    torch.cuda.synchronize()
    print(f"tile.matmul {m}x{n}x{k} {args.dtype}: {args.calls} calls; cache {torch_tile.runtime.cache_stats()}")


if __name__ == "__main__":
    main()
