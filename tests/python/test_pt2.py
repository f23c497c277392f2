"""The ops under PyTorch's machinery: opcheck (schema, fake kernels, autograd
registration, AOT dispatch with dynamic shapes), gradients against torch, and
torch.compile with dynamic shapes and no recompilation.
"""

import pytest
import torch
import torch.nn.functional as F

import torch_tile  # noqa: F401

SHAPES = [(5, 7, 3), (1, 1, 1), (33, 17, 9)]  # (M, N, K)


def matrices(shape, dtype, grad=False):
    m, n, k = shape
    if dtype == torch.int8:
        return (torch.randint(-128, 128, (m, k), dtype=dtype),
                torch.randint(-128, 128, (k, n), dtype=dtype))
    a = torch.randn(m, k).to(dtype).requires_grad_(grad)
    b = (torch.randn(k, n) / k**0.5).to(dtype).requires_grad_(grad)
    return a, b


def test_ops_are_tagged_pt2_compliant():
    for op in (torch.ops.tile.vector_add, torch.ops.tile.matmul, torch.ops.tile.matmul_leaky_relu,
               torch.ops.tile.matmul_leaky_relu_backward):
        assert torch.Tag.pt2_compliant_tag in op.default.tags
    assert torch.Tag.pt2_compliant_tag in torch.ops.tile.matmul_leaky_relu.Tensor.tags


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("size", [1, 1000])
def test_opcheck_vector_add(dtype, size):
    a, b = torch.randn(size).to(dtype), torch.randn(size).to(dtype)
    torch.library.opcheck(torch.ops.tile.vector_add, (a.requires_grad_(), b))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, out_dtype", [(torch.float32, None), (torch.float16, None),
                                              (torch.bfloat16, torch.float32),
                                              (torch.int8, torch.int32)])
@pytest.mark.parametrize("op", ["matmul", "matmul_leaky_relu"])
def test_opcheck_matmuls(op, shape, dtype, out_dtype):
    if op == "matmul_leaky_relu" and dtype == torch.int8:
        pytest.skip("leaky_relu has no int8 variant")
    a, b = matrices(shape, dtype, grad=dtype.is_floating_point)
    args = (a, b) if op == "matmul" else (a, b, 0.2)
    kwargs = {} if out_dtype is None else {"out_dtype": out_dtype}
    torch.library.opcheck(getattr(torch.ops.tile, op).default, args, kwargs)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, out_dtype", [(torch.float32, None), (torch.float16, None),
                                              (torch.bfloat16, torch.float32)])
@pytest.mark.parametrize("grad", [False, True])
def test_opcheck_tensor_slope(shape, dtype, out_dtype, grad):
    # The slope as a 0-d tensor, as compiled graphs hold a float attribute under
    # dynamic=True; with gradients the op composes tile.matmul and aten ops, which trace
    # without the slope's value.
    a, b = matrices(shape, dtype, grad=grad)
    bias = torch.randn(shape[1]).to(dtype).requires_grad_(grad)
    kwargs = {"bias": bias} if out_dtype is None else {"out_dtype": out_dtype, "bias": bias}
    torch.library.opcheck(torch.ops.tile.matmul_leaky_relu.Tensor,
                          (a, b, torch.tensor(-0.3, dtype=torch.float64)), kwargs)


@pytest.mark.parametrize("slope", [0.2, 0.0, -0.5, float("nan")])
@pytest.mark.parametrize("grad", [False, True])
def test_tensor_slope_matches_the_float_overload(slope, grad):
    a, b = matrices((40, 24, 32), torch.float32, grad=grad)
    bias = torch.randn(24, requires_grad=grad)
    want = torch.ops.tile.matmul_leaky_relu(a, b, slope, bias=bias)
    got = torch.ops.tile.matmul_leaky_relu.Tensor(a, b, torch.tensor(slope), bias=bias)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-6, atol=1e-6)
    if grad:
        weight = torch.randn_like(want)
        want_grads = torch.autograd.grad((want * weight).nansum(), (a, b, bias))
        got_grads = torch.autograd.grad((got * weight).nansum(), (a, b, bias))
        for g, w in zip(got_grads, want_grads):
            torch.testing.assert_close(g, w, equal_nan=True, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("slope, error, message", [
    (torch.tensor([0.2]), ValueError, "negative_slope must be a 0-d tensor"),
    (torch.tensor(1), TypeError, "negative_slope must be a floating-point tensor"),
])
def test_bad_tensor_slopes_are_clear_errors(slope, error, message):
    a, b = matrices((4, 5, 6), torch.float32)
    with pytest.raises(error, match=message):
        torch.ops.tile.matmul_leaky_relu.Tensor(a, b, slope)


def grads(fn, *inputs):
    out = fn(*inputs)
    weight = torch.randn_like(out, dtype=torch.float32).to(out.dtype)
    (out * weight).sum().backward()
    return [x.grad for x in inputs]


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.float16, 3e-3)])
@pytest.mark.parametrize("slope", [0.2, 0.0, -0.5])
def test_leaky_gradients_match_torch(dtype, tolerance, slope):
    a, b = matrices((40, 24, 32), dtype, grad=True)
    a_ref = a.detach().double().requires_grad_()
    b_ref = b.detach().double().requires_grad_()
    torch.manual_seed(1)
    got = grads(lambda x, y: torch.ops.tile.matmul_leaky_relu(x, y, slope), a, b)
    torch.manual_seed(1)
    want = grads(lambda x, y: F.leaky_relu(x @ y, slope).to(dtype), a_ref, b_ref)
    for g, w in zip(got, want):
        assert g.dtype == dtype
        err = ((g.double() - w).norm() / w.norm().clamp_min(1e-30)).item()
        assert err < tolerance, err


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matmul_and_vector_add_gradients_match_torch(dtype):
    a, b = matrices((17, 9, 13), dtype, grad=True)
    torch.manual_seed(2)
    got = grads(torch.ops.tile.matmul, a, b)
    a_ref = a.detach().double().requires_grad_()
    b_ref = b.detach().double().requires_grad_()
    torch.manual_seed(2)
    want = grads(lambda x, y: (x @ y).to(dtype), a_ref, b_ref)
    for g, w in zip(got, want):
        err = ((g.double() - w).norm() / w.norm()).item()
        assert err < (1e-5 if dtype == torch.float32 else 3e-3), err
    x = torch.randn(100, dtype=dtype, requires_grad=True)
    y = torch.randn(100, dtype=dtype, requires_grad=True)
    torch.ops.tile.vector_add(x, y).sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x)) and torch.equal(y.grad, torch.ones_like(y))


def test_compile_dynamic_shapes_without_recompiling():
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def layer(x, w, bias_like):
        h = torch.ops.tile.matmul_leaky_relu(x, w, 0.1)
        return torch.ops.tile.vector_add(h, bias_like) + torch.ops.tile.matmul(x, w)

    compiled = torch.compile(layer, backend=counting_backend, fullgraph=True, dynamic=True)
    for m, n, k in [(8, 16, 4), (12, 20, 6), (30, 7, 5), (3, 3, 3)]:
        x, w = torch.randn(m, k), torch.randn(k, n)
        bias = torch.randn(m, n)
        expected = F.leaky_relu(x @ w, 0.1) + bias + x @ w
        torch.testing.assert_close(compiled(x, w, bias), expected, rtol=1e-5, atol=1e-5)
    assert len(graphs) == 1, f"recompiled: {len(graphs)} graphs for 4 sizes"
