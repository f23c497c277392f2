"""torch_tile.config: torch-tile's settings, in the style of ``torch._inductor.config``.

    import torch_tile
    torch_tile.config.autotune = True

    with torch_tile.config.patch(autotune=True, dump_dir="/tmp/tile-stages"):
        ...

    @torch_tile.config.patch({"autotune": False})
    def f(): ...

Every option is a module attribute with a ``TILE_<NAME>`` environment override read at import
(``TILE_AUTOTUNE=1``; dicts and lists as JSON). Setting an attribute checks the value (a
wrong name or type raises at once) and hands it to the C++ runtime, which reads it on the
next op call.

A matmul config is a dict of the knobs ``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``, ``GROUP_M``,
``num_warps``, ``num_stages``, ``waves_per_eu``, ``matrix_instr_nonkdim`` and ``kpack``; a
candidate may leave knobs out, which then keep the target's default.
"""

import contextlib
import copy
import json
import math
import os
import sys
import types

import torch

MATMUL_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages",
                "waves_per_eu", "matrix_instr_nonkdim", "kpack", "warp_specialize",
                "persistent", "num_ctas", "stream_k")
TARGET_FAMILIES = ("cpu", "hip", "cuda")
TUNABLE_OPS = ("matmul",)  # matmul_leaky_relu shares matmul's candidates
BACKEND_MATMUL_CHOICES = ("auto", "always", "never")


def _configs(*rows, keys):
    return [dict(zip(keys, row)) for row in rows]


# The AMD list starts from the ROCm Triton GEMM tutorial's fp16 candidates, with its MFMA
# shape and kpack made explicit.
_HIP_MATMUL = _configs(
    (128, 256, 16, 1, 2, 4, 0, 16, 1),
    (256, 256, 16, 4, 2, 8, 0, 16, 1),
    (128, 128, 32, 1, 2, 8, 0, 16, 1),
    (64, 128, 32, 8, 3, 4, 0, 16, 1),
    (64, 64, 32, 1, 8, 4, 0, 16, 1),
    keys=("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "waves_per_eu", "num_warps", "num_stages",
          "matrix_instr_nonkdim", "kpack"))

# The NVIDIA list of the same tutorial.
_CUDA_MATMUL = _configs(
    (128, 256, 64, 8, 3, 8), (64, 256, 32, 8, 4, 4), (128, 128, 32, 8, 4, 4),
    (128, 64, 32, 8, 4, 4), (64, 128, 32, 8, 4, 4), (128, 32, 32, 8, 4, 4),
    (64, 32, 32, 8, 5, 2), (32, 64, 32, 8, 5, 2),
    keys=("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_stages", "num_warps"))

# The CPU keeps a BLOCK_M x BLOCK_N accumulator in vector registers through the K loop:
# shapes around the 16 registers of a 4x64 or 8x32 f32 block on AVX-512 (8x16 on AVX2),
# with BLOCK_K trading the reuse of a row of b against the cache it occupies, and groups
# of 1024 rows of a that walk past each block column of b while it stays in L2.
_CPU_MATMUL = _configs(
    (4, 64, 256, 256), (8, 32, 256, 128), (8, 32, 128, 128), (8, 16, 256, 128),
    (4, 64, 128, 256), (4, 32, 256, 256),
    keys=("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"))

# name -> (default, type, what it does); a tuple for the type lists the values allowed.
# The defaults before any environment override.
_OPTIONS = {
    "autotune": (False, bool,
                 "benchmark the candidate configs on the first call of each (op, shape bucket, "
                 "dtypes, target) and keep the fastest whose result matches the default "
                 "config's; off: the heuristic default at once"),
    "autotune_progress_after": (1.0, float,
                                "seconds of autotuning after which progress is shown on a "
                                "terminal (stderr)"),
    "autotune_configs": ({"matmul": {"cpu": _CPU_MATMUL, "hip": _HIP_MATMUL,
                                     "cuda": _CUDA_MATMUL}}, dict,
                         "candidate configs per op and target family (cpu, hip, cuda); "
                         "matmul_leaky_relu shares matmul's"),
    "backend_matmul": ("auto", BACKEND_MATMUL_CHOICES,
                       "which GEMMs (mm, addmm, mm + leaky_relu) the tile rewrites of "
                       "backend=\"tile\" and torch_tile.inductor.install() put on tile: "
                       "'auto' where tile was measured faster on this device for the shape "
                       "bucket and dtype, 'always' every eligible one, 'never' none"),
    "cache_dir": (None, str,
                  "folder of the kernel and autotuning cache; None: $TILE_CACHE_DIR, else "
                  "~/.cache/torch_tile; '': no disk cache"),
    "dump_dir": (None, str,
                 "folder where every compiled kernel writes its stages (tile IR, lowered IR, "
                 "LLVM IR, assembly, resource report); None: no dumps"),
}


def _check(name, value):
    """The value as stored, or a ValueError/TypeError naming the option and the problem."""
    default, kind, _ = _OPTIONS[name]
    if value is None and default is None:
        return None
    if kind is bool:
        if not isinstance(value, bool):
            raise TypeError(f"torch_tile.config.{name} must be a bool, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"torch_tile.config.{name} must be a number, got {value!r}")
        # Seconds: NaN would compare false with everything (progress never or always).
        if math.isnan(value) or value < 0:
            raise ValueError(f"torch_tile.config.{name} must be a number of seconds >= 0 "
                             f"(inf: never), got {value!r}")
        return float(value)
    if isinstance(kind, tuple):
        if not isinstance(value, str) or value not in kind:
            raise ValueError(f"torch_tile.config.{name} must be one of "
                             f"{', '.join(map(repr, kind))}, got {value!r}")
        return value
    if kind is str:
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"torch_tile.config.{name} must be a path or None, got {value!r}")
        return os.fspath(value)
    return _check_autotune_configs(value)


