"""torch_tile.vector_add / matmul / matmul_leaky_relu: the C functions that call the tile
ops as torch.add calls aten's. They must be the same ops as torch.ops.tile.*: the same
results, gradients, errors, overrides and compiled graphs."""

import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torch_tile

OPS = ["vector_add", "matmul", "matmul_leaky_relu"]


def test_the_functions_are_the_c_extension():
    # The build makes torch_tile._C for the Python that runs the tests; the Python
    # fallbacks are for builds without Python's headers.
    extension = sys.modules["torch_tile._C"]
    for name in OPS:
        assert getattr(torch_tile, name) is getattr(extension, name)
        assert type(getattr(torch_tile, name)).__name__ == "builtin_function_or_method"


def test_vector_add_matches_torch():
    a, b = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(torch_tile.vector_add(a, b), a + b, rtol=0, atol=0)
    torch.testing.assert_close(torch_tile.vector_add(b=b, a=a), a + b, rtol=0, atol=0)


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("out_dtype", [None, torch.float32])
def test_matmul_matches_torch(with_bias, out_dtype):
    a, b = torch.randn(67, 45), torch.randn(45, 33)
    bias = torch.randn(33) if with_bias else None
    expected = a @ b + (bias if with_bias else 0)
    torch.testing.assert_close(torch_tile.matmul(a, b, out_dtype=out_dtype, bias=bias), expected,
                               rtol=1e-4, atol=1e-4)


def test_int8_matmul_takes_out_dtype():
    a = torch.randint(-128, 128, (40, 72), dtype=torch.int8)
    b = torch.randint(-128, 128, (72, 24), dtype=torch.int8)
    out = torch_tile.matmul(a, b, out_dtype=torch.int32)
    assert out.dtype == torch.int32
    torch.testing.assert_close(out, a.int() @ b.int(), rtol=0, atol=0)


@pytest.mark.parametrize("slope_kind", ["default", "positional", "keyword", "0-d tensor"])
def test_matmul_leaky_relu_matches_torch(slope_kind):
    a, b, bias = torch.randn(50, 70), torch.randn(70, 31), torch.randn(31)
    slope = {"default": 0.01, "positional": 0.2, "keyword": 0.3, "0-d tensor": 0.25}[slope_kind]
    if slope_kind == "default":
        out = torch_tile.matmul_leaky_relu(a, b, bias=bias)
    elif slope_kind == "positional":
        out = torch_tile.matmul_leaky_relu(a, b, slope, bias=bias)
    elif slope_kind == "keyword":
        out = torch_tile.matmul_leaky_relu(a, b, negative_slope=slope, bias=bias)
    else:
        out = torch_tile.matmul_leaky_relu(a, b, torch.tensor(slope), bias=bias)
    torch.testing.assert_close(out, F.leaky_relu(a @ b + bias, slope), rtol=1e-4, atol=1e-4)


def test_gradients_match_the_torch_ops_call():
    a, b, bias = (torch.randn(30, 20, requires_grad=True), torch.randn(20, 10, requires_grad=True),
                  torch.randn(10, requires_grad=True))
    grad_out = torch.randn(30, 10)
    direct = torch.autograd.grad(torch_tile.matmul_leaky_relu(a, b, 0.1, bias=bias), (a, b, bias), grad_out)
    through_ops = torch.autograd.grad(torch.ops.tile.matmul_leaky_relu(a, b, 0.1, bias=bias),
                                      (a, b, bias), grad_out)
    for got, want in zip(direct, through_ops):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_errors_are_the_ops_own():
    with pytest.raises(RuntimeError, match="shapes differ"):
        torch_tile.vector_add(torch.randn(3), torch.randn(4))
    with pytest.raises(RuntimeError, match="bias"):
        torch_tile.matmul(torch.randn(4, 5), torch.randn(5, 6), bias=torch.randn(7))
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        torch_tile.vector_add(torch.randn(3))
    with pytest.raises(TypeError, match="out_dtype"):
        torch_tile.matmul(torch.randn(4, 5), torch.randn(5, 6), out_dtype="float32")
    with pytest.raises(TypeError):
        torch_tile.matmul(torch.randn(4, 5), [[1.0]])


def test_torch_function_overrides_see_the_tile_op():
    seen = []

    class Recorder(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    a, b = torch.randn(8), torch.randn(8)
    with Recorder():
        out = torch_tile.vector_add(a, b)
    assert seen == [torch.ops.tile.vector_add]
    torch.testing.assert_close(out, a + b, rtol=0, atol=0)


def compiled_graph_code(fn, *args):
    from torch._dynamo.testing import EagerAndRecordGraphs

    torch._dynamo.reset()
    recorder = EagerAndRecordGraphs()
    out = torch.compile(fn, fullgraph=True, backend=recorder)(*args)
    assert len(recorder.graphs) == 1
    return out, recorder.graphs[0].code


def test_compiled_graphs_hold_the_tile_ops():
    a, b, bias = torch.randn(16, 24), torch.randn(24, 8), torch.randn(8)

    def model(a, b, bias):
        return (torch_tile.matmul(a, b, bias=bias), torch_tile.matmul_leaky_relu(a, b, 0.2),
                torch_tile.vector_add(a, a))

    (mm, fused, added), code = compiled_graph_code(model, a, b, bias)
    for name in OPS:
        assert f"torch.ops.tile.{name}" in code, code
    torch.testing.assert_close(mm, a @ b + bias, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(fused, F.leaky_relu(a @ b, 0.2), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(added, a + a, rtol=0, atol=0)


@pytest.mark.parametrize("dynamo_first", [False, True])
def test_dynamo_traces_the_ops_whichever_is_imported_first(dynamo_first):
    # torch._dynamo takes about a second to import; torch_tile does not import it, but
    # tells it about its functions when something else does (or already has).
    script = textwrap.dedent(f"""
        import sys, torch
        if {dynamo_first}:
            import torch._dynamo
        import torch_tile
        assert {dynamo_first} or "torch._dynamo" not in sys.modules, "import torch_tile imported torch._dynamo"
        from torch._dynamo.testing import EagerAndRecordGraphs
        recorder = EagerAndRecordGraphs()
        a, b = torch.randn(8, 8), torch.randn(8, 8)
        out = torch.compile(lambda a, b: torch_tile.matmul(a, b) + 1, fullgraph=True, backend=recorder)(a, b)
        assert "torch.ops.tile.matmul" in recorder.graphs[0].code, recorder.graphs[0].code
        torch.testing.assert_close(out, a @ b + 1, rtol=1e-4, atol=1e-4)
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_gpu_calls_match_torch():
    a, b = torch.randn(4097, device="cuda"), torch.randn(4097, device="cuda")
    torch.testing.assert_close(torch_tile.vector_add(a, b), a + b, rtol=0, atol=0)
    x, w = (torch.randn(200, 96, device="cuda", dtype=torch.float16),
            torch.randn(96, 136, device="cuda", dtype=torch.float16))
    bias = torch.randn(136, device="cuda", dtype=torch.float16)
    expected = F.leaky_relu(x.float() @ w.float() + bias.float(), 0.1)
    torch.testing.assert_close(torch_tile.matmul_leaky_relu(x, w, 0.1, out_dtype=torch.float32, bias=bias),
                               expected, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(torch_tile.matmul(x, w).float(), x.float() @ w.float(), rtol=4e-3, atol=4e-3)
