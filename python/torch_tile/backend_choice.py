"""Whether a GEMM goes to tile or stays aten's in the graphs the tile rewrites touch
(torch_tile.config.backend_matmul = "auto"): a verdict per device, op, dtype, shape bucket,
operand layout and bias (a Linear's addmm, timed against aten's addmm), measured once and
kept in memory and in the disk cache.

The first GEMM of a bucket times tile's kernel against aten's on random operands of its
shape, dtype, strides and device: tile's first call compiles it (and autotunes it when
torch_tile.config.autotune is on), so the tile time is that of the kernel the compiled
graph will run. The verdict is "tile" only when tile's median is more than margin(device)
below aten's.

Buckets are those of the C++ autotuner (csrc/torch/MatmulTuning.cpp): the next power of
two of each of M, N and K, so a verdict covers the shapes one tuning winner covers. The
operand layout (row- or column-major a and b) is part of the key as well, unlike the
autotuner's: tile compiles another kernel for each layout (its unit strides are compile-time
constants), and on the CPU a column-major b is copied first, so the layouts of one bucket
(the forward's x @ w.T, the backward's g @ w and g.T @ x) win or lose apart.

On disk a verdict is a JSON file of its own in <cache_dir>/backend-verdicts, named by the
hash of its key. A file is written whole (temporary file, fsync, rename) so a reader sees
a whole verdict or none, and one whose content is damaged, was written for another key, is
not a regular file or is not the user's own is ignored with a warning and timed again.
"""

import contextlib
import functools
import hashlib
import itertools
import json
import logging
import math
import os
import stat
import statistics
import tempfile
import threading
import time
import warnings

import torch

from . import config, runtime

log = logging.getLogger(__name__)
aten = torch.ops.aten
tile = torch.ops.tile

# Tile is chosen only when its median is below (1 - margin) of aten's, so that a tie stays
# aten's: Inductor knows aten's GEMMs (it keeps an addmm's bias inside the GEMM, plans their
# layouts), while tile's is an opaque call with costs around the kernel that a timing of
# the kernel alone misses. On this project's 2-core CPU a bucket timed 2% ahead of aten
# (float32 512x512x2048 with a bias, the weight transposed) took the model's training step
# 3% slower than aten's GEMM did (bench_backend, interleaved): in the step, other ops have
# evicted the weight that tile copies into panels. 5% keeps such ties aten's; the
# differences that matter are larger (tile 1.3-1.7x of aten in bfloat16 and float16 on that
# CPU). A verdict read from the disk cache is decided again from its two times, whatever
# margin it was stored with.
CPU_MARGIN = 0.05
# On a GPU the call is asynchronous and tile's operands are read where they lie: what the
# graph pays for a GEMM is its kernel, the time the verdict measures, so the margin only
# has to cover the spread of that measurement (about 1% for the median of 15 calls of a
# large GEMM on an H100). 5% had kept cuBLAS for a Linear's backward GEMMs at
# 4096x16384x4096, where tile timed 4.3-4.7% ahead (0.815 against 0.851 ms, 0.796 against
# 0.836).
GPU_MARGIN = 0.02


def margin(device_type: str) -> float:
    """How far ahead of aten's GEMM tile's must time to be chosen on `device_type` (a
    device type this was not measured on, or a verdict's record without one, takes the
    larger)."""
    return GPU_MARGIN if device_type == "cuda" else CPU_MARGIN


