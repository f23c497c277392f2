"""Parity of torch.ops.tile.matmul and matmul_leaky_relu with a float64 reference on the CPU,
their input checks and their kernel caching.

Shapes are written (M, N, K) throughout: a is M x K, b is K x N and the result is M x N.
"""

import math
import re
import subprocess
import sys
from typing import NamedTuple, Optional

import pytest
import torch
import torch.nn.functional as F

import torch_tile


class DtypePair(NamedTuple):
    inputs: torch.dtype
    out_dtype: Optional[torch.dtype]  # the op's out_dtype argument; None: left out
    result: torch.dtype
    # Bound on ||out - ref||_F / ||ref||_F, ref computed in float64 from the very same
    # (already rounded) inputs; 0 for integers: exact.
    max_rel_error: float


PAIRS = [
    pytest.param(DtypePair(torch.float32, None, torch.float32, 1e-5), id="f32"),
    pytest.param(DtypePair(torch.float16, None, torch.float16, 2e-3), id="f16"),
    pytest.param(DtypePair(torch.bfloat16, None, torch.bfloat16, 1e-2), id="bf16"),
    pytest.param(DtypePair(torch.float16, torch.float32, torch.float32, 1e-5), id="f16_to_f32"),
    pytest.param(DtypePair(torch.bfloat16, torch.float32, torch.float32, 1e-5), id="bf16_to_f32"),
    pytest.param(DtypePair(torch.int8, torch.int32, torch.int32, 0.0), id="i8_to_i32"),
]
FLOAT_PAIRS = [p for p in PAIRS if p.values[0].inputs.is_floating_point]

DEFAULT_SLOPE = 0.01
OTHER_SLOPES = [0.0, 0.2, 1.0]

# (M, N, K): the tile-aligned shapes of the issue, then odd ones that leave partial tiles.
SHAPES = [(128, 256, 32), (128, 16, 32), (32, 128, 64), (64, 64, 32), (32, 32, 128),
          (512, 512, 512), (1024, 1024, 1024), (1, 1, 1), (7, 13, 5), (257, 129, 65)]
# Every slope other than the default runs on these only, to keep the suite quick.
SLOPE_SHAPES = [(128, 256, 32), (32, 32, 128), (1, 1, 1), (7, 13, 5), (257, 129, 65)]


def shape_params(shapes):
    return [pytest.param(shape, id=f"M{shape[0]}_N{shape[1]}_K{shape[2]}") for shape in shapes]


OPS = ["matmul", "matmul_leaky_relu"]
# Every (op, dtype pair) that must work: matmul_leaky_relu has no int8 variant.
OP_PAIRS = [pytest.param(op, pair.values[0], id=f"{op}-{pair.id}")
            for op in OPS for pair in PAIRS
            if not (op == "matmul_leaky_relu" and pair.values[0].inputs == torch.int8)]


def run_op(op, a, b, pair, slope=None):
    kwargs = {} if pair.out_dtype is None else {"out_dtype": pair.out_dtype}
    if op == "matmul":
        return torch.ops.tile.matmul(a, b, **kwargs)
    return torch.ops.tile.matmul_leaky_relu(a, b, DEFAULT_SLOPE if slope is None else slope,
                                            **kwargs)


def random_matrix(rows, cols, dtype, scale=1.0):
    if dtype == torch.int8:
        return torch.randint(-128, 128, (rows, cols), dtype=torch.int8)
    return (torch.randn(rows, cols) * scale).to(dtype)


def random_inputs(shape, dtype):
    m, n, k = shape
    # b scaled by 1/sqrt(K) keeps the result near N(0, 1) at every K: about half of it
    # negative (so the leaky branch runs) and far from the float16 range.
    return random_matrix(m, k, dtype), random_matrix(k, n, dtype, 1 / math.sqrt(max(k, 1)))


def laid_out_inputs(shape, dtype, layout):
    """random_inputs with each operand whose letter in `layout` ("nn", "nt", "tn", "tt") is
    "t" stored transposed (column-major), as a weight's W^T or an activation's x^T are."""
    a, b = random_inputs(shape, dtype)
    if layout[0] == "t":
        a = a.t().contiguous().t()
    if layout[1] == "t":
        b = b.t().contiguous().t()
    return a, b


def reference(op, a, b, slope):
    if a.dtype == torch.int8:
        return a.long() @ b.long()
    ref = a.double() @ b.double()
    return F.leaky_relu(ref, slope) if op == "matmul_leaky_relu" else ref


def unit_roundoff(dtype):
    return torch.finfo(dtype).eps / 2


def assert_matches_reference(out, op, a, b, pair, slope):
    ref = reference(op, a, b, slope)
    assert isinstance(out, torch.Tensor)
    assert out.shape == (a.shape[0], b.shape[1])
    assert out.dtype == pair.result
    assert out.device == a.device
    if out.numel() > 0:
        out_storage = out.untyped_storage().data_ptr()
        assert out_storage not in (a.untyped_storage().data_ptr(),
                                   b.untyped_storage().data_ptr()), "output aliases an input"

    if pair.result == torch.int32:
        mismatches = (out.long() != ref).sum().item()
        assert mismatches == 0, f"{mismatches} of {out.numel()} int32 results differ"
        return

    assert torch.isfinite(out).all(), "non-finite values in the output"
    error = out.double() - ref
    rel_error = (error.norm() / max(ref.norm().item(), torch.finfo(torch.float64).tiny)).item()
    assert rel_error <= pair.max_rel_error, (
        f"relative Frobenius error {rel_error:.3g} > {pair.max_rel_error:g}")

    # The Frobenius norm hides a handful of wrong elements in a large result (one wrong
    # element of a 1024 x 1024 bfloat16 result moves it by ~1e-3), so every element must
    # also stay inside the worst-case error of a float32 accumulation in any order (each
    # product and each sum rounded) followed by one rounding to the output dtype.
    k = a.shape[1]
    magnitude = a.double().abs() @ b.double().abs()
    slope_gain = max(1.0, abs(slope)) if op == "matmul_leaky_relu" else 1.0
    bound = 2 * (unit_roundoff(pair.result) * ref.abs()
                 + slope_gain * (k + 2) * unit_roundoff(torch.float32) * magnitude)
    bound += torch.finfo(pair.result).tiny
    outside = error.abs() > bound
    assert not outside.any(), (
        f"{outside.sum().item()} elements outside the worst-case float32-accumulation bound, "
        f"first at {outside.nonzero()[0].tolist()}")


def check(op, a, b, pair, slope=None):
    """Runs the op, checks it against the reference and that it left its inputs alone."""
    a_before, b_before = a.clone(), b.clone()
    out = run_op(op, a, b, pair, slope)
    assert torch.equal(a, a_before) and torch.equal(b, b_before), "the op wrote to its inputs"
    assert_matches_reference(out, op, a, b, pair, DEFAULT_SLOPE if slope is None else slope)
    return out


@pytest.mark.parametrize("shape", shape_params(SHAPES))
@pytest.mark.parametrize("op, pair", OP_PAIRS)
def test_parity(op, shape, pair):
    a, b = random_inputs(shape, pair.inputs)
    check(op, a, b, pair)


