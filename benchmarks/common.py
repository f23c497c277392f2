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

    return (f"{platform.machine()} CPU ({torch_tile.runtime.host_target()}), "
            f"{torch.get_num_threads()} threads")


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
