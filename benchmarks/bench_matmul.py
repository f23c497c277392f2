"""TFLOP/s of tile's matmul against torch.matmul, and of the fused matmul_leaky_relu
against torch.matmul followed by leaky_relu, on the same run and device; on CUDA also
against Triton's tutorial matmul (when triton imports). tile's ops are called as
torch_tile.matmul / torch_tile.matmul_leaky_relu (torch.ops.tile.* through torch's
argument parser, as torch.matmul is called), so that small CPU sizes compare the kernels
and the dispatch alike, not Python's op-packet layer.

    .venv/bin/python benchmarks/bench_matmul.py [--device cuda|cpu] [--dtype DTYPE]
        [--max-size N] [--shape M N K ...] [--layout nn|nt|tn|tt] [--bias] [--quick]
        [--autotune]
        CUDA only: [--samples S] [--batch-ms MS] [--warm-seconds S] [--skip-largest]
                   [--no-triton] [--triton-mma-sync] [--include-launch-overhead]

Shapes are (M, N, K): a is M x K, b is K x N. Runs on CUDA when torch sees a GPU, else on
the CPU. Prints a table, writes results/bench_matmul_<device>_<dtype>[_<layout>][_bias][_autotuned]
[_quick][_<tag>].json and .png (the layout where it is not nn; --tag names the machine). FLOPs per call: 2*M*N*K (leaky_relu's M*N are not counted). The unfused
baseline applies leaky_relu in place, torch's cheapest way without fusion. --dtype int8
(CPU only): int8 -> int32 against torch._int_mm and against torch's float32 matmul of the
same values, with no fused op.

CPU (default float32): square sizes 128 ... 4096 up to --max-size (4096). Before timing, each
shape is checked once against torch (Frobenius norm), and the first call is timed after
clearing the kernel cache, so it includes the compile. tile and torch are then timed
interleaved, round by round, for about twice --budget seconds (at least 3 rounds), and a shape whose calls are predicted, from the shapes
before it, to take longer than --max-call-seconds each is skipped: the default run takes a
few minutes on two CPU cores.

CUDA (default float16; run once per dtype): shapes 1024^3, 2048^3, 4096^3, 8192^3 and
9728x8192x65536 (--skip-largest leaves the last out). Candidates: cuBLAS (torch.matmul),
Triton (benchmarks/triton_matmul.py, the tutorial kernel, autotuned on its first call) and
tile.matmul; for the fused op torch.matmul + leaky_relu_, Triton with its leaky_relu
epilogue and tile.matmul_leaky_relu. Per shape:
  1. parity, once: every candidate's output must be finite everywhere and within a
     dtype-dependent max|out - ref| / max|ref| of a float32 torch reference (per element,
     not a norm); a failure is flagged in the table and the JSON, and the run goes on;
  2. timing (common.cuda_interleaved_times): first --warm-seconds (default 5) of the
     candidates' batches in turn, untimed, so that every shape's samples find the GPU as a
     sustained workload keeps it (an H100 at its power limit), not cool from the parity
     checks and compiles before them; then --samples samples; in each, every candidate in
     turn (order rotated per sample): 256 MB written to flush the L2, CUDA events around a
     batch of back-to-back calls (batch sized so the fastest candidate's batch lasts
     --batch-ms), time per call = elapsed / batch; no synchronization inside a batch. The
     GPU is held busy (torch.cuda._sleep) while the host enqueues the batch, so the events
     time the kernels, not Python's launch rate (--include-launch-overhead: not held).
     Medians over the samples are reported, with ratios tile/cuBLAS, tile/Triton and, for
     the fused op, tile_fused/tile_matmul (1.0 = a free epilogue) and
     tile_fused/(torch.matmul + leaky_relu_).
--triton-mma-sync restricts Triton to the pre-Hopper warp-level MMA (mma.sync, as Triton's
DISABLE_MMA_V3=1 does) instead of Hopper's warpgroup MMA: the peer of the same instruction
class as tile.matmul's NVIDIA kernel; written to its own file (_triton_mma_sync).
--bias adds a Linear's bias (length N, the input dtype) in tile's epilogue, against
torch.addmm (and addmm + leaky_relu_): with --layout nt, a Linear's x @ W^T + b. Triton's
tutorial kernel takes no bias and is left out; written to its own file (_bias).
--quick: a smoke run (CUDA: 256^3 ... 1024^3, 5 samples; CPU: up to 256, short budget).
--autotune sets torch_tile.config.autotune (as TILE_AUTOTUNE=1 does): tile autotunes on the
first call of each shape, before the parity check and the timing.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import torch_tile

from common import L2_FLUSH_BYTES, cuda_interleaved_times, interleaved_seconds, write_results

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int8": torch.int8}
# Largest ||tile - torch||_F / ||torch||_F accepted: both results carry their own rounding
# (int8 -> int32 is exact; its float32 baseline rounds sums past 2^24).
MAX_REL_ERROR = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2e-2, torch.int8: 1e-6}
SQUARE_SIZES = [128, 256, 512, 1024, 2048, 4096]
QUICK_MAX_SIZE_CPU = 256
# CUDA: the sizes users quote; the last one (a is 1.3 GB in 16 bits) is left out by
# --skip-largest.
CUDA_SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
               (9728, 8192, 65536)]
CUDA_QUICK_SHAPES = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024)]
# CUDA parity: largest max|out - ref| / max|ref| against a float32 torch reference, per
# element. Rounding the output to the dtype alone costs up to half an ulp, 2^-11 (float16)
# and 2^-8 (bfloat16) of max|ref|; the bounds allow about 8x and 5x that, room for cuBLAS's
# reduced-precision split-K reductions, while a 16-bit accumulator over K >= 1024 or a wrong
# element (errors of order 1e-2 to 1) fails. float32 allows for the accumulation order over
# K up to 65536 (TF32 would fail it).
MAX_ELEMENT_ERROR = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2e-2}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=sorted(DTYPES),
                        help="default: float32 on the CPU, float16 on CUDA")
    parser.add_argument("--max-size", type=int,
                        help="skip shapes with a dimension above this (default: 4096 on the "
                             "CPU, none on CUDA)")
    parser.add_argument("--shape", type=int, nargs=3, action="append", default=[],
                        metavar=("M", "N", "K"), help="an extra (M, N, K) shape; repeatable")
    parser.add_argument("--only-shapes", action="store_true",
                        help="run only the --shape shapes, not the default ones")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--negative-slope", type=float, default=0.01)
    parser.add_argument("--budget", type=float, default=0.5,
                        help="CPU: seconds of timed calls per measurement, at least one call")
    parser.add_argument("--max-call-seconds", type=float, default=15.0,
                        help="skip shapes predicted to need longer than this per call")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads before running")
    parser.add_argument("--tag", help="appended to the record's name (results/bench_matmul_..._<tag>.*), "
                        "to keep the records of several machines apart")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: small shapes only, few samples (CPU: short budget)")
    parser.add_argument("--autotune", action="store_true",
                        help="torch_tile.config.autotune = True (as TILE_AUTOTUNE=1)")
    parser.add_argument("--bias", action="store_true",
                        help="a bias of length N in the epilogue, against torch.addmm")
    parser.add_argument("--layout", choices=LAYOUTS, default="nn",
                        help="how a and b are stored: n as themselves (row-major), t as the "
                             "transpose of a row-major matrix (b as a Linear's weight, a as "
                             "the x^T of a weight's gradient); default nn")
    gpu = parser.add_argument_group("CUDA")
    gpu.add_argument("--samples", type=int,
                     help="interleaved samples per candidate (default 30; --quick: 5)")
    gpu.add_argument("--warm-seconds", type=float, default=5.0,
                     help="untimed load before each shape's samples (default 5; 0: none)")
    gpu.add_argument("--batch-ms", type=float,
                     help="the fastest candidate's batch lasts at least this (default 1.0; "
                          "--quick: 0.2)")
    gpu.add_argument("--skip-largest", action="store_true",
                     help="leave out 9728x8192x65536")
    gpu.add_argument("--no-triton", action="store_true", help="leave Triton out")
    gpu.add_argument("--triton-mma-sync", action="store_true",
                     help="Triton on mma.sync only (DISABLE_MMA_V3=1), not Hopper's wgmma")
    gpu.add_argument("--include-launch-overhead", action="store_true",
                     help="do not hold the GPU while the host enqueues a batch: a host "
                          "slower than the kernels then shows in the times")
    args = parser.parse_args()
    cuda = torch.device(args.device).type == "cuda"
    if args.dtype is None:
        args.dtype = "float16" if cuda else "float32"
    if args.max_size is None and not cuda:
        args.max_size = QUICK_MAX_SIZE_CPU if args.quick else 4096
    if args.quick and not cuda:
        args.budget = min(args.budget, 0.05)
    if args.samples is None:
        args.samples = 5 if args.quick else 30
    if args.batch_ms is None:
        args.batch_ms = 0.2 if args.quick else 1.0
    if args.bias and args.dtype == "int8":
        parser.error("--bias: the int8 rows compare against torch._int_mm, which adds no bias")
    return args


def too_slow(shape, predicted, args, skipped, width):
    """Skips (and records) a shape whose calls are predicted to pass --max-call-seconds."""
    if predicted <= args.max_call_seconds:
        return False
    skipped.append(list(shape))
    print(f"{'x'.join(map(str, shape)):<{width}} skipped: about {predicted:.0f} s per call "
          f"(--max-call-seconds {args.max_call_seconds:g})")
    return True


def timed_once(fn, device):
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    result = fn()
    sync()
    return result, time.perf_counter() - start


def relative_error(out, ref):
    ref = ref.double()
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def repeats_within(budget_s, seconds_per_call):
    return max(1, min(10, int(budget_s / max(seconds_per_call, 1e-9))))


def int8_variants(a, b):
    """int8 -> int32 (no fused leaky_relu for int8): against torch's int8 GEMM
    (torch._int_mm) where this torch has one on the device, and against torch's float32
    matmul of the same values."""
    af, bf = a.float(), b.float()
    tile_fn = lambda: torch_tile.matmul(a, b, out_dtype=torch.int32)
    variants = []
    try:
        torch._int_mm(a, b)
        variants.append(("matmul", tile_fn, lambda: torch._int_mm(a, b)))
    except (RuntimeError, AttributeError):
        pass
    variants.append(("matmul_vs_float32", tile_fn, lambda: torch.matmul(af, bf)))
    return variants


LAYOUTS = ("nn", "nt", "tn", "tt")


def stored(rows, cols, transposed, make):
    """A rows x cols operand made by make(rows, cols), or stored as the transpose of a
    row-major cols x rows matrix (its columns contiguous)."""
    return make(cols, rows).t() if transposed else make(rows, cols)


def operands(shape, dtype, device, layout):
    """a (M x K) and b (K x N) in the given layout; b scaled by 1/sqrt(K), which keeps the
    results near N(0, 1), far from float16's range."""
    m, n, k = shape
    if dtype == torch.int8:
        def make(rows, cols, scale=1.0):
            return torch.randint(-128, 128, (rows, cols), device=device, dtype=dtype)
    else:
        def make(rows, cols, scale=1.0):
            return (torch.randn(rows, cols, device=device) * scale).to(dtype)
    a = stored(m, k, layout[0] == "t", make)
    b = stored(k, n, layout[1] == "t", lambda r, c: make(r, c, k**-0.5))
    return a, b