@pytest.mark.parametrize("slope", OTHER_SLOPES)
@pytest.mark.parametrize("pair", FLOAT_PAIRS)
@pytest.mark.parametrize("shape", shape_params(SLOPE_SHAPES))
def test_leaky_relu_slopes(shape, pair, slope):
    a, b = random_inputs(shape, pair.inputs)
    check("matmul_leaky_relu", a, b, pair, slope)


@pytest.mark.parametrize("pair", FLOAT_PAIRS)
def test_leaky_relu_exact_small_case(pair):
    # Every value is exact in every dtype: the negative entries must be scaled, the others kept.
    a = torch.tensor([[1.0, 2.0], [-3.0, 4.0], [-0.5, -8.0]]).to(pair.inputs)
    b = torch.eye(2).to(pair.inputs)
    out = run_op("matmul_leaky_relu", a, b, pair, 0.25)
    expected = torch.tensor([[1.0, 2.0], [-0.75, 4.0], [-0.125, -2.0]], dtype=pair.result)
    assert out.dtype == pair.result
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("pair", FLOAT_PAIRS)
def test_leaky_relu_default_and_keyword_slope(pair):
    a, b = random_inputs((33, 47, 29), pair.inputs)
    kwargs = {} if pair.out_dtype is None else {"out_dtype": pair.out_dtype}
    assert_matches_reference(torch.ops.tile.matmul_leaky_relu(a, b, **kwargs),
                             "matmul_leaky_relu", a, b, pair, 0.01)
    assert_matches_reference(torch.ops.tile.matmul_leaky_relu(a, b, negative_slope=0.2, **kwargs),
                             "matmul_leaky_relu", a, b, pair, 0.2)


def test_leaky_relu_applies_before_the_cast_to_float16():
    # The float32 accumulator holds -1e6, past float16's range (65504): scaled by 0.01
    # first it is -1e4, exact in float16; cast first it would be -inf.
    a = torch.full((2, 4), -500.0, dtype=torch.float16)
    b = torch.full((4, 3), 500.0, dtype=torch.float16)
    out = torch.ops.tile.matmul_leaky_relu(a, b, 0.01)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, torch.full((2, 3), -10000.0, dtype=torch.float16),
                               rtol=0, atol=0)


