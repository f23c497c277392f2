"""TFLOP/s of torch.ops.tile.matmul per config against torch.matmul (cuBLAS), on CUDA: which
configs the defaults and the autotuning candidates should be.

    python3 benchmarks/bench_matmul_configs.py [--dtype float16|bfloat16|float32|int8]
        [--shape M N K ...] [--configs FILE.json] [--samples S] [--batch-ms MS] [--warm-seconds S]
        [--triton] [--triton-mma-sync] [--rounds R]

Each config (a dict of matmul knobs; those left out keep the default) is forced by making it
the only autotuning candidate; tile's tuning is cleared between configs. Per shape and
config: a parity check against a float32 torch reference (per element, as bench_matmul.py
does), then common.cuda_interleaved_times over {cuBLAS, tile with this config} (L2 flushed,
CUDA events around batches, medians over --samples). A config that fails to compile or
launch is reported with its error and the run goes on. With --triton, the ROCm/CUDA tutorial's
Triton kernel runs the same config (same tiles, GROUP_M, num_warps, num_stages; no autotuning)
in the same interleaved timing, so a gap to Triton is read per config, not against Triton's
autotuned winner; --triton-mma-sync holds Triton to mma.sync (no wgmma), the instructions
tile.matmul uses. With --rounds R the configs of a shape are not timed one after another but
round by round: each round times every config (an order rotated by one each round) beside
cuBLAS, so that the GPU's drift (a cool GPU boosts, a hot one sits at its power limit) falls on
all configs alike; a config's ratio is the median over the rounds of cuBLAS's time over its
own, each pair timed in the same moment. Prints a table and writes
results/bench_matmul_configs_<dtype>.json and .png.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

import torch_tile

from bench_matmul import check_parity
from common import cuda_interleaved_times, write_results

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int8": torch.int8}
SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192)]
# mma.sync-class tiles as Triton's NVIDIA tutorial and CUTLASS's Ampere kernels pick them,
# and the BLOCK_K 64 tiles of Hopper's warpgroup MMA (whose 128-byte swizzle atoms are 64
# 16-bit elements of k).
CONFIGS = [
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "num_warps": 8, "num_stages": 4},
    {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 32, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 4},
]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float16")
    parser.add_argument("--shape", type=int, nargs=3, action="append", default=[],
                        metavar=("M", "N", "K"), help="shapes to run (default: 2048^3 ... 8192^3)")
    parser.add_argument("--configs", help="JSON file with a list of configs (default: built in)")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--batch-ms", type=float, default=20.0)
    parser.add_argument("--warm-seconds", type=float, default=5.0,
                        help="untimed load before each config's samples: the first config of "
                             "a run read 2-4%% lower against cuBLAS on a GPU cool from idling")
    parser.add_argument("--triton", action="store_true",
                        help="time Triton's tutorial kernel at each config as a second peer")
    parser.add_argument("--triton-mma-sync", action="store_true",
                        help="with --triton: Triton without wgmma (DISABLE_MMA_V3=1)")
    parser.add_argument("--rounds", type=int, default=0,
                        help="time the configs of a shape round by round (rotated order, each "
                             "beside cuBLAS), this many rounds")
    return parser.parse_args()


def triton_call(triton_matmul, a, b, config):
    """Triton's tutorial kernel at exactly `config` (GROUP_M 8 when left out, as the
    tutorial's configs have it), or None for a config Triton cannot express."""
    import triton
    kernel = triton_matmul.tutorial_matmul_kernel
    m, k = a.shape
    n = b.shape[1]
    tiles = {"BLOCK_SIZE_M": config.get("BLOCK_M"), "BLOCK_SIZE_N": config.get("BLOCK_N"),
             "BLOCK_SIZE_K": config.get("BLOCK_K"), "GROUP_SIZE_M": config.get("GROUP_M", 8)}
    if None in tiles.values() or "num_warps" not in config or "num_stages" not in config:
        return None
    c = torch.empty(m, n, device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(m, tiles["BLOCK_SIZE_M"]) * triton.cdiv(n, tiles["BLOCK_SIZE_N"]),)

    def call():
        kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                     c.stride(0), c.stride(1), 0.01, ACTIVATION="",
                     INPUT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
                     num_warps=config["num_warps"], num_stages=config["num_stages"], **tiles)
        return c
    return call