def _check_autotune_configs(value):
    if not isinstance(value, dict):
        raise TypeError(f"torch_tile.config.autotune_configs must be a dict of op -> "
                        f"{{family: [config, ...]}}, got {value!r}")
    for op, families in value.items():
        if op not in TUNABLE_OPS:
            raise ValueError(f"torch_tile.config.autotune_configs: no tunable op {op!r}; "
                             "tunable: matmul (its configs also serve matmul_leaky_relu)")
        if not isinstance(families, dict):
            raise TypeError(f"torch_tile.config.autotune_configs[{op!r}] must map target "
                            f"families to lists of configs, got {families!r}")
        for family, configs in families.items():
            where = f"torch_tile.config.autotune_configs[{op!r}][{family!r}]"
            if family not in TARGET_FAMILIES:
                raise ValueError(f"{where}: no target family {family!r}; families: "
                                 f"{', '.join(TARGET_FAMILIES)}")
            if not isinstance(configs, (list, tuple)):
                raise TypeError(f"{where} must be a list of configs, got {configs!r}")
            for config in configs:
                if not isinstance(config, dict) or not config:
                    raise TypeError(f"{where}: a config is a non-empty dict of knobs, "
                                    f"got {config!r}")
                for knob, number in config.items():
                    if knob not in MATMUL_KNOBS:
                        raise ValueError(f"{where}: unknown knob {knob!r} in {config}; knobs: "
                                         f"{', '.join(MATMUL_KNOBS)}")
                    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                        raise ValueError(f"{where}: knob {knob} must be a non-negative int, "
                                         f"got {number!r}")
    return copy.deepcopy(value)


def _from_environment(name):
    """The TILE_<NAME> override of an option, parsed, or the default."""
    default, kind, _ = _OPTIONS[name]
    variable = "TILE_" + name.upper()
    text = os.environ.get(variable)
    if text is None:
        return copy.deepcopy(default)
    try:
        if kind is bool:
            lowered = text.strip().lower()
            if lowered not in ("1", "0", "true", "false", "on", "off", "yes", "no", ""):
                raise ValueError("expected 1/0, true/false, on/off or yes/no")
            return lowered in ("1", "true", "on", "yes")
        if kind is float:
            return _check(name, float(text))
        if isinstance(kind, tuple):
            return _check(name, text.strip())
        if kind is str:
            return text
        return _check(name, json.loads(text))
    except (ValueError, TypeError) as error:
        raise ValueError(f"environment variable {variable}={text!r}: {error}") from None


def _push(name):
    """Hands an option to the C++ runtime."""
    runtime = torch.ops.tile_runtime
    if name in ("autotune", "autotune_progress_after"):
        runtime.set_autotune(_values["autotune"], _values["autotune_progress_after"])
    elif name == "autotune_configs":
        # Every tunable op, so that one left out of the dict loses its candidates.
        for op in TUNABLE_OPS:
            families = _values["autotune_configs"].get(op, {})
            for family in TARGET_FAMILIES:
                texts = [",".join(f"{knob}={number}" for knob, number in config.items())
                         for config in families.get(family, [])]
                runtime.set_autotune_candidates(op, family, texts)
    elif name == "cache_dir":
        runtime.set_cache_dir(_values["cache_dir"])
    elif name == "dump_dir":
        runtime.set_dump_dir(_values["dump_dir"])


_values = {name: _from_environment(name) for name in _OPTIONS}


class _ConfigModule(types.ModuleType):
    """Options read and written as attributes; anything else is the module's own."""

    def __getattr__(self, name):
        if name in _OPTIONS:
            return _values[name]
        raise AttributeError(f"torch_tile.config has no option {name!r}; options: "
                             f"{', '.join(_OPTIONS)}")

    def __setattr__(self, name, value):
        if name not in _OPTIONS:
            raise AttributeError(f"torch_tile.config has no option {name!r}; options: "
                                 f"{', '.join(_OPTIONS)}")
        _values[name] = _check(name, value)
        _push(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_OPTIONS))


class _Patch(contextlib.ContextDecorator):
    """Sets options on entry and restores them on exit; usable as a decorator too."""

    def __init__(self, changes):
        for name in changes:
            if name not in _OPTIONS:
                raise AttributeError(f"torch_tile.config has no option {name!r}; options: "
                                     f"{', '.join(_OPTIONS)}")
        self._changes = changes
        self._saved = []

    def __enter__(self):
        module = sys.modules[__name__]
        saved = {name: _values[name] for name in self._changes}
        try:
            for name, value in self._changes.items():
                setattr(module, name, value)
        except Exception:
            for name, value in saved.items():
                setattr(module, name, value)
            raise
        self._saved.append(saved)
        return self

    def __exit__(self, *exc):
        module = sys.modules[__name__]
        for name, value in self._saved.pop().items():
            setattr(module, name, value)
        return False


def patch(changes=None, **more):
    """Options set for a ``with`` block or a decorated function, then restored:
    ``patch(autotune=True)`` or ``patch({"autotune": True})``."""
    merged = dict(changes or {})
    merged.update(more)
    return _Patch(merged)


def get_config_copy():
    """Every option and its current value."""
    return copy.deepcopy(_values)


def describe():
    """Every option with its value and what it does, one per line."""
    return "\n".join(f"{name} = {_values[name]!r}  # {doc}"
                     for name, (_, _, doc) in _OPTIONS.items())


sys.modules[__name__].__class__ = _ConfigModule
for _name in _OPTIONS:
    _push(_name)
