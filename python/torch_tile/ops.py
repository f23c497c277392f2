"""What PyTorch needs to treat the tile ops as its own: fake (meta) kernels for tracing
under torch.compile and export, with symbolic sizes, and autograd formulas.

The backward of the matmuls runs on tile.matmul itself.
"""

import torch

_FLOAT_OUT = {torch.float32: (torch.float32,), torch.float16: (torch.float16, torch.float32),
              torch.bfloat16: (torch.bfloat16, torch.float32)}


def _matmul_out_dtype(name, a, b, out_dtype, epilogue):
    """The output dtype the real kernels produce, with their error for anything else."""
    torch._check(a.device == b.device,
                 lambda: f"tile::{name}: tensor a is on {a.device} but b is on {b.device}")
    torch._check(a.dim() == 2 and b.dim() == 2,
                 lambda: f"tile::{name}: a and b must be 2-D matrices, got a of shape "
                         f"{tuple(a.shape)} and b of shape {tuple(b.shape)}")
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"tile::{name}: inner dimensions differ: a is {tuple(a.shape)} and b is "
                         f"{tuple(b.shape)} (a.shape[1] must equal b.shape[0])")
    torch._check(a.dtype == b.dtype,
                 lambda: f"tile::{name}: dtypes differ: a is {a.dtype} and b is {b.dtype}")
    if a.dtype == torch.int8:
        torch._check(not epilogue, lambda: f"tile::{name}: int8 inputs are not supported")
        torch._check(out_dtype == torch.int32,
                     lambda: f"tile::{name}: int8 inputs accumulate in int32; pass out_dtype=torch.int32")
        return torch.int32
    torch._check(a.dtype in _FLOAT_OUT, lambda: f"tile::{name}: unsupported dtype {a.dtype}")
    out = a.dtype if out_dtype is None else out_dtype
    torch._check(out in _FLOAT_OUT[a.dtype],
                 lambda: f"tile::{name}: out_dtype {out} is not supported for {a.dtype} inputs")
    return out


@torch.library.register_fake("tile::vector_add")
def _vector_add_fake(a, b):
    torch._check(a.device == b.device,
                 lambda: f"tile::vector_add: tensor a is on {a.device} but b is on {b.device}")
    torch._check(a.shape == b.shape,
                 lambda: f"tile::vector_add: shapes differ: a is {tuple(a.shape)} and b is "
                         f"{tuple(b.shape)} (vector_add does not broadcast)")
    torch._check(a.dtype == b.dtype,
                 lambda: f"tile::vector_add: dtypes differ: a is {a.dtype} and b is {b.dtype}")
    return torch.empty_like(a, memory_format=torch.contiguous_format)


@torch.library.register_fake("tile::matmul")
def _matmul_fake(a, b, *, out_dtype=None):
    out = _matmul_out_dtype("matmul", a, b, out_dtype, epilogue=False)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out)


@torch.library.register_fake("tile::matmul_leaky_relu")
def _matmul_leaky_relu_fake(a, b, negative_slope=0.01, *, out_dtype=None):
    out = _matmul_out_dtype("matmul_leaky_relu", a, b, out_dtype, epilogue=True)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out)


def _vector_add_backward(ctx, grad):
    return grad, grad


torch.library.register_autograd("tile::vector_add", _vector_add_backward)


def _matmul_grads(ctx, grad_z):
    """d(a @ b): grad_a = grad_z @ b.T and grad_b = a.T @ grad_z, by tile.matmul, in the
    inputs' dtype."""
    a, b = ctx.saved_tensors[:2]
    grad_z = grad_z.to(a.dtype)
    grad_a = torch.ops.tile.matmul(grad_z, b.t()) if ctx.needs_input_grad[0] else None
    grad_b = torch.ops.tile.matmul(a.t(), grad_z) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


def _matmul_setup(ctx, inputs, output, keyword_only_inputs=None):
    a, b = inputs
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx, grad):
    return _matmul_grads(ctx, grad)


torch.library.register_autograd("tile::matmul", _matmul_backward, setup_context=_matmul_setup)


def _leaky_setup(ctx, inputs, output, keyword_only_inputs=None):
    a, b, negative_slope = inputs
    ctx.negative_slope = negative_slope
    ctx.save_for_backward(a, b, output)


def _leaky_backward(ctx, grad):
    a, b, out = ctx.saved_tensors
    slope = ctx.negative_slope
    # leaky_relu' is 1 where the pre-activation z is positive, else the slope. With a
    # slope >= 0 the sign of z is the sign of the output (as torch's own backward uses it);
    # a negative slope flips it, so z is recomputed.
    positive = out > 0 if slope >= 0 else torch.ops.tile.matmul(a, b, out_dtype=torch.float32) > 0
    grad_z = torch.where(positive, grad, grad * slope)
    grad_a, grad_b = _matmul_grads(ctx, grad_z)
    return grad_a, grad_b, None


torch.library.register_autograd("tile::matmul_leaky_relu", _leaky_backward, setup_context=_leaky_setup)
