"""The "tile" torch.compile backend: AOTAutograd and Inductor, as backend="inductor", with
the tile rewrites of graph_rewrites.py run on each post-grad graph (forward, backward and
inference alike). Everything they leave is Inductor's.

    torch.compile(model, backend="tile")
    torch.compile(model, backend="tile", mode="max-autotune-no-cudagraphs")

torch finds the backend through setup.py's torch_dynamo_backends entry point, so the
user imports nothing. mode and options mean what they mean for backend="inductor"
(options are Inductor config patches).

A GEMM moves to tile only where tile is faster on this device for its shape bucket and
dtype, measured on the first compile that meets the bucket and kept in the disk cache
(torch_tile.config.backend_matmul = "auto"); "always" moves every eligible one, "never"
none.
"""

import torch
from torch._inductor import list_mode_options
from torch._inductor.compile_fx import compile_fx

from . import config, graph_rewrites


def tile_backend(gm: torch.fx.GraphModule, example_inputs, *, mode: str | None = None,
                 options: dict | None = None):
    patches = {**(list_mode_options(mode) if mode else {}), **(options or {})}
    # backend_matmul as it is now: AOTAutograd compiles the backward at its first call,
    # maybe outside a config.patch() that held for the forward.
    rewrites = graph_rewrites.TileRewritePass(
        matmul=True, vector_add_min_elements=dict(graph_rewrites.VECTOR_ADD_MIN_ELEMENTS),
        backend_matmul=config.backend_matmul)
    # Passes already configured (the user's, or torch_tile.inductor.install()'s) run first.
    configured = patches.get("post_grad_custom_post_pass",
                             torch._inductor.config.post_grad_custom_post_pass)
    patches["post_grad_custom_post_pass"] = graph_rewrites.chain_after(configured, rewrites)
    joint = patches.get("joint_custom_post_pass", torch._inductor.config.joint_custom_post_pass)
    patches["joint_custom_post_pass"] = graph_rewrites.chain_after(
        joint, graph_rewrites.JointRewritePass(backend_matmul=config.backend_matmul))
    return compile_fx(gm, example_inputs, config_patches=patches)
