"""Triton's tutorial matmul (python/tutorials/03-matrix-multiplication.py), the peer that
bench_matmul.py times next to cuBLAS and tile.matmul on CUDA.

Triton is an optional benchmark dependency: only bench_matmul.py imports this module, and only
when triton imports; neither the torch_tile package nor its tests do.

The kernel is the tutorial's `matmul_kernel` with its CUDA autotune configs (all 16, the
fp8-oriented ones included, as the tutorial lists them): grouped program ordering, fp32
accumulator, K-masked loads, the optional leaky_relu epilogue applied to the fp32
accumulator. What differs from the tutorial, and why:

- the output is stored in the inputs' dtype (the tutorial hard-codes float16), so bfloat16
  and float32 runs store what tile.matmul and torch.matmul store;
- leaky_relu's negative slope is an argument (the tutorial hard-codes 0.01, the default of
  bench_matmul.py's --negative-slope), so all candidates compute the same function;
- float32 inputs use input_precision="ieee": tl.dot's default would be TF32, while
  tile.matmul and torch.matmul (allow_tf32 off) compute float32 products in full precision;
  16-bit inputs keep the default, as in the tutorial;
- the autotuning key is ['M', 'N', 'K', 'ACTIVATION'] (the tutorial's lacks ACTIVATION), so
  the fused kernel is tuned for itself instead of reusing the plain kernel's winner;
- the tutorial's tl.assume hints are kept where the installed Triton has tl.assume (3.2+),
  so the module works on every Triton 3.x.
"""

import triton
import triton.language as tl

# A global constexpr: the `if` on it is resolved at compile time, so older Triton never sees
# the tl.assume calls.
_HAS_ASSUME = tl.constexpr(hasattr(tl, "assume"))


# The tutorial's get_cuda_autotune_config(), in order, as
# (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_stages, num_warps).
_CUDA_CONFIGS = [
    (128, 256, 64, 8, 3, 8), (64, 256, 32, 8, 4, 4), (128, 128, 32, 8, 4, 4),
    (128, 64, 32, 8, 4, 4), (64, 128, 32, 8, 4, 4), (128, 32, 32, 8, 4, 4),
    (64, 32, 32, 8, 5, 2), (32, 64, 32, 8, 5, 2),
    # Good config for fp8 inputs.
    (128, 256, 128, 8, 3, 8), (256, 128, 128, 8, 3, 8), (256, 64, 128, 8, 4, 4),
    (64, 256, 128, 8, 4, 4), (128, 128, 128, 8, 4, 4), (128, 64, 64, 8, 4, 4),
    (64, 128, 64, 8, 4, 4), (128, 32, 64, 8, 4, 4),
]


def get_cuda_autotune_config():
    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k,
                           "GROUP_SIZE_M": group}, num_stages=stages, num_warps=warps)
            for m, n, k, group, stages, warps in _CUDA_CONFIGS]


@triton.jit
def leaky_relu(x, negative_slope):
    return tl.where(x >= 0, x, negative_slope * x)


@triton.jit
def tutorial_matmul_kernel(
        # Pointers to matrices
        a_ptr, b_ptr, c_ptr,
        # Matrix dimensions
        M, N, K,
        # The stride variables represent how much to increase the ptr by when moving by 1
        # element in a particular dimension.
        stride_am, stride_ak,  #
        stride_bk, stride_bn,  #
        stride_cm, stride_cn,
        negative_slope,
        # Meta-parameters
        BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,  #
        GROUP_SIZE_M: tl.constexpr,  #
        ACTIVATION: tl.constexpr,  #
        INPUT_PRECISION: tl.constexpr,  #
):
    """C = A x B (then leaky_relu if ACTIVATION == "leaky_relu").
    A has shape (M, K), B has shape (K, N) and C has shape (M, N)."""
    # Map program ids `pid` to the block of C it should compute, in grouped ordering to
    # promote L2 data reuse.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Integer bound assumptions that guide the backend's address arithmetic.
    if _HAS_ASSUME:
        tl.assume(pid_m >= 0)
        tl.assume(pid_n >= 0)
        tl.assume(stride_am > 0)
        tl.assume(stride_ak > 0)
        tl.assume(stride_bn > 0)
        tl.assume(stride_bk > 0)
        tl.assume(stride_cm > 0)
        tl.assume(stride_cn > 0)

    # Pointers to the first blocks of A and B, advanced along K in the loop.
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    # Accumulate a [BLOCK_SIZE_M, BLOCK_SIZE_N] block of fp32 values.
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        # Load the next blocks of A and B, zero beyond K.
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    # The activation is fused while the accumulator is still in fp32.
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator, negative_slope)
    c = accumulator.to(c_ptr.dtype.element_ty)

    # Write back the block of C, masked at the edges.
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


# The autotuned kernel the CUDA benchmark launches; bench_isa.py compiles
# tutorial_matmul_kernel itself for AMD archs, in an interpreter that may lack torch.
matmul_kernel = triton.autotune(configs=get_cuda_autotune_config(),
                                key=['M', 'N', 'K', 'ACTIVATION'])(tutorial_matmul_kernel)


def matmul(a, b, activation="", negative_slope=0.01):
    """a @ b (then leaky_relu with `negative_slope` if activation == "leaky_relu"), in a's
    dtype; a is M x K and contiguous, b is K x N."""
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    assert a.is_contiguous(), "Matrix A must be contiguous"
    assert a.dtype == b.dtype, "a and b must have the same dtype"
    M, K = a.shape
    K, N = b.shape
    import torch

    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    # 1D launch: one program per block of C.
    grid = lambda META: (
        triton.cdiv(M, META['BLOCK_SIZE_M']) * triton.cdiv(N, META['BLOCK_SIZE_N']), )
    matmul_kernel[grid](
        a, b, c,  #
        M, N, K,  #
        a.stride(0), a.stride(1),  #
        b.stride(0), b.stride(1),  #
        c.stride(0), c.stride(1),  #
        negative_slope,  #
        ACTIVATION=activation,  #
        INPUT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",  #
    )
    return c


def best_config(m, n, k, activation="", dtype=None):
    """The autotuner's winner for that problem as a string, or None before it ran. The
    autotuner's cache key is (M, N, K, ACTIVATION) followed by the dtypes of the tensor
    arguments (Triton 3.x)."""
    if len(matmul_kernel.configs) == 1:  # the autotuner runs it without a cache entry
        return str(matmul_kernel.configs[0])
    prefix = (m, n, k, activation)
    for cache_key, config in getattr(matmul_kernel, "cache", {}).items():
        if tuple(cache_key[:4]) == prefix and (dtype is None or str(dtype) in cache_key):
            return str(config)
    return None
