"""The ops on GPU tensors, through torch: parity for every dtype pair and shape of the
CPU suite, the current stream, CUDA graphs, and errors. Skipped where torch sees no GPU
(CI); run on a GPU machine (tests/device/).
"""

import pytest
import torch
import torch.nn.functional as F

import torch_tile  # noqa: F401

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible to torch")

PAIRS = [(torch.float32, None, 1e-5), (torch.float16, None, 2e-3), (torch.bfloat16, None, 1e-2),
         (torch.float16, torch.float32, 1e-5), (torch.bfloat16, torch.float32, 1e-5),
         (torch.int8, torch.int32, 0.0)]
SHAPES = [(128, 256, 32), (128, 16, 32), (32, 128, 64), (64, 64, 32), (32, 32, 128),
          (512, 512, 512), (1024, 1024, 1024), (1, 1, 1), (7, 13, 5), (257, 129, 65), (5, 7, 0)]


def matrices(shape, dtype):
    m, n, k = shape
    if dtype == torch.int8:
        return (torch.randint(-128, 128, (m, k), dtype=dtype, device="cuda"),
                torch.randint(-128, 128, (k, n), dtype=dtype, device="cuda"))
    return (torch.randn(m, k, device="cuda").to(dtype),
            (torch.randn(k, n, device="cuda") / max(k, 1) ** 0.5).to(dtype))


def relative_error(out, ref):
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


# Per element: max|out - ref| / max|ref|, which one wrong element fails (a norm can hide it).
# Rounding the output alone costs half an ulp of max|ref|: 2^-11 (float16), 2^-8 (bfloat16).
ELEMENT_BOUND = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def element_error(out, ref):
    return ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()


def poison_next_allocation(shape, dtype):
    """NaN-fills a block of the caching allocator the size of the op's output and frees it,
    so that the output the op allocates next starts as NaN, not as zeros or old results."""
    block = torch.empty(shape, dtype=dtype, device="cuda")
    block.fill_(float("nan") if dtype.is_floating_point else torch.iinfo(dtype).min)
    del block


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype, out_dtype, bound", PAIRS, ids=lambda p: str(p))
@pytest.mark.parametrize("op", ["matmul", "matmul_leaky_relu"])
def test_matmul_parity(op, shape, dtype, out_dtype, bound):
    if op == "matmul_leaky_relu" and dtype == torch.int8:
        pytest.skip("leaky_relu has no int8 variant")
    a, b = matrices(shape, dtype)
    kwargs = {} if out_dtype is None else {"out_dtype": out_dtype}
    poison_next_allocation((shape[0], shape[1]), out_dtype or dtype)
    if op == "matmul":
        out = torch.ops.tile.matmul(a, b, **kwargs)
        ref = a.double() @ b.double()
    else:
        out = torch.ops.tile.matmul_leaky_relu(a, b, 0.2, **kwargs)
        ref = F.leaky_relu(a.double() @ b.double(), 0.2)
    assert out.device == a.device and out.dtype == (out_dtype or dtype)
    assert out.shape == (shape[0], shape[1])
    if shape[2] == 0:
        assert (out == 0).all()
        return
    if dtype == torch.int8:
        assert torch.equal(out.long(), ref.long())
    else:
        assert relative_error(out, ref) <= bound
        assert element_error(out, ref) <= ELEMENT_BOUND[out_dtype or dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 2047, 2048, 1_000_003])
def test_vector_add_parity(dtype, n):
    a, b = torch.randn(n, device="cuda").to(dtype), torch.randn(n, device="cuda").to(dtype)
    assert torch.equal(torch.ops.tile.vector_add(a, b), a + b)


def test_strided_views():
    x = torch.randn(300, 200, device="cuda")
    w = torch.randn(150, 300, device="cuda")
    out = torch.ops.tile.matmul(x.t(), w.t())  # both transposed
    assert relative_error(out, x.t().double() @ w.t().double()) <= 1e-5
    sliced = torch.randn(64, 80, device="cuda")[:, ::2]
    out = torch.ops.tile.matmul(sliced, torch.randn(40, 24, device="cuda"))
    assert out.shape == (64, 24)


