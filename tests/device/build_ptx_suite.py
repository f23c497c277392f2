"""Compile the ops to PTX here (LLVM 22 is here, not on the GPU machine) for
check_ptx_suite.py to load and run on an NVIDIA GPU through the CUDA driver API.

    python tests/device/build_ptx_suite.py --out .device-ptx [--target cuda:sm_90]
"""

import argparse
import json
import os

import torch

import torch_tile  # noqa: F401

DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int8": "i8", "int32": "i32"}

# (op, input dtype, output dtype)
KERNELS = [
    ("vector_add", "float32", "float32"),
    ("vector_add", "float16", "float16"),
    ("matmul", "float16", "float16"),
    ("matmul", "bfloat16", "bfloat16"),
    ("matmul", "float16", "float32"),
    ("matmul", "float32", "float32"),
    ("matmul", "int8", "int32"),
    ("matmul_leaky_relu", "float16", "float16"),
    ("matmul_leaky_relu", "bfloat16", "float32"),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--target", default="cuda:sm_90")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    manifest = []
    for op, dtype, out_dtype in KERNELS:
        names, values = torch.ops.tile_runtime.default_config(op, args.target, DTYPES[dtype])
        config = dict(zip(names, values))
        dtypes = [DTYPES[dtype]] if op == "vector_add" else [DTYPES[dtype], DTYPES[out_dtype]]
        _, _, binary, report = torch.ops.tile_runtime.compile_offline(
            op, dtypes, list(config), list(config.values()), args.target)
        name = f"{op}_{dtype}_{out_dtype}.ptx"
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(binary.numpy().tobytes())
        threads = config.get("num_warps", 4) * 32
        manifest.append({"file": name, "op": op, "dtype": dtype, "out_dtype": out_dtype,
                         "config": config, "threads": threads, "report": report})
        print(name, json.dumps(config, sort_keys=True))
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump({"target": args.target, "kernels": manifest}, f, indent=1)


if __name__ == "__main__":
    main()
