"""tile.matmul as one more GEMM choice for Inductor's max-autotune: Inductor benchmarks it
against its own choices (ATen, the C++ or Triton templates) and keeps it only where it is
faster. Installed by torch_tile.inductor.install().

The fused tile.matmul_leaky_relu is autotuned the other way round: where the fusion pass
formed it, max-autotune times tile's kernel against what Inductor itself makes of the
pattern (its own GEMM, autotuned, with leaky_relu as an epilogue its templates may fuse),
and inlines the latter where it wins (Inductor's custom-op autotuning).

The hook is InductorChoices.get_template_configs, which Inductor's mm lowering
(torch/_inductor/kernel/mm.py, tuned_mm) calls once with op_name "mm" for the choices it
then autotunes. Its addmm lowering (tuned_addmm) calls it once per family of choices with
op_name "addmm": tile's goes in beside ATen's addmm, as tile.matmul with the bias in its
epilogue (a Linear with its bias), where the bias is one row broadcast over M.
"""

import torch
import torch.nn.functional as F
from torch._inductor import config
from torch._inductor.choices import InductorChoices
from torch._inductor.custom_graph_pass import get_hash_for_files
from torch._inductor.select_algorithm import ExternKernelChoice
from torch._inductor.virtualized import V

from . import graph_rewrites

# The name in max_autotune_gemm_backends that lets Inductor offer tile.matmul. Inductor
# splits that list on commas and checks membership only, so it ignores a name it does not
# know instead of rejecting it.
TILE_GEMM_BACKEND = "TILE"

# Lowered as a call of torch.ops.tile.matmul (a fallback kernel), so the generated code
# needs nothing but `import torch_tile`; no out= variant, as the op has none. Looked up
# first: a choice is registered once per process under its name.
TILE_MATMUL = ExternKernelChoice.lookup("tile_matmul") or ExternKernelChoice(
    torch.ops.tile.matmul, name="tile_matmul", has_out_variant=False,
    op_overload=torch.ops.tile.matmul.default, use_fallback_kernel=True)


def tile_addmm(bias, a, b, *, alpha=1, beta=1):
    """addmm(bias, a, b) with alpha = beta = 1 (the only ones offered) on tile: bias is
    1-D of length N, or its M x N expansion, whose first row is every row."""
    return torch.ops.tile.matmul(a, b, bias=bias if bias.dim() == 1 else bias[0])


TILE_ADDMM = ExternKernelChoice.lookup("tile_addmm") or ExternKernelChoice(
    tile_addmm, name="tile_addmm", has_out_variant=False)


def gemm_backends() -> list[str]:
    """max_autotune_gemm_backends as Inductor reads it (torch/_inductor/utils.py)."""
    return [name.strip() for name in config.max_autotune_gemm_backends.upper().split(",")]


def tile_gemm_enabled() -> bool:
    """Whether Inductor's config asks for GEMM autotuning with the tile backend in it."""
    autotuning = config.max_autotune or config.max_autotune_gemm
    return autotuning and TILE_GEMM_BACKEND in gemm_backends()


def _tile_supports(kernel_inputs) -> bool:
    dtypes = set(kernel_inputs.dtypes())
    return (len(kernel_inputs.nodes()) == 2 and len(dtypes) == 1
            and dtypes <= set(graph_rewrites.FLOAT_DTYPES) and kernel_inputs.out_dtype() in dtypes
            and kernel_inputs.device_type in graph_rewrites.DEVICE_TYPES)


def _tile_takes_bias(kernel_inputs) -> bool:
    """addmm's inputs (bias, a, b) with alpha = beta = 1 and a bias that is one row: 1-D of
    length N, or M x N with a row stride of 0 (or one row), in the operands' dtype."""
    if kernel_inputs.count != 3 or kernel_inputs.get_scalar("alpha") != 1 \
            or kernel_inputs.get_scalar("beta") != 1:
        return False
    bias, a, b = kernel_inputs.nodes()
    known = V.graph.sizevars.statically_known_equals
    sizes, strides = bias.get_size(), bias.get_stride()
    n = b.get_size()[1]
    one_row = (len(sizes) == 1 and known(sizes[0], n)) or (
        len(sizes) == 2 and known(sizes[1], n) and (known(strides[0], 0) or known(sizes[0], 1)))
    dtypes = set(kernel_inputs.dtypes())
    return (one_row and len(dtypes) == 1 and dtypes <= set(graph_rewrites.FLOAT_DTYPES)
            and kernel_inputs.device_type in graph_rewrites.DEVICE_TYPES)


class TileGemmChoices(InductorChoices):
    """Inductor's choices, plus tile.matmul for each mm and each addmm it autotunes."""

    def get_template_configs(self, kernel_inputs, templates, op_name, kwarg_overrides=None):
        choices = super().get_template_configs(kernel_inputs, templates, op_name,
                                               kwarg_overrides)
        if not tile_gemm_enabled():
            return choices
        layout = choices[0].layout if choices else None
        if op_name == "mm" and _tile_supports(kernel_inputs):
            choices.append(TILE_MATMUL.bind(
                kernel_inputs.nodes(), layout or kernel_inputs.output_layout(flexible=False)))
        # Once per addmm: with ATen's own choice, which every addmm autotuning has.
        elif op_name == "addmm" and any(getattr(t, "name", None) == "addmm" for t in templates) \
                and _tile_takes_bias(kernel_inputs):
            choices.append(TILE_ADDMM.bind(
                kernel_inputs.nodes(), layout or kernel_inputs.output_layout(flexible=False)))
        return choices

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__, graph_rewrites.__file__))


def matmul_leaky_relu_by_inductor(a, b, negative_slope=0.01, *, out_dtype=None):
    """tile.matmul_leaky_relu as Inductor's own ops: a GEMM, then leaky_relu."""
    out = F.leaky_relu(torch.mm(a, b), negative_slope)
    return out if out_dtype is None else out.to(out_dtype)


def matmul_leaky_relu_bias_by_inductor(a, b, bias, negative_slope):
    """tile_inductor.matmul_leaky_relu_bias as Inductor's own ops: an addmm (the bias one
    row, broadcast over M), then leaky_relu."""
    return F.leaky_relu(torch.addmm(bias, a, b), negative_slope)


def fused_op_lowering(autotuned):
    """A lowering of a fused matmul + leaky_relu op that autotunes it (`autotuned`,
    Inductor's custom-op autotuning lowering) where max-autotune offers tile's GEMMs, for
    the calls whose output has the inputs' dtype and whose bias, if any, is positional;
    None elsewhere, which leaves the op to Inductor's normal lowering: a call of tile's
    kernel."""
    def lowering(*args, **kwargs):
        if not tile_gemm_enabled() or kwargs.get("bias") is not None or len(args) < 2:
            return None
        out_dtype = kwargs.get("out_dtype")
        if out_dtype is not None and out_dtype != args[0].get_dtype():
            return None
        return autotuned(*args, **kwargs)

    return lowering