def test_int8_accumulates_in_int32():
    # Extremes everywhere: products of +-16384 or +-16256, so a 16-bit (saturating)
    # pairwise sum would be wrong; 1031 * 16384 still fits in int32.
    k = 1031
    a = torch.tensor([[-128] * k, [127] * k, [-128, 127] * (k // 2) + [-128]], dtype=torch.int8)
    b = torch.stack([torch.full((k,), -128), torch.full((k,), 127),
                     torch.tensor([-128, -128] * (k // 2) + [127])], dim=1).to(torch.int8)
    out = torch.ops.tile.matmul(a, b, out_dtype=torch.int32)
    assert out.dtype == torch.int32
    assert torch.equal(out.long(), a.long() @ b.long())


@pytest.mark.parametrize("k", [1024, 1016, 2048])
def test_int8_whole_blocks_at_extreme_rows(k):
    # Whole blocks of 64 rows and columns (the CPU's grouped panels): rows of a all -128
    # or all 127 give the largest sums of a row that the kernels correct for (vpdpbusd
    # takes b + 128 there), at BLOCK_K's bound, with a rest of k past whole steps, and over
    # two chunks of k.
    torch.manual_seed(k)
    a = torch.randint(-128, 128, (128, k), dtype=torch.int8)
    a[0::3] = -128
    a[1::3] = 127
    b = torch.randint(-128, 128, (k, 128), dtype=torch.int8)
    b[:, 0] = -128
    b[:, 1] = 127
    out = torch.ops.tile.matmul(a, b, out_dtype=torch.int32)
    assert torch.equal(out.long(), a.long() @ b.long())


def strided_inputs(layout, shape, dtype):
    """A non-contiguous (a, b) of the given (M, N, K) shape."""
    m, n, k = shape
    scale = 1 / math.sqrt(k)
    if layout == "a_transposed":
        return random_matrix(k, m, dtype).t(), random_matrix(k, n, dtype, scale)
    if layout == "b_transposed":
        return random_matrix(m, k, dtype), random_matrix(n, k, dtype, scale).t()
    if layout == "both_transposed":
        return random_matrix(k, m, dtype).t(), random_matrix(n, k, dtype, scale).t()
    if layout == "column_steps":
        return random_matrix(m, 2 * k, dtype)[:, ::2], random_matrix(k, 3 * n, dtype, scale)[:, ::3]
    if layout == "row_steps":
        return random_matrix(2 * m, k, dtype)[::2], random_matrix(3 * k, n, dtype, scale)[::3]
    if layout == "offset_slices":
        return (random_matrix(m + 1, k + 3, dtype)[1:, 3:],
                random_matrix(k + 2, n + 5, dtype, scale)[2:, 5:])
    if layout == "transposed_slice":
        return (random_matrix(2 * k + 1, m, dtype)[1::2].t(),
                random_matrix(n, k + 4, dtype, scale)[:, 4:].t())
    if layout == "expanded":
        return (random_matrix(1, k, dtype).expand(m, k),
                random_matrix(k, 1, dtype, scale).expand(k, n))
    raise ValueError(layout)


LAYOUTS = ["a_transposed", "b_transposed", "both_transposed", "column_steps", "row_steps",
           "offset_slices", "transposed_slice", "expanded"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op, pair", OP_PAIRS)
def test_strided_inputs(op, layout, pair):
    a, b = strided_inputs(layout, (67, 45, 37), pair.inputs)
    assert not (a.is_contiguous() and b.is_contiguous())
    check(op, a, b, pair)


@pytest.mark.parametrize("shape", shape_params([(5, 7, 0), (1, 1, 0), (64, 64, 0)]))
@pytest.mark.parametrize("op, pair", OP_PAIRS)
def test_empty_k_gives_zeros(op, shape, pair):
    a, b = random_inputs(shape, pair.inputs)
    out = check(op, a, b, pair)
    assert torch.equal(out, torch.zeros(shape[:2], dtype=pair.result))


@pytest.mark.parametrize("shape", shape_params([(0, 7, 5), (5, 0, 3), (0, 0, 4), (0, 0, 0)]))
@pytest.mark.parametrize("op, pair", OP_PAIRS)
def test_empty_result(op, shape, pair):
    a, b = random_inputs(shape, pair.inputs)
    out = check(op, a, b, pair)
    assert out.shape == shape[:2] and out.numel() == 0


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.id.endswith(("f32", "i32"))])
def test_compiled_on_first_call_then_cached(op, pair):
    torch_tile.runtime.clear_cache()
    stats = torch_tile.runtime.cache_stats()
    assert (stats["hits"], stats["misses"]) == (0, 0)
    a, b = random_inputs((96, 80, 72), pair.inputs)
    run_op(op, a, b, pair)
    first = torch_tile.runtime.cache_stats()
    assert first["misses"] >= 1, "the first call compiled no kernel"
    check(op, a, b, pair)
    second = torch_tile.runtime.cache_stats()
    assert second["misses"] == first["misses"], "an identical second call compiled again"
    assert second["hits"] > first["hits"], "the second call did not use the kernel cache"


@pytest.mark.parametrize("pair", [p for p in PAIRS if p.id in ("f32", "bf16", "i8_to_i32")])
def test_transposed_operands_are_read_from_copies(pair):
    # The CPU kernels read a in rows of k and b in rows of n: a transposed a is copied to
    # rows first (float32 then takes the contiguous layout's kernel; the tiles' config may
    # differ for a copy), a transposed b into panels. A layout seen before compiles
    # nothing, and every layout matches torch at ragged sizes.
    shape = (41, 35, 27)
    torch_tile.runtime.clear_cache()
    misses = []
    for layout in ["contiguous", "a_transposed", "b_transposed", "contiguous", "a_transposed",
                   "b_transposed", "both_transposed"]:
        if layout == "contiguous":
            a, b = random_inputs(shape, pair.inputs)
        else:
            a, b = strided_inputs(layout, shape, pair.inputs)
        check("matmul", a, b, pair)
        misses.append(torch_tile.runtime.cache_stats()["misses"])
    assert misses[0] >= 1
    if pair.inputs == torch.float32:
        assert misses[1] == misses[0], "a transposed a was not read from a copy in rows"
    assert misses[5] == misses[4] == misses[3] == misses[2], "a layout seen before compiled again"


@pytest.mark.parametrize("pair", [p for p in PAIRS if p.id in ("f32", "bf16", "i8_to_i32")])
@pytest.mark.parametrize("layout", ["contiguous", "b_transposed", "row_steps"])
def test_b_rows_4kb_apart_are_copied_further_apart(pair, layout):
    # Rows of b a multiple of 4 KB apart share cache sets: a call large enough (M, N and K
    # at least 256) runs on a copy of b whose rows are one cache line further apart. The
    # result matches torch, and b is left as it was.
    m, k = 264, 272
    n = 4096 // pair.inputs.itemsize
    if layout == "contiguous":
        a, b = random_inputs((m, n, k), pair.inputs)
    else:
        a, b = strided_inputs(layout, (m, n, k), pair.inputs)
    before = b.clone()
    check("matmul", a, b, pair)
    assert torch.equal(b, before)


# (M, N, K) whose b reaches 4 MB (int8: 256 KB, with 512 rows of a), where the CPU
# kernel reads b from a copy in panels of BLOCK_N columns; ragged in every dimension, with
# more rows than take dots along k or the transposed product against a transposed b.
PANEL_SHAPES = {torch.float32: (299, 1031, 1025), torch.float16: (70, 1500, 1401),
                torch.bfloat16: (299, 1500, 1401), torch.int8: (515, 530, 503)}


def specs_compiled(dump_dir):
    return [p.read_text() for p in dump_dir.glob("cpu-*/matmul*/spec.txt")]


def checked_specs(op, a, b, pair, dump_dir):
    """The specs of the kernels a checked call compiles from a fresh kernel cache."""
    with torch_tile.config.patch(dump_dir=dump_dir):
        torch_tile.runtime.clear_cache()
        check(op, a, b, pair)
    return specs_compiled(dump_dir)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as info:
            return next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    except OSError:
        return []


def test_host_matrix_units_follow_the_cpu():
    # What the kernels may use is what the CPU has: the AVX-512 dot products exactly, AMX
    # only where the CPU has it (and the OS grants it, which a Linux from 5.16 does).
    units = torch_tile.runtime.host_matrix_units()
    flags = cpu_flags()
    assert ("AVX512-BF16" in units) == ("avx512_bf16" in flags)
    assert ("AVX512-VNNI" in units) == ("avx512_vnni" in flags)
    for unit, flag in (("AMX-BF16", "amx_bf16"), ("AMX-INT8", "amx_int8")):
        assert unit not in units or flag in flags


def expected_panel_group(dtype):
    """packed_b's value: the k per group of b's panels, where the host's dot-product
    instruction reads them so (vdpbf16ps: bf16 pairs, vpdpbusd: int8 quads); 1 otherwise.
    The kernel reads a's groups of k from its rows, whatever a's layout: an a whose k is not
    contiguous (column_steps) is copied to rows first. A float16 call of PANEL_SHAPES' size
    multiplies bfloat16 terms of a and b (a's rows contiguous) where the host's tiles take
    bfloat16."""
    flags = cpu_flags()
    if dtype == torch.float16 and "amx_bf16" in flags:
        return 2
    if dtype == torch.bfloat16 and "avx512_bf16" in flags:
        return 2
    if dtype == torch.int8 and "avx512_vnni" in flags:
        return 4
    return 1


@pytest.mark.parametrize("layout", ["contiguous", "b_transposed", "row_steps", "column_steps",
                                    "a_transposed", "both_transposed"])
@pytest.mark.parametrize("op, pair", OP_PAIRS)
def test_large_b_is_read_from_panels(op, pair, layout, tmp_path):
    # Past the L2 the microkernel's walk down b's rows (a page apart or more) stalls on the
    # TLB and the caches: the call copies b into panels, each block column's K rows in one
    # contiguous run, from any layout, and a kernel specialized on it reads them (a
    # transposed a from its copy in rows, transposed in whole tiles and at the edges). The
    # result matches torch, and a and b are left as they were.
    shape = PANEL_SHAPES[pair.inputs]
    if layout == "contiguous":
        a, b = random_inputs(shape, pair.inputs)
    else:
        a, b = strided_inputs(layout, shape, pair.inputs)
    specs = checked_specs(op, a, b, pair, tmp_path)
    if (pair.inputs == torch.float16 and layout == "b_transposed" and "f16c" in cpu_flags()
            and "AMX-BF16" not in torch_tile.runtime.host_matrix_units()):
        # float16 against a transposed b takes dots along k on the float16 operands, b
        # read in place (test_float16_few_rows_take_dots_along_k_on_float16).
        assert specs and all("packed_b" not in spec and "BLOCK_N=8," in spec
                             for spec in specs), specs
        return
    group = expected_panel_group(pair.inputs)
    assert specs and all(f"packed_b={group}" in spec for spec in specs), specs


@pytest.mark.parametrize("layout", ["contiguous", "a_transposed", "both_transposed"])
@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS
                                      if p.values[1].inputs in (torch.float32, torch.bfloat16, torch.int8)])
@pytest.mark.parametrize("shape", [(200, 300, 250), (600, 300, 500), (257, 40, 500)])
def test_each_thread_writes_its_own_operands(op, pair, layout, shape):
    # Where the grid is one group of rows, each of the launch's threads packs the panels of
    # its own block columns (and copies a transposed a for itself: up to 128 KB, int8 off
    # the tiles up to 1 MB, as the second shape's; a larger copy, as the second shape's
    # float32 and bfloat16 one, is written first, shared; where the threads split one
    # block column, as the third shape's, each copies only its rows, and a shared copy is
    # written and multiplied in bands of rows) on every call: the result
    # follows a and b changed in place between calls (no copy or panel is reused), at
    # ragged sizes, with every op.
    if layout == "contiguous":
        a, b = random_inputs(shape, pair.inputs)
    else:
        a, b = strided_inputs(layout, shape, pair.inputs)
    check(op, a, b, pair)
    a.copy_(random_matrix(*a.shape, pair.inputs))
    check(op, a, b, pair)
    b.copy_(random_matrix(*b.shape, pair.inputs, 1 / math.sqrt(shape[2])))
    check(op, a, b, pair)


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs == torch.int8])
@pytest.mark.parametrize("shape, block_k", [((150, 170, 192), 256), ((150, 170, 320), 512),
                                            ((150, 170, 448), 512), ((200, 400, 500), 512)])
def test_int8_k_of_whole_tile_steps_runs_as_one_chunk(op, pair, shape, block_k, tmp_path):
    # Where the host has AMX-INT8, an int8 32x32 block whose K is whole tile steps (64
    # bytes) runs all of K as one chunk: BLOCK_K is the power of two at or above K, whose
    # steps past K the kernel skips. K = 500 with 400 columns: a is copied onto whole cache
    # lines, zeros past k, and the kernel runs K = 512. Ragged M and N.
    a, b = random_inputs(shape, pair.inputs)
    specs = checked_specs(op, a, b, pair, tmp_path)
    assert specs
    if "AMX-INT8" in torch_tile.runtime.host_matrix_units():
        assert all(f"BLOCK_K={block_k}," in spec and "BLOCK_M=32," in spec for spec in specs), specs


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs in (torch.bfloat16, torch.int8)])
def test_large_blocks_of_matrix_tiles(op, pair, tmp_path):
    # Problems of 1024 rows and columns and more take 64x64 blocks where the host has AMX
    # (2x2 sub-blocks of tiles sharing their rows of a and b), elsewhere the vector
    # kernel; ragged in every dimension, K past one BLOCK_K.
    a, b = random_inputs((1030, 1041, 1100), pair.inputs)
    specs = checked_specs(op, a, b, pair, tmp_path)
    amx = ("AMX-BF16" if pair.inputs == torch.bfloat16 else "AMX-INT8") in torch_tile.runtime.host_matrix_units()
    assert specs and all(("BLOCK_M=64" in spec) == amx for spec in specs), specs


