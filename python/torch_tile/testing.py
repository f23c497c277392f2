"""Seeded random cases of the matmul ops for property tests: sizes from 0 to 300 (primes
among them), every supported dtype pair, operands as transposes, slices, storage offsets
and stride-0 expands, slopes 0, negative and NaN, and a bias (in the input or the output
dtype, contiguous, strided or expanded) on some of them. A case is plain data and rebuilds its
operands from its own seed, so a failure prints a reproducer that runs on its own.

The project's test_fuzz.py runs a fixed number of cases on the CPU in `make test` and
test_gpu.py more of them on a GPU; `python -m torch_tile selftest` runs them on a user's
own device.
"""

import dataclasses
import math
import random

import torch

# (input dtype, out_dtype argument or None, result dtype)
DTYPE_PAIRS = [("float32", None, "float32"), ("float16", None, "float16"),
               ("bfloat16", None, "bfloat16"), ("float16", "float32", "float32"),
               ("bfloat16", "float32", "float32"), ("int8", "int32", "int32")]
VIEWS = ["contiguous", "transposed", "row_slice", "column_slice", "offset", "expanded"]
PRIMES = [2, 3, 5, 7, 11, 13, 17, 31, 61, 67, 127, 131, 251, 257, 293]
SPECIAL_SLOPES = [0.0, -0.5, float("nan"), 0.01]
BIAS_VIEWS = ["contiguous", "strided", "expanded", "offset"]


@dataclasses.dataclass(frozen=True)
class Case:
    seed: int
    op: str  # "matmul" or "matmul_leaky_relu"
    dtype: str
    out_dtype: str | None
    result: str
    m: int
    n: int
    k: int
    a_view: str
    b_view: str
    slope: float
    bias: str | None = None  # the bias's dtype; None: no bias
    bias_view: str = "contiguous"

    def __str__(self):
        bias = f" bias={self.bias}/{self.bias_view}" if self.bias else ""
        return (f"{self.op} {self.dtype}->{self.result} M={self.m} N={self.n} K={self.k} "
                f"a={self.a_view} b={self.b_view} slope={self.slope}{bias} seed={self.seed}")

    def reproducer(self) -> str:
        return ("import torch, torch_tile\n"
                "from torch_tile.testing import Case, run, check\n"
                f"case = {self!r}\n"
                "a, b = case.operands('cpu')  # or 'cuda'\n"
                "bias = case.bias_operand('cpu')\n"
                "check(case, a, b, run(case, a, b, bias), bias)\n")

    def operands(self, device):
        generator = torch.Generator().manual_seed(self.seed)
        a = _view(self.a_view, self.m, self.k, self.dtype, 1.0, generator, device)
        b = _view(self.b_view, self.k, self.n, self.dtype, 1 / math.sqrt(max(self.k, 1)),
                  generator, device)
        return a, b

    def bias_operand(self, device):
        """The case's bias (None without one), drawn from its own seed."""
        if self.bias is None:
            return None
        generator = torch.Generator().manual_seed(self.seed + 1)
        if self.bias_view == "strided":  # every other element of a longer vector
            return _values(1, 2 * self.n, self.bias, 1.0, generator, device)[0, ::2]
        if self.bias_view == "expanded":  # one value repeated: a stride of 0
            return _values(1, 1, self.bias, 1.0, generator, device)[0].expand(self.n)
        if self.bias_view == "offset":  # a storage offset that breaks 16-byte alignment
            return _values(1, self.n + 1, self.bias, 1.0, generator, device)[0, 1:]
        return _values(1, self.n, self.bias, 1.0, generator, device)[0]


def _values(rows, cols, dtype, scale, generator, device):
    """Drawn on the CPU (the same values on every device), then moved whole."""
    if dtype in ("int8", "int32"):
        values = torch.randint(-128, 128, (rows, cols), dtype=getattr(torch, dtype),
                               generator=generator)
    else:
        values = (torch.randn(rows, cols, generator=generator) * scale).to(getattr(torch, dtype))
    return values.to(device)


def _view(kind, rows, cols, dtype, scale, generator, device):
    """A rows x cols operand laid out as `kind`."""
    draw = lambda r, c: _values(r, c, dtype, scale, generator, device)  # noqa: E731
    if kind == "transposed":
        return draw(cols, rows).t()
    if kind == "row_slice":  # every other row of a taller matrix
        return draw(2 * rows, cols)[::2]
    if kind == "column_slice":  # a band of columns: a row stride larger than cols
        return draw(rows, cols + 3)[:, 1:cols + 1]
    if kind == "offset":  # a storage offset that breaks 16-byte alignment
        return draw(1, rows * cols + 1).view(-1)[1:].view(rows, cols)
    if kind == "expanded":  # one row repeated: a row stride of 0
        return draw(1, cols).expand(rows, cols)
    return draw(rows, cols)