def test_calls_alike_but_for_layout_keep_their_own_kernels():
    # A repeated call reuses the launch plan of its signature; the same sizes with another
    # layout (transposed, misaligned, a strided bias) must not.
    torch.manual_seed(3)
    storage = torch.randn(2 * 96 * 80 + 8, device="cuda", dtype=torch.float16)
    aligned = storage[: 96 * 80].view(96, 80)
    misaligned = storage[1 : 1 + 96 * 80].view(96, 80)  # 2 bytes off 16
    b = torch.randn(80, 72, device="cuda", dtype=torch.float16)
    bias = torch.randn(144, device="cuda", dtype=torch.float16)
    variants = [
        lambda: (aligned, b, None),
        lambda: (misaligned, b, None),
        lambda: (aligned, b.t().contiguous().t(), None),
        lambda: (aligned, b, bias[:72]),
        lambda: (aligned, b, bias[::2]),
    ]
    for _ in range(3):
        for variant in variants:
            a_, b_, bias_ = variant()
            ref = a_.double() @ b_.double() + (0 if bias_ is None else bias_.double())
            poison_next_allocation((96, 72), torch.float16)
            out = torch.ops.tile.matmul(a_, b_, bias=bias_)
            assert element_error(out, ref) <= ELEMENT_BOUND[torch.float16]


def test_runs_on_the_current_stream():
    a, b = matrices((512, 512, 512), torch.float16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = torch.ops.tile.matmul(a, b)
        total = torch.ops.tile.vector_add(out, out)
    torch.cuda.current_stream().wait_stream(side)
    assert relative_error(total, 2 * (a.double() @ b.double())) <= 2e-3


def replays_match_torch(shape, replays, eager_too=False):
    """matmul_leaky_relu(a, b, 0.1) captured into a CUDA graph (on a side stream, after a
    first call that compiles, loads and tunes it), then replayed on new a and b, each
    replay checked against float64 torch (and, with `eager_too`, a call outside the graph
    on the same operands)."""
    a, b = matrices(shape, torch.float16)
    torch.ops.tile.matmul_leaky_relu(a, b, 0.1)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph):
            out = torch.ops.tile.matmul_leaky_relu(a, b, 0.1)
    for _ in range(replays):
        new_a, new_b = matrices(shape, torch.float16)
        a.copy_(new_a)
        b.copy_(new_b)
        graph.replay()
        torch.cuda.synchronize()
        ref = F.leaky_relu(a.double() @ b.double(), 0.1)
        assert relative_error(out, ref) <= 2e-3
        if eager_too:
            assert relative_error(torch.ops.tile.matmul_leaky_relu(a, b, 0.1), ref) <= 2e-3


def test_cuda_graph_capture_and_replay():
    replays_match_torch((256, 256, 128), replays=2)


def test_gpu_and_cpu_operands_are_rejected():
    with pytest.raises(RuntimeError, match="tensor a is on cuda:0 but b is on cpu"):
        torch.ops.tile.matmul(torch.randn(4, 4, device="cuda"), torch.randn(4, 4))
    # A CPU a with a GPU b reaches the GPU kernel too: the op's own error, not a guard's.
    with pytest.raises(RuntimeError, match="tensor a is on cpu but b is on cuda:0"):
        torch.ops.tile.matmul(torch.randn(4, 4), torch.randn(4, 4, device="cuda"))
    with pytest.raises(RuntimeError, match="tensor a is on cpu but b is on cuda:0"):
        torch.ops.tile.matmul_leaky_relu(torch.randn(4, 4), torch.randn(4, 4, device="cuda"))
    with pytest.raises(RuntimeError, match="is on"):
        torch.ops.tile.vector_add(torch.randn(4, device="cuda"), torch.randn(4))
    with pytest.raises(RuntimeError, match="tensor a is on cpu but b is on cuda:0"):
        torch.ops.tile.vector_add(torch.randn(4), torch.randn(4, device="cuda"))