@pytest.mark.parametrize("shape", [(300, 200, 40), (777, 500, 8)])
def test_int8_k_under_a_tile_step_stays_on_the_vector_kernel(shape, tmp_path):
    # An int8 K under one tile step (64 bytes) would have every block stage a zero-padded
    # copy of its rows of a: where the host has AMX-INT8 such calls take vpdpbusd on the
    # vector registers (the product exact either way).
    pair = next(p.values[0] for p in PAIRS if p.values[0].inputs == torch.int8)
    a, b = random_inputs(shape, pair.inputs)
    specs = checked_specs("matmul", a, b, pair, tmp_path)
    assert specs and not any(re.search(r"BLOCK_M=(32|64),", spec) for spec in specs), specs


@pytest.mark.parametrize("layout", ["contiguous", "b_transposed", "a_transposed", "row_steps",
                                    "offset_slices", "expanded"])
@pytest.mark.parametrize("bias", ["none", "int32_extremes", "int8_strided"])
@pytest.mark.parametrize("shape", [(1025, 200, 5), (2048, 130, 128), (1100, 16, 256),
                                   (1500, 1000, 1), (4100, 48, 64)])
def test_int8_short_k_past_one_group_takes_a_as_unsigned(layout, bias, shape, tmp_path):
    # int8 of K up to 256 past 1024 rows, on vpdpbusd with b in panels of quads: the kernel
    # reads a + 128 (vpdpbusd's unsigned side, unsigned_a) and its bias carries -128 times
    # b's column sums, summed by the call once, with the caller's bias (int32 added with
    # int32's wraparound, or int8 at a stride). Exact against int64 products, at ragged
    # sizes, from any layout.
    pair = next(p.values[0] for p in PAIRS if p.values[0].inputs == torch.int8)
    if layout == "contiguous":
        a, b = random_inputs(shape, torch.int8)
    else:
        a, b = strided_inputs(layout, shape, torch.int8)
    n = shape[1]
    extra = {}
    if bias == "int32_extremes":
        extra["bias"] = torch.tensor([-2**31, 2**31 - 1] * n, dtype=torch.int32)[:n]
    elif bias == "int8_strided":
        extra["bias"] = torch.randint(-128, 128, (2 * n,), dtype=torch.int8)[::2]
    with torch_tile.config.patch(dump_dir=tmp_path):
        torch_tile.runtime.clear_cache()
        out = torch.ops.tile.matmul(a, b, out_dtype=torch.int32, **extra)
    want = a.long() @ b.long() + (extra["bias"].long() if extra else 0)
    want = (want + 2**31) % 2**32 - 2**31
    assert out.dtype == torch.int32 and torch.equal(out.long(), want)
    # Every kernel of the call on vpdpbusd takes a so; AMX's tiles (32 or 64 rows a block)
    # multiply signed bytes and take it as it is.
    specs = specs_compiled(tmp_path)
    vnni = "AVX512-VNNI" in torch_tile.runtime.host_matrix_units()
    assert specs and all(("unsigned_a=1" in spec) == (vnni and not re.search(r"BLOCK_M=(32|64),", spec))
                         for spec in specs), specs


@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
@pytest.mark.parametrize("shape", [(63, 777, 1), (1024, 1024, 1), (300, 100, 3), (5, 4100, 2),
                                   (1001, 65, 15), (200, 777, 8)])
def test_float32_k_under_16_runs_row_by_row(layout, shape, tmp_path):
    # float32 with K under 16 (an outer product, K = 1): BLOCK_K the power of two at or
    # above K, and the blocks row by row (GROUP_M 1), c written in whole rows. Parity with
    # every op at ragged sizes.
    pair = PAIRS[0].values[0]
    assert pair.inputs == torch.float32
    a, b = laid_out_inputs(shape, torch.float32, layout)
    for op in ("matmul", "matmul_leaky_relu"):
        specs = checked_specs(op, a, b, pair, tmp_path / op)
        block_k = 1 << (shape[2] - 1).bit_length()
        assert specs and all(f"BLOCK_K={block_k}," in spec and "GROUP_M=1," in spec
                             for spec in specs), specs


@pytest.mark.parametrize("shape", [(600, 4100, 64), (1024, 4096, 100), (513, 5000, 3)])
def test_int8_short_k_of_wide_results_runs_in_groups_of_16_rows(shape, tmp_path):
    # int8 of K up to 256 on the vector kernel's 4 x 64 blocks, past 512 rows and with
    # 4096 columns or more: the launch runs groups of 16 rows (GROUP_M 4), each walking
    # every block column, not one group of every row. Exact at ragged sizes.
    pair = next(p.values[0] for p in PAIRS if p.values[0].inputs == torch.int8)
    a, b = random_inputs(shape, torch.int8)
    specs = checked_specs("matmul", a, b, pair, tmp_path)
    # The AVX-512 vector kernel's blocks (AVX2's float32 4 x 16 keep their groups).
    vector = [spec for spec in specs if "BLOCK_M=4,BLOCK_N=64," in spec]
    assert all("GROUP_M=4," in spec for spec in vector), specs
    if "AVX512-VNNI" in torch_tile.runtime.host_matrix_units() and shape[2] < 64:
        assert vector, specs


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs in (torch.bfloat16, torch.int8)])
@pytest.mark.parametrize("m", [500, 449])
def test_rows_past_a_whole_block(op, pair, m):
    # Where the host has AMX, a's copy is padded to whole 64-row blocks (the kernel runs
    # the last block row whole, into rows of c's allocation past M): the result has M rows
    # all the same, contiguous, and the rows past M reach nobody.
    a, b = random_inputs((m, 500, 500), pair.inputs)
    out = check(op, a, b, pair)
    assert out.shape == (m, 500) and out.stride() == (500, 1) and out.is_contiguous()
    assert out.clone().shape == (m, 500)


