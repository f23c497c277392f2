"""The AMDGCN that tile.matmul (float16) compiles to, beside the one that Triton's tutorial
matmul compiles to, for the same arch and config: registers, LDS, occupancy, and what the
main loop is made of (MFMA/WMMA, LDS and global accesses by width, waits, barriers).
No GPU is needed: both compilers run offline.

    .venv/bin/python benchmarks/bench_isa.py [--triton-python .venv-triton/bin/python]
                                             [--arch gfx942 ...] [--asm-dir DIR]
    python3 benchmarks/bench_isa.py --parse kernel.s ...   # the metrics of any AMDGCN file

Triton is optional (benchmarks/requirements.txt names the version this was written for).
It is used from this interpreter when importable, otherwise from the interpreter given by
--triton-python, which runs this file with --triton-worker. Without either, only tile's
columns are filled.

Configs, for each arch: tile's own default for a large float16 problem
(torch.ops.tile_runtime.default_config), the five float16 configs of the ROCm Triton GEMM
tutorial, and 128x128x64 with 4 warps (the NVIDIA tutorial's first config with AMD knobs).
A config the compiler refuses is recorded with its message.

The Triton kernel is `matmul_kernel` of Triton's tutorial 03-matrix-multiplication.py (MIT
license), as triton_matmul.py holds it for the CUDA benchmark, without its activation: a and b row-major, fp32 accumulator, fp16 output, K-masked loads. It is
specialized as Triton's JIT specializes it for contiguous 4096x4096x4096 operands:
pointers 16-byte aligned and under 2 GiB (so AMD buffer loads apply), sizes and leading
strides multiples of 16, unit strides folded to the constant 1.

Metrics, from `amdgcn_metrics(assembly)`, which any other tool can call on an AMDGCN file:
  VGPR/AGPR/SGPR   architected VGPRs, accumulation VGPRs, SGPRs (the kernel info comments,
                   else the .amdgpu_metadata fields)
  scratch, spills  .private_segment_fixed_size, .vgpr/.sgpr_spill_count, scratch_* instrs
  LDS              .group_segment_fixed_size plus the dynamic LDS given by the caller:
                   Triton allocates all its LDS dynamically (the metadata says 0), so its
                   `shared` size from the compiled kernel is added
  waves/SIMD       the occupancy formula of tile's resource report (GpuArch.cpp): CDNA
                   512 VGPRs per SIMD lane, AGPRs after the VGPRs rounded to 4, granule 8,
                   8 waves; RDNA wave32 1536, granule 24, 16 waves; capped by the
                   workgroups that fit in the CU's LDS, their waves spread over 4 SIMDs
  main loop        the span from a label to the last backward branch to it; of those, the
                   smallest one holding the most MFMA/WMMA instructions
  K/iter           K depth the workgroup's MFMA/WMMA cover in one iteration of the main
                   loop: sum of the instructions' M*N*K * waves / (BLOCK_M*BLOCK_N), with
                   the waves the workgroup runs (its threads over the wave size);
                   BLOCK_K when the loop runs one K block per iteration
  LDS/global       reads/loads and writes/stores by mnemonic with the bits per lane each
                   moves (ds_read2* and ds_*_2addr* move two elements); a buffer load
                   with the lds modifier (straight to LDS, Triton on gfx950) is counted
                   as "buffer_load_* lds" among the global loads
Counts are static: where the loop branches inside (tile's per-vector bounds checks, which
fall back to one 16-bit load per element at the edges), both paths are counted.

Prints two tables, each cell "tile/triton", and writes results/bench_isa.json (the metrics
of every kernel) and results/bench_isa.png (VGPR+AGPR and main-loop MFMA counts).
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ARCHS = ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201")

# The ROCm Triton GEMM tutorial's float16 configs, then 128x128x64 with 4 warps.
TUTORIAL_CONFIGS = [
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=16, GROUP_M=1, num_warps=4, waves_per_eu=2),
    dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=16, GROUP_M=4, num_warps=8, waves_per_eu=2),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=1, num_warps=8, waves_per_eu=2),
    dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=4, waves_per_eu=3),
    dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=1, num_warps=4, waves_per_eu=8),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, waves_per_eu=2),
]
for _config in TUTORIAL_CONFIGS:
    _config.update(num_stages=2, matrix_instr_nonkdim=16, kpack=1)

# tile knob -> Triton name: a constexpr of the kernel, or a compile option.
TRITON_CONSTEXPRS = {"BLOCK_M": "BLOCK_SIZE_M", "BLOCK_N": "BLOCK_SIZE_N",
                     "BLOCK_K": "BLOCK_SIZE_K", "GROUP_M": "GROUP_SIZE_M"}
TRITON_OPTIONS = ("num_warps", "num_stages", "waves_per_eu", "matrix_instr_nonkdim", "kpack")


# ---------------------------------------------------------------------------------------
# The parser: AMDGCN assembly text -> metrics. Standard library only, so that any tool
# (and the Triton worker, which has no torch) can import it.

class AmdArch:
    """Occupancy data of one arch, as tile's GpuArch.cpp has it."""

    def __init__(self, wave_size, lds_bytes, vgprs_per_simd, granule, max_waves, has_agprs):
        self.wave_size = wave_size
        self.lds_bytes = lds_bytes
        self.vgprs_per_simd = vgprs_per_simd
        self.granule = granule
        self.max_waves = max_waves
        self.has_agprs = has_agprs