def _size(rng):
    roll = rng.random()
    if roll < 0.08:
        return rng.choice([0, 1])
    if roll < 0.35:
        return rng.choice(PRIMES)
    return rng.randint(1, 300)


def cases(count: int, seed: int):
    """`count` cases drawn from `seed`."""
    rng = random.Random(seed)
    drawn = []
    for index in range(count):
        dtype, out_dtype, result = rng.choice(DTYPE_PAIRS)
        op = "matmul" if dtype == "int8" else rng.choice(["matmul", "matmul_leaky_relu"])
        slope = rng.choice(SPECIAL_SLOPES + [rng.uniform(-2, 2)])
        bias = rng.choice([None, None, dtype, result])
        drawn.append(Case(seed=seed * 100_003 + index, op=op, dtype=dtype, out_dtype=out_dtype,
                          result=result, m=_size(rng), n=_size(rng), k=_size(rng),
                          a_view=rng.choice(VIEWS), b_view=rng.choice(VIEWS),
                          slope=slope if op == "matmul_leaky_relu" else 0.0, bias=bias,
                          bias_view=rng.choice(BIAS_VIEWS) if bias else "contiguous"))
    return drawn


def run(case: Case, a, b, bias=None):
    kwargs = {} if case.out_dtype is None else {"out_dtype": getattr(torch, case.out_dtype)}
    if bias is not None:
        kwargs["bias"] = bias
    if case.op == "matmul":
        return torch.ops.tile.matmul(a, b, **kwargs)
    return torch.ops.tile.matmul_leaky_relu(a, b, case.slope, **kwargs)


def check(case: Case, a, b, out, bias=None):
    """out against a float64 reference, element by element: exact for int8; otherwise
    within the worst case of a float32 accumulation in any order (the bias one more term)
    plus one rounding to the result dtype, NaN exactly where leaky_relu with a NaN slope
    makes the reference NaN."""
    result = getattr(torch, case.result)
    assert out.shape == (case.m, case.n), f"shape {tuple(out.shape)}"
    assert out.dtype == result, f"dtype {out.dtype}"
    assert out.device == a.device
    if case.dtype == "int8":
        ref = a.cpu().long() @ b.cpu().long()
        if bias is not None:
            ref += bias.cpu().long()
        wrong = (out.cpu().long() != ref).sum().item()
        assert wrong == 0, f"{wrong} of {out.numel()} int32 results differ"
        return
    a64, b64 = a.cpu().double(), b.cpu().double()
    product = a64 @ b64
    magnitude = a64.abs() @ b64.abs()
    if bias is not None:
        product = product + bias.cpu().double()
        magnitude = magnitude + bias.cpu().double().abs()
    got = out.cpu().double()
    slope = case.slope
    if case.op == "matmul_leaky_relu":
        # leaky_relu written out, so that a NaN slope gives NaN exactly where x <= 0.
        ref = torch.where(product > 0, product, product * slope)
        gain = 1.0 if math.isnan(slope) else max(1.0, abs(slope))
    else:
        ref, gain = product, 1.0
    unit = torch.finfo(result).eps / 2
    bound = 2 * (unit * ref.abs().nan_to_num(0.0)
                 + gain * (case.k + 2) * (torch.finfo(torch.float32).eps / 2) * magnitude)
    bound += torch.finfo(result).tiny
    # Where the exact product is within the accumulation error of 0, its sign (and so a
    # NaN slope's NaN) may go either way.
    sign_certain = product.abs() > bound
    expect_nan = ref.isnan() & sign_certain
    assert got[expect_nan].isnan().all(), (
        f"{(~got[expect_nan].isnan()).sum().item()} elements should be NaN (negative times a "
        "NaN slope)")
    finite_ref = ~ref.isnan()
    assert not got[finite_ref & sign_certain].isnan().any(), "NaN where the reference is a number"
    assert torch.isfinite(got[finite_ref]).all(), "non-finite values where the reference is finite"
    error = (got - ref).abs()
    outside = finite_ref & ~got.isnan() & (error > bound)
    assert not outside.any(), (
        f"{outside.sum().item()} elements outside the float32-accumulation bound, first at "
        f"{outside.nonzero()[0].tolist()}: got {got[tuple(outside.nonzero()[0])].item()}, "
        f"want {ref[tuple(outside.nonzero()[0])].item()}")