def test_far_apart_rows_of_b_are_read_from_panels(tmp_path):
    # f32 rows of b 2 KB or more apart put a block's runs in few cache sets: b is copied
    # into panels below the L2's size too (here 400 KB), ragged in every dimension.
    pair = PAIRS[0].values[0]
    assert pair.inputs == torch.float32
    a, b = random_inputs((67, 517, 203), pair.inputs)
    specs = checked_specs("matmul", a, b, pair, tmp_path)
    assert specs and all("packed_b=1" in spec for spec in specs), specs


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs in (torch.bfloat16, torch.int8)])
@pytest.mark.parametrize("shape", [(64, 96, 100), (200, 130, 500), (13, 2048, 2048)])
def test_groups_of_k_are_read_from_panels_at_any_size(op, pair, shape, tmp_path):
    # Where the host's dot-product instruction takes b's k in groups (vdpbf16ps: bfloat16
    # pairs, vpdpbusd: int8 quads), b read in place would have its rows interleaved by the
    # kernel at every block: from 64 rows of a, b is copied into grouped panels however
    # small it is, ragged in every dimension; with fewer rows, where b is past the L2
    # (4 MB).
    group = expected_panel_group(pair.inputs)
    a, b = random_inputs(shape, pair.inputs)
    specs = checked_specs(op, a, b, pair, tmp_path)
    assert specs
    if group > 1:
        assert all(f"packed_b={group}" in spec for spec in specs), specs


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs in (torch.bfloat16, torch.int8)])
@pytest.mark.parametrize("k", [3, 7, 1001, 2051])
def test_k_ending_inside_a_group_of_k(op, pair, k):
    # Where K ends inside a group of k (int8 quads, bfloat16 pairs), blocks of whole rows
    # and columns run the whole groups, then the last one from a's words cut at K. a's
    # rows are contiguous, so the bytes past K are the next row's: read as a's, they would
    # change the result. K past one chunk of k leaves a last chunk of a part of a group.
    a, b = random_inputs((128, 192, k), pair.inputs)
    check(op, a, b, pair)


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs in (torch.float32, torch.bfloat16, torch.int8)])
@pytest.mark.parametrize("m", [1, 8, 16, 17])
def test_few_rows_read_b_in_place(op, pair, m, tmp_path):
    # A call of a few rows of a (a decode step's batch) streams b once: where the host has
    # AVX-512 (and for bf16 and int8 their dot-product instructions), its blocks take the
    # rows whole (float32 17 rows: 8-row blocks and an edge) and read b in place, whole
    # cache lines of it per row, however large b is (here 4 MB, past the L2): on AMD's
    # cores, and for a single row elsewhere. The result matches torch with N ragged.
    k, n = {torch.float32: (512, 2050), torch.bfloat16: (1024, 2050), torch.int8: (2048, 2050)}[pair.inputs]
    a, b = random_inputs((m, n, k), pair.inputs)
    specs = checked_specs(op, a, b, pair, tmp_path)
    assert specs
    dot = {torch.float32: "avx512f", torch.bfloat16: "avx512_bf16", torch.int8: "avx512_vnni"}[pair.inputs]
    flags = cpu_flags()
    zen = torch_tile.runtime.host_target().startswith("cpu:znver")
    if "avx512f" in flags and dot in flags and (m == 1 or zen):
        # int8 reads b in place only in one pass: 16 rows take its panels.
        in_place = pair.inputs == torch.float32 or m != 17 and not (pair.inputs == torch.int8 and m == 16)
        assert all(("packed_b" not in spec) == in_place for spec in specs), specs
        if in_place:
            block_m = {1: 1, 8: 8, 16: 16 if pair.inputs == torch.bfloat16 else 8, 17: 8}[m]
            assert all(f"BLOCK_M={block_m}," in spec for spec in specs), specs


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs in (torch.bfloat16, torch.int8)])
@pytest.mark.parametrize("shape", [(40, 512, 320), (13, 33, 77), (7, 100, 99), (16, 80, 1030),
                                   (63, 70, 500), (3, 17, 5)])
def test_edges_of_b_read_in_place(op, pair, shape, tmp_path):
    # Few rows against a small b read in place (bfloat16 below 64 rows, int8 up to 16):
    # the blocks at M's and N's edges and the last chunk of a K that BLOCK_K does not
    # divide take the dot-product instruction under b's column mask, a's missing rows
    # read from its first and dropped. Ragged in every dimension; K past one chunk.
    a, b = random_inputs(shape, pair.inputs)
    specs = checked_specs(op, a, b, pair, tmp_path)
    assert specs
    flags = cpu_flags()
    dot = {torch.bfloat16: "avx512_bf16", torch.int8: "avx512_vnni"}[pair.inputs]
    m = shape[0]
    if "avx512f" in flags and dot in flags and not torch_tile.runtime.host_matrix_units():
        in_place = m <= 16 or pair.inputs == torch.bfloat16
        assert all(("packed_b" not in spec) == in_place for spec in specs), specs


@pytest.mark.parametrize("op, pair", OP_PAIRS)
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("m, k", [(2, 7), (17, 1030), (300, 320), (70, 1)])
def test_one_column_products(op, pair, layout, m, k):
    # A matrix times a vector (N = 1) runs as its transpose, one row against a^T: c^T's
    # row is c's column in memory. The result is an M x 1 contiguous tensor as torch's,
    # in every layout of a and b.
    a, b = laid_out_inputs((m, 1, k), pair.inputs, layout)
    out = check(op, a, b, pair)
    assert out.shape == (m, 1) and out.is_contiguous() and out.stride() == (1, 1)


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs in (torch.float32, torch.int8)])
@pytest.mark.parametrize("layout", ["nn", "nt"])
@pytest.mark.parametrize("shape", [(1000, 10, 300), (200, 16, 64), (100, 3, 50), (300, 30, 100),
                                   (33, 16, 200), (5, 8, 100), (1, 16, 512)])
def test_narrow_results_take_narrow_blocks(op, pair, layout, shape, tmp_path):
    # A result of 16 columns or fewer (a classifier's few outputs) runs in blocks of 16
    # columns on AVX-512 (16 rows, or the rows there are below 16: a few rows' blocks of 64
    # columns too had computed mostly lanes past N), int8's of up to 32 columns in 8 x 32
    # blocks. Ragged in every dimension, b as given and transposed.
    specs = checked_specs(op, *laid_out_inputs(shape, pair.inputs, layout), pair, tmp_path)
    assert specs
    tiles = pair.inputs == torch.int8 and "AMX-INT8" in torch_tile.runtime.host_matrix_units()
    m, n, k = shape
    # Rows against a transposed b may take dots along k instead (see
    # test_few_rows_against_a_transposed_b_take_dots_along_k).
    int8 = pair.inputs == torch.int8
    dots = layout == "nt" and (m <= (32 if int8 else 72) or (int8 and n <= 16)) and k >= (
        (128 if m <= 16 else 1024) if int8 else (32 if m <= 16 else 128))
    if "avx512f" in cpu_flags() and not tiles and not dots:
        block_n = 16 if n <= 16 else 32 if int8 else None
        if block_n:
            assert all(f"BLOCK_N={block_n}," in spec for spec in specs), specs


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs in
                                      (torch.float32, torch.float16, torch.bfloat16)])
