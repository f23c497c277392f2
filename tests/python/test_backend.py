"""torch.compile(backend="tile"): found through the entry point, rewrites what tile runs
(checked in the code Inductor generates and in the profiler), matches eager in the forward
and the backward, with static and dynamic shapes, and leaves the rest to Inductor.
"""

import re
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounterWithBackend
from torch._inductor.utils import run_and_get_code

import torch_tile
from torch_tile import graph_rewrites


class MLP(nn.Module):
    def __init__(self, dim=64, hidden=128, first_bias=True, slope=0.1):
        super().__init__()
        self.up = nn.Linear(dim, hidden, bias=first_bias)
        self.down = nn.Linear(hidden, dim)
        self.slope = slope

    def forward(self, x):
        return self.down(F.leaky_relu(self.up(x), self.slope)) + x


@pytest.fixture(autouse=True)
def fresh_compiles():
    """Every test compiles anew: no graph from an earlier test or from the disk caches,
    which would skip the passes whose output the tests read."""
    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def every_gemm_on_tile():
    """These tests check what the rewrites do to each GEMM, so every eligible one is
    rewritten, however fast tile is on this machine (test_backend_choice.py tests "auto")."""
    with torch_tile.config.patch(backend_matmul="always"):
        yield


def relative_error(got, want):
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


def training_step(model, x, out_grad):
    """The output, and the gradients of x (a leaf) and of every parameter for out_grad."""
    model.zero_grad()
    x.grad = None
    out = model(x.requires_grad_())
    out.backward(out_grad)
    return [out, x.grad] + [p.grad for p in model.parameters()]


def assert_matches(got, want, tolerance=1e-4):
    for g, w in zip(got, want, strict=True):
        assert relative_error(g, w) < tolerance


def inductor_kernels(code):
    """The names of the kernels Inductor generated in `code` (named after the ops they
    compute), on the CPU or a GPU."""
    return set(re.findall(r"\b(?:cpp|triton)_(?:poi|red|per|fused)\w*", code))


def tile_ops_profiled(fn):
    with torch.profiler.profile() as profile:
        fn()
    return {event.name for event in profile.events() if event.name.startswith("tile::")}


