"""The bias of the matmul ops (`bias=`, added to the accumulator before leaky_relu and
the cast): parity with a float64 reference element by element for every dtype pair and
bias dtype, on the CPU and on a GPU where torch sees one; gradients; errors for a bias of
the wrong shape, dtype or device; opcheck.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import torch_tile  # noqa: F401
from torch_tile.testing import Case, check

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no GPU visible to torch"))]

# (input dtype, out_dtype argument, result dtype); each takes a bias in its input or its
# result dtype.
PAIRS = [(torch.float32, None, torch.float32), (torch.float16, None, torch.float16),
         (torch.bfloat16, None, torch.bfloat16), (torch.float16, torch.float32, torch.float32),
         (torch.bfloat16, torch.float32, torch.float32), (torch.int8, torch.int32, torch.int32)]
CASES = [pytest.param(inputs, out_dtype, result, bias_dtype,
                      id=f"{str(inputs)[6:]}-{str(result)[6:]}-bias_{str(bias_dtype)[6:]}")
         for inputs, out_dtype, result in PAIRS
         for bias_dtype in dict.fromkeys([inputs, result])]
# 800 x 777 takes 64 x 64 blocks where the host has AMX: the epilogue's loop over rows,
# the bias shared by every row, the last block row and column partly outside.
SHAPES = [(128, 256, 32), (7, 13, 5), (257, 129, 65), (1, 1, 1), (64, 64, 0), (800, 777, 130)]


def operands(shape, dtype, bias_dtype, device):
    m, n, k = shape
    if dtype == torch.int8:
        return (torch.randint(-128, 128, (m, k), dtype=dtype, device=device),
                torch.randint(-128, 128, (k, n), dtype=dtype, device=device),
                torch.randint(-128, 128, (n,), dtype=bias_dtype, device=device))
    # Bias values of the size of the product's, so that both matter to every element.
    return (torch.randn(m, k, device=device).to(dtype),
            (torch.randn(k, n, device=device) / math.sqrt(max(k, 1))).to(dtype),
            torch.randn(n, device=device).to(bias_dtype))


def poisoned(shape, dtype, device):
    """NaN-fills a freed block of the output's size, so a kernel that skips an element
    leaves NaN, not an old result (the allocator hands the block back next)."""
    block = torch.empty(shape, dtype=dtype, device=device)
    block.fill_(float("nan") if dtype.is_floating_point else torch.iinfo(dtype).min)
    del block


def assert_close_elementwise(out, a, b, bias, op, slope, result, out_dtype=None):
    """The property test's check (torch_tile.testing.check): element by element within the worst
    case of a float32 accumulation (the bias one more term) and one rounding to the result
    dtype; exact for int8."""
    name = lambda dtype: str(dtype).removeprefix("torch.")  # noqa: E731
    case = Case(seed=0, op=op, dtype=name(a.dtype), out_dtype=out_dtype and name(out_dtype),
                result=name(result), m=a.shape[0], n=b.shape[1], k=a.shape[1],
                a_view="contiguous", b_view="contiguous",
                slope=slope if op == "matmul_leaky_relu" else 0.0, bias=name(bias.dtype))
    check(case, a, b, out, bias)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("inputs, out_dtype, result, bias_dtype", CASES)
@pytest.mark.parametrize("op", ["matmul", "matmul_leaky_relu"])
def test_bias_parity(op, inputs, out_dtype, result, bias_dtype, shape, device):
    if op == "matmul_leaky_relu" and inputs == torch.int8:
        pytest.skip("leaky_relu has no int8 variant")
    a, b, bias = operands(shape, inputs, bias_dtype, device)
    kwargs = {"bias": bias} if out_dtype is None else {"bias": bias, "out_dtype": out_dtype}
    poisoned((shape[0], shape[1]), result, device)
    if op == "matmul":
        out = torch.ops.tile.matmul(a, b, **kwargs)
    else:
        out = torch.ops.tile.matmul_leaky_relu(a, b, -0.3, **kwargs)
    assert_close_elementwise(out, a, b, bias, op, -0.3, result, out_dtype)


# Rows of a against a transposed b (a Linear's weight) of 256 columns or more run as
# c^T = b^T a^T: on matrix tiles (AMX) from 8 rows, on the vector kernel past the rows that
# take dots along k (200 here). The bias, one per column of c, and leaky_relu then apply to
# c after the transpose back, in the accumulator's dtype, and the result is rounded once.
# Elsewhere the kernel's epilogue applies them; parity either way.
@pytest.mark.parametrize("shape", [(8, 300, 64), (17, 257, 130), (64, 512, 999), (200, 300, 130)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("inputs, out_dtype, result, bias_dtype",
                         [c for c in CASES if c.values[0] != torch.float16])
@pytest.mark.parametrize("op", ["matmul", "matmul_leaky_relu"])
def test_bias_with_few_rows_against_a_transposed_b(op, inputs, out_dtype, result, bias_dtype,
                                                   shape):
    if op == "matmul_leaky_relu" and inputs == torch.int8:
        pytest.skip("leaky_relu has no int8 variant")
    m, n, k = shape
    a, b, bias = operands((m, n, k), inputs, bias_dtype, "cpu")
    b = b.t().contiguous().t()
    kwargs = {"bias": bias} if out_dtype is None else {"bias": bias, "out_dtype": out_dtype}
    poisoned((m, n), result, "cpu")
    if op == "matmul":
        out = torch.ops.tile.matmul(a, b, **kwargs)
    else:
        out = torch.ops.tile.matmul_leaky_relu(a, b, -0.3, **kwargs)
    assert_close_elementwise(out, a, b, bias, op, -0.3, result, out_dtype)


# A matrix times a vector (N = 1) runs as c^T = b^T a^T, one row against a^T: its one bias
# value is every column's of c^T, added before leaky_relu as anywhere else.
@pytest.mark.parametrize("shape", [(300, 1, 320), (5, 1, 17)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("inputs, out_dtype, result, bias_dtype", CASES)
@pytest.mark.parametrize("op", ["matmul", "matmul_leaky_relu"])
def test_bias_of_one_column_products(op, inputs, out_dtype, result, bias_dtype, shape):
    if op == "matmul_leaky_relu" and inputs == torch.int8:
        pytest.skip("leaky_relu has no int8 variant")
    a, b, bias = operands(shape, inputs, bias_dtype, "cpu")
    kwargs = {"bias": bias} if out_dtype is None else {"bias": bias, "out_dtype": out_dtype}
    poisoned((shape[0], shape[1]), result, "cpu")
    if op == "matmul":
        out = torch.ops.tile.matmul(a, b, **kwargs)
    else:
        out = torch.ops.tile.matmul_leaky_relu(a, b, -0.3, **kwargs)
    assert out.shape == (shape[0], 1) and out.is_contiguous()
    assert_close_elementwise(out, a, b, bias, op, -0.3, result, out_dtype)


# A contiguous bias compiles a kernel of its own (one vector load per block row), other
# views the kernel that reads it through its stride; 800 x 777 in bfloat16 and int8 takes
# the tile registers' 64 x 64 blocks where the host has AMX.
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", ["strided", "expanded", "offset"])
@pytest.mark.parametrize("dtype,shape", [(torch.float16, (70, 45, 33)),
                                         (torch.bfloat16, (800, 777, 130)),
                                         (torch.int8, (800, 777, 130))],
                         ids=["float16", "bfloat16", "int8"])
def test_bias_views(view, dtype, shape, device):
    result = torch.int32 if dtype == torch.int8 else dtype
    out_dtype = torch.int32 if dtype == torch.int8 else None
    a, b, _ = operands(shape, dtype, result, device)
    n = shape[1]
    source = (torch.randint(-128, 128, (2 * n + 1,), device=device) if dtype == torch.int8
              else torch.randn(2 * n + 1, device=device)).to(result)
    bias = {"strided": source[:2 * n:2], "expanded": source[:1].expand(n),
            "offset": source[1:n + 1]}[view]
    out = torch.ops.tile.matmul_leaky_relu(a, b, 0.1, out_dtype=out_dtype, bias=bias) \
        if dtype != torch.int8 else torch.ops.tile.matmul(a, b, out_dtype=out_dtype, bias=bias)
    op, slope = ("matmul", 0.0) if dtype == torch.int8 else ("matmul_leaky_relu", 0.1)
    assert_close_elementwise(out, a, b, bias, op, slope, result, out_dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("slope", [0.2, -0.5])
@pytest.mark.parametrize("op", ["matmul", "matmul_leaky_relu"])
def test_bias_gradient_is_the_column_sum(op, slope, device):
    a = torch.randn(40, 24, device=device, requires_grad=True)
    b = torch.randn(24, 32, device=device, requires_grad=True)
    bias = torch.randn(32, device=device, requires_grad=True)
    refs = [t.detach().double().requires_grad_() for t in (a, b, bias)]
    if op == "matmul":
        out, ref = torch.ops.tile.matmul(a, b, bias=bias), refs[0] @ refs[1] + refs[2]
    else:
        out = torch.ops.tile.matmul_leaky_relu(a, b, slope, bias=bias)
        ref = F.leaky_relu(refs[0] @ refs[1] + refs[2], slope)
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    (ref * weight.double()).sum().backward()
    for got, want in zip((a.grad, b.grad, bias.grad), (r.grad for r in refs)):
        assert got is not None and got.dtype == torch.float32
        assert ((got.double() - want).abs().max() / want.abs().max()).item() < 1e-5


def test_bias_gradient_keeps_the_bias_dtype():
    a = torch.randn(16, 8).half().requires_grad_()
    b = torch.randn(8, 12).half().requires_grad_()
    bias = torch.randn(12).requires_grad_()  # float32: the output dtype
    out = torch.ops.tile.matmul(a, b, out_dtype=torch.float32, bias=bias)
    out.sum().backward()
    assert bias.grad.dtype == torch.float32 and a.grad.dtype == torch.float16
    assert torch.allclose(bias.grad, torch.full((12,), 16.0))


def test_only_the_bias_needs_a_gradient():
    a, b = torch.randn(9, 5), torch.randn(5, 7)
    bias = torch.randn(7, requires_grad=True)
    torch.ops.tile.matmul_leaky_relu(a, b, 0.5, bias=bias).sum().backward()
    positive = (a @ b + bias.detach()) > 0
    assert torch.allclose(bias.grad, torch.where(positive, 1.0, 0.5).sum(0))


BAD_BIASES = [
    pytest.param(lambda: torch.randn(6), r"bias must be 1-D of length N = b.shape\[1\] = 7",
                 id="short"),
    pytest.param(lambda: torch.randn(1, 7), r"bias must be 1-D", id="2-D"),
    pytest.param(lambda: torch.randn(()), r"bias must be 1-D", id="0-D"),
    pytest.param(lambda: torch.randn(7, dtype=torch.float64),
                 r"bias dtype .* is neither the input dtype", id="float64"),
    pytest.param(lambda: torch.randn(7).half(), r"bias dtype .* is neither the input dtype",
                 id="float16_for_float32"),
]


@pytest.mark.parametrize("make_bias, match", BAD_BIASES)
@pytest.mark.parametrize("op", ["matmul", "matmul_leaky_relu"])
def test_bad_bias_raises(op, make_bias, match):
    a, b = torch.randn(4, 5), torch.randn(5, 7)
    with pytest.raises((RuntimeError, TypeError), match=match):
        getattr(torch.ops.tile, op)(a, b, bias=make_bias())
    # The fake kernel (torch.compile, export) raises the same.
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode, pytest.raises((RuntimeError, TypeError), match=match):
        getattr(torch.ops.tile, op)(mode.from_tensor(a), mode.from_tensor(b),
                                    bias=mode.from_tensor(make_bias()))


def test_bias_of_a_one_column_product_has_one_element():
    # A matrix times a vector runs as its transpose, whose bias is the one value spread
    # over every column: a bias of M values (one per row of c) is still refused.
    a, b = torch.randn(6, 4), torch.randn(4, 1)
    with pytest.raises(RuntimeError, match=r"bias"):
        torch.ops.tile.matmul(a, b, bias=torch.randn(6))


def test_int8_bias_must_be_int8_or_int32():
    a = torch.randint(-128, 128, (4, 5), dtype=torch.int8)
    b = torch.randint(-128, 128, (5, 7), dtype=torch.int8)
    with pytest.raises(TypeError, match="bias dtype"):
        torch.ops.tile.matmul(a, b, out_dtype=torch.int32, bias=torch.zeros(7))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible to torch")
def test_bias_on_another_device_raises():
    a, b = torch.randn(4, 5, device="cuda"), torch.randn(5, 7, device="cuda")
    with pytest.raises(RuntimeError, match="bias is on cpu but the operands are on cuda:0"):
        torch.ops.tile.matmul(a, b, bias=torch.randn(7))
    with pytest.raises(RuntimeError, match="bias is on cuda:0 but the operands are on cpu"):
        torch.ops.tile.matmul_leaky_relu(a.cpu(), b.cpu(), bias=torch.randn(7, device="cuda"))


@pytest.mark.parametrize("dtype, out_dtype, bias_dtype",
                         [(torch.float32, None, torch.float32),
                          (torch.float16, torch.float32, torch.float32),
                          (torch.bfloat16, None, torch.bfloat16),
                          (torch.int8, torch.int32, torch.int32)])
@pytest.mark.parametrize("op", ["matmul", "matmul_leaky_relu"])
def test_opcheck_with_bias(op, dtype, out_dtype, bias_dtype):
    if op == "matmul_leaky_relu" and dtype == torch.int8:
        pytest.skip("leaky_relu has no int8 variant")
    a, b, bias = operands((33, 17, 9), dtype, bias_dtype, "cpu")
    if dtype.is_floating_point:
        a.requires_grad_(), bias.requires_grad_()
    kwargs = {"bias": bias} if out_dtype is None else {"bias": bias, "out_dtype": out_dtype}
    args = (a, b) if op == "matmul" else (a, b, 0.2)
    torch.library.opcheck(getattr(torch.ops.tile, op).default, args, kwargs)