# Seconds of timed repetitions per verdict, tile's and aten's together (a GEMM longer than
# that still gets MIN_REPETITIONS calls of each). Beside it each verdict costs a warm-up
# and a calibrating call of each; tile's warm-up compiles its kernel, as the graph would
# where tile wins. A model with tens of distinct GEMM buckets compiles a few seconds longer
# the first time, and no longer once the verdicts are on disk.
BUDGET_S = 0.1
# Each repetition times enough calls to last about this long, so that timer resolution
# and launch overheads do not decide a small GEMM.
REPETITION_S = 1e-3
MIN_REPETITIONS = 3
MAX_REPETITIONS = 15
# leaky_relu's slope does not change the time of either side.
SLOPE = 0.01
# On the CPU each side is timed over several sets of operands, used in turn, together at
# least COLD_OPERAND_BYTES (past both cores' L2 on this project's CPU): in a model's step
# other ops evict a GEMM's weight from the caches before its next call, and tile copies b
# into panels on every call. Timed on the same hot operands, float32 512x256x1024 with a
# bias (the weight transposed) read 6% ahead of aten, and then made the model's forward
# 4% slower than aten's GEMM did (2-core Xeon); timed cold, it stays aten's.
COLD_OPERAND_BYTES = 8 << 20
MAX_OPERAND_SETS = 16

FOLDER = "backend-verdicts"
FORMAT = "torch_tile backend verdict 1"
OPS = ("matmul", "matmul_leaky_relu", "matmul_leaky_relu_backward")
CHOICES = ("tile", "aten")
# The fields of a key that describe where it was measured, as opposed to what.
CONTEXT_FIELDS = ("device_type", "device", "threads", "compiler", "build", "torch", "tuning",
                  "timing")

# Verdicts by key text; each {"key": {...}, "tile_ms", "aten_ms", "choice", "source"}.
_verdicts: dict[str, dict] = {}
# Files already read, by path, with the (mtime, size, inode) they had: each is read (and a
# bad one warned about) once until it changes.
_files_read: dict[str, tuple] = {}
_stats = {"timed": 0, "disk_loads": 0, "disk_rejected": 0}
# One verdict is timed at a time: two timings side by side would slow each other.
_lock = threading.RLock()


@functools.cache
def _gpu_name(index: int) -> str:
    if torch.version.hip:
        return "hip:" + torch.cuda.get_device_properties(index).gcnArchName
    return torch.cuda.get_device_name(index)


def _tuning(family: str) -> str:
    """What tile's time depends on in the autotuning settings: its candidates when on."""
    if not config.autotune:
        return "off"
    candidates = config.autotune_configs.get("matmul", {}).get(family, [])
    text = json.dumps(candidates, sort_keys=True)
    return "on:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _context(device: torch.device) -> dict:
    """Where a verdict is measured: everything besides the GEMM that decides the times."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        name, threads = _gpu_name(index), None
        family = "hip" if torch.version.hip else "cuda"
    else:
        name, threads, family = runtime.host_target(), torch.get_num_threads(), "cpu"
    context = {"device_type": device.type, "device": name, "threads": threads,
               "compiler": runtime.compiler_version(), "build": runtime.core_build_id(),
               "torch": torch.__version__, "tuning": _tuning(family)}
    # How the CPU's verdicts are timed (see COLD_OPERAND_BYTES): those timed on hot
    # operands, which have no such field, are timed again. (Absent on GPUs: their verdicts
    # keep their keys.)
    if device.type == "cpu":
        context["timing"] = f"operands cold in {COLD_OPERAND_BYTES >> 20} MB"
    return context


def _current_contexts() -> list[dict]:
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices += [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    contexts = []
    for device in devices:
        context = _context_of(_context(device))
        if context not in contexts:
            contexts.append(context)
    return contexts


def _context_of(key: dict) -> dict:
    """The fields of a key (or a context) that say where it was measured, absent ones None."""
    return {f: key.get(f) for f in CONTEXT_FIELDS}


def bucket(size: int) -> int:
    """The autotuner's bucket of a size: the next power of two (1 for 0 and 1)."""
    power = 1
    while power < size:
        power <<= 1
    return power


def _key(op: str, device: torch.device, dtype: torch.dtype, m: int, n: int, k: int,
         layout: str, bias: bool = False) -> dict:
    if op not in OPS:
        raise ValueError(f"no tile GEMM op {op!r}; ops: {', '.join(OPS)}")
    key = {**_context(device), "op": op, "dtype": str(dtype).removeprefix("torch."),
           "bucket": [bucket(m), bucket(n), bucket(k)], "layout": layout}
    # A GEMM with a bias (a Linear's addmm) has verdicts of its own: aten adds the bias
    # inside its GEMM, which can make it faster than its plain mm (on this project's CPU,
    # MKL's addmm ran 7% ahead of its mm + nothing at 256x1024x256), so the plain mm's
    # verdict would favour tile where it loses. (Absent otherwise: earlier verdicts keep
    # their keys.)
    if bias:
        key["bias"] = True
    return key