def operands(shape, dtype, device):
    m, n, k = shape
    if dtype == torch.int8:
        return (torch.randint(-8, 8, (m, k), device=device, dtype=torch.int8),
                torch.randint(-8, 8, (k, n), device=device, dtype=torch.int8))
    a = torch.randn(m, k, device=device).to(dtype)
    return a, (torch.randn(k, n, device=device) / k**0.5).to(dtype)


def calls(a, b):
    if a.dtype == torch.int8:
        return (lambda: torch._int_mm(a, b),
                lambda: torch.ops.tile.matmul(a, b, out_dtype=torch.int32))
    return lambda: torch.matmul(a, b), lambda: torch.ops.tile.matmul(a, b)


def parity(out, a, b):
    """(ok, max|out - ref| / max|ref|): bench_matmul.py's per-element check; int8 exact."""
    ref = torch.matmul(a.float(), b.float())
    if a.dtype == torch.int8:
        return bool(torch.equal(out.float(), ref)), 0.0
    result = check_parity(out, ref, max(ref.abs().max().item(), 1e-30), tuple(ref.shape), a.dtype)
    return result["ok"], result["max_rel_error"]


def use_config(config):
    """Makes `config` the only autotuning candidate and forgets the tuned choice, so that the
    next call runs it (compiled once; later switches find it in the kernel cache)."""
    torch_tile.config.autotune_configs = {"matmul": {"cuda": [config]}}
    torch_tile.config.autotune = True
    torch.ops.tile_runtime.clear_tuning()


def timed_rounds(reference, tile, configs, rounds, batch_seconds, warm_seconds):
    """Per-call seconds of cuBLAS and of tile at each config, round by round.

    Each round visits every config once, in an order rotated by one each round: the config
    is made current and called once, untimed (its tuning, a lookup of its compiled kernel),
    then common.cuda_interleaved_times times cuBLAS and it in two samples (both orders), so
    that each config's time sits beside a cuBLAS time of the same moment. Returns
    {"torch": [[s per round] per config], "tile": [[s per round] per config]}."""
    device = torch.device("cuda")
    times = {"torch": [[] for _ in configs], "tile": [[] for _ in configs]}
    warm_until = time.perf_counter() + warm_seconds
    while time.perf_counter() < warm_until:
        for config in configs:
            use_config(config)
            for _ in range(3):
                tile()
                reference()
        torch.cuda.synchronize()
    for r in range(rounds):
        for i in [(r + j) % len(configs) for j in range(len(configs))]:
            use_config(configs[i])
            tile()
            torch.cuda.synchronize()
            pair = cuda_interleaved_times({"torch": reference, "tile": tile}, device, 2,
                                          batch_seconds)["times"]
            for role in ("torch", "tile"):
                times[role][i].append(statistics.median(pair[role]))
    return times


def config_rounds(args, shape, a, b, reference, tile, configs, flops):
    """--rounds: every config's parity, then all of them timed round by round."""
    rows, live = [], []
    for config in configs:
        row = {"m": shape[0], "n": shape[1], "k": shape[2], "dtype": args.dtype,
               "config": config, "rounds": args.rounds}
        try:
            use_config(config)
            out = tile()
            torch.cuda.synchronize()
            row["parity_ok"], row["max_error"] = parity(out, a, b)
            del out
            live.append(len(rows))
        except Exception as error:
            row["error"] = f"{type(error).__name__}: {error}".strip()
        rows.append(row)
    times = timed_rounds(reference, tile, [rows[i]["config"] for i in live], args.rounds,
                         args.batch_ms * 1e-3, args.warm_seconds)
    for index, i in enumerate(live):
        ratios = [t / c for t, c in zip(times["torch"][index], times["tile"][index])]
        rows[i].update(torch_tflops=flops / statistics.median(times["torch"][index]) / 1e12,
                       tile_tflops=flops / statistics.median(times["tile"][index]) / 1e12,
                       ratio=statistics.median(ratios), ratio_min=min(ratios),
                       ratio_max=max(ratios))
    for row in rows:
        label = ",".join(f"{v}" for v in row["config"].values())
        if "ratio" in row:
            print(f"{'x'.join(map(str, shape)):>18} {label:<44} {row['torch_tflops']:7.1f} "
                  f"{row['tile_tflops']:7.1f} {row['ratio']:6.3f} "
                  f"[{row['ratio_min']:.3f}-{row['ratio_max']:.3f}]  "
                  f"{'ok' if row['parity_ok'] else 'FAIL %.2e' % row['max_error']}", flush=True)
        else:
            print(f"{'x'.join(map(str, shape)):>18} {label:<44} error: "
                  f"{row['error'].splitlines()[0][:120]}", flush=True)
    return rows