AMD_ARCHS = {
    "gfx90a": AmdArch(64, 64 * 1024, 512, 8, 8, True),
    "gfx942": AmdArch(64, 64 * 1024, 512, 8, 8, True),
    "gfx950": AmdArch(64, 160 * 1024, 512, 8, 8, True),
    "gfx1100": AmdArch(32, 64 * 1024, 1536, 24, 16, False),
    "gfx1201": AmdArch(32, 64 * 1024, 1536, 24, 16, False),
}


def waves_per_simd(arch, vgprs, agprs, lds_bytes, waves_per_group):
    """Waves of a kernel that fit on one SIMD: by registers, then by LDS."""
    limits = AMD_ARCHS[arch]

    def round_up(x, to):
        return (x + to - 1) // to * to

    total = max(1, vgprs)
    if limits.has_agprs:
        # AGPRs start at the VGPR count rounded to 4 (.amdhsa_accum_offset).
        total = round_up(total, 4) + agprs
    waves = min(limits.max_waves, limits.vgprs_per_simd // round_up(total, limits.granule))
    if lds_bytes > 0 and waves_per_group > 0:
        groups = limits.lds_bytes // lds_bytes
        waves = min(waves, groups * waves_per_group // 4)
    return waves


MATRIX_PREFIXES = ("v_mfma", "v_smfmac", "v_wmma", "v_swmmac")
MATRIX_SHAPE = re.compile(r"_(\d+)x(\d+)x(\d+)")
LABEL = re.compile(r"^([.\w$]+):")
INSTRUCTION = re.compile(r"^\s+([a-z_][a-z0-9_]*)\b\s*(.*)$")
BRANCH = re.compile(r"^(s_cbranch_\w+|s_branch)$")
# Memory-counter waits: s_waitcnt* up to gfx11, s_wait_{load,store,ds,km,...}cnt on gfx12.
# s_wait_alu (a gfx12 ALU dependency wait) is not one.
MEMORY_WAIT = re.compile(r"^s_waitcnt|^s_wait_\w*cnt")


def access_bits(mnemonic):
    """Bits per lane that one memory instruction moves: ds_read2st64_b64 -> 128,
    global_load_dwordx4 -> 128, ds_read_u16_d16_hi -> 16, ds_read_b64_tr_b16 -> 64."""
    dwords = re.search(r"dword(?:x(\d))?", mnemonic)
    if dwords:
        bits = 32 * int(dwords.group(1) or 1)
    else:
        sized = re.search(r"_[bui](\d+)", mnemonic)
        if sized:
            bits = int(sized.group(1))
        elif "short" in mnemonic:
            bits = 16
        elif "byte" in mnemonic:
            bits = 8
        else:
            return None
    if re.search(r"read2|write2|_2addr", mnemonic):
        bits *= 2
    return bits


def memory_class(mnemonic):
    """lds_read, lds_write, global_load, global_store, scratch, or None."""
    if mnemonic.startswith("scratch_"):
        return "scratch"
    if mnemonic.startswith(("ds_read", "ds_load")):
        return "lds_read"
    if mnemonic.startswith(("ds_write", "ds_store")):
        return "lds_write"
    if mnemonic.startswith(("global_load", "buffer_load", "flat_load")):
        return "global_load"
    if mnemonic.startswith(("global_store", "buffer_store", "flat_store")):
        return "global_store"
    return None


def is_matrix(mnemonic):
    return mnemonic.startswith(MATRIX_PREFIXES)


def matrix_macs(mnemonic):
    """Multiply-adds per wave of one MFMA/WMMA: v_mfma_f32_16x16x16_f16 -> 4096."""
    shape = MATRIX_SHAPE.search(mnemonic)
    if not shape:
        return 0
    m, n, k = map(int, shape.groups())
    return m * n * k


def summarize(instructions):
    """Counts over a list of (mnemonic, operands)."""
    counts = Counter(mnemonic for mnemonic, _ in instructions)
    summary = {
        "instructions": len(instructions),
        "matrix": sum(n for m, n in counts.items() if is_matrix(m)),
        "matrix_macs": sum(n * matrix_macs(m) for m, n in counts.items() if is_matrix(m)),
        "matrix_by_mnemonic": {m: n for m, n in sorted(counts.items()) if is_matrix(m)},
        "memory_waits": sum(n for m, n in counts.items() if MEMORY_WAIT.match(m)),
        # s_barrier up to gfx11; on gfx12 a barrier is a signal and a wait: count signals.
        "barriers": counts["s_barrier"] + sum(
            n for m, n in counts.items() if m.startswith("s_barrier_signal")),
    }
    for kind in ("lds_read", "lds_write", "global_load", "global_store", "scratch"):
        by_mnemonic = {m: {"count": n, "bits": access_bits(m)}
                       for m, n in sorted(counts.items()) if memory_class(m) == kind}
        summary[kind] = by_mnemonic
        summary[kind + "_count"] = sum(e["count"] for e in by_mnemonic.values())
        summary[kind + "_bits"] = sum(e["count"] * (e["bits"] or 0)
                                      for e in by_mnemonic.values())
    return summary


def metadata_fields(text):
    """Integer and string fields of the first kernel in .amdgpu_metadata (YAML)."""
    start = text.find("amdhsa.kernels:")
    if start < 0:
        return {}
    fields = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith(".end_amdgpu_metadata") or line.startswith("amdhsa.target"):
            break
        match = re.match(r"^\s*(?:- )?\.([\w]+):\s+(\S+)\s*$", line)
        # Fields of the kernel entry are at 4 spaces; those of its arguments are deeper.
        if match and re.match(r"^(  - |    )\.", line) and match.group(1) not in fields:
            value = match.group(2)
            fields[match.group(1)] = int(value) if value.isdigit() else value
    return fields


def comment_field(text, name):
    """N from LLVM's kernel info comment `; name: N`, or None."""
    match = re.search(rf"^; {name}: (\d+)", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def set_symbol(text, name):
    """N from `.set <kernel>.name, N` (`.set .L<kernel>.name, N` in some LLVM versions)."""
    match = re.search(rf"^\s*\.set\s+[.\w$]+\.{name},\s*(\d+)\s*$", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def body_lines(text):
    """The lines of the first kernel's code: from its symbol's label to .Lfunc_end."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if LABEL.match(line) and not line.startswith(".")), 0)
    end = next((i for i in range(start, len(lines)) if lines[i].startswith(".Lfunc_end")),
               len(lines))
    return lines[start:end]


def find_main_loop(lines):
    """(label, instructions) of the main loop, or (None, []).

    A loop is the span from a label to the last branch back to it (a rotated loop ends in a
    conditional backward branch; one that exits at the top ends in s_branch). The main loop
    is the smallest span that holds the most MFMA/WMMA instructions, so an outer loop or a
    backward jump to an out-of-line block loses to the K loop."""
    labels, instructions, spans = {}, [], {}
    for line in lines:
        label = LABEL.match(line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        instruction = INSTRUCTION.match(line.split(";")[0])
        if not instruction:
            continue
        mnemonic, operands = instruction.group(1), instruction.group(2).strip()
        # A buffer load with the lds modifier (gfx90a on) writes LDS, not registers: it
        # stands apart from the loads that feed ds_write.
        if mnemonic.startswith("buffer_load") and operands.split()[-1:] == ["lds"]:
            mnemonic += " lds"
        instructions.append((mnemonic, operands))
        if BRANCH.match(mnemonic) and operands in labels:
            spans[operands] = (labels[operands], len(instructions))
    best = (None, [])
    best_key = None
    for label, (begin, end) in spans.items():
        body = instructions[begin:end]
        key = (sum(1 for m, _ in body if is_matrix(m)), -len(body))
        if best_key is None or key > best_key:
            best, best_key = (label, body), key
    return best, instructions


def amdgcn_metrics(text, dynamic_lds_bytes=0):
    """Metrics of the first kernel in an AMDGCN assembly file (see the module docstring).

    dynamic_lds_bytes: LDS allocated at launch rather than in the kernel descriptor (Triton
    allocates all of its LDS that way); it is added to .group_segment_fixed_size."""
    meta = metadata_fields(text)
    # "amdgcn-amd-amdhsa--gfx942", or "amdgpu9.42-amd-amdhsa-unknown-gfx942" (Triton 3.9),
    # with :feature+ suffixes at times.
    target = re.search(r'\.amdgcn_target\s+"[^"]*-(gfx[0-9a-f]+)', text)
    arch = target.group(1) if target else None
    # .vgpr_count is the VGPR+AGPR total on CDNA (AGPRs after the VGPRs rounded to 4); the
    # kernel info comments, or else the .set symbols, hold the two counts apart.
    vgprs = comment_field(text, "NumVgprs")
    agprs = comment_field(text, "NumAgprs")
    if vgprs is None:
        vgprs = set_symbol(text, "num_vgpr")
        agprs = set_symbol(text, "num_agpr")
    if vgprs is None:
        agprs = meta.get("agpr_count", 0)
        vgprs = meta.get("vgpr_count", 0) - agprs
    agprs = agprs or 0
    lds = meta.get("group_segment_fixed_size", 0) + dynamic_lds_bytes
    wave_size = meta.get("wavefront_size") or (AMD_ARCHS[arch].wave_size if arch in AMD_ARCHS
                                               else 64)
    group_threads = meta.get("max_flat_workgroup_size", 0)
    waves_per_group = -(-group_threads // wave_size) if group_threads else 0

    lines = body_lines(text)
    (loop_label, loop), instructions = find_main_loop(lines)
    metrics = {
        "arch": arch,
        "kernel": meta.get("name"),
        "vgprs": vgprs,
        "agprs": agprs,
        "total_vgprs": comment_field(text, "TotalNumVgprs") or meta.get("vgpr_count"),
        "sgprs": meta.get("sgpr_count", comment_field(text, "TotalNumSgprs")),
        "scratch_bytes": meta.get("private_segment_fixed_size", 0),
        "vgpr_spills": meta.get("vgpr_spill_count", 0),
        "sgpr_spills": meta.get("sgpr_spill_count", 0),
        "lds_bytes": lds,
        "static_lds_bytes": meta.get("group_segment_fixed_size", 0),
        "workgroup_threads": group_threads,
        "wave_size": wave_size,
        "waves_per_simd": (waves_per_simd(arch, vgprs, agprs, lds, waves_per_group)
                           if arch in AMD_ARCHS else None),
        # LLVM's own estimate: it knows waves_per_eu but not dynamic LDS.
        "llvm_occupancy": comment_field(text, "Occupancy"),
        "main_loop_label": loop_label,
        "loop": summarize(loop),
        "kernel_total": summarize(instructions),
    }
    return metrics


# ---------------------------------------------------------------------------------------
# Triton: the tutorial kernel, compiled offline. Runs in whichever interpreter has triton.

def triton_compile(jobs):
    """[{arch, config}] -> [{asm, shared} or {error}], compiled with this interpreter's
    triton for GPUs that it does not need to see."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    from triton_matmul import tutorial_matmul_kernel as kernel

    names = kernel.arg_names
    unit_strides = ("stride_ak", "stride_bn", "stride_cn")
    results = []
    for job in jobs:
        arch, config = job["arch"], job["config"]
        try:
            target = GPUTarget("hip", arch, 32 if arch.startswith(("gfx10", "gfx11", "gfx12"))
                               else 64)
            backend = make_backend(target)
            constexprs = {TRITON_CONSTEXPRS[k]: config[k] for k in TRITON_CONSTEXPRS}
            constexprs.update({name: 1 for name in unit_strides})
            # The plain product: no activation; fp16 inputs make the precision moot.
            constexprs.update({"ACTIVATION": "", "INPUT_PRECISION": "ieee"})
            signature = {name: "constexpr" if name in constexprs
                         else "*fp16" if name.endswith("_ptr")
                         else "fp32" if name == "negative_slope" else "i32" for name in names}
            # "D": divisible by 16; "S": within 2 GiB, which lets the backend use buffer ops.
            attrs = {(names.index(name),): backend.parse_attr("DS" if kind == "*fp16" else "D")
                     for name, kind in signature.items() if kind not in ("constexpr", "fp32")}
            options = {k: config[k] for k in TRITON_OPTIONS if k in config}
            # Triton 3.9's default, said explicitly to silence its warning about 3.10.
            options["enable_fp_fusion"] = True
            compiled = triton.compile(ASTSource(fn=kernel, signature=signature,
                                                constexprs=constexprs, attrs=attrs),
                                      target=target, options=options)
            results.append({"asm": compiled.asm["amdgcn"],
                            "shared": int(compiled.metadata.shared)})
        except Exception as error:  # a refused config is a result, not a crash
            results.append({"error": f"{type(error).__name__}: {error}".strip()})
    return results


def triton_version(python):
    if python is None:
        import triton
        return triton.__version__
    out = subprocess.run([python, "-c", "import triton; print(triton.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def triton_compile_in(python, jobs):
    """triton_compile in another interpreter: this file with --triton-worker."""
    with tempfile.TemporaryDirectory() as folder:
        jobs_path, out_path = Path(folder) / "jobs.json", Path(folder) / "out.json"
        jobs_path.write_text(json.dumps(jobs))
        process = subprocess.run([python, str(Path(__file__).resolve()), "--triton-worker", str(jobs_path),
                                  str(out_path)], capture_output=True, text=True)
        if process.returncode != 0 or not out_path.exists():
            raise SystemExit(f"the Triton worker ({python}) failed:\n{process.stderr[-4000:]}")
        return json.loads(out_path.read_text())


# ---------------------------------------------------------------------------------------
# tile: the compiler of this build, through the API of `python -m torch_tile compile`.

def tile_compile(arch, overrides):
    """(config, asm, report dict) or (config, None, {error})."""
    import torch
    from torch_tile.cli import config_for

    target = f"hip:{arch}"
    config = config_for("matmul", target, "float16", overrides)
    try:
        names, texts, _binary, report = torch.ops.tile_runtime.compile_offline(
            "matmul", ["f16", "f16"], list(config), list(config.values()), target)
    except RuntimeError as error:
        return config, None, {"error": str(error).strip()}
    stages = dict(zip(names, texts))
    fields = {}
    for line in report.splitlines():
        name, _, value = line.partition(":")
        value = value.strip()
        fields[name.strip()] = int(value) if value.lstrip("-").isdigit() else value
    return config, stages["asm"], fields


def config_label(config):
    return (f"{config['BLOCK_M']}x{config['BLOCK_N']}x{config['BLOCK_K']} "
            f"G{config['GROUP_M']} w{config['num_warps']} s{config['num_stages']} "
            f"wpe{config['waves_per_eu']}")


def k_per_iteration(metrics, config):
    macs = metrics["loop"]["matrix_macs"]
    if not macs:
        return None
    # The waves the workgroup runs: on RDNA, tile may run more than num_warps (a large
    # accumulator is split over twice the wave32s), which the launch size records.
    waves = config["num_warps"]
    if metrics.get("workgroup_threads") and metrics.get("wave_size"):
        waves = metrics["workgroup_threads"] // metrics["wave_size"]
    return macs * waves / (config["BLOCK_M"] * config["BLOCK_N"])


def compact(by_mnemonic, prefix_pattern=r"^(ds|global|buffer|flat|scratch)_(read|write|load|store)_?"):
    """{ds_read2st64_b64: {count 32, bits 128}} -> '2st64_b64(128)x32'."""
    parts = []
    for mnemonic, entry in by_mnemonic.items():
        short = re.sub(prefix_pattern, "", mnemonic) or mnemonic
        parts.append(f"{short}({entry['bits']})x{entry['count']}")
    return " ".join(parts) or "-"


def pair(tile, triton, get, fmt="{}"):
    def one(metrics):
        if metrics is None:
            return "."
        if "error" in metrics:
            return "err"
        value = get(metrics)
        return "-" if value is None else fmt.format(value)
    return f"{one(tile)}/{one(triton)}"


def print_tables(rows):
    columns = [
        ("VGPR", lambda m: m["vgprs"], "{}"),
        ("AGPR", lambda m: m["agprs"], "{}"),
        ("SGPR", lambda m: m["sgprs"], "{}"),
        ("scratch", lambda m: m["scratch_bytes"], "{}"),
        ("spills", lambda m: m["vgpr_spills"] + m["sgpr_spills"], "{}"),
        ("LDS KiB", lambda m: m["lds_bytes"] / 1024, "{:.1f}"),
        ("threads", lambda m: m["workgroup_threads"], "{}"),
        ("waves", lambda m: m["waves_per_simd"], "{}"),
        ("MFMA loop", lambda m: m["loop"]["matrix"], "{}"),
        ("MFMA all", lambda m: m["kernel_total"]["matrix"], "{}"),
        ("K/iter", lambda m: m["k_per_iteration"], "{:g}"),
        ("loop instrs", lambda m: m["loop"]["instructions"], "{}"),
        ("waitcnt", lambda m: m["loop"]["memory_waits"], "{}"),
        ("barrier", lambda m: m["loop"]["barriers"], "{}"),
    ]
    label_width = max(len("config (cells: tile/triton)"), *(len(r["label"]) for r in rows))
    head = f"{'arch':<8} {'config (cells: tile/triton)':<{label_width}}"
    cells = []
    for row in rows:
        cells.append([pair(row["tile"], row["triton"], get, fmt) for _, get, fmt in columns])
    widths = [max(len(name), *(len(c[i]) for c in cells)) for i, (name, _, _) in
              enumerate(columns)]
    print(head + " " + " ".join(f"{name:>{w}}" for (name, _, _), w in zip(columns, widths)))
    for row, cell in zip(rows, cells):
        print(f"{row['arch']:<8} {row['label']:<{label_width}} " +
              " ".join(f"{c:>{w}}" for c, w in zip(cell, widths)))

    print("\nMain loop, per iteration: LDS reads, LDS writes, global loads "
          "(mnemonic(bits per lane)xcount); global stores of the whole kernel")
    for row in rows:
        print(f"{row['arch']} {row['label']}")
        for name in ("tile", "triton"):
            metrics = row[name]
            if metrics is None:
                continue
            if "error" in metrics:
                print(f"  {name:<7}error: {metrics['error'].splitlines()[0][:150]}")
                continue
            loop, whole = metrics["loop"], metrics["kernel_total"]
            print(f"  {name:<7}lds read {compact(loop['lds_read'])} | "
                  f"lds write {compact(loop['lds_write'])} | "
                  f"load {compact(loop['global_load'])} | "
                  f"store {compact(whole['global_store'])}")


def plot_rows(rows):
    def plot(axis):
        axis.figure.set_size_inches(max(10, 0.55 * len(rows)), 7)
        positions = range(len(rows))
        for index in range(1, len(rows)):
            if rows[index]["arch"] != rows[index - 1]["arch"]:
                axis.axvline(index - 0.5, color="gray", linewidth=0.8)
        series = [
            ("tile VGPR+AGPR", "tile", lambda m: m["vgprs"] + m["agprs"], -1.5, "tab:blue"),
            ("Triton VGPR+AGPR", "triton", lambda m: m["vgprs"] + m["agprs"], -0.5,
             "tab:orange"),
            ("tile main-loop MFMA/WMMA", "tile", lambda m: m["loop"]["matrix"], 0.5,
             "tab:cyan"),
            ("Triton main-loop MFMA/WMMA", "triton", lambda m: m["loop"]["matrix"], 1.5,
             "tab:red"),
        ]
        width = 0.2
        for label, key, get, offset, color in series:
            values = [get(r[key]) if r[key] and "error" not in r[key] else 0 for r in rows]
            axis.bar([p + offset * width for p in positions], values, width, label=label,
                     color=color)
        axis.set_xticks(list(positions), [f"{r['arch']} {r['label']}" for r in rows],
                        rotation=90, fontsize=7)
        axis.set_ylabel("VGPR+AGPR per lane; MFMA/WMMA per main-loop iteration")
        axis.set_xlabel("arch, config (compiled offline, no GPU; a missing bar: refused)")
    return plot


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", choices=ARCHS, default=list(ARCHS))
    parser.add_argument("--triton-python", default=None,
                        help="an interpreter with triton, used when this one has none")
    parser.add_argument("--asm-dir", default=None,
                        help="also write every kernel's assembly into this folder")
    parser.add_argument("--parse", nargs="+", metavar="FILE",
                        help="only print the metrics of these AMDGCN files as JSON")
    parser.add_argument("--triton-worker", nargs=2, metavar=("JOBS", "OUT"),
                        help=argparse.SUPPRESS)
    return parser.parse_args()


def import_torch_tile():
    try:
        import torch_tile  # noqa: F401
    except ImportError:
        # A build tree before `make install`: CMake puts the libraries in python/.
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
        import torch_tile  # noqa: F401


def main():
    args = parse_args()
    if args.parse:
        metrics = {path: amdgcn_metrics(Path(path).read_text()) for path in args.parse}
        print(json.dumps(metrics, indent=2))
        return
    if args.triton_worker:
        jobs_path, out_path = args.triton_worker
        results = triton_compile(json.loads(Path(jobs_path).read_text()))
        Path(out_path).write_text(json.dumps(results))
        return

    import_torch_tile()
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import write_results

    try:
        import triton  # noqa: F401
        triton_python = None  # this interpreter
    except ImportError:
        triton_python = args.triton_python
    has_triton = triton_python is not None or "triton" in sys.modules
    if not has_triton:
        print("triton is not importable and --triton-python is not given: tile only")

    rows, jobs = [], []
    for arch in args.arch:
        default = dict(zip(*torch.ops.tile_runtime.default_config("matmul", f"hip:{arch}",
                                                                   "f16")))
        for name, overrides in [("default", default)] + [("tutorial", c) for c in
                                                           TUTORIAL_CONFIGS]:
            config, asm, report = tile_compile(arch, overrides)
            if asm is None:
                tile = report
            else:
                tile = amdgcn_metrics(asm)
                tile["report"] = report
                tile["k_per_iteration"] = k_per_iteration(tile, config)
            label = config_label(config) + (" (tile default)" if name == "default" else "")
            rows.append({"arch": arch, "label": label, "config_source": name,
                         "config": config, "tile": tile, "triton": None, "asm": {"tile": asm}})
            jobs.append({"arch": arch, "config": config})
            status = tile.get("error", "").splitlines()[0][:100] if "error" in tile else "ok"
            print(f"tile   {arch} {label}: {status}", flush=True)

    if has_triton:
        print(f"Triton: compiling {len(jobs)} kernels"
              f"{' with ' + triton_python if triton_python else ''}", flush=True)
        results = triton_compile(jobs) if triton_python is None else triton_compile_in(
            triton_python, jobs)
        for row, result in zip(rows, results):
            row["asm"]["triton"] = result.get("asm")
            if "error" in result:
                row["triton"] = result
                continue
            metrics = amdgcn_metrics(result["asm"], dynamic_lds_bytes=result["shared"])
            metrics["dynamic_lds_bytes"] = result["shared"]
            metrics["k_per_iteration"] = k_per_iteration(metrics, row["config"])
            row["triton"] = metrics

    for row in rows:
        tile = row["tile"]
        if "error" not in tile and tile["report"].get("waves_per_simd") != tile["waves_per_simd"]:
            print(f"note: {row['arch']} {row['label']}: tile's report says "
                  f"{tile['report'].get('waves_per_simd')} waves per SIMD, the formula on "
                  f"the parsed registers {tile['waves_per_simd']}")
        if args.asm_dir:
            folder = Path(args.asm_dir)
            folder.mkdir(parents=True, exist_ok=True)
            stem = f"{row['arch']}_{row['label'].split(' (')[0].replace(' ', '_')}"
            for name, text in row["asm"].items():
                if text:
                    (folder / f"{stem}.{name}.amdgcn.s").write_text(text)
        del row["asm"]

    print()
    print_tables(rows)
    json_path = write_results("bench_isa", torch.device("cpu"), rows, plot_rows(rows))
    # What common.write_results does not record: the compilers and that nothing ran.
    record = json.loads(json_path.read_text())
    import torch_tile

    record.update(
        device=f"none: compiled offline on {record['device']}",
        targets=[f"hip:{arch}" for arch in args.arch],
        tile_compiler=torch_tile.runtime.compiler_version(),
        triton=triton_version(triton_python) if has_triton else None,
        triton_python=triton_python,
        triton_specialization="contiguous 4096^3 fp16: pointers D+S, M/N/K/leading strides "
                              "D, unit strides constexpr 1",
    )
    json_path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nwrote {json_path} and {json_path.with_suffix('.png').name}")


if __name__ == "__main__":
    main()
