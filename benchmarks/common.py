"""Shared helpers of the benchmarks: timing, device description, JSON + PNG output."""

import json
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def device_description(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import torch_tile

    return (f"{platform.machine()} CPU ({torch_tile.runtime.host_target()}{cpu_model_and_matrix_units()}), "
            f"{torch.get_num_threads()} threads")


def cpu_model_and_matrix_units() -> str:
    """The model name and the matrix extensions of the host (Linux), e.g.
    ", Intel(R) Xeon(R) Processor, AMX-BF16 AMX-INT8": a virtual machine may show LLVM
    another CPU's name (a Xeon with AMX came up as rocketlake)."""
    try:
        with open("/proc/cpuinfo") as info:
            lines = info.read().splitlines()
    except OSError:
        return ""
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    units = [name for flag, name in (("avx512_bf16", "AVX512-BF16"), ("avx512_vnni", "AVX512-VNNI"),
                                     ("amx_bf16", "AMX-BF16"), ("amx_int8", "AMX-INT8")) if flag in flags]
    return "".join(f", {part}" for part in (model, " ".join(units)) if part)


def median_seconds(fn, device: torch.device, min_repeats: int = 10, budget_s: float = 0.5):
    """Median wall time of fn() over enough repeats to fill `budget_s` (after a warm-up)."""
    fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    samples = []
    deadline = time.perf_counter() + budget_s
    while len(samples) < min_repeats or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
        if len(samples) >= 10_000:
            break
    return statistics.median(samples)


def interleaved_seconds(candidates: dict, device: torch.device, budget_s: float = 1.0,
                        min_rounds: int = 20, batch_s: float = 2e-3, host_only: bool = False) -> dict:
    """Per-call wall seconds of each candidate, one sample per candidate per round, the
    candidates interleaved (the order rotated by one each round), so that a drift of the
    machine (another process, clocks, caches) hits all of them alike instead of whichever
    was timed during it. Each sample times a batch of back-to-back calls lasting about
    `batch_s` (from a calibrating call after a warm-up), synchronized once at its end.
    Rounds go on until `budget_s` has passed and at least `min_rounds` were made.

    host_only: the clock stops before that synchronization, so that on a GPU whose kernels
    run faster than the host issues them (small ones) a sample is the host's own cost per
    call: the binding, the dispatcher, the launch. On the CPU it is the whole call.

    Returns name -> list of per-call seconds, one per round."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    names = list(candidates)
    calls = {}
    for name in names:
        candidates[name]()
        sync()
        start = time.perf_counter()
        candidates[name]()
        sync()
        calls[name] = max(1, int(batch_s / max(time.perf_counter() - start, 1e-7)))
    samples = {name: [] for name in names}
    deadline = time.perf_counter() + budget_s
    rounds = 0
    while rounds < min_rounds or (time.perf_counter() < deadline and rounds < 10_000):
        shift = rounds % len(names)
        for name in names[shift:] + names[:shift]:
            fn, count = candidates[name], calls[name]
            start = time.perf_counter()
            for _ in range(count):
                fn()
            if not host_only:
                sync()
            samples[name].append((time.perf_counter() - start) / count)
            sync()
        rounds += 1
    return samples


def spread(samples) -> float:
    """The interquartile range of `samples` over their median."""
    quartiles = statistics.quantiles(samples, n=4)
    return (quartiles[2] - quartiles[0]) / statistics.median(samples)


def write_results(name: str, device: torch.device, rows: list, plot) -> Path:
    """Writes results/<name>.json (rows + device + command) and results/<name>.png."""
    RESULTS.mkdir(exist_ok=True)
    record = {
        "benchmark": name,
        "device": device_description(device),
        "command": " ".join(shlex.quote(arg) for arg in [Path(sys.executable).name] + sys.argv),
        "torch": torch.__version__,
        "rows": rows,
    }
    json_path = RESULTS / f"{name}.json"
    json_path.write_text(json.dumps(record, indent=2) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 5))
    plot(axis)
    axis.set_title(f"{name} on {record['device']}")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=120)
    plt.close(figure)
    return json_path


# --- GPU timing: CUDA events around batches, candidates interleaved, L2 flushed -------------

L2_FLUSH_BYTES = 256 * 1024 * 1024  # what triton.testing.do_bench writes between calls


def _cuda_sleep_cycles_per_second(device: torch.device) -> float:
    """Clock rate that torch.cuda._sleep counts in (SM cycles per second), measured."""
    cycles = 2_000_000
    rates = []
    for _ in range(3):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        rates.append(cycles / (start.elapsed_time(end) * 1e-3))
    return statistics.median(rates)


def cuda_interleaved_times(candidates: dict, device: torch.device, samples: int,
                           batch_seconds: float = 1e-3, flush_bytes: int = L2_FLUSH_BYTES,
                           hide_launch: bool = True, max_batch: int = 1000,
                           warm_seconds: float = 0.0) -> dict:
    """Per-call GPU seconds of each candidate, measured sample by sample with the candidates
    interleaved, so that clock or thermal drift hits all of them alike.

    candidates: name -> fn (each already warmed up: compiled, autotuned). Every sample runs
    every candidate once, in an order rotated by one each sample; for each: write
    `flush_bytes` (the L2 flush of triton.testing.do_bench), then CUDA events around `batch`
    back-to-back calls; per-call time = elapsed / batch. No synchronization inside a batch;
    one at the end of each sample, outside every timed region. All candidates of one call
    share the batch size, chosen so that the fastest candidate's batch lasts at least
    `batch_seconds`; only the first call of a batch meets a cold L2.

    hide_launch: before each batch, torch.cuda._sleep keeps the GPU busy for 1.5x the host
    time the batch takes to enqueue (measured per candidate), so the events time the GPU's
    work back to back, not the host's launch rate; False: a host slower than the kernels
    shows in the times (the user's view of a small op).

    warm_seconds: before the samples, the candidates' batches run in turn, untimed, for this
    long, so that the samples find the GPU as a sustained workload keeps it (an H100 under
    a long run sits at its power limit and clocks down) rather than cool from idling, where
    it boosts its clocks for the first fraction of a second of load and each candidate gains
    differently from that.

    Returns {"times": name -> [per-call seconds, one per sample], "batch": int,
    "host_launch_s": name -> host seconds per call, "gpu_estimate_s": name -> seconds per
    call before the samples, "hide_launch": bool, "flush_bytes": int,
    "sleep_cycles_per_s": float or None, "warm_seconds": float}.
    """
    names = list(candidates)
    sync = torch.cuda.synchronize
    flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device=device)

    # Estimates: GPU time per call (events around a few calls) and host time per call.
    gpu_estimate, host_launch = {}, {}
    for name in names:
        fn = candidates[name]
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        sync()
        start.record()
        fn()
        end.record()
        sync()
        once = start.elapsed_time(end) * 1e-3
        calls = max(1, min(100, int(2e-3 / max(once, 1e-9))))
        flush.zero_()
        sync()
        begin = time.perf_counter()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        host_launch[name] = (time.perf_counter() - begin) / calls
        sync()
        gpu_estimate[name] = start.elapsed_time(end) * 1e-3 / calls
    fastest = min(gpu_estimate.values())
    batch = max(1, min(max_batch, -(-int(batch_seconds * 1e9) // max(int(fastest * 1e9), 1))))

    cycles_per_s = None
    if hide_launch and hasattr(torch.cuda, "_sleep"):
        cycles_per_s = _cuda_sleep_cycles_per_second(device)
    sleep_cycles = {name: int(cycles_per_s * (1.5 * batch * host_launch[name] + 20e-6))
                    if cycles_per_s else 0 for name in names}

    warm_until = time.perf_counter() + warm_seconds
    while time.perf_counter() < warm_until:
        for name in names:
            for _ in range(batch):
                candidates[name]()
        sync()

    times = {name: [] for name in names}
    for sample in range(samples):
        shift = sample % len(names)
        order = names[shift:] + names[:shift]
        events = []
        for name in order:
            fn = candidates[name]
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            flush.zero_()
            if sleep_cycles[name]:
                torch.cuda._sleep(sleep_cycles[name])
            start.record()
            for _ in range(batch):
                fn()
            end.record()
            events.append((name, start, end))
        sync()
        for name, start, end in events:
            times[name].append(start.elapsed_time(end) * 1e-3 / batch)
    del flush
    return {"times": times, "batch": batch, "host_launch_s": host_launch,
            "gpu_estimate_s": gpu_estimate, "hide_launch": bool(cycles_per_s),
            "flush_bytes": flush_bytes, "sleep_cycles_per_s": cycles_per_s,
            "warm_seconds": warm_seconds}
