"""tile.matmul as one more GEMM choice for Inductor's max-autotune: Inductor benchmarks it
against its own choices (ATen, the C++ or Triton templates) and keeps it only where it is
faster. Installed by torch_tile.inductor.install().

The hook is InductorChoices.get_template_configs, which Inductor's mm lowering
(torch/_inductor/kernel/mm.py, tuned_mm) calls once with op_name "mm" for the choices it
then autotunes.
"""

import torch
from torch._inductor import config
from torch._inductor.choices import InductorChoices
from torch._inductor.custom_graph_pass import get_hash_for_files
from torch._inductor.select_algorithm import ExternKernelChoice

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


class TileGemmChoices(InductorChoices):
    """Inductor's choices, plus tile.matmul for each mm it autotunes."""

    def get_template_configs(self, kernel_inputs, templates, op_name, kwarg_overrides=None):
        choices = super().get_template_configs(kernel_inputs, templates, op_name,
                                               kwarg_overrides)
        if op_name == "mm" and tile_gemm_enabled() and _tile_supports(kernel_inputs):
            layout = choices[0].layout if choices else kernel_inputs.output_layout(
                flexible=False)
            choices.append(TILE_MATMUL.bind(kernel_inputs.nodes(), layout))
        return choices

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__, graph_rewrites.__file__))
