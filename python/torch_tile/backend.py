"""The "tile" torch.compile backend: AOTAutograd and Inductor, as backend="inductor", with
the tile rewrites of graph_rewrites.py run on each post-grad graph (forward, backward and
inference alike). Everything they leave is Inductor's.

    torch.compile(model, backend="tile")
    torch.compile(model, backend="tile", mode="max-autotune-no-cudagraphs")

torch finds the backend through setup.py's torch_dynamo_backends entry point, so the
user imports nothing. mode and options mean what they mean for backend="inductor"
(options are Inductor config patches).
"""

import torch
from torch._inductor import list_mode_options
from torch._inductor.compile_fx import compile_fx

from . import graph_rewrites


def tile_backend(gm: torch.fx.GraphModule, example_inputs, *, mode: str | None = None,
                 options: dict | None = None):
    patches = {**(list_mode_options(mode) if mode else {}), **(options or {})}
    rewrites = graph_rewrites.TileRewritePass(
        matmul=True, vector_add_min_elements=dict(graph_rewrites.VECTOR_ADD_MIN_ELEMENTS))
    # Passes already configured (the user's, or torch_tile.inductor.install()'s) run first.
    configured = patches.get("post_grad_custom_post_pass",
                             torch._inductor.config.post_grad_custom_post_pass)
    patches["post_grad_custom_post_pass"] = graph_rewrites.chain_after(configured, rewrites)
    return compile_fx(gm, example_inputs, config_patches=patches)