def test_gradients_on_the_gpu():
    a = torch.randn(64, 48, device="cuda", requires_grad=True)
    b = torch.randn(48, 32, device="cuda", requires_grad=True)
    torch.ops.tile.matmul_leaky_relu(a, b, 0.2).sum().backward()
    a2 = a.detach().double().requires_grad_()
    b2 = b.detach().double().requires_grad_()
    F.leaky_relu(a2 @ b2, 0.2).sum().backward()
    assert relative_error(a.grad, a2.grad) <= 1e-5
    assert relative_error(b.grad, b2.grad) <= 1e-5


@pytest.mark.parametrize("slope", [float("nan"), float("inf")])
def test_non_finite_slope_follows_torch(slope):
    a, b = torch.randn(24, 16, device="cuda"), torch.randn(16, 40, device="cuda")
    b[:, 0] = 0.0
    out = torch.ops.tile.matmul_leaky_relu(a, b, slope)
    ref = F.leaky_relu(a.double() @ b.double(), slope).float()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_gpu_arch_without_a_lowering_is_a_clear_error():
    # TILE_TARGET stands in for a GPU torch-tile has no lowering for.
    import os
    import subprocess
    import sys
    code = ("import torch, torch_tile\n"
            "try:\n"
            "    torch.ops.tile.vector_add(torch.ones(8, device='cuda'), torch.ones(8, device='cuda'))\n"
            "except RuntimeError as e:\n"
            "    print('raised:', e)\n")
    env = dict(os.environ, TILE_TARGET="cuda:sm_75")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "raised:" in result.stdout and "sm_75" in result.stdout, result.stdout
    assert "not one torch-tile compiles for" in result.stdout


GPU_CANDIDATES = [{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4},
                  {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8},
                  {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 64}]  # > 1024 threads


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_autotuning_on_the_gpu(tmp_path, dtype):
    from torch_tile import config, runtime

    family = "hip" if torch.version.hip else "cuda"
    runtime.clear_tuning()
    with config.patch(autotune=True, cache_dir=tmp_path,
                      autotune_configs={"matmul": {family: GPU_CANDIDATES}}):
        before = runtime.autotune_stats()
        a, b = matrices((300, 200, 96), dtype)
        out = torch.ops.tile.matmul(a, b)
        after = runtime.autotune_stats()
        assert relative_error(out, a.double() @ b.double()) <= (1e-5 if dtype == torch.float32
                                                                 else 2e-3)
        assert after["benchmarked"] - before["benchmarked"] == 1
        assert after["candidates_run"] - before["candidates_run"] == 2
        assert after["candidates_rejected"] - before["candidates_rejected"] == 1

        # Under graph capture nothing is benchmarked: a new bucket runs the default.
        stream = torch.cuda.Stream()
        a2, b2 = matrices((40, 50, 30), dtype)
        with torch.cuda.stream(stream):
            with config.patch(autotune=False):
                torch.ops.tile.matmul(a2, b2)  # compiles and loads the default kernel
            runtime.clear_tuning()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                captured = torch.ops.tile.matmul(a2, b2)
        graph.replay()
        torch.cuda.synchronize()
        assert runtime.autotune_stats()["benchmarked"] == 0
        assert relative_error(captured, a2.double() @ b2.double()) <= (
            1e-5 if dtype == torch.float32 else 2e-3)
    runtime.clear_tuning()


def default_candidates():
    from torch_tile import config

    family = "hip" if torch.version.hip else "cuda"
    return config.autotune_configs["matmul"][family]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("index", range(8))
def test_every_default_candidate_computes_the_same(tmp_path, index, dtype):
    """Autotuning trusts each candidate's result: every default config must be exact."""
    from torch_tile import config, runtime

    candidates = default_candidates()
    if index >= len(candidates):
        pytest.skip(f"the default list has {len(candidates)} configs")
    family = "hip" if torch.version.hip else "cuda"
    runtime.clear_tuning()
    with config.patch(autotune=True, cache_dir=tmp_path,
                      autotune_configs={"matmul": {family: [candidates[index]]}}):
        before = runtime.autotune_stats()
        for shape in [(300, 260, 100), (1024, 512, 256)]:
            a, b = matrices(shape, dtype)
            out = torch.ops.tile.matmul_leaky_relu(a, b, 0.2)
            ref = F.leaky_relu(a.double() @ b.double(), 0.2)
            assert relative_error(out, ref) <= (1e-5 if dtype == torch.float32 else 1e-2)
        stats = runtime.autotune_stats()
    runtime.clear_tuning()
    if stats["candidates_rejected"] > before["candidates_rejected"]:
        pytest.skip(f"{candidates[index]} is refused by the resource check for {dtype}")