def linear_bias(n, dtype, device):
    """A Linear's bias for --bias: N values in the input dtype, of the outputs' scale."""
    return torch.randn(n, device=device).to(dtype)


def variants_of(a, b, bias, slope):
    """{op: (tile's call, torch's)}: the plain matmul and the fused leaky_relu, with the
    bias where there is one (torch.addmm, as a Linear calls it)."""
    if bias is None:
        return {"matmul": (lambda: torch_tile.matmul(a, b), lambda: torch.matmul(a, b)),
                "matmul_leaky_relu": (lambda: torch_tile.matmul_leaky_relu(a, b, slope),
                                      lambda: F.leaky_relu(torch.matmul(a, b), slope, inplace=True))}
    return {"matmul": (lambda: torch_tile.matmul(a, b, bias=bias), lambda: torch.addmm(bias, a, b)),
            "matmul_leaky_relu": (lambda: torch_tile.matmul_leaky_relu(a, b, slope, bias=bias),
                                  lambda: F.leaky_relu(torch.addmm(bias, a, b), slope, inplace=True))}


def measure(shape, dtype, device, args):
    """Rows for one shape: the plain matmul against torch, then the fused leaky_relu."""
    m, n, k = shape
    slope = args.negative_slope
    flops = 2 * m * n * k
    a, b = operands(shape, dtype, device, args.layout)
    if dtype == torch.int8:
        variants = int8_variants(a, b)
    else:
        bias = linear_bias(n, dtype, device) if args.bias else None
        variants = [(op, *fns) for op, fns in variants_of(a, b, bias, slope).items()]
    rows = []
    for op, tile_fn, torch_fn in variants:
        torch_tile.runtime.clear_cache()
        out, first_call_s = timed_once(tile_fn, device)
        compiled = torch_tile.runtime.cache_stats()["misses"]
        ref, torch_once_s = timed_once(torch_fn, device)
        error = relative_error(out, ref)
        if not error <= MAX_REL_ERROR[dtype]:
            raise SystemExit(f"tile::{op} {m}x{n}x{k} {dtype}: relative error {error:.3g} "
                             f"against torch exceeds {MAX_REL_ERROR[dtype]:g}; not timing it")
        del out, ref
        # Interleaved, round by round, so that a busy moment of the machine falls on both.
        rounds = min(repeats_within(args.budget, first_call_s), repeats_within(args.budget, torch_once_s))
        samples = interleaved_seconds({"tile": tile_fn, "torch": torch_fn}, device, 2 * args.budget,
                                      min_rounds=max(3, rounds))
        tile_s, torch_s = statistics.median(samples["tile"]), statistics.median(samples["torch"])
        rows.append({"op": op, "m": m, "n": n, "k": k, "dtype": str(dtype).removeprefix("torch."),
                     "tile_tflops": flops / tile_s / 1e12, "torch_tflops": flops / torch_s / 1e12,
                     "ratio": torch_s / tile_s, "tile_s": tile_s, "torch_s": torch_s,
                     "first_call_s": first_call_s, "kernels_compiled": compiled,
                     "rel_error": error})
    return rows