def _key_text(key: dict) -> str:
    return json.dumps(key, sort_keys=True)


def _file_name(key_text: str) -> str:
    return hashlib.sha256(key_text.encode()).hexdigest()[:40] + ".json"


def _folder() -> str | None:
    """The verdicts' folder in the disk cache; None while the disk cache is off."""
    root = runtime.cache_dir()
    return os.path.join(root, FOLDER) if root else None


def _hint(size) -> int:
    """A size as an int: a symbolic one by its hint, as Inductor plans with it."""
    if isinstance(size, int):
        return size
    from torch._inductor import config as inductor_config

    fallback = inductor_config.unbacked_symint_fallback
    try:
        from torch.fx.experimental.symbolic_shapes import optimization_hint
    except ImportError:  # torch before 2.13 names it hint_int
        from torch.fx.experimental.symbolic_shapes import hint_int as optimization_hint
    return int(optimization_hint(size, fallback=fallback))


def _layout_letter(sizes, strides) -> str:
    """N: rows contiguous, T: columns contiguous (a transposed matrix), S: neither."""
    if strides[1] == 1 or sizes[1] == 1:
        return "N"
    if strides[0] == 1 or sizes[0] == 1:
        return "T"
    return "S"


def _shape_of(fake) -> tuple[list[int], list[int]]:
    return [_hint(s) for s in fake.shape], [_hint(s) for s in fake.stride()]


def _operand(fake, generator, device) -> torch.Tensor:
    """A random real tensor on `device` with `fake`'s sizes, strides and dtype."""
    sizes, strides = _shape_of(fake)
    if _overlaps(sizes, strides):
        # Elements that share memory (a stride of 0) cannot be filled at random; tile reads
        # such an operand as any other strided one, so a dense one times the same.
        strides = torch.empty(sizes, device="meta").stride()
    real = torch.empty_strided(sizes, strides, dtype=fake.dtype, device=device)
    return real.normal_(generator=generator)


def _overlaps(sizes, strides) -> bool:
    """Whether two elements of a 2-D tensor of these sizes and strides share memory."""
    dims = sorted((stride, size) for size, stride in zip(sizes, strides) if size > 1)
    if not dims:
        return False
    if dims[0][0] < 1:
        return True
    return len(dims) == 2 and dims[1][0] < dims[0][0] * dims[0][1]


def _median_seconds(runs, device: torch.device) -> list[float]:
    """Median seconds per call of each of `runs`, timed by turns so that a slow spell of
    the machine falls on all of them."""
    if device.type == "cuda":
        def sync():
            torch.cuda.synchronize(device)
    else:
        def sync():
            pass
    for run in runs:  # tile's first call compiles its kernel, aten's may load a library
        run()
    sync()
    once = []
    for run in runs:
        start = time.perf_counter()
        run()
        sync()
        once.append(max(time.perf_counter() - start, 1e-7))
    calls = max(1, min(10_000, round(REPETITION_S / max(once))))
    repetitions = max(MIN_REPETITIONS,
                      min(MAX_REPETITIONS, int(BUDGET_S / (calls * sum(once)))))
    samples = [[] for _ in runs]
    order = list(range(len(runs)))
    for _ in range(repetitions):
        for i in order:
            if device.type == "cuda":
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                for _ in range(calls):
                    runs[i]()
                end.record()
                end.synchronize()
                samples[i].append(start.elapsed_time(end) / 1e3 / calls)
            else:
                begin = time.perf_counter()
                for _ in range(calls):
                    runs[i]()
                samples[i].append((time.perf_counter() - begin) / calls)
        order.reverse()
    return [statistics.median(s) for s in samples]