@pytest.mark.parametrize("stages", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_every_pipeline_depth_computes_the_same(tmp_path, stages, dtype):
    """num_stages 1-5 on ragged and whole shapes, short and long K loops (on Hopper the
    aligned ones by bulk tensor copies, the others by cp.async)."""
    from torch_tile import config, runtime

    family = "hip" if torch.version.hip else "cuda"
    candidate = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4,
                 "num_stages": stages}
    runtime.clear_tuning()
    with config.patch(autotune=True, cache_dir=tmp_path,
                      autotune_configs={"matmul": {family: [candidate]}}):
        before = runtime.autotune_stats()
        for shape in [(300, 260, 100), (256, 512, 1024), (64, 64, 32), (65, 33, 17)]:
            a, b = matrices(shape, dtype)
            poison_next_allocation(shape[:2], dtype)
            out = torch.ops.tile.matmul_leaky_relu(a, b, 0.2)
            ref = F.leaky_relu(a.double() @ b.double(), 0.2)
            assert element_error(out, ref) <= ELEMENT_BOUND[dtype], (shape, stages)
        assert runtime.autotune_stats()["candidates_run"] - before["candidates_run"] == 4
    runtime.clear_tuning()


def hopper():
    return (torch.version.hip is None and torch.cuda.is_available()
            and torch.cuda.get_device_capability() == (9, 0))


def leaky_matmul_ptx(a, b, folder, name, bias=None, **settings):
    """matmul_leaky_relu(a, b, 0.2, bias=bias) under `settings` (torch_tile.config) from a
    cold kernel cache, checked element by element against float64 torch; the PTX it
    compiled."""
    from torch_tile import config, runtime

    with config.patch(dump_dir=folder, **settings):
        runtime.clear_cache()
        poison_next_allocation((a.shape[0], b.shape[1]), a.dtype)
        out = torch.ops.tile.matmul_leaky_relu(a, b, 0.2, bias=bias)
        torch.cuda.synchronize()
    ref = F.leaky_relu(a.double() @ b.double() + (0 if bias is None else bias.double()), 0.2)
    assert element_error(out, ref) <= ELEMENT_BOUND[a.dtype], name
    ptx = "".join(p.read_text() for p in folder.rglob("*.ptx"))
    assert ptx, f"{name}: no PTX dumped under {folder}"
    return ptx


@pytest.mark.skipif(not hopper(), reason="bulk tensor copies are Hopper's (sm_90a)")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_bulk_tensor_copies_and_their_cp_async_fallback_agree(tmp_path, dtype):
    """Operands that a tensor map describes (16-byte aligned, strides of whole 16 bytes,
    either dimension contiguous) arrive by bulk tensor copies; a misaligned base or a row
    stride that is not a multiple of 16 bytes gets a kernel that copies with cp.async.
    Both give torch's results, with ragged edges (the copy fills zeros past them)."""
    from torch_tile import runtime

    m, n, k = 392, 264, 328  # none a multiple of the blocks
    def dense(rows, cols):
        return torch.randn(rows, cols, device="cuda").to(dtype)
    flat = torch.randn(m * k + 8, device="cuda").to(dtype)
    b = (dense(k, n) / k ** 0.5)
    cases = {
        "row-major": (dense(m, k), b, True),
        "transposed": (dense(k, m).t(), (dense(n, k) / k ** 0.5).t(), True),
        "misaligned base": (flat[1:m * k + 1].view(m, k), b, False),
        "stride of 660 bytes": (dense(m, k + 2)[:, :k], b, False),
    }
    for name, (a, b_case, bulk) in cases.items():
        ptx = leaky_matmul_ptx(a, b_case, tmp_path / name.replace(" ", "-"), name,
                               cache_dir=tmp_path / "cache")
        assert ("cp.async.bulk.tensor" in ptx) == bulk, name
        assert ("cp.async.cg" in ptx) != bulk, name
    runtime.clear_cache()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8])