# --- CUDA: cuBLAS, Triton and tile, interleaved ---------------------------------------------

# Candidate roles per op, in table order: the torch baseline, Triton, tile.
ROLES = ("torch", "triton", "tile")
BASELINE_NAME = {"matmul": "cuBLAS (torch.matmul)",
                 "matmul_leaky_relu": "torch.matmul + leaky_relu_"}
BIAS_BASELINE_NAME = {"matmul": "cuBLAS (torch.addmm)",
                      "matmul_leaky_relu": "torch.addmm + leaky_relu_"}


def load_triton(args, device):
    """(the triton_matmul module or None, why not)."""
    if device.type != "cuda":
        return None, "not a CUDA run"
    if args.no_triton:
        return None, "--no-triton"
    if args.bias:
        return None, "--bias (the tutorial kernel adds no bias)"
    if args.triton_mma_sync:
        # Read by Triton when it compiles (and part of its cache key).
        os.environ["DISABLE_MMA_V3"] = "1"
    try:
        import triton_matmul
    except Exception as error:  # not installed, or an install that does not import
        return None, f"triton does not import: {type(error).__name__}: {error}"
    return triton_matmul, None


def triton_version():
    module = sys.modules.get("triton")
    return getattr(module, "__version__", None) if module else None


def check_parity(out, ref, scale, shape, dtype):
    """Per-element check of one output against the float32 reference: finite everywhere,
    max|out - ref| / max|ref| within MAX_ELEMENT_ERROR[dtype]."""
    m, n = shape
    if tuple(out.shape) != (m, n) or out.dtype != dtype:
        return {"ok": False, "reason": f"got {tuple(out.shape)} {out.dtype}, expected "
                                       f"{(m, n)} {dtype}"}
    nonfinite = int((~torch.isfinite(out)).sum().item())
    diff = (out.float() - ref).abs()
    worst = int(diff.nan_to_num(nan=float("inf")).argmax().item())
    max_abs = diff.view(-1)[worst].item()
    ref_norm = ref.norm().item()
    result = {
        "ok": nonfinite == 0 and max_abs / scale <= MAX_ELEMENT_ERROR[dtype],
        "nonfinite": nonfinite,
        "max_abs_error": max_abs,
        "max_rel_error": max_abs / scale,  # relative to max|ref|
        "tolerance": MAX_ELEMENT_ERROR[dtype],
        "fro_rel_error": (out.float() - ref).norm().item() / max(ref_norm, 1e-300),
        "worst": {"row": worst // n, "col": worst % n,
                  "out": out.view(-1)[worst].float().item(), "ref": ref.view(-1)[worst].item()},
    }
    if not result["ok"]:
        result["reason"] = (f"{nonfinite} non-finite elements" if nonfinite else
                            f"max|err|/max|ref| {max_abs / scale:.3g} > "
                            f"{MAX_ELEMENT_ERROR[dtype]:g}")
    return result