def _time(op: str, a, b, bias=None) -> tuple[float, float]:
    """(tile, aten) median seconds of `op` on random operands shaped as fakes a and b, with
    the bias shaped as fake `bias` added (aten's addmm) where there is one, and for
    matmul_leaky_relu_backward an activation of the result's shape."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily(), torch.no_grad():
        generator = torch.Generator(a.device).manual_seed(0)  # the user's RNG is left alone
        fakes = [a, b] if bias is None else [a, b, bias]
        if op == "matmul_leaky_relu_backward":
            fakes.append(torch.empty((_hint(a.shape[0]), _hint(b.shape[1])), dtype=a.dtype,
                                     device="meta"))
        sets = [[_operand(f, generator, a.device) for f in fakes]]
        if a.device.type == "cpu":
            set_bytes = sum(t.untyped_storage().nbytes() for t in sets[0])
            count = min(MAX_OPERAND_SETS, -(-COLD_OPERAND_BYTES // max(set_bytes, 1)))
            sets += [[_operand(f, generator, a.device) for f in fakes] for _ in range(count - 1)]
        turn = itertools.count()

        def operands():
            return sets[next(turn) % len(sets)]

        def gemm():
            x, y, *c = operands()
            return aten.addmm(c[0], x, y) if c else aten.mm(x, y)

        def tile_gemm(fn, *args):
            x, y, *c = operands()
            return fn(x, y, *args, **({"bias": c[0]} if c else {}))

        if op == "matmul":
            runs = [lambda: tile_gemm(tile.matmul), gemm]
        elif op == "matmul_leaky_relu_backward":
            # Inductor's gate after aten's GEMM is a pointwise kernel of the GEMM's output
            # and the activation, as aten's leaky_relu_backward is.
            def tile_gated():
                x, y, activation = operands()
                return tile.matmul_leaky_relu_backward(x, y, activation, SLOPE)

            def aten_gated():
                x, y, activation = operands()
                return aten.leaky_relu_backward(aten.mm(x, y), activation, SLOPE, False)

            runs = [tile_gated, aten_gated]
            if a.device.type == "cpu":  # as for matmul_leaky_relu below
                one = torch.zeros(1)
                runs.append(lambda: aten.leaky_relu_backward(one, one, SLOPE, False))
        else:
            # Outside max-autotune Inductor calls aten's GEMM as an extern kernel, so the
            # leaky_relu after it runs as a kernel of its own. In place: a second output
            # would cost eager an allocation that Inductor's kernel does not pay (on the
            # CPU, fresh pages for each call: 0.3 ms of 1.2 at 256x1024).
            runs = [lambda: tile_gemm(tile.matmul_leaky_relu, SLOPE),
                    lambda: aten.leaky_relu_(gemm(), SLOPE)]
            if a.device.type == "cpu":
                # On the CPU that kernel is Inductor's own C++, called from its wrapper
                # without the dispatcher, where eager's leaky_relu_ pays a dispatcher call
                # of a few microseconds: timed alone (on one element) and taken off aten's
                # side. Counted, it had put tile ahead at 64x128x64 in isolation (32 us
                # against 33) while in the compiled graph tile's GEMM cost 10 us more.
                one = torch.zeros(1)
                runs.append(lambda: aten.leaky_relu_(one, SLOPE))
        tile_s, aten_s, *call = _median_seconds(runs, a.device)
        if call:
            aten_s = max(aten_s - call[0], aten_s / 2)
    return tile_s, aten_s


def _make_private_dirs(path: str) -> None:
    """Creates `path` and any missing parent 0700, as the C++ disk cache makes its own."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        _make_private_dirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def _warn(message: str) -> None:
    warnings.warn(f"torch_tile: {message}", stacklevel=3)