def test_backend_is_listed_without_importing_torch_tile():
    script = ("import sys, torch\n"
              "assert 'tile' in torch._dynamo.list_backends(), 'no entry point for the tile "
              "backend: run pip install --no-build-isolation --no-deps -e .'\n"
              "assert 'torch_tile' not in sys.modules\n"
              "from torch._dynamo.backends.registry import lookup_backend\n"
              "assert lookup_backend('tile').__module__ == 'torch_tile.backend'\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr


# float16 and bfloat16: leaky_relu as decomposed computes in float32 between a widening of
# the GEMM's output and a narrowing of its own, which the fusion takes in. Tolerances: the
# fused kernel rounds once where eager rounds the GEMM's output first, and the GEMMs sum in
# another order.
DTYPES = [pytest.param(torch.float32, 1e-4, id="float32"),
          pytest.param(torch.float16, 2e-3, id="float16"),
          pytest.param(torch.bfloat16, 2e-2, id="bfloat16")]


@pytest.mark.parametrize("dtype, tolerance", DTYPES)
@pytest.mark.parametrize("first_bias", [True, False])
def test_mlp_training_matches_eager_and_runs_tile(first_bias, dtype, tolerance):
    model = MLP(first_bias=first_bias).to(dtype)
    compiled = torch.compile(model, backend="tile", fullgraph=True)
    x, out_grad = torch.randn(32, 64, dtype=dtype), torch.randn(32, 64, dtype=dtype)
    got, (forward_code, backward_code) = run_and_get_code(training_step, compiled, x, out_grad)
    assert_matches(got, training_step(model, x, out_grad), tolerance)

    # No GEMM is left to Inductor; up and leaky_relu fuse, with up's bias in the kernel's
    # epilogue where it has one, and down's bias goes into its kernel too.
    for code in (forward_code, backward_code):
        assert "aten.mm" not in code and "extern_kernels.mm" not in code
        assert "extern_kernels.addmm" not in code
    fused = forward_code.count("torch.ops.tile.matmul_leaky_relu.default(")
    assert fused == 1
    assert ("0.1, bias=primals_" in forward_code) == first_bias
    assert forward_code.count(", bias=primals_") == (2 if first_bias else 1)
    # The backward takes leaky_relu's mask from the fused output, which down's weight
    # gradient reads anyway: the forward computes and saves no mask of its own. The GEMM
    # whose output is the gradient of leaky_relu's output (out_grad @ down's weight) applies
    # leaky_relu's backward in its epilogue: no kernel of Inductor's computes it.
    assert "torch.bool" not in forward_code
    assert backward_code.count("torch.ops.tile.matmul_leaky_relu_backward.default(") == 1
    assert backward_code.count("torch.ops.tile.matmul.default(") == 3
    assert not [k for k in inductor_kernels(backward_code) if "leaky" in k or "where" in k]
    # On this CPU no add is worth tile.vector_add (graph_rewrites.VECTOR_ADD_MIN_ELEMENTS).
    assert "vector_add" not in forward_code + backward_code

    x, out_grad = torch.randn(32, 64, dtype=dtype), torch.randn(32, 64, dtype=dtype)
    assert tile_ops_profiled(lambda: training_step(compiled, x, out_grad)) == {
        "tile::matmul", "tile::matmul_leaky_relu", "tile::matmul_leaky_relu_backward"}
    assert_matches(training_step(compiled, x, out_grad), training_step(model, x, out_grad),
                   tolerance)


@pytest.mark.parametrize("dtype, tolerance", DTYPES)
def test_linear_with_bias_and_leaky_relu_fuse_in_inference(dtype, tolerance):
    model = MLP(first_bias=True).to(dtype)
    x = torch.randn(24, 64, dtype=dtype)
    with torch.no_grad():
        got, (code,) = run_and_get_code(torch.compile(model, backend="tile", fullgraph=True), x)
        assert relative_error(got, model(x)) < tolerance
    # One kernel for Linear + bias + leaky_relu, one for Linear + bias: no aten GEMM, no
    # leaky_relu (a where) and no bias add left for Inductor but the residual add.
    assert code.count("torch.ops.tile.matmul_leaky_relu.default(") == 1
    assert code.count("torch.ops.tile.matmul.default(") == 1
    assert code.count(", bias=arg") == 2
    assert "extern_kernels" not in code.replace("from torch._inductor.select_algorithm import "
                                                "extern_kernels", "")
    assert "where" not in code


def test_an_addmm_bias_the_kernel_cannot_take_stays_an_add():
    # A full M x N "bias" (the backward's addmm of the grad): tile.matmul and an aten add.
    a, b, c = torch.randn(16, 32), torch.randn(32, 8), torch.randn(16, 8)
    with torch.no_grad():
        got, (code,) = run_and_get_code(
            torch.compile(lambda a, b, c: torch.addmm(c, a, b), backend="tile", fullgraph=True),
            a, b, c)
    assert relative_error(got, torch.addmm(c, a, b)) < 1e-5
    assert "torch.ops.tile.matmul.default(arg" in code and "bias=" not in code


def test_negative_slope_fuses_only_where_the_backward_reads_no_mask():
    # The backward of leaky_relu reads gt(pre-activation, 0); with slope < 0 the fused
    # output has the opposite sign where the pre-activation is negative, so that mask
    # cannot be read from it.
    model = MLP(first_bias=False, slope=-0.5)
    compiled = torch.compile(model, backend="tile", fullgraph=True)
    x, out_grad = torch.randn(16, 64), torch.randn(16, 64)
    got, (forward_code, _) = run_and_get_code(training_step, compiled, x, out_grad)
    assert_matches(got, training_step(model, x, out_grad))
    assert "matmul_leaky_relu" not in forward_code

    with torch.no_grad():
        got, (inference_code,) = run_and_get_code(compiled, x)
        assert relative_error(got, model(x)) < 1e-4
    assert "torch.ops.tile.matmul_leaky_relu.default(" in inference_code


def test_what_tile_does_not_support_is_left_to_inductor():
    model = MLP(first_bias=False).double()
    x = torch.randn(16, 64, dtype=torch.float64)
    with torch.no_grad():
        got, (code,) = run_and_get_code(torch.compile(model, backend="tile", fullgraph=True), x)
        assert relative_error(got, model(x)) < 1e-12
    assert "torch.ops.tile" not in code


@pytest.mark.parametrize("dynamic", ["mark_dynamic", "dynamic=True"])
def test_dynamic_shapes_compile_once_with_fullgraph(dynamic):
    model = MLP(first_bias=True)
    counter = CompileCounterWithBackend("tile")
    compiled = torch.compile(model, backend=counter, fullgraph=True,
                             dynamic=True if dynamic == "dynamic=True" else None)
    for rows in (8, 24, 40, 56):
        x, out_grad = torch.randn(rows, 64), torch.randn(rows, 64)
        if dynamic == "mark_dynamic":
            torch._dynamo.mark_dynamic(x, 0)
        assert_matches(training_step(compiled, x, out_grad), training_step(model, x, out_grad))
    assert counter.frame_count == 1
    # dynamic=True also turns float attributes such as the slope into graph inputs
    # (torch._dynamo.config.specialize_float is False): its sign unknown when compiling,
    # the backward's mask could not read the fused output, so the pair is not fused, and
    # leaky_relu's backward stays Inductor's too (its gate takes a constant slope).
    assert tile_ops_profiled(lambda: training_step(compiled, x, out_grad)) == (
        {"tile::matmul", "tile::matmul_leaky_relu", "tile::matmul_leaky_relu_backward"}
        if dynamic == "mark_dynamic" else {"tile::matmul"})
    # Either way the biases stay in the kernels' epilogues, at every size.
    with torch.no_grad():
        _, (code,) = run_and_get_code(compiled, torch.randn(72, 64))
    assert code.count(", bias=arg") == 2 and "extern_kernels.addmm" not in code


@pytest.mark.parametrize("dynamic", ["mark_dynamic", "dynamic=True"])
def test_dynamic_shapes_keep_the_fusion_in_inference(dynamic):
    # With no backward to give a mask to, the pair is fused whatever the slope's sign;
    # under dynamic=True the slope is a graph input that the kernel's call reads at run
    # time, so a new slope compiles nothing.
    model = MLP(first_bias=True, slope=0.2)
    counter = CompileCounterWithBackend("tile")
    compiled = torch.compile(model, backend=counter, fullgraph=True,
                             dynamic=True if dynamic == "dynamic=True" else None)
    with torch.no_grad():
        for rows, slope in ((8, 0.2), (24, 0.2), (40, 0.2), (56, 0.2), (40, -0.5)):
            if dynamic == "dynamic=True":
                model.slope = slope
            x = torch.randn(rows, 64)
            if dynamic == "mark_dynamic":
                torch._dynamo.mark_dynamic(x, 0)
            got, (code,) = run_and_get_code(compiled, x) if rows == 8 else (compiled(x), (None,))
            assert relative_error(got, model(x)) < 1e-5, (rows, slope)
            if code is not None:
                fused = ("torch.ops.tile.matmul_leaky_relu.Tensor(" if dynamic == "dynamic=True"
                         else "torch.ops.tile.matmul_leaky_relu.default(")
                assert fused in code and ", bias=arg" in code
                assert "leaky_relu_" not in code.replace("tile.matmul_leaky_relu", "")
    assert counter.frame_count == 1


def test_only_adds_nothing_fuses_with_become_vector_add(monkeypatch):
    # Pretend tile.vector_add won on this CPU from the first element, to check which adds
    # the rule picks: the sum of two matmuls, read by nothing but the output; not the one
    # that relu reads, which Inductor fuses into relu's kernel.
    monkeypatch.setitem(graph_rewrites.VECTOR_ADD_MIN_ELEMENTS, "cpu", 0)

    def layer(x, w, v, u, y):
        return x @ w + x @ v, torch.relu(x @ u + y)

    x, y = torch.randn(8, 16), torch.randn(8, 12)
    w, v, u = (torch.randn(16, 12) for _ in range(3))
    got, (code,) = run_and_get_code(torch.compile(layer, backend="tile", fullgraph=True),
                                    x, w, v, u, y)
    for g, want in zip(got, layer(x, w, v, u, y), strict=True):
        assert relative_error(g, want) < 1e-5
    assert code.count("torch.ops.tile.vector_add.default(") == 1