def test_operands_no_tensor_map_takes_copy_in_the_widest_pieces_their_alignment_allows(tmp_path, dtype):
    """An operand whose first element or row stride is not 16-byte aligned (a row of 1500
    or 1030 half-precision elements) has no tensor map and no 16-byte cp.async; where the
    call finds it 4-byte aligned its kernel copies it asynchronously in 8-byte pieces (a
    run-time check) or 4-byte ones, and below that (a 16-bit base one element off) through
    registers, in a kernel without the pieces. Each class, with rows that end inside a
    piece (the piece's source bytes cut short, its rest zero-filled), against float64."""
    from torch_tile import config, runtime

    size = torch.tensor([], dtype=dtype).element_size()
    m, n = 300, 264

    def dense(rows, cols):
        if dtype == torch.int8:
            return torch.randint(-128, 128, (rows, cols), dtype=dtype, device="cuda")
        return (torch.randn(rows, cols, device="cuda") / cols ** 0.25).to(dtype)

    def rows_aligned_to(alignment, rows, cols):
        """A (rows x cols) view whose row stride in bytes is a multiple of `alignment`
        but not of twice it, and whose rows end inside an 8-byte piece where they can."""
        stride = cols
        while (stride * size) % alignment or (stride * size) % (2 * alignment) == 0:
            stride += 1
        return dense(rows, stride)[:, :cols]

    def base_off_by(elements, rows, cols):
        return dense(rows * cols + 16, 1).view(-1)[elements:elements + rows * cols].view(rows, cols)

    k = 333
    # name -> (a, b, whether the kernel copies in pieces: the caller promises 4 bytes)
    cases = {
        "a's rows 8-byte aligned": (rows_aligned_to(8, m, k), dense(k, n), True),
        "a's rows 4-byte aligned": (rows_aligned_to(4, m, k), dense(k, n), True),
        "b's rows 8-byte aligned": (dense(m, k), rows_aligned_to(8, k, 261), True),
        "b's rows 4-byte aligned": (dense(m, k), rows_aligned_to(4, k, 261), True),
        "a's base 8 bytes off": (base_off_by(8 // size, m, 336), dense(336, n), True),
        "a's base one element off": (base_off_by(1, m, 336), dense(336, n), size >= 4),
    }
    # The default pipeline copies by cp.async; num_stages=1 loads each tile through
    # registers, in 32-bit words where the call promised 4 bytes.
    unpipelined = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 1}
    for name, (a, b, pieces) in cases.items():
        for settings in ({}, {"autotune": True, "autotune_configs": {"matmul": {"cuda": [unpipelined]}}}):
            kwargs = {"out_dtype": torch.int32} if dtype == torch.int8 else {}
            where = f"{name}{' num_stages=1' if settings else ''}"
            folder = tmp_path / where.replace(" ", "-").replace("'", "").replace("=", "")
            runtime.clear_tuning()
            with config.patch(dump_dir=folder, cache_dir=tmp_path / "cache", **settings):
                poison_next_allocation((a.shape[0], b.shape[1]), kwargs.get("out_dtype", dtype))
                out = torch.ops.tile.matmul(a, b, **kwargs)
                torch.cuda.synchronize()
            ref = a.double() @ b.double()
            if dtype == torch.int8:
                assert torch.equal(out.long(), (a.long().cpu() @ b.long().cpu()).cuda()), where
            else:
                assert element_error(out, ref) <= ELEMENT_BOUND[dtype], where
            ptx = "".join(p.read_text() for p in folder.rglob("*.ptx"))
            if ptx and not settings:  # compiled here, not loaded from an earlier case's
                assert ("cp.async.ca.shared.global" in ptx) == pieces, where
    runtime.clear_tuning()
    runtime.clear_cache()


def pipeline_cases(dtype):
    """name -> (a, b, whether bulk tensor copies can read them) for the Hopper pipelines:
    ragged edges, K shorter than a block, K loops longer than the ring, more tiles than
    multiprocessors, transposed operands, and a misaligned a (the cp.async fallback)."""
    def dense(rows, cols):
        return torch.randn(rows, cols, device="cuda").to(dtype)

    return {
        "ragged": (dense(392, 328), dense(328, 264) / 328 ** 0.5, True),
        "short K": (dense(200, 24), dense(24, 136), True),
        "long K": (dense(256, 4096), dense(4096, 512) / 64, True),
        "many tiles": (dense(2056, 200), dense(200, 2312) / 200 ** 0.5, True),
        "transposed": (dense(328, 392).t(), (dense(264, 328) / 328 ** 0.5).t(), True),
        "misaligned": (torch.randn(300 * 200 + 8, device="cuda").to(dtype)[1:300 * 200 + 1].view(300, 200),
                       dense(200, 136) / 200 ** 0.5, False),
    }


@pytest.mark.skipif(not hopper(), reason="warp specialization splits Hopper's bulk-copy loop")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("candidate", [
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 2},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4},
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3, "persistent": 1},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "persistent": 1},
    {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "persistent": 1},
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3, "num_ctas": 2},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "num_ctas": 2},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "persistent": 1,
     "num_ctas": 2},
], ids=["64x128-s2", "128x128-s3", "128x256-w8-s4", "persistent-64x128-s3", "persistent-128x256-w8-s4",
        "persistent-256x128-w8-s4", "cluster-64x128-s3", "cluster-128x256-w8-s4", "cluster-persistent-128x256-w8-s4"])