def _store(key_text: str, verdict: dict) -> None:
    folder = _folder()
    if folder is None:
        return
    record = {"format": FORMAT, "key": verdict["key"], "tile_ms": verdict["tile_ms"],
              "aten_ms": verdict["aten_ms"], "choice": verdict["choice"],
              "margin": margin(verdict["key"]["device_type"])}
    path = os.path.join(folder, _file_name(key_text))
    try:
        _make_private_dirs(folder)
        # A dot name: never read as a verdict, even when a killed writer leaves it behind.
        descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "w") as out:
                json.dump(record, out, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        # The rename itself reaches the disk only with its folder.
        folder_descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(folder_descriptor)
        finally:
            os.close(folder_descriptor)
        info = os.stat(path)
        _files_read[path] = (info.st_mtime_ns, info.st_size, info.st_ino)
    except OSError as error:
        _warn(f"cannot store the backend verdict in {folder} ({error}); it is kept in "
              "memory for this process")


def _is_milliseconds(value) -> bool:
    return (value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                              and math.isfinite(value) and value >= 0))


def _read(path: str) -> tuple[bytes | None, str | None]:
    """(content, None) of a regular file of the user's own that only they may write, else
    (None, why not). Opened without following a link or waiting on a FIFO; the checks are
    made on what was opened."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return None, f"it cannot be opened ({error.strerror})"
    with os.fdopen(descriptor, "rb") as source:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return None, "it is not a regular file"
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            return None, "another user owns it or may write it"
        content = source.read(65537)
    if len(content) > 65536:
        return None, "it is too large for a verdict"
    return content, None


def _parse(path: str) -> tuple[dict | None, str | None]:
    """(record, None) when the file at `path` is a whole verdict of the user's own, else
    (None, why not)."""
    content, problem = _read(path)
    if content is None:
        return None, problem
    try:
        record = json.loads(content)
    except ValueError as error:
        return None, f"it does not read as JSON ({error})"
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None, "it is not a verdict of this version of torch_tile"
    key = record.get("key")
    if not isinstance(key, dict) or _file_name(_key_text(key)) != os.path.basename(path):
        return None, "it was written for another key"
    if record.get("choice") not in CHOICES or not _is_milliseconds(record.get("tile_ms")) \
            or not _is_milliseconds(record.get("aten_ms")):
        return None, "its fields are damaged"
    return record, None


def _load_file(path: str) -> None:
    """Takes the verdict in the file at `path` into memory, unless it was read unchanged
    before; a bad file is warned about (once) and left to be replaced."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as error:
        info, problem = None, f"it cannot be read ({error})"
    stamp = None if info is None else (info.st_mtime_ns, info.st_size, info.st_ino)
    if stamp is not None and _files_read.get(path) == stamp:
        return
    _files_read[path] = stamp
    record = None
    if info is not None:
        record, problem = _parse(path)
    if record is None:
        _stats["disk_rejected"] += 1
        _warn(f"ignoring the backend verdict file {path}: {problem}; its GEMM is timed again "
              "when compiled")
        return
    key_text = _key_text(record["key"])
    if key_text not in _verdicts:
        _verdicts[key_text] = {"key": record["key"], "tile_ms": record["tile_ms"],
                               "aten_ms": record["aten_ms"],
                               "choice": _choice(record["tile_ms"], record["aten_ms"],
                                                 record["key"].get("device_type")),
                               "source": "disk"}
        _stats["disk_loads"] += 1


def _load_folder() -> None:
    folder = _folder()
    if folder is None:
        return
    try:
        names = sorted(name for name in os.listdir(folder)
                       if name.endswith(".json") and not name.startswith("."))
    except OSError:  # no folder yet, or one we cannot list: nothing to reuse
        return
    for name in names:
        _load_file(os.path.join(folder, name))


def tile_wins(op: str, a, b, bias=None) -> bool:
    """Whether tile's `op` (one of OPS) beats aten's on operands
    shaped as fake (or real) 2-D tensors a and b, with a 1-D `bias` added where given (the
    kernel's bias; aten's addmm), by the verdict of their bucket: known, read from the
    disk cache, or measured now."""
    with _lock:
        (m, k), a_strides = _shape_of(a)
        (_, n), b_strides = _shape_of(b)
        layout = (_layout_letter((m, k), a_strides)
                  + _layout_letter((k, n), b_strides))
        key = _key(op, a.device, a.dtype, m, n, k, layout, bias=bias is not None)
        key_text = _key_text(key)
        if key_text not in _verdicts and (folder := _folder()) is not None:
            _load_file(os.path.join(folder, _file_name(key_text)))
        verdict = _verdicts.get(key_text)
        if verdict is None:
            verdict = _measure(op, a, b, key, key_text, bias)
        return verdict["choice"] == "tile"


