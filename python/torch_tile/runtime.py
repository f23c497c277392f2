"""What the tile runtime knows: the host target, kernel cache counters, autotuning and the
"tile" backend's verdicts."""

import json

import torch


def host_target() -> str:
    """The CPU target kernels are compiled for, e.g. ``cpu:znver3``."""
    return torch.ops.tile_runtime.host_target()


def host_matrix_units() -> list:
    """The host's matmul instructions that CPU kernels use, e.g. ``["AVX512-BF16",
    "AVX512-VNNI", "AMX-BF16", "AMX-INT8"]``. AMX is listed only where the OS grants the
    tile state to this process."""
    units = (("avx512bf16", "AVX512-BF16"), ("avx512vnni", "AVX512-VNNI"),
             ("amx-bf16", "AMX-BF16"), ("amx-int8", "AMX-INT8"))
    return [name for feature, name in units if torch.ops.tile_runtime.host_has_feature(feature)]


def cache_stats() -> dict:
    """Kernel cache counters: ``{"hits": int, "misses": int, "disk_loads": int}``.

    ``hits`` are calls served from memory; each miss compiled a kernel or read it from the
    disk cache (``disk_loads`` counts those).
    """
    return json.loads(torch.ops.tile_runtime.cache_stats())


def clear_cache() -> None:
    """Forget every compiled kernel: the next call of each op compiles again."""
    torch.ops.tile_runtime.clear_cache()


def compiler_version() -> str:
    return torch.ops.tile_runtime.compiler_version()


def core_build_id() -> str:
    """The GNU build id of the loaded compiler core (hex): it changes with every rebuild,
    and the disk cache keys compiled kernels and tuning winners by it."""
    return torch.ops.tile_runtime.core_build_id()


def cache_dir() -> str:
    """The disk cache folder: ``$TILE_CACHE_DIR``, else ``~/.cache/torch_tile``."""
    return torch.ops.tile_runtime.cache_dir()


def autotune_stats() -> dict:
    """Autotuner counters: ``{"benchmarked": problems tuned by running candidates,
    "disk_loads": problems whose winner came from the disk cache, "candidates_run",
    "candidates_rejected"}`` (rejected: refused by the compiler's resource check)."""
    return json.loads(torch.ops.tile_runtime.autotune_stats())


def clear_tuning() -> None:
    """Forget the autotuning winners held in memory (those on disk stay)."""
    torch.ops.tile_runtime.clear_tuning()


def backend_verdicts(here: bool = False) -> list[dict]:
    """The "tile" backend's verdicts known to this process (torch_tile.config.backend_matmul
    = "auto"), one dict each. What was measured: ``op`` ("matmul" or "matmul_leaky_relu"),
    ``dtype`` ("float32"), ``bucket`` ((M, N, K), each the next power of two, as the
    autotuner buckets), ``layout`` (a's then b's: N row-major, T column-major, S other),
    ``bias`` (True for a GEMM with a bias added, timed against aten's addmm). Where:
    ``device_type``, ``device`` (the CPU target or the GPU's name or arch), ``threads`` (CPU),
    ``compiler``, ``build``, ``torch``, ``tuning``. The result: ``tile_ms`` and ``aten_ms``
    (median milliseconds per call; None when not measured here), ``choice`` ("tile" or
    "aten") and ``source``: "timed" in this process, "disk" from the disk cache, "set" by
    set_backend_verdict(), "failed" when tile could not be timed (aten's GEMM is kept).
    With ``here``, only those that apply in this process now: measured on its devices with
    its compiler build, torch and tuning settings (the disk cache keeps other builds'
    verdicts too).
    """
    from . import backend_choice

    return backend_choice.verdicts(here)


def backend_verdict_stats() -> dict:
    """Verdict counters since the last clear_backend_verdicts(): ``{"timed": verdicts
    measured, "disk_loads": verdicts read from the disk cache, "disk_rejected": verdict files
    ignored as damaged, foreign or unreadable}``."""
    from . import backend_choice

    return backend_choice.stats()


def set_backend_verdict(op: str, dtype: torch.dtype, shape: tuple[int, int, int], choice: str,
                        *, device="cpu", layout: str = "NN", bias: bool = False) -> None:
    """Pins, in memory, the verdict ("tile" or "aten") of the bucket of `shape` (M, N, K) for
    `op` on `device` (as it is now: threads, tuning settings), with a bias added (a Linear's
    addmm) or not; the disk cache is untouched."""
    from . import backend_choice

    backend_choice.set_verdict(op, dtype, shape, choice, device=device, layout=layout, bias=bias)


def clear_backend_verdicts() -> None:
    """Forget the verdicts held in memory and their counters (those on disk stay, and are
    read again when needed)."""
    from . import backend_choice

    backend_choice.clear()
