"""Fake (meta) kernels of the tile ops, for tracing under torch.compile and export with
symbolic sizes. The autograd formulas of the three public ops are in C++
(csrc/torch/Autograd.cpp), where calls that need no gradient pay nothing for them;
matmul_leaky_relu_backward, which compiled backward graphs call, has its own here.
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


def _check_epilogue_device(name, what, t, a):
    """An operand of the epilogue (`what`: bias, activation) on the operands' device."""
    torch._check(t.device == a.device,
                 lambda: f"tile::{name}: {what} is on {t.device} but the operands are on {a.device}")


def _check_epilogue_dtype(name, what, t, a, out):
    """An operand of the epilogue in the input or the output dtype."""
    torch._check(t.dtype in (a.dtype, out),
                 lambda: f"tile::{name}: {what} dtype {t.dtype} is neither the input dtype "
                         f"({a.dtype}) nor the output dtype ({out})")


def _check_bias(name, bias, a, b, out):
    """A bias of length N in the input or the output dtype, on the operands' device."""
    if bias is None:
        return
    _check_epilogue_device(name, "bias", bias, a)
    torch._check(bias.dim() == 1 and bias.shape[0] == b.shape[1],
                 lambda: f"tile::{name}: bias must be 1-D of length N = b.shape[1] = {b.shape[1]}, "
                         f"got shape {tuple(bias.shape)}")
    _check_epilogue_dtype(name, "bias", bias, a, out)


@torch.library.register_fake("tile::matmul")
def _matmul_fake(a, b, *, out_dtype=None, bias=None):
    out = _matmul_out_dtype("matmul", a, b, out_dtype, epilogue=False)
    _check_bias("matmul", bias, a, b, out)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out)


@torch.library.register_fake("tile::matmul_leaky_relu")
def _matmul_leaky_relu_fake(a, b, negative_slope=0.01, *, out_dtype=None, bias=None):
    out = _matmul_out_dtype("matmul_leaky_relu", a, b, out_dtype, epilogue=True)
    _check_bias("matmul_leaky_relu", bias, a, b, out)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out)


@torch.library.register_fake("tile::matmul_leaky_relu.Tensor")
def _matmul_leaky_relu_tensor_slope_fake(a, b, negative_slope, *, out_dtype=None, bias=None):
    torch._check(negative_slope.dim() == 0,
                 lambda: f"tile::matmul_leaky_relu: negative_slope must be a 0-d tensor, got "
                         f"shape {tuple(negative_slope.shape)}")
    torch._check(negative_slope.dtype.is_floating_point,
                 lambda: f"tile::matmul_leaky_relu: negative_slope must be a floating-point "
                         f"tensor, got {negative_slope.dtype}")
    return _matmul_leaky_relu_fake(a, b, out_dtype=out_dtype, bias=bias)


# tile.matmul_leaky_relu with its bias as a positional argument: the form in which
# Inductor's custom-op autotuning (which hands every tensor to the op positionally) can time
# it against Inductor's own addmm + leaky_relu (gemm_choices, under inductor.install() and
# max-autotune). Defined here, on `import torch_tile`, so that a cached compiled graph that
# calls it runs in any process.
@torch.library.custom_op("tile_inductor::matmul_leaky_relu_bias", mutates_args=())
def matmul_leaky_relu_bias(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor,
                           negative_slope: float) -> torch.Tensor:
    return torch.ops.tile.matmul_leaky_relu(a, b, negative_slope, bias=bias)


@matmul_leaky_relu_bias.register_fake
def _matmul_leaky_relu_bias_fake(a, b, bias, negative_slope):
    return _matmul_leaky_relu_fake(a, b, negative_slope, bias=bias)


def _check_activation(name, activation, a, b, out):
    """The activation of leaky_relu's backward: the result's shape (M, N), on the operands'
    device, in the input or the output dtype."""
    _check_epilogue_device(name, "activation", activation, a)
    torch._check(activation.dim() == 2 and activation.shape[0] == a.shape[0]
                 and activation.shape[1] == b.shape[1],
                 lambda: f"tile::{name}: activation must have the result's shape (M, N) = "
                         f"({a.shape[0]}, {b.shape[1]}), got shape {tuple(activation.shape)}")
    _check_epilogue_dtype(name, "activation", activation, a, out)


@torch.library.register_fake("tile::matmul_leaky_relu_backward")
def _matmul_leaky_relu_backward_fake(a, b, activation, negative_slope=0.01, *, out_dtype=None):
    name = "matmul_leaky_relu_backward"
    out = _matmul_out_dtype(name, a, b, out_dtype, epilogue=True)
    _check_activation(name, activation, a, b, out)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out)


def _leaky_relu_backward_setup(ctx, inputs, keyword_only_inputs, output):
    a, b, activation, negative_slope = inputs[:4]
    ctx.save_for_backward(a, b, activation)
    ctx.negative_slope = negative_slope


def _leaky_relu_backward_grads(ctx, grad):
    # The op is linear in a @ b, gated by the activation's sign: its gradient passes the
    # same gate back through the product. The gate is a step of the activation: no gradient.
    a, b, activation = ctx.saved_tensors
    gated = torch.where(activation > 0, grad, grad * ctx.negative_slope).to(a.dtype)
    grad_a = torch.ops.tile.matmul(gated, b.t()) if ctx.needs_input_grad[0] else None
    grad_b = torch.ops.tile.matmul(a.t(), gated) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b, None, None


torch.library.register_autograd("tile::matmul_leaky_relu_backward", _leaky_relu_backward_grads,
                                setup_context=_leaky_relu_backward_setup)
