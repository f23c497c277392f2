"""tile.matmul's CUDA kernel and Triton's tutorial kernel at one config, side by side in SASS:
registers, spills and the main loop's instruction mix (sass_loop.py).

    python3 benchmarks/compare_sass.py --config '{"BLOCK_M": 128, "BLOCK_N": 128,
        "BLOCK_K": 32, "num_warps": 4, "num_stages": 4}' [--mma-sync] [--out DIR]

tile's kernel comes from the offline compiler (`python -m torch_tile compile`, PTX), put
through ptxas for the GPU's sm; Triton's is compiled by running the tutorial kernel once on
a 1024^3 problem in an empty TRITON_CACHE_DIR (--mma-sync: DISABLE_MMA_V3=1, Triton on
mma.sync as tile is). Needs a CUDA GPU, ptxas and nvdisasm. Writes each kernel's SASS and
ptxas report to --out.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import sass_loop


def tile_cubin(config: dict, dtype: str, sm: str, out: str) -> str:
    folder = os.path.join(out, "tile")
    subprocess.run([sys.executable, "-m", "torch_tile", "compile", "--op", "matmul", "--dtype",
                    dtype, "--target", f"cuda:{sm}", "--config", json.dumps(config), "--emit",
                    "asm", "--out", folder], check=True)
    ptx = glob.glob(os.path.join(folder, "*.ptx"))[0]
    cubin = os.path.join(out, "tile.cubin")
    verbose = subprocess.run(["ptxas", "-v", f"-arch={sm}", ptx, "-o", cubin], check=True,
                             capture_output=True, text=True).stderr
    print("tile ptxas:", " ".join(line.split("info    :")[-1].strip()
                                  for line in verbose.splitlines() if "Used" in line or "spill" in line))
    return cubin


def triton_cubin(config: dict, dtype: str, mma_sync: bool, out: str) -> str:
    cache = tempfile.mkdtemp(prefix="triton-cache-", dir=out)
    script = f"""
import torch, triton, triton_matmul
m = n = k = 1024
dtype = getattr(torch, {dtype!r})
a = torch.randn(m, k, device="cuda", dtype=dtype)
b = torch.randn(k, n, device="cuda", dtype=dtype)
c = torch.empty(m, n, device="cuda", dtype=dtype)
cfg = {config!r}
tiles = dict(BLOCK_SIZE_M=cfg["BLOCK_M"], BLOCK_SIZE_N=cfg["BLOCK_N"],
             BLOCK_SIZE_K=cfg["BLOCK_K"], GROUP_SIZE_M=cfg.get("GROUP_M", 8))
grid = (triton.cdiv(m, tiles["BLOCK_SIZE_M"]) * triton.cdiv(n, tiles["BLOCK_SIZE_N"]),)
triton_matmul.tutorial_matmul_kernel[grid](
    a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
    c.stride(1), 0.01, ACTIVATION="", INPUT_PRECISION="tf32", num_warps=cfg["num_warps"],
    num_stages=cfg["num_stages"], **tiles)
torch.cuda.synchronize()
err = (c.float() - a.float() @ b.float()).abs().max().item()
print("triton max |err|", err)
"""
    env = dict(os.environ, TRITON_CACHE_DIR=cache)
    if mma_sync:
        env["DISABLE_MMA_V3"] = "1"
    subprocess.run([sys.executable, "-c", script], check=True, env=env,
                   cwd=os.path.dirname(os.path.abspath(__file__)))
    cubins = glob.glob(os.path.join(cache, "**", "*.cubin"), recursive=True)
    for meta_path in glob.glob(os.path.join(cache, "**", "*.json"), recursive=True):
        meta = json.load(open(meta_path))
        if isinstance(meta, dict) and "n_regs" in meta:
            print(f"triton: {meta.get('n_regs')} registers, {meta.get('n_spills')} spills, "
                  f"{meta.get('shared')} bytes shared")
    return cubins[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="matmul knobs as JSON")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    parser.add_argument("--mma-sync", action="store_true")
    parser.add_argument("--out", default="sass-compare")
    args = parser.parse_args()
    import torch
    major, minor = torch.cuda.get_device_capability()
    sm = f"sm_{major}{minor}"
    config = json.loads(args.config)
    os.makedirs(args.out, exist_ok=True)
    for name, cubin in (("tile", tile_cubin(config, args.dtype, sm, args.out)),
                        ("triton", triton_cubin(config, args.dtype, args.mma_sync, args.out))):
        text = sass_loop.disassemble(cubin)
        with open(os.path.join(args.out, f"{name}.sass"), "w") as f:
            f.write(text)
        sass_loop.report(name, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
