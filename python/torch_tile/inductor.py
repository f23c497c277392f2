"""Tile kernels inside the default Inductor backend (torch.compile(model) as it is), opt in:

    import torch_tile.inductor
    torch_tile.inductor.install()    # or TILE_INDUCTOR=1 before `import torch_tile`

install() changes Inductor's config for this process:
- post_grad_custom_post_pass gains graph_rewrites' mm + leaky_relu fusion into
  tile.matmul_leaky_relu (a CustomGraphPass, so the FX graph cache keys on it), under
  torch_tile.config.backend_matmul as the "tile" backend's rewrites are;
- joint_custom_post_pass gains graph_rewrites.JointRewritePass, which has leaky_relu's
  backward read its mask from leaky_relu's output, so that a fused forward saves no mask;
- inductor_choices_class becomes gemm_choices.TileGemmChoices, which offers tile.matmul
  to max-autotune's GEMM benchmarking while max_autotune or max_autotune_gemm is on and
  "TILE" is in max_autotune_gemm_backends;
- "TILE" joins max_autotune_gemm_backends, unless TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS
  chose that list;
- under that same max-autotune, the fusion forms tile.matmul_leaky_relu (with a bias:
  tile_inductor.matmul_leaky_relu_bias) wherever it is eligible, and the op's lowering
  times tile's kernel against Inductor's own GEMM with leaky_relu as its (fusable)
  epilogue, keeping the faster (gemm_choices.fused_op_lowering).
uninstall() puts back what install() found. This module imports no Inductor code until
install() runs, so `import torch_tile` stays as fast without TILE_INDUCTOR.
"""

import os
import warnings

ENVIRONMENT_VARIABLE = "TILE_INDUCTOR"

# What install() replaced, for uninstall(); None while not installed.
_replaced: dict | None = None


def install() -> None:
    """Hooks the tile kernels into Inductor; calling it again changes nothing."""
    global _replaced
    if _replaced is not None:
        return
    from torch._inductor import config
    from torch._inductor.virtualized import V

    from .gemm_choices import TILE_GEMM_BACKEND, TileGemmChoices, gemm_backends
    from .graph_rewrites import JointRewritePass, TileRewritePass, chain_after

    _replaced = {"post_grad_custom_post_pass": config.post_grad_custom_post_pass,
                 "joint_custom_post_pass": config.joint_custom_post_pass,
                 "inductor_choices_class": config.inductor_choices_class,
                 "max_autotune_gemm_backends": config.max_autotune_gemm_backends,
                 "choices_handler": V.choices}
    # The fusion puts the GEMM on tile's kernel, as the "tile" backend's rewrites do, and
    # loses as they do where tile's GEMM is slower than aten's (cuBLAS on an H100), so it
    # obeys the same backend_matmul and verdicts: read at each compile, as this pass stays
    # installed across config changes. max-autotune's tile.matmul needs no verdict:
    # Inductor times it against its own GEMMs and keeps the faster.
    # Where max-autotune can time the fused ops against Inductor's own lowering, it forms
    # them without a verdict; an Inductor without that timing keeps the verdicts.
    fusion = TileRewritePass(matmul=False, fuse_where_autotuned=_install_fused_op_autotuning())
    config.post_grad_custom_post_pass = chain_after(config.post_grad_custom_post_pass, fusion)
    config.joint_custom_post_pass = chain_after(config.joint_custom_post_pass, JointRewritePass())
    if config.inductor_choices_class is None:
        config.inductor_choices_class = TileGemmChoices
        # Inductor keeps one choices object per thread from its first use: replace this
        # thread's; other threads build theirs from the config.
        V.set_choices_handler(TileGemmChoices())
    else:
        warnings.warn(f"torch_tile: torch._inductor.config.inductor_choices_class is already "
                      f"{config.inductor_choices_class!r}; max-autotune will not be offered "
                      f"tile.matmul (the mm + leaky_relu fusion is installed)")
    if ("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS" not in os.environ
            and TILE_GEMM_BACKEND not in gemm_backends()):
        config.max_autotune_gemm_backends += f",{TILE_GEMM_BACKEND}"


def _fused_ops():
    """The fused ops that max-autotune times, each with Inductor's own version of it."""
    import torch

    from .gemm_choices import matmul_leaky_relu_bias_by_inductor, matmul_leaky_relu_by_inductor
    return ((torch.ops.tile.matmul_leaky_relu.default, matmul_leaky_relu_by_inductor),
            (torch.ops.tile_inductor.matmul_leaky_relu_bias.default,
             matmul_leaky_relu_bias_by_inductor))


def _install_fused_op_autotuning() -> bool:
    """Registers the autotuning lowerings of the fused ops (torch 2.13's custom-op
    autotuning; older Inductors keep them as calls of tile's kernel); whether every one
    was registered."""
    from torch._inductor.lowering import user_lowerings

    from .gemm_choices import fused_op_lowering
    try:
        from torch._inductor.kernel.custom_op import (CustomOpConfig,
                                                      register_custom_op_autotuning)
    except ImportError:
        return False
    previous = {}
    timed = True
    for op, by_inductor in _fused_ops():
        previous[op] = user_lowerings.get(op)
        try:
            register_custom_op_autotuning(op, configs=[CustomOpConfig(by_inductor)],
                                          name=f"tile_{op._opname}")
        except (TypeError, ValueError) as error:  # an Inductor whose API differs
            warnings.warn(f"torch_tile: max-autotune will not time {op} against Inductor's "
                          f"own GEMM: {error}")
            timed = False
            continue
        user_lowerings[op] = fused_op_lowering(user_lowerings[op])
    _replaced["fused_op_lowerings"] = previous
    return timed


def uninstall() -> None:
    """Restores the Inductor config that install() changed."""
    global _replaced
    if _replaced is None:
        return
    from torch._inductor import config
    from torch._inductor.virtualized import V

    replaced, _replaced = _replaced, None
    V.set_choices_handler(replaced.pop("choices_handler"))
    if "fused_op_lowerings" in replaced:
        from torch._inductor.lowering import user_lowerings

        for op, previous in replaced.pop("fused_op_lowerings").items():
            if previous is None:
                user_lowerings.pop(op, None)
            else:
                user_lowerings[op] = previous
    for name, value in replaced.items():
        setattr(config, name, value)


def installed() -> bool:
    return _replaced is not None


def install_from_environment() -> None:
    """install() when TILE_INDUCTOR=1; `import torch_tile` calls this."""
    if os.environ.get(ENVIRONMENT_VARIABLE) == "1":
        install()
