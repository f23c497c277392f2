"""`make run`: vector_add compiled on its first call, cached, checked and timed against torch.

    python -m torch_tile.demo [--size N] [--repeats R]
"""

import argparse
import statistics
import sys
import time

import torch

from torch_tile import runtime

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def median_seconds(fn, repeats):
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def describe_gpu():
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return (f"{name} found, but this build launches tile kernels on the CPU only "
                "(GPU code generation and launch are later work); running on the CPU")
    return "none found; running on the CPU"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2**20 + 3, help="elements per tensor")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)

    print(f"{runtime.compiler_version()}, torch {torch.__version__}")
    print(f"target : {runtime.host_target()} (host CPU, {torch.get_num_threads()} threads)")
    print(f"GPU    : {describe_gpu()}")
    print(f"op     : torch.ops.tile.vector_add on {args.size} elements\n")

    runtime.clear_cache()
    header = (f"{'dtype':<9} {'first call':>11} {'2nd call':>9} {'parity':>7} "
              f"{'tile':>10} {'torch':>10} {'tile/torch':>10}")
    print(header)
    print("-" * len(header))
    all_ok = True
    for name, dtype in DTYPES.items():
        a = torch.randn(args.size).to(dtype)
        b = torch.randn(args.size).to(dtype)

        before = runtime.cache_stats()
        start = time.perf_counter()
        out = torch.ops.tile.vector_add(a, b)
        first_ms = (time.perf_counter() - start) * 1e3
        after_first = runtime.cache_stats()
        torch.ops.tile.vector_add(a, b)
        after_second = runtime.cache_stats()
        compiled = after_first["misses"] == before["misses"] + 1
        hit = after_second["hits"] == after_first["hits"] + 1
        cache = "hit" if compiled and hit else "MISS"

        parity = torch.equal(out, a + b)
        tile_s = median_seconds(lambda: torch.ops.tile.vector_add(a, b), args.repeats)
        torch_s = median_seconds(lambda: torch.add(a, b), args.repeats)
        all_ok &= parity and compiled and hit
        print(f"{name:<9} {first_ms:>8.1f} ms {cache:>9} {'OK' if parity else 'FAIL':>7} "
              f"{tile_s * 1e6:>7.1f} us {torch_s * 1e6:>7.1f} us {torch_s / tile_s:>9.2f}x")

    print("\nfirst call = compile (tile IR -> MLIR passes -> LLVM -> x86 object -> ORC JIT) + run;")
    print("tile/torch = torch time / tile time per call (above 1: tile is faster).")
    print("parity OK" if all_ok else "parity FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