def test_warp_specialized_kernels_compute_the_same(tmp_path, dtype, candidate):
    """warp_specialize=1: a producer warpgroup issues the bulk copies, released stage by
    stage by the consumers' mbarrier arrivals; with persistent=1 each program walks
    several tiles (more tiles than multiprocessors), its stages' phases counted across
    them, and stages C beside the ring (each consumer warpgroup its own rows, one
    64x64 box at a time in two buffers of its own; 256x128: two row boxes per band);
    with num_ctas=2 blocks run in pairs that multicast their halves of each B tile (an
    odd number of block rows leaves a pair's second block past M). Ragged edges, K shorter than a block, K loops longer than the ring, transposed
    operands; the cp.async fallback (misaligned a) keeps its own kernel."""
    from torch_tile import runtime

    for name, (a, b, bulk) in pipeline_cases(dtype).items():
        runtime.clear_tuning()
        ptx = leaky_matmul_ptx(a, b, tmp_path / name.replace(" ", "-"), name, autotune=True,
                               cache_dir=tmp_path / "cache",
                               autotune_configs={"matmul": {"cuda": [dict(candidate, warp_specialize=1)]}})
        # The consumers release stages; the producer hands them its registers.
        released = "mbarrier.arrive.shared::cta.b64" in ptx or "mbarrier.arrive.shared::cluster.b64" in ptx
        assert released == bulk, name
        assert ("setmaxnreg.inc.sync.aligned.u32" in ptx) == bulk, name
        if candidate.get("num_ctas") == 2:
            assert ".reqnctapercluster 2, 1, 1" in ptx, name
            assert ("multicast::cluster" in ptx) == bulk, name
    runtime.clear_tuning()
    runtime.clear_cache()


@pytest.mark.skipif(not hopper(), reason="the persistent kernel is sm_90a's")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_default_kernel_walks_many_waves_of_short_tiles(tmp_path, dtype):
    """A Linear's x @ W^T + bias, then leaky_relu, at 4096 x 16384 x 256: 2048 blocks of
    128x256 (15-16 per multiprocessor) with a short K loop, which the default runs on the
    persistent, warp-specialized kernel, each program walking its tiles in GROUP_M order
    and reading each tile's bias while its last MMAs run."""
    from torch_tile import runtime

    x = torch.randn(4096, 256, device="cuda").to(dtype)
    w = (torch.randn(16384, 256, device="cuda") / 16).to(dtype)
    bias = torch.randn(16384, device="cuda").to(dtype)
    ptx = leaky_matmul_ptx(x, w.t(), tmp_path / "dump", "4096x16384x256", bias=bias)
    assert "setmaxnreg.inc.sync.aligned.u32" in ptx
    runtime.clear_cache()


STREAM_K_CANDIDATES = [
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4},
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3},
]


