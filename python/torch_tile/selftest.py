"""`python -m torch_tile selftest`: checks the ops on this machine's device (the GPU when
torch sees one, else the CPU) and reports, for users on hardware the project cannot
reach (AMD GPUs above all):

- parity of the three ops against float64 references: every dtype pair, ragged and
  aligned shapes, transposed, sliced and misaligned operands, biases and slopes (the
  generator of the project's own property tests), outputs poisoned before each call;
- a short speed table against torch.matmul and torch.add on the same device;
- the `env` report.

It prints a verdict and exits 1 on any mismatch; `--json PATH` writes the whole report,
to attach to a bug report.
"""

import json
import platform
import time

import torch

from . import runtime
from .testing import Case, cases, check, run

ALIGNED_SHAPES = [(64, 64, 64), (128, 256, 64), (256, 128, 512), (512, 512, 512)]
VECTOR_SIZES = [1, 1000, 4099, (1 << 16) + 3]


def _device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _poison(shape, dtype, device):
    """Fills a block the size of the next output and frees it: on a GPU the caching
    allocator hands the same memory to the op, so an element it fails to write shows."""
    if device.type != "cuda":
        return
    block = torch.empty(shape, dtype=dtype, device=device)
    block.fill_(float("nan") if dtype.is_floating_point else torch.iinfo(dtype).min)
    del block


def _parity_cases(count, seed):
    drawn = list(cases(count, seed))
    # Aligned shapes at every dtype pair, plain row-major operands: the fast paths.
    for index, (m, n, k) in enumerate(ALIGNED_SHAPES):
        for pair in {(c.dtype, c.out_dtype, c.result) for c in drawn}:
            for op in ("matmul", "matmul_leaky_relu"):
                if op == "matmul_leaky_relu" and pair[0] == "int8":
                    continue
                drawn.append(Case(
                    seed=seed * 7 + index, op=op, dtype=pair[0], out_dtype=pair[1],
                    result=pair[2], m=m, n=n, k=k, a_view="contiguous", b_view="contiguous",
                    slope=0.1 if op == "matmul_leaky_relu" else 0.0))
    return drawn


def check_parity(device, count, seed):
    """(checks run, failures as dicts with a reproducer)."""
    failures, checked = [], 0
    for case in _parity_cases(count, seed):
        checked += 1
        try:
            a, b = case.operands(device)
            bias = case.bias_operand(device)
            _poison((case.m, case.n), getattr(torch, case.result), device)
            check(case, a, b, run(case, a, b, bias), bias)
        except Exception as error:  # noqa: BLE001  (every failure is reported, none stops the run)
            failures.append({"case": str(case), "error": str(error).splitlines()[0][:300],
                             "reproducer": case.reproducer().replace("'cpu'", repr(device.type))})
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for size in VECTOR_SIZES:
            checked += 1
            try:
                a = torch.randn(size, device=device).to(dtype)
                b = torch.randn(size, device=device).to(dtype)
                _poison((size,), dtype, device)
                out = torch.ops.tile.vector_add(a, b)
                if not torch.equal(out, a + b):
                    raise AssertionError(f"{(out != a + b).sum().item()} of {size} sums differ")
            except Exception as error:  # noqa: BLE001
                failures.append({"case": f"vector_add {dtype} n={size}",
                                 "error": str(error).splitlines()[0][:300]})
    return checked, failures


def _seconds(fn, device, budget=0.2):
    """Median time of fn() after a warm-up, synchronized per call."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fn()
    sync()
    samples, deadline = [], time.perf_counter() + budget
    while len(samples) < 5 or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
    return sorted(samples)[len(samples) // 2]


def speed_table(device):
    sizes = [1024, 4096] if device.type == "cuda" else [256, 1024]
    dtypes = [torch.float16, torch.float32] if device.type == "cuda" else [torch.float32]
    rows = []
    for dtype in dtypes:
        for size in sizes:
            a = torch.randn(size, size, device=device).to(dtype)
            b = torch.randn(size, size, device=device).to(dtype)
            flops = 2 * size**3
            tile = _seconds(lambda: torch.ops.tile.matmul(a, b), device)
            ref = _seconds(lambda: torch.matmul(a, b), device)
            rows.append({"op": "matmul", "dtype": str(dtype).replace("torch.", ""),
                         "shape": f"{size}^3", "tile_tflops": flops / tile / 1e12,
                         "torch_tflops": flops / ref / 1e12, "tile_over_torch": ref / tile})
    n = 1 << 22
    a, b = torch.randn(n, device=device), torch.randn(n, device=device)
    tile = _seconds(lambda: torch.ops.tile.vector_add(a, b), device)
    ref = _seconds(lambda: torch.add(a, b), device)
    rows.append({"op": "vector_add", "dtype": "float32", "shape": "2^22",
                 "tile_gbps": 12 * n / tile / 1e9, "torch_gbps": 12 * n / ref / 1e9,
                 "tile_over_torch": ref / tile})
    return rows


def environment(device):
    report = {"torch_tile": runtime.compiler_version(), "torch": torch.__version__,
              "hip": torch.version.hip, "cuda": torch.version.cuda,
              "python": platform.python_version(), "host_target": runtime.host_target(),
              "device": str(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        report["gpu"] = props.name
        report["gpu_target"] = (f"hip:{props.gcnArchName}" if torch.version.hip
                                else f"cuda:sm_{props.major}{props.minor}")
    return report


def selftest(cases_count=150, seed=20261123, json_path=None, speed=True):
    device = _device()
    env = environment(device)
    print("torch-tile selftest on " + (env.get("gpu", "") + " (" + env.get("gpu_target", "") + ")"
                                      if device.type == "cuda" else f"the CPU ({env['host_target']})"))
    for name, value in env.items():
        print(f"  {name:<12}: {value}")
    start = time.perf_counter()
    checked, failures = check_parity(device, cases_count, seed)
    print(f"parity: {checked} checks against float64 references in {time.perf_counter() - start:.0f} s,"
          f" {len(failures)} mismatches")
    for failure in failures[:10]:
        print(f"  FAILED {failure['case']}: {failure['error']}")
    rows = []
    if speed and not failures:
        rows = speed_table(device)
        print(f"{'op':<11} {'dtype':<9} {'shape':<7} {'tile':>10} {'torch':>10} {'tile/torch':>10}")
        for row in rows:
            unit = "tflops" if "tile_tflops" in row else "gbps"
            print(f"{row['op']:<11} {row['dtype']:<9} {row['shape']:<7} "
                  f"{row['tile_' + unit]:>10.1f} {row['torch_' + unit]:>10.1f} "
                  f"{row['tile_over_torch']:>9.2f}x  ({'TFLOP/s' if unit == 'tflops' else 'GB/s'})")
    verdict = "PASS" if not failures else "FAIL"
    print(f"verdict: {verdict}" + ("" if not failures else
                                   f" ({len(failures)} of {checked} checks mismatched; "
                                   f"{'--json writes' if not json_path else json_path + ' has'} "
                                   "a reproducer for each)"))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"verdict": verdict, "environment": env, "checks": checked,
                       "failures": failures, "speed": rows, "seed": seed}, f, indent=2)
        print(f"wrote {json_path}")
    return 0 if not failures else 1