@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", [(65, 33, 520), (200, 48, 64), (97, 40, 300), (130, 60, 100),
                                   (13, 40, 200)])
def test_results_under_64_columns_take_narrower_blocks(op, pair, layout, shape, tmp_path):
    # 33 to 63 columns fit one 64-wide block column, whose masked edge computes up to 31
    # lanes past N in every row: float32 and float16 from 33 to 48 columns run blocks of
    # 16 columns (a few rows too, from 4 a block), bfloat16 up to 63 blocks of 32. Ragged
    # in every dimension, a as given and transposed.
    specs = checked_specs(op, *laid_out_inputs(shape, pair.inputs, layout), pair, tmp_path)
    assert specs
    tiles = MATRIX_TILES[pair.inputs] in torch_tile.runtime.host_matrix_units()
    n = shape[1]
    if "avx512f" in cpu_flags() and not tiles:
        block_n = 32 if pair.inputs == torch.bfloat16 else 16 if n <= 48 else 64
        assert all(f"BLOCK_N={block_n}," in spec for spec in specs), specs


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs == torch.float32])
@pytest.mark.parametrize("shape, block_n", [((13, 20, 300), 16), ((40, 32, 200), 32), ((8, 45, 1030), 16),
                                            ((2, 20, 300), 64)])
def test_few_rows_of_narrow_results_take_narrower_blocks(op, pair, shape, block_n, tmp_path):
    # A few rows of a (b read in place) against 17 to 48 float32 columns run blocks of 16
    # columns (of 32 at 32 columns) from 4 rows a block; one or two rows keep blocks of 64,
    # one pass over b's rows. Ragged in every dimension.
    specs = checked_specs(op, *random_inputs(shape, pair.inputs), pair, tmp_path)
    assert specs
    if "avx512f" in cpu_flags() and torch_tile.runtime.host_target().startswith("cpu:znver"):
        assert all(f"BLOCK_N={block_n}," in spec and "packed_b" not in spec for spec in specs), specs


# The host's matrix units (torch_tile.runtime.host_matrix_units()) that take each input
# dtype on the tiles (float16 as bfloat16 terms).
MATRIX_TILES = {torch.float32: None, torch.float16: "AMX-BF16", torch.bfloat16: "AMX-BF16",
                torch.int8: "AMX-INT8"}


def transposed_b_specs(op, pair, m, n, k, tmp_path):
    """The specs that a checked call of m rows of a against a transposed b (a Linear's
    weight: x @ W^T) compiles from a fresh kernel cache."""
    a = random_matrix(m, k, pair.inputs)
    b = random_matrix(n, k, pair.inputs, 1 / math.sqrt(k)).t()
    specs = checked_specs(op, a, b, pair, tmp_path)
    assert specs
    return specs


@pytest.mark.parametrize("op, pair", OP_PAIRS)
@pytest.mark.parametrize("m, n, k", [(1, 45, 7), (1, 1000, 999), (1, 8, 4100), (1, 2050, 64),
                                     (1, 3, 2), (2, 45, 130), (3, 100, 999), (8, 33, 70),
                                     (7, 16, 4100), (17, 45, 130), (31, 100, 999), (33, 20, 70),
                                     (64, 9, 1030), (70, 300, 130), (100, 20, 70), (40, 512, 5),
                                     (8, 300, 8), (1001, 13, 1030), (300, 16, 300), (97, 17, 1030)])
def test_few_rows_against_a_transposed_b_take_dots_along_k(op, pair, m, n, k, tmp_path):
    # Rows of a (a decode step of a few tokens, or a small batch) against a transposed b
    # (a Linear's weight: x @ W^T): where the host has the dtype's dot-product instruction
    # (float32 always; float16 is widened where it is multiplied, with F16C) and the rows
    # do not take the matrix tiles, the kernel takes dots along k for up to 32 rows (int8)
    # or 72 (bf16, float32; float16 any), on the operands as given: blocks of 8 columns and
    # all the rows up to 32, run two rows at a time, b read in place (no panels). The
    # result matches torch at ragged M, N and K: rows and columns past the matrix in the
    # last blocks, sub-blocks of rows all past it, a K of no whole vector of k, a K below
    # one, two block rows. A short k leaves most lanes of the dots empty (one row takes
    # them at any k): b is then copied into panels for the row-major kernel. bf16 and int8
    # take dots at any number of rows against 16 columns or fewer.
    specs = transposed_b_specs(op, pair, m, n, k, tmp_path)
    dot = {torch.float32: None, torch.float16: "f16c", torch.bfloat16: "avx512_bf16",
           torch.int8: "avx512_vnni"}[pair.inputs]
    most_rows = {torch.int8: 32, torch.float16: math.inf}.get(pair.inputs, 72)
    if pair.inputs in (torch.bfloat16, torch.int8) and n <= 16:
        most_rows = math.inf
    on_tiles = m >= 32 and MATRIX_TILES[pair.inputs] in torch_tile.runtime.host_matrix_units()
    # float16 calls of 2^20 multiply-adds or more take bfloat16 terms on the tiles there.
    if pair.inputs == torch.float16:
        on_tiles = on_tiles and m * n * k >= 1 << 20
    fewest_k = {torch.float32: (32, 128), torch.bfloat16: (64, 256), torch.int8: (128, 1024),
                torch.float16: (32, 32)}[pair.inputs][m > 16]
    long_enough = m == 1 or k >= fewest_k
    if (dot is None or dot in cpu_flags()) and m <= most_rows and not on_tiles and long_enough:
        block_m = 1 if m == 1 else min(32, 1 << (m - 1).bit_length())
        assert all("packed_b" not in spec and f"BLOCK_M={block_m}," in spec and
                   "BLOCK_N=8," in spec for spec in specs), specs
        if pair.inputs == torch.float16:
            assert all(spec.startswith(f"{op}[f16,") for spec in specs), specs
    elif pair.inputs != torch.float16:
        assert all("packed_b" in spec for spec in specs), specs


@pytest.mark.parametrize("op, pair", [p for p in OP_PAIRS if p.values[1].inputs in (torch.float32, torch.bfloat16, torch.int8)])
@pytest.mark.parametrize("m, n, k", [(8, 256, 64), (9, 300, 999), (16, 1000, 130), (31, 257, 4100),
                                     (33, 512, 70), (64, 300, 1030), (100, 256, 520),
                                     (130, 300, 130), (200, 300, 130), (256, 260, 33),
                                     (96, 1024, 1024), (192, 2048, 2048)])
