"""The property test's generator (torch_tile.testing) run long on a GPU: thousands of
seeded random cases against a float64 reference, each output NaN-filled before its run.

    python3 tests/device/fuzz_gpu.py --cases 2400 --seed 20261125 --workers 12 \
        --seconds 240 [--json PATH]

A case's time is mostly its kernels' first compile, which runs on the host, so the cases
are dealt round-robin to worker processes sharing one GPU and one disk cache
(TILE_CACHE_DIR): a kernel one worker compiled, the others load. Cases not reached by the
deadline are counted as not run, never as passed. Prints the count and the first
failures with their reproducers; exits 1 on any failure.
"""

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path


def run_share(worker: int, workers: int, count: int, seed: int, deadline: float):
    # The GPU test file's case runner: the same poisoning, reference and reproducers.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    from test_gpu import cuda_case_failures
    from torch_tile.testing import cases

    return cuda_case_failures(cases(count, seed=seed)[worker::workers], deadline)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2400)
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=240.0, help="deadline for starting cases")
    parser.add_argument("--json", help="write the counts and failures here")
    args = parser.parse_args()
    deadline = time.time() + args.seconds
    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked into workers
    with context.Pool(args.workers) as pool:
        shares = pool.starmap(run_share, [(worker, args.workers, args.cases, args.seed, deadline)
                                          for worker in range(args.workers)])
    done = sum(count for count, _ in shares)
    failures = [failure for _, found in shares for failure in found]
    import torch
    device = torch.cuda.get_device_name()
    print(f"GPU fuzz on {device}: {done} of {args.cases} cases run (seed {args.seed}, "
          f"{args.workers} workers), {len(failures)} failed")
    for failure in failures[:10]:
        print(failure)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": device, "seed": args.seed, "cases": args.cases, "run": done,
                       "failed": len(failures), "failures": failures,
                       "command": " ".join(sys.argv)}, out, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