@pytest.mark.skipif(not hopper(), reason="stream-K runs on the persistent kernel of sm_90a")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("candidate", STREAM_K_CANDIDATES, ids=["128x256-w8-s4", "64x128-w4-s3"])
@pytest.mark.parametrize("mode", [1, 2], ids=["last-two-waves", "last-wave"])
def test_stream_k_computes_the_same(tmp_path, dtype, candidate, mode):
    """stream_k=1: the programs take equal shares of the K steps of the last two waves'
    tiles; stream_k=2: the partly filled last wave's tiles run their first steps on
    programs of their own and the other programs share their tails. Either way a tile's
    steps may run on several programs: those that start inside it leave partial sums
    that the one running its first step adds. Covered: shares that end inside a tile
    (many tiles), tiles split over dozens of programs (long K, few tiles), more programs
    than steps (short K: empty shares), ragged edges, transposed operands, the cp.async fallback
    (misaligned a), a bias added once, and launches one after another on one stream
    (each must leave the flags as it found them)."""
    from torch_tile import config, runtime

    settings = dict(autotune=True, cache_dir=tmp_path / "cache",
                    autotune_configs={"matmul": {"cuda": [dict(candidate, warp_specialize=1, persistent=1,
                                                             stream_k=mode)]}})
    cases = pipeline_cases(dtype)
    # More tiles than an H100 has SMs, the last wave partly filled: its tiles are split.
    cases["uneven waves"] = (torch.randn(1544, 1000, device="cuda").to(dtype),
                             torch.randn(1000, 3080, device="cuda").to(dtype) / 1000 ** 0.5, True)
    for name, (a, b, bulk) in cases.items():
        runtime.clear_tuning()
        ptx = leaky_matmul_ptx(a, b, tmp_path / name.replace(" ", "-"), name, **settings)
        assert "st.release.gpu.global.b32" in ptx and "ld.acquire.gpu.global.b32" in ptx, name
        assert ("setmaxnreg.inc.sync.aligned.u32" in ptx) == bulk, name
        with config.patch(**settings):
            for _ in range(3):  # the same kernel again: the flags were cleared
                a.copy_(torch.randn_like(a, dtype=torch.float32))
                poison_next_allocation((a.shape[0], b.shape[1]), dtype)
                out = torch.ops.tile.matmul_leaky_relu(a, b, 0.2)
                ref = F.leaky_relu(a.double() @ b.double(), 0.2)
                assert element_error(out, ref) <= ELEMENT_BOUND[dtype], name
            bias = torch.randn(b.shape[1], device="cuda").to(dtype)
            out = torch.ops.tile.matmul(a, b, bias=bias)
            assert element_error(out, a.double() @ b.double() + bias.double()) <= ELEMENT_BOUND[dtype], name
    runtime.clear_tuning()
    runtime.clear_cache()


@pytest.mark.skipif(not hopper(), reason="stream-K runs on the persistent kernel of sm_90a")
def test_stream_k_under_cuda_graph_capture(tmp_path):
    """A captured stream-K launch gets a workspace of the graph's own, its flags zeroed by
    the graph: replays give torch's results, as do launches outside the graph."""
    from torch_tile import config, runtime

    candidate = dict(STREAM_K_CANDIDATES[0], warp_specialize=1, persistent=1, stream_k=1)
    with config.patch(autotune=True, cache_dir=tmp_path / "cache",
                      autotune_configs={"matmul": {"cuda": [candidate]}}):
        runtime.clear_tuning()
        replays_match_torch((1544, 3080, 1000), replays=3, eager_too=True)
        runtime.clear_tuning()


@pytest.mark.skipif(torch.version.hip is not None, reason="TF32 is NVIDIA's")
def test_float32_follows_torchs_matmul_precision():
    """'highest': exact f32 (FMAs); 'high': TF32 inputs, as torch.matmul then uses, so the
    result matches torch's own TF32 result far better than the exact one's error."""
    a, b = matrices((512, 384, 1024), torch.float32)
    exact = a.double() @ b.double()
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert element_error(torch.ops.tile.matmul(a, b), exact) <= 1e-5
        torch.set_float32_matmul_precision("high")
        tf32 = torch.ops.tile.matmul(a, b)
        # TF32 keeps 10 mantissa bits: errors well above f32's, well below a wrong result.
        error = element_error(tf32, exact)
        assert 1e-5 < error <= 5e-3, error
        assert element_error(tf32, torch.matmul(a, b).double()) <= 5e-3
        # Back to exact: a repeated call reuses a launch plan, of its own precision.
        torch.set_float32_matmul_precision("highest")
        assert element_error(torch.ops.tile.matmul(a, b), exact) <= 1e-5
    finally:
        torch.set_float32_matmul_precision(before)


