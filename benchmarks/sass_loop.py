"""The instruction mix of a CUDA kernel's main loop, read from its SASS: which instructions
the hot loop issues per iteration, so two kernels of the same config (tile.matmul's and
Triton's) can be compared instruction by instruction.

    python3 benchmarks/sass_loop.py KERNEL.cubin [MORE.cubin ...]   # needs nvdisasm
    python3 benchmarks/sass_loop.py --sass KERNEL.sass              # nvdisasm's text

The main loop is the backward branch whose body holds the most matrix instructions (HMMA,
or Hopper's warpgroup HGMMA);
nested loops are counted inside it. Prints, per kernel: registers (from the cubin's
EIATTR_REGCOUNT when nvdisasm reports it), the loop's length and a histogram of opcodes
(the mnemonic before the first '.', so HMMA.16816.F32 counts as HMMA).
"""

import argparse
import collections
import re
import subprocess
import sys

LABEL = re.compile(r"^\s*(\.L_x_\d+):")
INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w*\s+)?([A-Z][A-Z0-9_]*)(\.[^ ;]*)?")
BRANCH_TARGET = re.compile(r"\bBRA\b.*?`?\((\.L_x_\d+)\)|\bBRA\b\s+`?(\.L_x_\d+)")


def disassemble(cubin: str) -> str:
    return subprocess.run(["nvdisasm", "-c", cubin], check=True, capture_output=True,
                          text=True).stdout


def parse(text: str):
    """[(label or None, opcode or None, line)] in program order."""
    rows = []
    for line in text.splitlines():
        label = LABEL.match(line)
        if label:
            rows.append((label.group(1), None, line))
            continue
        found = INSTRUCTION.search(line)
        if found:
            rows.append((None, found.group(2), line))
    return rows


def main_loop(rows):
    """(histogram, instruction count) of the backward-branch body with the most HMMA/HGMMA."""
    where = {label: i for i, (label, _, _) in enumerate(rows) if label}
    best = None
    for i, (_, opcode, line) in enumerate(rows):
        if opcode != "BRA":
            continue
        target = BRANCH_TARGET.search(line)
        name = target and (target.group(1) or target.group(2))
        if name not in where or where[name] >= i:
            continue
        body = [op for _, op, _ in rows[where[name]:i + 1] if op]
        hmma = sum(op in ("HMMA", "HGMMA") for op in body)
        if best is None or hmma > best[0]:
            best = (hmma, body)
    if best is None:
        return collections.Counter(), 0
    return collections.Counter(best[1]), len(best[1])


def report(name: str, text: str) -> None:
    histogram, length = main_loop(parse(text))
    registers = re.search(r"EIATTR_REGCOUNT[^\n]*\n?[^\n]*?(\d+)\s*$", text, re.M)
    print(f"== {name}: main loop {length} instructions"
          + (f", {registers.group(1)} registers" if registers else ""))
    for opcode, count in histogram.most_common():
        print(f"   {opcode:<10} {count:5d}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--sass", action="store_true", help="the files are nvdisasm text")
    args = parser.parse_args()
    for path in args.files:
        report(path, open(path).read() if args.sass else disassemble(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