def quantiles(samples):
    ordered = sorted(samples)
    q1, median, q3 = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else ordered * 3
    return {"min_s": ordered[0], "q1_s": q1, "median_s": statistics.median(ordered),
            "q3_s": q3, "max_s": ordered[-1]}


def measure_cuda(shape, dtype, device, args, triton_module):
    """Rows for one shape: matmul and matmul_leaky_relu, each against its torch baseline and
    Triton, from one interleaved timing of all six candidates."""
    m, n, k = shape
    a, b = operands(shape, dtype, device, args.layout)
    slope = args.negative_slope
    flops = 2 * m * n * k
    bias = linear_bias(n, dtype, device) if args.bias else None
    candidates = {op: {"torch": torch_fn, "tile": tile_fn}
                  for op, (tile_fn, torch_fn) in variants_of(a, b, bias, slope).items()}
    if triton_module is not None:
        candidates["matmul"]["triton"] = lambda: triton_module.matmul(a, b)
        candidates["matmul_leaky_relu"]["triton"] = (
            lambda: triton_module.matmul(a, b, "leaky_relu", slope))

    # First calls: tile's after clearing its kernel cache (so it includes the compile, or the
    # autotuning with --autotune), Triton's includes its autotuning. A candidate that raises
    # is reported and left out.
    info = {op: {"errors": {}, "first_call_s": {}} for op in candidates}
    for op, fns in candidates.items():
        for role in list(fns):
            if role == "tile":
                torch_tile.runtime.clear_cache()
            try:
                _, info[op]["first_call_s"][role] = timed_once(fns[role], device)
            except Exception as error:
                info[op]["errors"][role] = f"{type(error).__name__}: {error}".strip()
                print(f"!!! {op} {role} {m}x{n}x{k}: first call raised "
                      f"{info[op]['errors'][role].splitlines()[0]}", flush=True)
                del fns[role]
                continue
            if role == "tile":
                info[op]["kernels_compiled"] = torch_tile.runtime.cache_stats()["misses"]
            if role == "triton":
                info[op]["triton_config"] = triton_module.best_config(
                    m, n, k, "leaky_relu" if op == "matmul_leaky_relu" else "", a.dtype)

    # Parity, once per shape and candidate, against a float32 torch reference.
    ref = torch.matmul(a.float(), b.float())
    if bias is not None:
        ref += bias.float()
    for op, fns in candidates.items():
        op_ref = F.leaky_relu(ref, slope) if op == "matmul_leaky_relu" else ref
        scale = max(op_ref.abs().max().item(), 1e-30)
        info[op]["parity"] = {}
        for role, fn in fns.items():
            out = fn()
            info[op]["parity"][role] = check_parity(out, op_ref, scale, (m, n), dtype)
            del out
        del op_ref
    del ref

    # Timing: the six candidates interleaved sample by sample.
    timed = {f"{op}/{role}": fn for op, fns in candidates.items() for role, fn in fns.items()}
    timing = cuda_interleaved_times(timed, device, args.samples, args.batch_ms * 1e-3,
                                    hide_launch=not args.include_launch_overhead,
                                    warm_seconds=0.0 if args.quick else args.warm_seconds)

    rows = []
    seconds = {}
    for op, fns in candidates.items():
        spread = {role: quantiles(timing["times"][f"{op}/{role}"]) for role in fns}
        seconds[op] = {role: spread[role]["median_s"] for role in fns}
        s = seconds[op]
        tflops = {role: flops / s[role] / 1e12 if role in s else None for role in ROLES}

        def over(x, y):
            return s[y] / s[x] if x in s and y in s else None

        row = {"op": op, "m": m, "n": n, "k": k, "dtype": str(dtype).removeprefix("torch."),
               "baseline": (BIAS_BASELINE_NAME if args.bias else BASELINE_NAME)[op],
               "tile_tflops": tflops["tile"], "torch_tflops": tflops["torch"],
               "triton_tflops": tflops["triton"],
               # Ratios of TFLOP/s (= inverse ratios of times): above 1, tile is faster.
               "ratio": over("tile", "torch"), "tile_over_torch": over("tile", "torch"),
               "tile_over_triton": over("tile", "triton"),
               "tile_s": s.get("tile"), "torch_s": s.get("torch"), "triton_s": s.get("triton"),
               "first_call_s": info[op]["first_call_s"].get("tile"),
               "kernels_compiled": info[op].get("kernels_compiled"),
               "triton_first_call_s": info[op]["first_call_s"].get("triton"),
               "triton_config": info[op].get("triton_config"),
               "parity_ok": all(p["ok"] for p in info[op]["parity"].values())
               and not info[op]["errors"],
               "parity": info[op]["parity"], "errors": info[op]["errors"],
               "spread": spread,
               "samples_s": {role: timing["times"][f"{op}/{role}"] for role in fns},
               "batch": timing["batch"],
               "host_launch_us": {role: timing["host_launch_s"][f"{op}/{role}"] * 1e6
                                  for role in fns}}
        rows.append(row)
    fused, plain = rows[1], rows[0]
    if fused["tile_s"] and plain["tile_s"]:
        # 1.0: the epilogue is free; below 1, the fused op pays for it.
        fused["tile_fused_over_tile_matmul"] = plain["tile_s"] / fused["tile_s"]
    fused["tile_fused_over_torch_unfused"] = fused["tile_over_torch"]
    timing_info = {key: timing[key] for key in ("hide_launch", "flush_bytes", "warm_seconds",
                                                "sleep_cycles_per_s")}
    return rows, timing_info