def test_offsets_past_two_to_the_31():
    """a of 65536 x 32800 float16 (4.3 GB): its last rows start past element 2**31, so the
    kernel indexes in 64 bits; the rows on both sides of that line are checked."""
    if torch.cuda.get_device_properties(0).total_memory < 16 * 2**30:
        pytest.skip("needs 16 GiB of GPU memory")
    m, k, n = 65536, 32800, 64
    a = torch.empty(m, k, device="cuda", dtype=torch.float16).uniform_(-1, 1)
    b = (torch.randn(k, n, device="cuda") / k**0.5).half()
    poison_next_allocation((m, n), torch.float16)
    out = torch.ops.tile.matmul(a, b)
    first_past = (2**31 + k - 1) // k  # the first row whose offset passes 2**31
    rows = torch.cat([torch.arange(0, 64), torch.arange(first_past - 64, m),
                      torch.randint(0, m, (64,))]).to("cuda")
    ref = a[rows].double() @ b.double()
    assert element_error(out[rows], ref) <= ELEMENT_BOUND[torch.float16]
    del a, out


@pytest.mark.parametrize("a_view, m, n", [("expanded", 60, 24), ("contiguous", 64, 64),
                                            ("transposed", 128, 256)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_empty_k_needs_no_tensor_map(a_view, m, n, dtype):
    # K = 0 with operands aligned as bulk tensor copies want them: an empty operand has no
    # tensor map (the GPU fuzz found a broadcast one refused at launch); the result is
    # the epilogue of a zero sum, with and without a bias.
    from torch_tile.testing import Case, check, run
    for bias in (None, dtype):
        case = Case(seed=0, op="matmul_leaky_relu", dtype=dtype, out_dtype=None, result=dtype,
                    m=m, n=n, k=0, a_view=a_view, b_view="offset", slope=-0.5, bias=bias,
                    bias_view="contiguous")
        a, b = case.operands("cuda")
        bias_operand = case.bias_operand("cuda")
        poison_next_allocation((m, n), getattr(torch, dtype))
        check(case, a, b, run(case, a, b, bias_operand), bias_operand)


def cuda_case_failures(drawn, deadline=None):
    """Runs each case of the property test's generator on the GPU, its output NaN-filled
    first, against its float64 reference: (cases run, failures with their reproducers).
    Cases not started by `deadline` (time.time()) are not run. Shared with the long GPU
    fuzz (tests/device/fuzz_gpu.py)."""
    import time

    from torch_tile.testing import check, run
    done, failures = 0, []
    for case in drawn:
        if deadline is not None and time.time() > deadline:
            break
        a, b = case.operands("cuda")
        bias = case.bias_operand("cuda")
        poison_next_allocation((case.m, case.n), getattr(torch, case.result))
        try:
            check(case, a, b, run(case, a, b, bias), bias)
        except Exception as error:  # collect them all: one run on a lent GPU is costly
            failures.append(f"{case}: {str(error).splitlines()[0]}\n{case.reproducer()}")
        done += 1
    return done, failures


def test_random_cases_match_float64():
    # The CPU property test's generator (torch_tile.testing), with other cases and the output
    # NaN-filled before each run: sizes 0-300, every dtype pair, strided, offset and
    # stride-0 operands, NaN and negative slopes, biases.
    from torch_tile.testing import cases
    # 300 cases: with biases (a kernel of their own per dtype) they take ~3 minutes of
    # compiles and runs on an H100, the test file's share of one device call.
    drawn = cases(300, seed=31337)
    _, failures = cuda_case_failures(drawn)
    assert not failures, (f"{len(failures)} of {len(drawn)} cases failed:\n"
                          + "\n".join(failures[:10]))
