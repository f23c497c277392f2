"""`python -m torch_tile compile`: compile an op for any target, no GPU needed.
`python -m torch_tile env`: what this machine has for torch-tile (versions, devices and
their targets, GPU driver libraries, the kernel cache).
`python -m torch_tile selftest [--json PATH]`: the ops checked on this machine's device.

    python -m torch_tile compile --op matmul --dtype float16 --target hip:gfx942 \\
        [--out-dtype float32] [--bias-dtype float16] [--config '{"BLOCK_M": 128, ...}'] \\
        --emit {tile,tile-cpu,tile-gpu,llvm,asm,bin,report} [...] --out DIR

Writes each chosen stage of the kernel as a file in DIR and prints the file names.
"""

import argparse
import json
import os
import sys

import torch

OPS = ("vector_add", "matmul", "matmul_leaky_relu", "matmul_leaky_relu_backward")
MATMULS = "matmul, matmul_leaky_relu and matmul_leaky_relu_backward"
DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int8": "i8", "int32": "i32"}
STAGES = ("tile", "tile-cpu", "tile-gpu", "llvm", "asm", "bin", "report")


def file_name(op, stage, target):
    """The file a stage goes to: extensions that the tools of each format expect."""
    kind = target.split(":")[0]
    extension = {
        "tile": "tile.mlir", "tile-cpu": "tile-cpu.mlir", "tile-gpu": "tile-gpu.mlir",
        "llvm": "ll", "report": "report.txt",
        "asm": {"hip": "amdgcn.s", "cuda": "ptx"}.get(kind, "s"),
        "bin": {"hip": "hsaco", "cuda": "ptx"}.get(kind, "o"),
    }[stage]
    return f"{op}.{extension}"


def kernel_dtypes(op, dtype, out_dtype, bias_dtype=None, activation_dtype=None):
    """The spec's dtypes: the input's, then for a matmul the output's and, with a bias
    (added in the epilogue), the bias's; for matmul_leaky_relu_backward the activation's
    (the input dtype unless given)."""
    if op == "vector_add":
        if out_dtype not in (None, dtype):
            raise SystemExit("vector_add has no --out-dtype: its output has the input dtype")
        if bias_dtype is not None:
            raise SystemExit("vector_add has no --bias-dtype: only the matmuls take a bias")
        return [DTYPES[dtype]]
    if activation_dtype is not None and op != "matmul_leaky_relu_backward":
        raise SystemExit("--activation-dtype is matmul_leaky_relu_backward's")
    if out_dtype is None:
        if dtype == "int8":
            raise SystemExit("int8 matmuls accumulate in int32: pass --out-dtype int32")
        out_dtype = dtype
    dtypes = [DTYPES[dtype], DTYPES[out_dtype]]
    if bias_dtype is not None:
        if bias_dtype not in (dtype, out_dtype):
            raise SystemExit(f"--bias-dtype must be the input or the output dtype ({dtype} or "
                             f"{out_dtype}), got {bias_dtype}")
        if op == "matmul_leaky_relu_backward":
            raise SystemExit("matmul_leaky_relu_backward takes no bias")
        dtypes.append(DTYPES[bias_dtype])
    if op == "matmul_leaky_relu_backward":
        activation_dtype = activation_dtype or dtype
        if activation_dtype not in (dtype, out_dtype):
            raise SystemExit(f"--activation-dtype must be the input or the output dtype ({dtype} "
                             f"or {out_dtype}), got {activation_dtype}")
        dtypes.append(DTYPES[activation_dtype])
    return dtypes


# Spec entries a matmul takes beyond its default config's knobs: allow_tf32 (f32 on NVIDIA
# only) and packed_b (CPU: b read from panels, 2 or 4 for bf16 or int8 in groups of k).
EXTRA_MATMUL_KNOBS = ("allow_tf32", "packed_b")

# What --help lists, with no native library needed (tests/python/test_cli.py checks it
# against the library's own lists).
TARGETS_HELP = ("cpu (this host; the default), hip:<arch>[:sramecc+:xnack-] for gfx90a, gfx942, "
                "gfx950, gfx1100, gfx1201, cuda:sm_<NN> for sm_80, sm_90, sm_90a")
KNOBS_HELP = {
    MATMULS: ("BLOCK_K", "BLOCK_M", "BLOCK_N", "GROUP_M", "allow_tf32",
                                     "divisibility_16", "index_bits", "kpack",
                                     "matrix_instr_nonkdim", "num_ctas", "num_stages", "num_warps",
                                     "packed_b", "persistent", "stream_k", "unit_strides",
                                     "warp_specialize", "waves_per_eu"),
    "vector_add": ("BLOCK_SIZE", "index_bits", "num_warps"),
}


def help_epilog():
    knobs = "\n".join(f"  {ops}: {', '.join(names)}" for ops, names in KNOBS_HELP.items())
    return (f"commands: compile (one kernel to files, no GPU needed), env (this machine), "
            f"selftest (parity and speed on this machine's device)\n"
            f"targets (--target): {TARGETS_HELP}\n"
            f"knobs (--config, a JSON object; those left out keep the default):\n{knobs}")


def config_for(op, target, dtype, overrides):
    names, values = torch.ops.tile_runtime.default_config(op, target, DTYPES[dtype])
    config = dict(zip(names, values))
    known = set(names) | (set(EXTRA_MATMUL_KNOBS) if op != "vector_add" else set())
    unknown = sorted(set(overrides) - known)
    if unknown:
        # Knob names are case-sensitive: {"block_m": 64} would otherwise change nothing.
        raise SystemExit(f"--config: {op} has no knob {', '.join(unknown)}; its knobs are "
                         f"{', '.join(sorted(known))}")
    for name, value in overrides.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise SystemExit(f"--config: knob {name} must be an integer, got {value!r}")
        config[name] = value
    return config


