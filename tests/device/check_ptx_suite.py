"""Run the PTX of build_ptx_suite.py on an NVIDIA GPU through the CUDA driver API and
check it against torch in float64 (outputs poisoned with NaN first, fresh random
inputs, ragged and strided shapes), then time the large matmuls against torch.matmul.

    python tests/device/check_ptx_suite.py .device-ptx [--json OUT.json]
"""

import ctypes
import json
import math
import os
import sys
import time

import torch

CU = ctypes.CDLL("libcuda.so.1")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int8": torch.int8, "int32": torch.int32}
BOUND = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2, "int32": 0.0}


def check(result, what):
    if result != 0:
        raise RuntimeError(f"{what} failed with CUresult {result}")


def load(path, name):
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    data = open(path, "rb").read() + b"\0"
    check(CU.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(data)), f"cuModuleLoadData({path})")
    check(CU.cuModuleGetFunction(ctypes.byref(function), module, name.encode()), "cuModuleGetFunction")
    return function


def launch(function, grid, threads, args):
    holders = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            holders.append(ctypes.c_uint64(arg.data_ptr()))
        elif isinstance(arg, float):
            holders.append(ctypes.c_float(arg))
        else:
            holders.append(ctypes.c_int32(arg))
    params = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    check(CU.cuLaunchKernel(function, grid, 1, 1, threads, 1, 1, 0, stream, params, None), "cuLaunchKernel")


def random(shape, dtype):
    if dtype == torch.int8:
        return torch.randint(-128, 128, shape, dtype=dtype, device="cuda")
    return (torch.randn(shape, device="cuda") / max(1, shape[-1]) ** 0.25).to(dtype)


def rel_error(out, ref):
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def run_vector_add(kernel, function, rows):
    dtype = DTYPES[kernel["dtype"]]
    block = kernel["config"]["BLOCK_SIZE"]
    for n in (1, 2047, 2048, 1_000_003):
        a, b = random((n,), dtype), random((n,), dtype)
        out = torch.full((n,), float("nan"), device="cuda", dtype=dtype)
        launch(function, math.ceil(n / block), kernel["threads"], [a, b, out, n])
        torch.cuda.synchronize()
        ok = torch.equal(out, a + b)
        rows.append((kernel["file"], f"n={n}", "exact" if ok else "MISMATCH", ok))


def run_matmul(kernel, function, rows, timings):
    dtype, out_dtype = DTYPES[kernel["dtype"]], DTYPES[kernel["out_dtype"]]
    config = kernel["config"]
    bm, bn = config["BLOCK_M"], config["BLOCK_N"]
    leaky = kernel["op"] == "matmul_leaky_relu"
    shapes = [(False, 128, 256, 32), (False, 128, 16, 32), (False, 64, 64, 32), (False, 1, 1, 1),
              (False, 7, 13, 5), (False, 257, 129, 65), (False, 5, 7, 0), (False, 1024, 1024, 1024),
              (True, 300, 200, 100)]
    for transposed, m, n, k in shapes:
        a = random((k, m), dtype).t() if transposed else random((m, k), dtype)
        b = random((k, n), dtype)
        c = torch.full((m, n), float("nan") if out_dtype.is_floating_point else -7,
                       device="cuda", dtype=out_dtype)
        args = [a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                c.stride(0), c.stride(1)]
        if leaky:
            args.append(0.2)
        grid = math.ceil(m / bm) * math.ceil(n / bn)
        launch(function, grid, kernel["threads"], args)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        if leaky:
            ref = torch.nn.functional.leaky_relu(ref, 0.2)
        if kernel["dtype"] in ("float16", "bfloat16") and out_dtype == torch.float32:
            bound = 1e-5
        else:
            bound = BOUND[kernel["out_dtype"]]
        if k == 0:
            ok = bool((c.double() == 0).all())
            err = 0.0
        else:
            err = rel_error(c, ref)
            ok = err <= bound and not c.double().isnan().any()
        rows.append((kernel["file"], f"{'aT ' if transposed else ''}{m}x{n}x{k}", f"{err:.1e}", ok))
    if dtype != torch.int8:
        size = 4096
        a, b = random((size, size), dtype), random((size, size), dtype)
        c = torch.empty((size, size), device="cuda", dtype=out_dtype)
        args = [a, b, c, size, size, size, size, 1, size, 1, size, 1] + ([0.2] if leaky else [])
        grid = (size // bm) * (size // bn)

        def tile_call():
            launch(function, grid, kernel["threads"], args)

        def torch_call():
            r = torch.matmul(a, b)
            return torch.nn.functional.leaky_relu(r, 0.2) if leaky else r

        for name, fn in (("tile", tile_call), ("torch", torch_call)):
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                fn()
            end.record()
            torch.cuda.synchronize()
            ms = start.elapsed_time(end) / 10
            timings.append((kernel["file"], name, ms, 2 * size**3 / ms / 1e9))


def main():
    folder = sys.argv[1]
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    torch.manual_seed(0)
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    rows, timings = [], []
    for kernel in manifest["kernels"]:
        try:
            function = load(os.path.join(folder, kernel["file"]), kernel["op"])
            if kernel["op"] == "vector_add":
                run_vector_add(kernel, function, rows)
            else:
                run_matmul(kernel, function, rows, timings)
        except Exception as error:  # report and go on with the next kernel
            rows.append((kernel["file"], "-", f"ERROR {error}", False))
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    for file, case, err, ok in rows:
        print(f"{'ok  ' if ok else 'FAIL'} {file:<45} {case:<16} {err}")
    for file, name, ms, tflops in timings:
        print(f"time {file:<45} {name:<6} {ms:8.3f} ms {tflops:8.1f} TFLOP/s")
    failed = sum(not ok for *_, ok in rows)
    print(f"{len(rows) - failed} passed, {failed} failed")
    if len(sys.argv) > 3 and sys.argv[2] == "--json":
        json.dump({"device": torch.cuda.get_device_name(0), "rows": rows, "timings": timings},
                  open(sys.argv[3], "w"), indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