def _choice(tile_time: float, aten_time: float, device_type: str) -> str:
    return "tile" if tile_time < aten_time * (1 - margin(device_type)) else "aten"


def _measure(op, a, b, key, key_text, bias=None) -> dict:
    try:
        tile_s, aten_s = _time(op, a, b, bias)
    except Exception as error:  # noqa: BLE001  (a kernel that fails to build or run)
        # Remembered in memory only: the cause (memory, a driver) may be gone next time.
        _warn(f"timing tile.{op} against aten for {key['dtype']} bucket "
              f"{'x'.join(map(str, key['bucket']))} failed ({error}); keeping aten's GEMM")
        verdict = {"key": key, "tile_ms": None, "aten_ms": None, "choice": "aten",
                   "source": "failed"}
        _verdicts[key_text] = verdict
        return verdict
    choice = _choice(tile_s, aten_s, key["device_type"])
    verdict = {"key": key, "tile_ms": tile_s * 1e3, "aten_ms": aten_s * 1e3,
               "choice": choice, "source": "timed"}
    _verdicts[key_text] = verdict
    _stats["timed"] += 1
    log.info("tile backend: %s%s %s bucket %s layout %s on %s: tile %.4f ms, aten %.4f ms -> %s",
             op, " with bias" if key.get("bias") else "", key["dtype"],
             "x".join(map(str, key["bucket"])), key["layout"], key["device"],
             tile_s * 1e3, aten_s * 1e3, choice)
    _store(key_text, verdict)
    return verdict


def fingerprint() -> str:
    """A digest of the verdicts that apply on this machine now (those of this process's
    devices, compiler, torch and tuning settings; the disk's included) and of those
    settings: the part of the rewrite pass's uuid that keeps Inductor's caches from
    serving a graph decided by other verdicts."""
    with _lock:
        _load_folder()
        contexts = _current_contexts()
        rows = sorted(f"{text}={verdict['choice']}" for text, verdict in _verdicts.items()
                      if _context_of(verdict["key"]) in contexts)
        material = "\n".join([_key_text(c) for c in contexts] + rows)
    return hashlib.sha256(material.encode()).hexdigest()


def set_verdict(op: str, dtype: torch.dtype, shape: tuple[int, int, int], choice: str, *,
                device: str | torch.device = "cpu", layout: str = "NN", bias: bool = False) -> None:
    """Pins the verdict of the bucket of `shape` (M, N, K) in memory, for this process."""
    if choice not in CHOICES:
        raise ValueError(f"a verdict is one of {', '.join(map(repr, CHOICES))}, got {choice!r}")
    if len(layout) != 2 or not set(layout) <= set("NTS"):
        raise ValueError(f"layout is two of N, T, S (a's then b's), got {layout!r}")
    m, n, k = shape
    key = _key(op, torch.device(device), dtype, m, n, k, layout, bias=bias)
    with _lock:
        _verdicts[_key_text(key)] = {"key": key, "tile_ms": None, "aten_ms": None,
                                     "choice": choice, "source": "set"}


def verdicts(here: bool = False) -> list[dict]:
    with _lock:
        contexts = _current_contexts() if here else None
        return [{"bias": False, **verdict["key"], "bucket": tuple(verdict["key"]["bucket"]),
                 **{f: verdict[f] for f in ("tile_ms", "aten_ms", "choice", "source")}}
                for verdict in _verdicts.values()
                if contexts is None
                or _context_of(verdict["key"]) in contexts]


def stats() -> dict:
    with _lock:
        return dict(_stats)


def clear() -> None:
    with _lock:
        _verdicts.clear()
        _files_read.clear()
        for name in _stats:
            _stats[name] = 0