def compile_command(args):
    try:
        overrides = json.loads(args.config) if args.config else {}
    except json.JSONDecodeError as error:
        raise SystemExit(f"--config is not JSON: {error}")
    if not isinstance(overrides, dict):
        raise SystemExit("--config must be a JSON object of knobs, e.g. '{\"BLOCK_M\": 64}'")
    dtypes = kernel_dtypes(args.op, args.dtype, args.out_dtype, args.bias_dtype,
                           args.activation_dtype)
    config = config_for(args.op, args.target, args.dtype, overrides)
    try:
        names, texts, binary, report = torch.ops.tile_runtime.compile_offline(
            args.op, dtypes, list(config), list(config.values()), args.target)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    stages = dict(zip(names, texts))
    os.makedirs(args.out, exist_ok=True)
    for stage in args.emit:
        path = os.path.join(args.out, file_name(args.op, stage, args.target))
        if stage == "bin":
            with open(path, "wb") as f:
                f.write(binary.numpy().tobytes())
        elif stage == "report":
            if not report:
                raise SystemExit("--emit report: resource reports are for GPU targets")
            with open(path, "w") as f:
                f.write(f"kernel: {args.op} {dtypes} {json.dumps(config, sort_keys=True)}\n")
                f.write(report)
        else:
            if stage not in stages:
                raise SystemExit(f"--emit {stage}: {args.target} has the stages "
                                 f"{', '.join(list(stages) + ['bin'])}")
            with open(path, "w") as f:
                f.write(stages[stage])
        print(path)
    return 0


def device_targets():
    """The tile target of each visible GPU: hip:<gcnArchName> on ROCm (features kept),
    cuda:sm_<major><minor> on CUDA."""
    targets = []
    if not torch.cuda.is_available():
        return targets
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        if torch.version.hip:
            target = f"hip:{props.gcnArchName}"
        else:
            target = f"cuda:sm_{props.major}{props.minor}"
        targets.append((index, props.name, target))
    return targets


def folder_size(path):
    total, files = 0, 0
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(folder, name))
                files += 1
            except OSError:
                pass
    return total, files


def env_command(_args):
    from torch_tile import runtime

    print(f"torch-tile      : {runtime.compiler_version()}")
    print(f"torch           : {torch.__version__} (HIP {torch.version.hip or '-'}, "
          f"CUDA {torch.version.cuda or '-'})")
    print(f"host target     : {runtime.host_target()}")
    print(f"CPU matmul units: {', '.join(runtime.host_matrix_units()) or 'none'}")
    targets = device_targets()
    if not targets:
        print("GPUs            : none visible to torch")
    for index, name, target in targets:
        print(f"GPU {index}           : {name}, target {target}")
    if os.environ.get("TILE_TARGET"):
        print(f"TILE_TARGET     : {os.environ['TILE_TARGET']} (overrides detection)")
    for driver in ("hip", "cuda"):
        # "": the launcher's own search (TILE_LIBHIP_PATH, the system, torch's lib folder).
        status = torch.ops.tile_runtime.driver_status(driver, "")
        label = "HIP runtime" if driver == "hip" else "CUDA driver"
        print(f"{label:<16}: {status.replace(chr(10), chr(10) + ' ' * 18)}")
    cache = runtime.cache_dir()
    size, files = folder_size(cache) if cache and os.path.isdir(cache) else (0, 0)
    print(f"kernel cache    : {cache or '(none)'} ({files} files, {size / 1e6:.1f} MB)")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_tile", description=__doc__.splitlines()[0],
                                     epilog=help_epilog(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("env", help="what this machine has for torch-tile")
    selftest_parser = commands.add_parser(
        "selftest", help="check the ops on this machine's GPU (else the CPU): parity, speed, env")
    selftest_parser.add_argument("--cases", type=int, default=150,
                                 help="random matmul cases besides the aligned ones (default 150)")
    selftest_parser.add_argument("--seed", type=int, default=20261123)
    selftest_parser.add_argument("--no-speed", action="store_true", help="skip the speed table")
    selftest_parser.add_argument("--json", metavar="PATH", help="write the report as JSON")
    compile_parser = commands.add_parser("compile", help="compile one kernel to files",
                                         epilog=help_epilog(),
                                         formatter_class=argparse.RawDescriptionHelpFormatter)
    compile_parser.add_argument("--op", required=True, choices=OPS)
    compile_parser.add_argument("--dtype", required=True, choices=[d for d in DTYPES if d != "int32"])
    compile_parser.add_argument("--out-dtype", choices=list(DTYPES), default=None)
    compile_parser.add_argument("--bias-dtype", choices=list(DTYPES), default=None,
                                help="compile the matmul with a bias input of this dtype")
    compile_parser.add_argument("--activation-dtype", choices=list(DTYPES), default=None,
                                help="matmul_leaky_relu_backward's activation (default: --dtype)")
    compile_parser.add_argument("--target", default=None,
                                help="cpu, hip:gfx942[:sramecc+:xnack-], cuda:sm_90 (default: host CPU)")
    compile_parser.add_argument("--config", default=None, help="JSON object of knobs")
    compile_parser.add_argument("--emit", nargs="+", choices=STAGES, required=True)
    compile_parser.add_argument("--out", required=True, help="folder for the files")
    args = parser.parse_args(argv)
    if args.command == "env":
        return env_command(args)
    if args.command == "selftest":
        from torch_tile.selftest import selftest

        return selftest(args.cases, args.seed, args.json, speed=not args.no_speed)
    if args.target is None:
        from torch_tile import runtime

        args.target = runtime.host_target()
    return compile_command(args)