def fmt(value, spec, width):
    return f"{value:{spec}}".rjust(width) if value is not None else "-".rjust(width)


def print_cuda_row(row):
    full_shape = "x".join(str(row[d]) for d in "mnk")
    shape = full_shape if row["op"] == "matmul" else ""
    iqr = max(((q["q3_s"] - q["q1_s"]) / q["median_s"] for q in row["spread"].values()),
              default=None)
    failures = [f"{role}: {p['reason']}" for role, p in row["parity"].items() if not p["ok"]]
    failures += [f"{role}: raised (above), not timed" for role in row["errors"]]
    parity = "ok" if not failures else "PARITY FAIL " + "; ".join(failures)
    print(f"{shape:<17} {row['op']:<18} {fmt(row['torch_tflops'], '.1f', 10)} "
          f"{fmt(row['triton_tflops'], '.1f', 11)} {fmt(row['tile_tflops'], '.1f', 10)} "
          f"{fmt(row['tile_over_torch'], '.3f', 10)} {fmt(row['tile_over_triton'], '.3f', 11)} "
          f"{fmt(row.get('tile_fused_over_tile_matmul'), '.3f', 9)} "
          f"{fmt(iqr * 100 if iqr is not None else None, '.1f', 6)}% {row['batch']:>5}  "
          f"{parity}", flush=True)
    for failure in failures:
        print(f"!!! PARITY FAILURE {full_shape} {row['op']} {failure}", flush=True)


