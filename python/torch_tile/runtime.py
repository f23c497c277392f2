"""What the tile runtime knows: the host target, kernel cache counters."""

import json

import torch


def host_target() -> str:
    """The CPU target kernels are compiled for, e.g. ``cpu:znver3``."""
    return torch.ops.tile_runtime.host_target()


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
