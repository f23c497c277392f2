"""tile.matmul_leaky_relu_backward(a, b, activation, negative_slope): a @ b where activation
> 0, else (a @ b) * negative_slope, the gradient of leaky_relu's input that compiled backward
graphs compute in one kernel. Parity with a float64 reference element by element for every
dtype pair, activation dtype and layout, on the CPU and on a GPU where torch sees one;
gradients; errors for an activation of the wrong shape, dtype or device; opcheck.
"""

import math

import pytest
import torch

import torch_tile  # noqa: F401

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no GPU visible to torch"))]

# (input dtype, out_dtype argument, result dtype); the activation in either.
PAIRS = [(torch.float32, None, torch.float32), (torch.float16, None, torch.float16),
         (torch.bfloat16, None, torch.bfloat16), (torch.float16, torch.float32, torch.float32),
         (torch.bfloat16, torch.float32, torch.float32)]
CASES = [pytest.param(inputs, out_dtype, result, activation_dtype,
                      id=f"{str(inputs)[6:]}-{str(result)[6:]}-activation_{str(activation_dtype)[6:]}")
         for inputs, out_dtype, result in PAIRS
         for activation_dtype in dict.fromkeys([inputs, result])]
# Blocks partly outside M and N, one element, K = 0, and a size of several blocks each way.
SHAPES = [(128, 256, 32), (7, 13, 5), (257, 129, 65), (1, 1, 1), (64, 64, 0), (800, 777, 130)]


def activation_of(m, n, dtype, device, layout="contiguous"):
    """Random signs, with exact zeros (gated like negatives) and NaNs (never > 0)."""
    values = torch.randn(m, n, device=device)
    values[torch.rand(m, n, device=device) < 0.05] = 0.0
    values[torch.rand(m, n, device=device) < 0.02] = float("nan")
    values = values.to(dtype)
    if layout == "transposed":
        return values.t().contiguous().t()
    if layout == "column_slice":
        wider = torch.zeros(m, n + 3, dtype=dtype, device=device)
        wider[:, 1:n + 1] = values
        return wider[:, 1:n + 1]
    return values


def operands(shape, dtype, device):
    m, n, k = shape
    return (torch.randn(m, k, device=device).to(dtype),
            (torch.randn(k, n, device=device) / math.sqrt(max(k, 1))).to(dtype))


def poisoned(shape, dtype, device):
    """NaN-fills a freed block of the output's size, so a kernel that skips an element
    leaves NaN, not an old result (the allocator hands the block back next)."""
    block = torch.empty(shape, dtype=dtype, device=device)
    block.fill_(float("nan"))
    del block