def main_cuda(args, device, dtype):
    if device.type == "cuda":
        # The float32 reference (and float32 runs' cuBLAS) in full precision, not TF32.
        torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    triton_module, no_triton = load_triton(args, device)
    shapes = [] if args.only_shapes else list(CUDA_QUICK_SHAPES if args.quick else CUDA_SHAPES)
    if args.skip_largest:
        shapes = [s for s in shapes if s != CUDA_SHAPES[-1]]
    shapes = sorted(set(shapes) | {tuple(s) for s in args.shape},
                    key=lambda s: (s[0] * s[1] * s[2], s))
    if args.max_size:
        shapes = [s for s in shapes if max(s) <= args.max_size]

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    print(f"{args.dtype} on {name}: torch {torch.__version__}, "
          f"triton {triton_version() or '- (' + no_triton + ')'}"
          f"{' (mma.sync only)' if triton_module and args.triton_mma_sync else ''}, "
          f"tile autotune {'on' if torch_tile.config.autotune else 'off'}, "
          f"negative_slope {args.negative_slope}")
    print(f"{args.samples} interleaved samples, batches of >= {args.batch_ms:g} ms, "
          f"{L2_FLUSH_BYTES >> 20} MiB L2 flush before each batch, launch "
          f"{'overhead included' if args.include_launch_overhead else 'hidden'}; medians")
    bases = BIAS_BASELINE_NAME if args.bias else BASELINE_NAME
    print(f"base: {bases['matmul']} for matmul, {bases['matmul_leaky_relu']} for "
          f"matmul_leaky_relu{' (a bias of length N in every op)' if args.bias else ''}; "
          "ratios of TFLOP/s, above 1: tile faster; fused/mm: tile_fused / tile_matmul")
    print(f"{'M x N x K':<17} {'op':<18} {'base TF/s':>10} {'Triton TF/s':>11} "
          f"{'tile TF/s':>10} {'tile/base':>10} {'tile/Triton':>11} {'fused/mm':>9} "
          f"{'IQR':>7} {'batch':>5}  parity", flush=True)
    rows, skipped, failed, timing_info = [], [], [], {}
    seconds_per_flop = 0.0
    for shape in shapes:
        flops = 2 * shape[0] * shape[1] * shape[2]
        if too_slow(shape, seconds_per_flop * flops, args, skipped, width=17):
            continue
        try:
            shape_rows, timing_info = measure_cuda(shape, dtype, device, args, triton_module)
        except Exception as error:  # out of memory, a dead context: record it, go on
            failed.append({"shape": list(shape), "error": f"{type(error).__name__}: {error}"})
            print(f"!!! {'x'.join(map(str, shape))} failed: {type(error).__name__}: "
                  f"{str(error).splitlines()[0] if str(error) else ''}", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        for row in shape_rows:
            rows.append(row)
            print_cuda_row(row)
            times = [row[key] for key in ("tile_s", "torch_s", "triton_s") if row[key]]
            if times:
                seconds_per_flop = max(times) / flops
        if device.type == "cuda":
            torch.cuda.empty_cache()

    bad = [r for r in rows if not r["parity_ok"]]
    if bad:
        print(f"!!! {len(bad)} row(s) FAILED the parity check: " + ", ".join(
            f"{r['m']}x{r['n']}x{r['k']} {r['op']}" for r in bad))
    else:
        print(f"parity: every candidate of every shape within tolerance "
              f"({MAX_ELEMENT_ERROR[dtype]:g} of max|ref|, all finite)" if rows else "no rows")

    measured = {(r["m"], r["n"], r["k"]) for r in rows}
    labels = [s for s in shapes if s in measured]

    def plot(axis):
        positions = list(range(len(labels)))
        styles = {"tile": "-", "torch": "--", "triton": ":"}
        for op, marker in (("matmul", "o"), ("matmul_leaky_relu", "s")):
            by_shape = {(r["m"], r["n"], r["k"]): r for r in rows if r["op"] == op}
            for role in ("tile", "torch", "triton"):
                values = [by_shape[s][f"{role}_tflops"] if s in by_shape else None
                          for s in labels]
                if all(v is None for v in values):
                    continue
                label = {"tile": f"tile {op}", "torch": bases[op],
                         "triton": f"Triton {op}"}[role]
                axis.plot(positions, [v if v is not None else float("nan") for v in values],
                          f"{marker}{styles[role]}", label=label)
        axis.set_xticks(positions, ["x".join(map(str, s)) for s in labels], rotation=30)
        axis.set_xlabel(f"M x N x K ({args.dtype}; medians of {args.samples} interleaved "
                        f"samples)")
        axis.set_ylabel("TFLOP/s (2*M*N*K per call)")

    return rows, skipped, failed, plot, {
        "triton": triton_version(), "triton_missing": no_triton,
        "timing": {"method": "CUDA events around batches of back-to-back calls, candidates "
                             "interleaved sample by sample (order rotated), L2 flushed "
                             "before each batch; per-call time = elapsed / batch; medians",
                   "samples": args.samples, "batch_ms": args.batch_ms, **timing_info},
        "parity_tolerance": MAX_ELEMENT_ERROR[dtype], "parity_failures": len(bad),
        "failed_shapes": failed,
    }


# Environment variables besides TILE_* and TRITON_* that change what the kernels do.
RECORDED_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING",
                      "PYTORCH_CUDA_ALLOC_CONF", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
                      "NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG", "LD_LIBRARY_PATH")