def main():
    args = parse_args()
    if args.rounds and args.triton:
        raise SystemExit("--rounds times tile's configs against cuBLAS only; leave out --triton")
    device = torch.device("cuda")
    dtype = DTYPES[args.dtype]
    configs = json.loads(open(args.configs).read()) if args.configs else CONFIGS
    shapes = [tuple(s) for s in args.shape] or SHAPES
    torch_tile.config.cache_dir = ""
    triton_matmul = None
    if args.triton:
        if args.triton_mma_sync:
            os.environ["DISABLE_MMA_V3"] = "1"  # read by Triton when it compiles
        import triton_matmul
    rows = []
    header = (f"{'M x N x K':>18} {'config':<44} {'cuBLAS':>7} {'tile':>7} {'ratio':>6}"
              + (f" {'Triton':>7} {'tile/Tr':>7}" if triton_matmul else "") + "  parity")
    print(f"# tile.matmul per config, {args.dtype}, TFLOP/s (TOP/s for int8) on "
          f"{torch.cuda.get_device_name(device)}\n{header}", flush=True)
    for shape in shapes:
        a, b = operands(shape, dtype, device)
        reference, tile = calls(a, b)
        flops = 2 * shape[0] * shape[1] * shape[2]
        if args.rounds:
            rows += config_rounds(args, shape, a, b, reference, tile, configs, flops)
            continue
        for config in configs:
            label = ",".join(f"{v}" for v in config.values())
            row = {"m": shape[0], "n": shape[1], "k": shape[2], "dtype": args.dtype,
                   "config": config}
            try:
                use_config(config)
                out = tile()
                torch.cuda.synchronize()
                row["parity_ok"], row["max_error"] = parity(out, a, b)
                del out
                candidates = {"torch": reference, "tile": tile}
                peer = triton_call(triton_matmul, a, b, config) if triton_matmul else None
                if peer is not None:
                    row["triton_parity_ok"], _ = parity(peer().clone(), a, b)
                    candidates["triton"] = peer
                times = cuda_interleaved_times(candidates, device, args.samples,
                                               args.batch_ms * 1e-3,
                                               warm_seconds=args.warm_seconds)["times"]
                seconds = {role: statistics.median(t) for role, t in times.items()}
                row.update(torch_tflops=flops / seconds["torch"] / 1e12,
                           tile_tflops=flops / seconds["tile"] / 1e12,
                           ratio=seconds["torch"] / seconds["tile"])
                versus = ""
                if "triton" in seconds:
                    row.update(triton_tflops=flops / seconds["triton"] / 1e12,
                               tile_over_triton=seconds["triton"] / seconds["tile"],
                               triton_mma_sync=args.triton_mma_sync)
                    versus = f" {row['triton_tflops']:7.1f} {row['tile_over_triton']:7.3f}"
                print(f"{'x'.join(map(str, shape)):>18} {label:<44} {row['torch_tflops']:7.1f} "
                      f"{row['tile_tflops']:7.1f} {row['ratio']:6.3f}{versus}  "
                      f"{'ok' if row['parity_ok'] else 'FAIL %.2e' % row['max_error']}", flush=True)
            except Exception as error:
                row["error"] = f"{type(error).__name__}: {error}".strip()
                print(f"{'x'.join(map(str, shape)):>18} {label:<44} error: "
                      f"{row['error'].splitlines()[0][:120]}", flush=True)
            rows.append(row)
    torch_tile.config.autotune = False

    def plot(axis):
        ok = [r for r in rows if "ratio" in r]
        labels = sorted({json.dumps(r["config"], sort_keys=True) for r in ok})
        for shape in shapes:
            xs, ys = [], []
            for i, label in enumerate(labels):
                for r in ok:
                    if (r["m"], r["n"], r["k"]) == shape and json.dumps(r["config"], sort_keys=True) == label:
                        xs.append(i)
                        ys.append(r["ratio"])
            axis.plot(xs, ys, "o-", label="x".join(map(str, shape)))
        axis.set_xticks(range(len(labels)))
        axis.set_xticklabels([",".join(str(v) for v in json.loads(l).values()) for l in labels],
                             rotation=60, fontsize=6)
        axis.set_ylabel("tile / cuBLAS (TFLOP/s ratio)")

    path = write_results(f"bench_matmul_configs_{args.dtype}", device, rows, plot)
    print(f"wrote {path}")
    return 0 if all(r.get("parity_ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
