"""torch_tile.inductor.install(): the default Inductor backend fuses mm + leaky_relu into
tile.matmul_leaky_relu, and max-autotune benchmarks tile.matmul beside its own GEMMs when
its config asks for it, and the fused op against Inductor's own GEMM + leaky_relu;
uninstall() restores Inductor's config.
"""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch._inductor import config
from torch._inductor.select_algorithm import add_feedback_saver, clear_feedback_savers
from torch._inductor.utils import run_and_get_code

import torch_tile.inductor
from torch_tile.graph_rewrites import JointRewritePass, TileRewritePass

INSTALLED_CONFIG = ("post_grad_custom_post_pass", "joint_custom_post_pass",
                    "inductor_choices_class", "max_autotune_gemm_backends")


@pytest.fixture(autouse=True)
def fresh_compiles():
    """Compiles anew (no graph or autotuning result from the caches) and uninstalls."""
    torch._dynamo.reset()
    with config.patch(fx_graph_cache=False, autotune_local_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        yield
    torch_tile.inductor.uninstall()
    torch._dynamo.reset()


@pytest.fixture
def benchmarked():
    """The choices max-autotune benchmarks, as {op name: [choice names]}."""
    seen = {}

    def save(timings, name, input_nodes, choices, profiled_bench_fn, *args):
        seen.setdefault(name, []).extend(choice.name for choice in timings)

    add_feedback_saver(save)
    yield seen
    clear_feedback_savers()


def relative_error(got, want):
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


def test_install_is_idempotent_and_uninstall_restores(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS", raising=False)
    before = {name: getattr(config, name) for name in INSTALLED_CONFIG}
    torch_tile.inductor.install()
    torch_tile.inductor.install()
    passes = config.post_grad_custom_post_pass
    assert [type(p) for p in passes.passes] == [TileRewritePass]
    assert config.max_autotune_gemm_backends.split(",").count("TILE") == 1
    torch_tile.inductor.uninstall()
    assert {name: getattr(config, name) for name in INSTALLED_CONFIG} == before
    assert not torch_tile.inductor.installed()


def test_a_backend_list_chosen_in_the_environment_is_kept(monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS", "ATEN,CPP")
    before = config.max_autotune_gemm_backends
    torch_tile.inductor.install()
    assert config.max_autotune_gemm_backends == before


@pytest.mark.parametrize("value, installs", [("1", True), ("0", False), (None, False)])
def test_install_from_environment(monkeypatch, value, installs):
    if value is None:
        monkeypatch.delenv("TILE_INDUCTOR", raising=False)
    else:
        monkeypatch.setenv("TILE_INDUCTOR", value)
    torch_tile.inductor.install_from_environment()
    assert torch_tile.inductor.installed() == installs


def test_pass_uuids_are_stable_and_tell_settings_apart():
    # Inductor's FX graph cache keys on uuid(): equal for equal passes, across instances.
    assert TileRewritePass(matmul=False).uuid() == TileRewritePass(matmul=False).uuid()
    assert TileRewritePass(matmul=False).uuid() != TileRewritePass(matmul=True).uuid()
    assert TileRewritePass(matmul=True).uuid() != TileRewritePass(
        matmul=True, vector_add_min_elements={"cpu": 0}).uuid()
    assert JointRewritePass().uuid() == JointRewritePass().uuid()
    assert JointRewritePass(backend_matmul="auto").uuid() != JointRewritePass(
        backend_matmul="never").uuid()


@torch_tile.config.patch(backend_matmul="always")  # the fusion wherever eligible
def test_default_inductor_fuses_matmul_leaky_relu_after_install():
    torch_tile.inductor.install()

    def layer(x, w, v):
        return F.leaky_relu(x @ w, 0.2) @ v

    x, out_grad = torch.randn(32, 48), torch.randn(32, 16)
    w = torch.randn(48, 40).requires_grad_()
    v = torch.randn(40, 16).requires_grad_()

    def step(fn):
        w.grad = v.grad = None
        out = fn(x, w, v)
        out.backward(out_grad)
        return out, w.grad, v.grad

    got, (forward_code, backward_code) = run_and_get_code(step, torch.compile(layer))
    for g, want in zip(got, step(layer), strict=True):
        assert relative_error(g, want) < 1e-4
    assert forward_code.count("torch.ops.tile.matmul_leaky_relu.default(") == 1
    # The backward's mask comes from the fused output, saved for v's gradient: the forward
    # saves no mask of its own.
    assert "torch.bool" not in forward_code
    # Only the fusion: the other GEMMs stay Inductor's outside max-autotune.
    assert "torch.ops.tile.matmul.default(" not in forward_code + backward_code


@pytest.mark.parametrize("flag", ["max_autotune", "max_autotune_gemm"])
def test_max_autotune_benchmarks_tile_matmul(benchmarked, flag):
    torch_tile.inductor.install()
    a, b = torch.randn(96, 80), torch.randn(80, 72)
    with config.patch({flag: True}):
        got = torch.compile(lambda a, b: (a @ b).relu())(a, b)
    assert relative_error(got, (a @ b).relu()) < 1e-5
    assert "tile_matmul" in benchmarked["mm"]


def test_max_autotune_benchmarks_tile_for_a_linear_with_bias(benchmarked):
    torch_tile.inductor.install()
    x, w, bias = torch.randn(96, 80), torch.randn(72, 80), torch.randn(72)
    with config.patch(max_autotune=True):
        got = torch.compile(lambda x, w, bias: F.linear(x, w, bias).relu())(x, w, bias)
    assert relative_error(got, F.linear(x, w, bias).relu()) < 1e-5
    assert "tile_addmm" in benchmarked["addmm"]
    assert benchmarked["addmm"].count("tile_addmm") == 1


def test_tile_addmm_matches_aten_addmm():
    from torch_tile.gemm_choices import tile_addmm
    a, b, bias = torch.randn(33, 20), torch.randn(20, 17), torch.randn(17)
    for row in (bias, bias.expand(33, 17)):
        assert relative_error(tile_addmm(row, a, b), torch.addmm(row, a, b)) < 1e-6


@pytest.mark.parametrize("patches", [{"max_autotune": False, "max_autotune_gemm": False},
                                     {"max_autotune": True, "max_autotune_gemm_backends": "ATEN"}],
                         ids=["without-autotuning", "without-TILE-in-backends"])
def test_tile_matmul_is_offered_only_when_asked_for(benchmarked, patches):
    torch_tile.inductor.install()
    a, b = torch.randn(40, 24), torch.randn(24, 56)
    with config.patch(patches):
        got, (code,) = run_and_get_code(torch.compile(lambda a, b: (a @ b).relu()), a, b)
    assert relative_error(got, (a @ b).relu()) < 1e-5
    assert "tile_matmul" not in benchmarked.get("mm", [])
    assert "torch.ops.tile" not in code


FUSED_CHOICES = "tile_matmul_leaky_relu"


def leaky_layer(x, w):
    return F.leaky_relu(x @ w, 0.2)


def test_max_autotune_times_the_fused_op_against_inductors_own(benchmarked):
    """Where the verdict would leave the GEMM on aten, max-autotune still forms the fused
    op and times tile's kernel against Inductor's GEMM + leaky_relu."""
    from torch_tile import runtime

    torch_tile.inductor.install()
    x, w = torch.randn(64, 96), torch.randn(96, 80)
    try:
        runtime.set_backend_verdict("matmul_leaky_relu", torch.float32, (64, 80, 96), "aten")
        with torch_tile.config.patch(backend_matmul="auto"), config.patch(max_autotune=True):
            got = torch.compile(leaky_layer)(x, w)
    finally:
        runtime.clear_backend_verdicts()
    assert relative_error(got, leaky_layer(x, w)) < 1e-5
    choices = benchmarked[FUSED_CHOICES]
    assert f"{FUSED_CHOICES}_fallback" in choices, choices  # tile's fused kernel
    assert any("matmul_leaky_relu_by_inductor" in name for name in choices), choices


def linear_leaky_layer(x, w, bias):
    return F.leaky_relu(F.linear(x, w, bias), 0.2)


def test_max_autotune_times_a_linear_with_bias_and_leaky_relu_too(benchmarked):
    """With a bias the fused op takes it positionally (tile_inductor's form), so that the
    timing can hand it over; both choices are timed, whatever the verdict."""
    from torch_tile import runtime

    torch_tile.inductor.install()
    x, w, bias = torch.randn(64, 96), torch.randn(80, 96), torch.randn(80)
    try:
        runtime.set_backend_verdict("matmul_leaky_relu", torch.float32, (64, 80, 96), "aten",
                                    layout="NT", bias=True)
        with torch_tile.config.patch(backend_matmul="auto"), config.patch(max_autotune=True):
            got = torch.compile(linear_leaky_layer)(x, w, bias)
        assert runtime.backend_verdict_stats()["timed"] == 0, "no verdict was needed"
    finally:
        runtime.clear_backend_verdicts()
    assert relative_error(got, linear_leaky_layer(x, w, bias)) < 1e-5
    choices = benchmarked[f"{FUSED_CHOICES}_bias"]
    assert "tile_inductor_matmul_leaky_relu_bias_fallback" in choices, choices
    assert any("matmul_leaky_relu_bias_by_inductor" in name for name in choices), choices


@pytest.mark.parametrize("inductors_wins", [True, False], ids=["inductor-wins", "tile-wins"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["mm", "linear-with-bias"])
def test_either_outcome_of_the_fused_op_timing_computes_the_same(inductors_wins, with_bias):
    torch_tile.inductor.install()
    x, w, bias = torch.randn(48, 72), torch.randn(40, 72), torch.randn(40)
    if with_bias:
        layer, inputs, fused = linear_leaky_layer, (x, w, bias), "matmul_leaky_relu_bias.default("
    else:
        layer, inputs, fused = leaky_layer, (x, w.t()), "tile.matmul_leaky_relu.default("
    with config.patch({"max_autotune": True,
                       "test_configs.force_custom_op_decomposition": inductors_wins}):
        got, codes = run_and_get_code(torch.compile(layer), *inputs)
    assert relative_error(got, layer(*inputs)) < 1e-5
    # The graph's own code is the last; the others were compiled to time a choice.
    calls_fused = fused in codes[-1]
    assert calls_fused != inductors_wins, codes[-1]


def test_the_fused_op_is_timed_only_under_max_autotune_and_uninstall_drops_it(benchmarked):
    from torch._inductor.lowering import user_lowerings

    torch_tile.inductor.install()
    assert torch.ops.tile.matmul_leaky_relu.default in user_lowerings
    x, w = torch.randn(40, 24), torch.randn(24, 56)
    with torch_tile.config.patch(backend_matmul="always"):
        got, (code,) = run_and_get_code(torch.compile(leaky_layer), x, w)
    assert relative_error(got, leaky_layer(x, w)) < 1e-5
    assert "torch.ops.tile.matmul_leaky_relu.default(" in code
    assert FUSED_CHOICES not in benchmarked
    torch_tile.inductor.uninstall()
    assert torch.ops.tile.matmul_leaky_relu.default not in user_lowerings
    assert torch.ops.tile_inductor.matmul_leaky_relu_bias.default not in user_lowerings


def test_import_installs_the_hooks_when_asked():
    code = "import torch_tile; print(torch_tile.inductor.installed())"
    env = dict(os.environ, TILE_INDUCTOR="1")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_max_autotune_leaves_leaky_relus_backward_to_inductors_templates():
    # Under max-autotune a GEMM template of Inductor's may take leaky_relu's backward into
    # its epilogue: the backward fusion, decided against aten's GEMM and a pointwise kernel,
    # is not formed there. Outside max-autotune it is.
    torch_tile.inductor.install()
    x, out_grad = torch.randn(32, 48), torch.randn(32, 16)
    w = torch.randn(48, 40).requires_grad_()
    v = torch.randn(40, 16).requires_grad_()

    def layer(x, w, v):
        return F.leaky_relu(x @ w, 0.2) @ v

    def step(fn):
        w.grad = v.grad = None
        out = fn(x, w, v)
        out.backward(out_grad)
        return out, w.grad, v.grad

    fused = "torch.ops.tile.matmul_leaky_relu_backward.default("
    for autotune in (False, True):
        torch._dynamo.reset()
        with torch_tile.config.patch(backend_matmul="always"), \
                config.patch(max_autotune=autotune, max_autotune_gemm_backends="ATEN,TRITON"):
            got, (_, backward_code) = run_and_get_code(step, torch.compile(layer))
        for g, want in zip(got, step(layer), strict=True):
            assert relative_error(g, want) < 1e-4
        assert (fused in backward_code) != autotune