def environment(device):
    """What else shapes a result: versions, the GPU, the settings that reach the kernels."""
    record = {"argv": sys.argv, "python": sys.executable, "python_version": sys.version,
              "cwd": os.getcwd(),
              "env": {key: value for key, value in sorted(os.environ.items())
                      if key.startswith(("TILE_", "TRITON_")) or key in RECORDED_VARIABLES}}
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        record.update(
            device_name=torch.cuda.get_device_name(device),
            device_capability=list(torch.cuda.get_device_capability(device)),
            device_sms=properties.multi_processor_count,
            device_memory_gib=round(properties.total_memory / 2**30, 1),
            cuda=torch.version.cuda, hip=torch.version.hip,
            float32_matmul_precision=torch.get_float32_matmul_precision())
    return record


def main_cpu(args, device, dtype):
    """The CPU run: tile against torch, interleaved round by round (common.interleaved_seconds)."""
    squares = set() if args.only_shapes else {(s, s, s) for s in SQUARE_SIZES}
    shapes = sorted(squares | {tuple(s) for s in args.shape},
                    key=lambda s: (s[0] * s[1] * s[2], s))
    shapes = [s for s in shapes if max(s) <= args.max_size]

    print(f"{args.dtype} on {device}, {torch.get_num_threads()} threads, "
          f"negative_slope {args.negative_slope}")
    print(f"{'M x N x K':<16} {'op':<18} {'tile TFLOP/s':>12} {'torch TFLOP/s':>13} "
          f"{'tile/torch':>10} {'first call':>10} {'rel err':>8}")
    rows, skipped = [], []
    seconds_per_flop = 0.0
    for shape in shapes:
        flops = 2 * shape[0] * shape[1] * shape[2]
        if too_slow(shape, seconds_per_flop * flops, args, skipped, width=16):
            continue
        for row in measure(shape, dtype, device, args):
            rows.append(row)
            seconds_per_flop = max(row["tile_s"], row["torch_s"]) / flops
            print(f"{'x'.join(map(str, shape)):<16} {row['op']:<18} {row['tile_tflops']:>12.3f} "
                  f"{row['torch_tflops']:>13.3f} {row['ratio']:>9.2f}x "
                  f"{row['first_call_s']:>9.3f}s {row['rel_error']:>8.1e}")

    labels = sorted({(r["m"], r["n"], r["k"]) for r in rows}, key=lambda s: (s[0] * s[1] * s[2], s))

    def plot(axis):
        positions = range(len(labels))
        baselines = {"matmul": "torch._int_mm" if args.dtype == "int8" else
                     "torch.addmm" if args.bias else "torch.matmul",
                     "matmul_leaky_relu": ("torch.addmm" if args.bias else "torch.matmul")
                     + " + leaky_relu",
                     "matmul_vs_float32": "torch.matmul (float32)"}
        for op, marker in (("matmul", "o"), ("matmul_leaky_relu", "s"), ("matmul_vs_float32", "^")):
            by_shape = {(r["m"], r["n"], r["k"]): r for r in rows if r["op"] == op}
            if not by_shape:
                continue
            if op != "matmul_vs_float32":  # the same tile calls as "matmul"
                axis.plot(positions, [by_shape[s]["tile_tflops"] for s in labels], f"{marker}-",
                          label=f"tile {op}")
            axis.plot(positions, [by_shape[s]["torch_tflops"] for s in labels], f"{marker}--",
                      label=baselines[op])
        axis.set_xticks(list(positions), ["x".join(map(str, s)) for s in labels], rotation=30)
        axis.set_xlabel(f"M x N x K ({args.dtype})")
        axis.set_ylabel("TFLOP/s (2*M*N*K per call)")

    return rows, skipped, plot, {}