def test_rows_against_a_transposed_b_as_the_transposed_product(op, pair, m, n, k, tmp_path):
    # Rows of a against a transposed b of 256 columns or more (x @ W^T for a batch of
    # tokens through a Linear's weight) run as c^T = b^T a^T: b^T's rows are the kernel's
    # a, read in place, a's rows the b copied into panels, and c is written from c^T. On
    # the matrix tiles (AMX) from 8 rows to 192 (int8: 9 to 256); on the vector kernel
    # past the rows that take dots along k, to 256 (int8 from 128), where b's copy is four
    # times a's and c's or more and a's rows fill the swapped call's blocks (96 and 192
    # rows here). Elsewhere dots along k or b's panels. The result matches torch at ragged
    # M, N and K either way.
    specs = transposed_b_specs(op, pair, m, n, k, tmp_path)
    fewest_rows, most_rows = (9, 256) if pair.inputs == torch.int8 else (8, 192)
    # An int8 k under one tile step (64) stays on the vector kernel.
    if (MATRIX_TILES[pair.inputs] in torch_tile.runtime.host_matrix_units()
            and fewest_rows <= m <= most_rows and (pair.inputs != torch.int8 or k >= 64)):
        # The swapped call's rows, b's columns, fill the tiles' blocks.
        assert all("packed_b" in spec and re.search(r"BLOCK_M=(32|64),", spec)
                   for spec in specs), specs


def float16_call(op, out_dtype, m, k, n, tmp_path, transposed_b=True):
    """A float16 call (b transposed unless told, a float16 bias) from a fresh kernel cache:
    the float64 reference, the output and the specs it compiled."""
    a = torch.randn(m, k).half()
    b = torch.randn(n, k).half().t() if transposed_b else torch.randn(k, n).half()
    bias = torch.randn(n).half()
    want = a.double() @ b.double() + bias.double()
    if op == "matmul_leaky_relu":
        want = torch.nn.functional.leaky_relu(want, 0.01)
    with torch_tile.config.patch(dump_dir=tmp_path):
        torch_tile.runtime.clear_cache()
        got = getattr(torch.ops.tile, op)(a, b, out_dtype=out_dtype, bias=bias)
    assert got.dtype == (out_dtype or torch.float16)
    magnitude = a.double().abs() @ b.double().abs() + bias.double().abs()
    return want, got, magnitude, specs_compiled(tmp_path)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("out_dtype", [None, torch.float32])
@pytest.mark.parametrize("m, k, n", [(1, 999, 300), (6, 517, 40), (17, 130, 45), (64, 4100, 20),
                                     (300, 70, 33)])
def test_float16_few_rows_take_dots_along_k_on_float16(op, out_dtype, m, k, n, tmp_path):
    # Rows against a transposed b (a float16 Linear's weight) are multiplied on the
    # float16 operands themselves where the host has F16C, each element widened to
    # float32 where it is loaded (blocks of 16 rows and more widen their columns once per
    # chunk of k, ahead of their pairs of rows): the float32 copy of b had converted all of
    # it on every call. A float16 bias added in float32 before leaky_relu, the result
    # rounded once.
    if ("AMX-BF16" in torch_tile.runtime.host_matrix_units() and m >= 32
            and m * n * k >= 1 << 20):
        pytest.skip("the host's tiles take this call as bfloat16 terms "
                    "(test_float16_takes_bfloat16_tiles_where_the_host_has_them)")
    want, got, _, specs = float16_call(op, out_dtype, m, k, n, tmp_path)
    want = want.float()
    torch.testing.assert_close(got.float(), want if out_dtype else want.half().float(),
                               rtol=2e-3 if out_dtype is None else 1e-5, atol=1e-3)
    if "f16c" in cpu_flags():
        assert specs and all(spec.startswith(f"{op}[f16,") and "BLOCK_N=8," in spec
                             for spec in specs), specs


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("out_dtype", [None, torch.float32])
@pytest.mark.parametrize("m, k, n", [(67, 131, 45), (1000, 70, 13)])
def test_float16_runs_on_the_float32_kernel(op, out_dtype, m, k, n, tmp_path):
    # On the CPU smaller float16 operands are converted once into float32 copies for the
    # float32 kernel (converted where they are multiplied, they took two micro-ops each on
    # the FMA ports), its result rounded once: the parity of a float16 kernel, a float16
    # bias added in float32 before leaky_relu; ragged, b row-major (a transposed b takes
    # dots along k). The larger a (over 256 KB as float32) runs in bands of rows, one per
    # thread.
    want, got, _, specs = float16_call(op, out_dtype, m, k, n, tmp_path, transposed_b=False)
    want = want.float()
    torch.testing.assert_close(got.float(), want if out_dtype else want.half().float(),
                               rtol=2e-3 if out_dtype is None else 1e-5, atol=1e-3)
    assert specs and all("[f32,f32" in spec for spec in specs), specs


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("out_dtype", [None, torch.float32])
@pytest.mark.parametrize("m, k, n", [(330, 203, 517), (1100, 60, 600), (96, 4100, 160)])
def test_float16_takes_bfloat16_tiles_where_the_host_has_them(op, out_dtype, m, k, n, tmp_path):
    # Larger float16 calls, where the host's tiles take bfloat16 (AMX-BF16), are split
    # into bfloat16 terms (hi + lo, exact) multiplied on the tiles into float32: three
    # products per pair (four where K is short: 60), a K past 2048 in chunks whose sums are
    # added, the bias and leaky_relu after them (4100). Parity as a float32 accumulation;
    # elsewhere dots along k on float16 (F16C), or the float32 kernel. b transposed, bias
    # in float16. A single dot rounds its float16 result in its own epilogue (a kernel of
    # bfloat16 in, float16 out).
    want, got, magnitude, specs = float16_call(op, out_dtype, m, k, n, tmp_path)
    bound = (k + 2) * 2.0**-23 * magnitude
    if out_dtype is None:
        bound += 2.0**-10 * want.abs() + 2.0**-24
    outside = (got.double() - want).abs() > bound
    assert not outside.any(), f"{outside.sum().item()} elements outside the float32-accumulation bound"
    tiles = "AMX-BF16" in torch_tile.runtime.host_matrix_units()
    out = "f16" if out_dtype is None and k <= 2048 else "f32"
    elsewhere = "[f16," if "f16c" in cpu_flags() else "[f32,f32"
    assert specs and all((f"[bf16,{out}" in spec) == tiles and (elsewhere in spec) != tiles
                         for spec in specs), specs


@pytest.mark.parametrize("where", ["a", "b", "both"])
def test_float16_with_an_infinity_keeps_torchs_infinities(where):
    # An infinity's bfloat16 terms would make inf * 0 = NaN: such calls take the float32
    # kernel, whose products are torch's. b is checked before the call, a's split finds
    # out itself, on the first call (while the kernel compiles) and on a later one.
    def call(infinite):
        a = torch.randn(512, 512).half()
        b = torch.randn(512, 512).half()
        if infinite and where in ("a", "both"):
            a[3, 4] = float("inf")
        if infinite and where in ("b", "both"):
            b[7, 9] = float("-inf")
        got = torch.ops.tile.matmul(a, b, out_dtype=torch.float32)
        want = a.float() @ b.float()
        assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got.isnan(), want.isnan())
        assert got.isinf().any() == infinite
        finite = want.isfinite()
        torch.testing.assert_close(got[finite], want[finite], rtol=1e-5, atol=1e-3)

    torch_tile.runtime.clear_cache()
    call(infinite=True)
    call(infinite=False)
    call(infinite=True)