def assert_gated_product(out, a, b, activation, slope, result):
    """Element by element within the worst case of a float32 accumulation in any order,
    times the gate, plus one rounding to the result dtype."""
    assert out.shape == (a.shape[0], b.shape[1]) and out.dtype == result
    assert out.device == a.device
    a64, b64 = a.cpu().double(), b.cpu().double()
    product, magnitude = a64 @ b64, a64.abs() @ b64.abs()
    ref = torch.where(activation.cpu().double() > 0, product, product * slope)
    unit = torch.finfo(result).eps / 2
    bound = 2 * (unit * ref.abs() + max(1.0, abs(slope)) * (a.shape[1] + 2)
                 * (torch.finfo(torch.float32).eps / 2) * magnitude) + torch.finfo(result).tiny
    got = out.cpu().double()
    assert torch.isfinite(got).all(), "non-finite values where the reference is finite"
    outside = (got - ref).abs() > bound
    assert not outside.any(), (
        f"{outside.sum().item()} elements outside the float32-accumulation bound, first at "
        f"{outside.nonzero()[0].tolist()}: got {got[tuple(outside.nonzero()[0])].item()}, "
        f"want {ref[tuple(outside.nonzero()[0])].item()}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("inputs, out_dtype, result, activation_dtype", CASES)
def test_parity(inputs, out_dtype, result, activation_dtype, shape, device):
    a, b = operands(shape, inputs, device)
    activation = activation_of(shape[0], shape[1], activation_dtype, device)
    kwargs = {} if out_dtype is None else {"out_dtype": out_dtype}
    poisoned((shape[0], shape[1]), result, device)
    out = torch.ops.tile.matmul_leaky_relu_backward(a, b, activation, -0.3, **kwargs)
    assert_gated_product(out, a, b, activation, -0.3, result)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["transposed", "column_slice"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_strided_operands_and_activation(dtype, layout, device):
    # A backward's GEMM reads a weight transposed; the activation may be any view.
    m, n, k = 200, 136, 72
    a = torch.randn(m, k, device=device).to(dtype)
    b = (torch.randn(n, k, device=device) / math.sqrt(k)).to(dtype).t()
    activation = activation_of(m, n, dtype, device, layout)
    out = torch.ops.tile.matmul_leaky_relu_backward(a, b, activation, 0.01)
    assert_gated_product(out, a, b, activation, 0.01, dtype)


def test_matches_torchs_leaky_relu_backward():
    a, b = operands((96, 80, 48), torch.float32, "cpu")
    activation = activation_of(96, 80, torch.float32, "cpu")
    want = torch.ops.aten.leaky_relu_backward(a @ b, activation, 0.2, False)
    got = torch.ops.tile.matmul_leaky_relu_backward(a, b, activation, 0.2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients(device):
    a = torch.randn(33, 20, device=device, requires_grad=True)
    b = torch.randn(20, 17, device=device, requires_grad=True)
    activation = activation_of(33, 17, torch.float32, device)
    grad = torch.randn(33, 17, device=device)
    torch.ops.tile.matmul_leaky_relu_backward(a, b, activation, 0.3).backward(grad)
    a_ref, b_ref = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    product = a_ref @ b_ref
    torch.where(activation > 0, product, product * 0.3).backward(grad)
    torch.testing.assert_close(a.grad, a_ref.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(b.grad, b_ref.grad, rtol=1e-4, atol=1e-4)


def test_opcheck():
    a = torch.randn(8, 4, requires_grad=True)
    b = torch.randn(4, 6, requires_grad=True)
    torch.library.opcheck(torch.ops.tile.matmul_leaky_relu_backward.default,
                          (a, b, activation_of(8, 6, torch.float32, "cpu"), 0.1))


@pytest.mark.parametrize("activation, problem", [
    (torch.randn(8, 5), "activation must have the result's shape \\(M, N\\) = \\(8, 6\\)"),
    (torch.randn(6), "activation must have the result's shape"),
    (torch.randn(8, 6, dtype=torch.float64), "activation dtype Double is neither"),
])
def test_a_wrong_activation_is_named(activation, problem):
    a, b = torch.randn(8, 4), torch.randn(4, 6)
    with pytest.raises((RuntimeError, TypeError), match=problem):
        torch.ops.tile.matmul_leaky_relu_backward(a, b, activation, 0.1)


def test_int8_and_a_float16_activation_for_float32_are_refused():
    with pytest.raises(TypeError, match="int8 inputs are not supported"):
        torch.ops.tile.matmul_leaky_relu_backward(
            torch.ones(4, 4, dtype=torch.int8), torch.ones(4, 4, dtype=torch.int8),
            torch.ones(4, 4), 0.1, out_dtype=torch.int32)
    with pytest.raises(TypeError, match="activation dtype Half is neither"):
        torch.ops.tile.matmul_leaky_relu_backward(torch.randn(4, 4), torch.randn(4, 4),
                                                  torch.randn(4, 4, dtype=torch.float16), 0.1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible to torch")
def test_an_activation_on_another_device_is_named():
    a, b = torch.randn(8, 4, device="cuda"), torch.randn(4, 6, device="cuda")
    with pytest.raises(RuntimeError, match="activation is on cpu but the operands are on cuda"):
        torch.ops.tile.matmul_leaky_relu_backward(a, b, torch.randn(8, 6), 0.1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible to torch")
@pytest.mark.parametrize("shape", [(2048, 4096, 512), (2000, 4000, 520), (2000, 3990, 520)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_large_blocks_on_a_gpu(dtype, shape):
    # Enough blocks for the largest GPU tiles (persistent and warp-specialized on Hopper):
    # whole blocks, blocks past M with N whole (the activation read by predicated runs), and
    # an N that is no multiple of 16 (read element by element).
    a, b = operands(shape, dtype, "cuda")
    activation = activation_of(shape[0], shape[1], dtype, "cuda")
    poisoned((shape[0], shape[1]), dtype, "cuda")
    out = torch.ops.tile.matmul_leaky_relu_backward(a, b, activation, 0.01)
    assert_gated_product(out, a, b, activation, 0.01, dtype)
