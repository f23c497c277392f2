"""What the tile runtime knows: the host target, kernel cache counters."""

import json

import torch


def host_target() -> str:
    """The CPU target kernels are compiled for, e.g. ``cpu:znver3``."""
    return torch.ops.tile_runtime.host_target()


def cache_stats() -> dict:
    """In-memory kernel cache counters: ``{"hits": int, "misses": int}``."""
    return json.loads(torch.ops.tile_runtime.cache_stats())


def clear_cache() -> None:
    """Forget every compiled kernel: the next call of each op compiles again."""
    torch.ops.tile_runtime.clear_cache()


def compiler_version() -> str:
    return torch.ops.tile_runtime.compiler_version()