@pytest.mark.parametrize("n, packed", [(256, False), (257, True), (240, True), (160, False)])
def test_small_b_is_read_in_place_where_its_rows_are_whole_cache_lines(n, packed, tmp_path):
    # Below the L2's size, with rows close together and whole cache lines apart (256 f32
    # columns), b is read through its strides: a copy would not repay itself. At 257
    # columns each vector load of a row of b would straddle two cache lines and the block
    # column at N's edge would take the masked path; panels, written whole (zeros past
    # N), take neither. 240 columns are whole lines but not whole 32-column blocks: the
    # edge column would still be masked, so panels; 160 are whole blocks. Parity at the
    # edge column either way.
    pair = PAIRS[0].values[0]
    a, b = random_inputs((67, n, 255), pair.inputs)
    specs = checked_specs("matmul", a, b, pair, tmp_path)
    assert specs and all(("packed_b=1" in spec) == packed for spec in specs), specs


def test_clear_cache_returns_the_kernels_memory():
    # Each kernel loaded on the CPU holds JIT code (~50 KB): clear_cache() must unload it,
    # or a program that clears and reloads grows without end. In a process of its own, so
    # that nothing else holds a kernel; kernels reload from the disk cache after the first.
    script = """
import os, torch, torch_tile
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
a, b = torch.randn(1000), torch.randn(1000)
x, y = torch.randn(33, 17), torch.randn(17, 9)
def cycle():
    assert torch.equal(torch.ops.tile.vector_add(a, b), a + b)
    torch.ops.tile.matmul(x, y)
    torch_tile.runtime.clear_cache()
for _ in range(100):
    cycle()
start = rss()
for _ in range(400):
    cycle()
print(rss() - start)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    growth = int(result.stdout.split()[-1])
    # Without unloading, 800 loads grow the process by ~40 MB.
    assert growth < 1_000_000, f"RSS grew by {growth / 1e6:.1f} MB over 400 clear_cache() cycles"


# Patterns the error messages must match, case-insensitively.
RANK = r"(?i)\b2-?d\b|dim"
INNER = r"(?i)inner|dim|shape|size|mismatch|multipl"
DTYPE = r"(?i)dtype"
OUT_DTYPE = r"(?i)out_dtype|output dtype"
DEVICE = r"(?i)device|\bis on\b"


def assert_rejected(call, match):
    with pytest.raises((RuntimeError, TypeError, ValueError), match=match) as info:
        call()
    # NotImplementedError is a RuntimeError: the op having no kernel is no input check.
    assert not isinstance(info.value, NotImplementedError), str(info.value)


def zeros(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


BAD_INPUTS = [
    pytest.param(zeros(4), zeros(4, 3), None, RANK, id="a_1d"),
    pytest.param(zeros(3, 4), zeros(4), None, RANK, id="b_1d"),
    pytest.param(zeros(2, 3, 4), zeros(4, 5), None, RANK, id="a_3d"),
    pytest.param(zeros(3, 4), zeros(2, 4, 5), None, RANK, id="b_3d"),
    pytest.param(zeros(), zeros(), None, RANK, id="scalars"),
    pytest.param(zeros(3, 4), zeros(5, 6), None, INNER, id="inner_dims_differ"),
    pytest.param(zeros(4, 3), zeros(4, 3), None, INNER, id="inner_dims_differ_square_k"),
    pytest.param(zeros(3, 4), zeros(4, 5, dtype=torch.float16), None, DTYPE, id="f32_by_f16"),
    pytest.param(zeros(3, 4, dtype=torch.bfloat16), zeros(4, 5, dtype=torch.float16), None,
                 DTYPE, id="bf16_by_f16"),
    pytest.param(zeros(3, 4, dtype=torch.int8), zeros(4, 5), torch.int32, DTYPE, id="i8_by_f32"),
    pytest.param(zeros(3, 4, dtype=torch.float64), zeros(4, 5, dtype=torch.float64), None, DTYPE,
                 id="f64"),
    pytest.param(zeros(3, 4, dtype=torch.int32), zeros(4, 5, dtype=torch.int32), None, DTYPE,
                 id="i32"),
    pytest.param(zeros(3, 4, dtype=torch.bool), zeros(4, 5, dtype=torch.bool), None, DTYPE,
                 id="bool"),
    pytest.param(zeros(3, 4, dtype=torch.complex64), zeros(4, 5, dtype=torch.complex64), None,
                 DTYPE, id="complex"),
    pytest.param(zeros(3, 4), torch.zeros(4, 5, device="meta"), None, DEVICE,
                 id="cpu_and_meta_devices"),
    pytest.param(zeros(3, 4, dtype=torch.float16), zeros(4, 5, dtype=torch.float16), torch.int32,
                 OUT_DTYPE, id="f16_to_i32"),
    pytest.param(zeros(3, 4), zeros(4, 5), torch.int32, OUT_DTYPE, id="f32_to_i32"),
    pytest.param(zeros(3, 4), zeros(4, 5), torch.float16, OUT_DTYPE, id="f32_to_f16"),
    pytest.param(zeros(3, 4), zeros(4, 5), torch.float64, OUT_DTYPE, id="f32_to_f64"),
    pytest.param(zeros(3, 4, dtype=torch.bfloat16), zeros(4, 5, dtype=torch.bfloat16),
                 torch.float16, OUT_DTYPE, id="bf16_to_f16"),
]


@pytest.mark.parametrize("a, b, out_dtype, match", BAD_INPUTS)
@pytest.mark.parametrize("op", OPS)
def test_bad_input_raises(op, a, b, out_dtype, match):
    kwargs = {} if out_dtype is None else {"out_dtype": out_dtype}
    assert_rejected(lambda: getattr(torch.ops.tile, op)(a, b, **kwargs), match)


@pytest.mark.parametrize("slope", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_slope_follows_torch(slope):
    # Defined as torch defines it: positive entries pass, the others are multiplied by
    # the slope (NaN * x is NaN, 0 * inf is NaN), with NaN in the same places as torch.
    a, b = torch.randn(24, 16), torch.randn(16, 40)
    b[:, 0] = 0.0  # a column of exact zeros: 0 * inf
    out = torch.ops.tile.matmul_leaky_relu(a, b, slope)
    ref = F.leaky_relu(a.double() @ b.double(), slope).float()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.int8], ids=["to_f32", "to_i8"])
def test_int8_rejects_other_out_dtypes(out_dtype):
    a, b = random_inputs((3, 5, 4), torch.int8)
    assert_rejected(lambda: torch.ops.tile.matmul(a, b, out_dtype=out_dtype), OUT_DTYPE)


def test_int8_without_out_dtype_names_the_fix():
    a, b = random_inputs((3, 5, 4), torch.int8)
    assert_rejected(lambda: torch.ops.tile.matmul(a, b), re.escape("out_dtype=torch.int32"))


@pytest.mark.parametrize("out_dtype", [None, torch.int32], ids=["default", "to_i32"])
def test_leaky_relu_rejects_int8(out_dtype):
    a, b = random_inputs((3, 5, 4), torch.int8)
    kwargs = {} if out_dtype is None else {"out_dtype": out_dtype}
    assert_rejected(lambda: torch.ops.tile.matmul_leaky_relu(a, b, 0.01, **kwargs),
                    r"(?i)int8|dtype")


@pytest.mark.parametrize("pair", FLOAT_PAIRS[:3])
@pytest.mark.parametrize("op", OPS)
def test_out_dtype_equal_to_input_dtype_is_the_default(op, pair):
    a, b = random_inputs((19, 23, 17), pair.inputs)
    explicit = pair._replace(out_dtype=pair.inputs)
    check(op, a, b, explicit)