def main():
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.autotune:
        torch_tile.config.autotune = True
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    if dtype == torch.int8 and device.type == "cuda":
        raise SystemExit("--dtype int8 is measured on the CPU only")
    if device.type == "cuda":
        rows, skipped, failed, plot, extra = main_cuda(args, device, dtype)
    else:
        rows, skipped, plot, extra = main_cpu(args, device, dtype)

    # TILE_AUTOTUNE=1 or --autotune (torch_tile.config.autotune) times the tuned configs, and
    # --quick a smoke run: each its own file.
    tuned = "_autotuned" if torch_tile.config.autotune else ""
    quick = "_quick" if args.quick else ""
    mma_sync = "_triton_mma_sync" if device.type == "cuda" and args.triton_mma_sync else ""
    layout = "" if args.layout == "nn" else f"_{args.layout}"
    bias = "_bias" if args.bias else ""
    tag = f"_{args.tag}" if args.tag else ""
    name = f"bench_matmul_{device.type}_{args.dtype}{layout}{bias}{tuned}{quick}{mma_sync}{tag}"
    json_path = write_results(name, device, rows, plot)
    # What common.write_results does not record: the settings that shaped the rows.
    record = json.loads(json_path.read_text())
    record.update(threads=torch.get_num_threads(), dtype=args.dtype,
                  autotune=torch_tile.config.autotune,
                  autotune_stats=torch_tile.runtime.autotune_stats(),
                  negative_slope=args.negative_slope, skipped_shapes=skipped, quick=args.quick,
                  layout=args.layout, bias=args.bias,
                  triton_mma_sync_only=bool(args.triton_mma_sync),
                  **extra, **environment(device))
    json_path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {json_path} and {json_path.with_suffix('.png').name}")


if __name__ == "__main__":
    main()
