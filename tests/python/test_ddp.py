"""DistributedDataParallel under torch.compile(backend="tile"), on two ranks that start
together on one cold kernel cache: two CPU processes over gloo, and where two GPUs are
visible, one process per GPU over NCCL. Dynamo's DDP optimizer splits the graph at bucket
boundaries; each piece must still reach the tile rewrites, forward and backward, and the
ranks must train as eager DDP does.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist

RANK = textwrap.dedent('''
    import json
    import sys

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    import torch_tile
    from torch_tile.backend import tile_backend


    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(512, 1024, bias=False)
            self.down = nn.Linear(1024, 512, bias=False)

        def forward(self, x):
            return self.down(F.leaky_relu(self.up(x), 0.1))


    def step(module, x):
        loss = module(x).square().mean()
        loss.backward()
        return loss.item()


    device_type = sys.argv[2]
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    rank = dist.get_rank()
    device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
    if device_type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = MLP().to(device)
    ids = [rank] if device_type == "cuda" else None
    # 2 MiB buckets: each 2 MiB weight in a bucket of its own, two graph pieces.
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=2)
    pieces = 0

    def counting_backend(gm, example_inputs):
        global pieces
        pieces += 1
        return tile_backend(gm, example_inputs)

    compiled = torch.compile(ddp, backend=counting_backend)
    torch.manual_seed(1 + rank)
    x = torch.randn(32, 512).to(device)
    first = step(compiled, x)
    after_first = torch_tile.runtime.cache_stats()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    step(compiled, x)
    after_second = torch_tile.runtime.cache_stats()
    model.zero_grad()
    eager = nn.parallel.DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=2)
    reference = step(eager, x)
    grad_error = max(((g - p.grad).norm() / p.grad.norm()).item()
                     for g, p in zip(grads, model.parameters()))
    with open(f"{sys.argv[1]}/rank{rank}.json", "w") as out:
        json.dump({"pieces": pieces, "loss": first, "eager_loss": reference,
                   "grad_error": grad_error, "after_first": after_first,
                   "after_second": after_second}, out)
    # Gloo's work objects of the last step, and the DDP wrappers' hooks, go before the
    # group: a group torn down under them can abort the process at exit.
    del compiled, ddp, eager
    dist.barrier()
    dist.destroy_process_group()
''')


def gpus_for_two_ranks():
    return torch.cuda.is_available() and torch.cuda.device_count() >= 2 and dist.is_nccl_available()


@pytest.mark.parametrize("device_type", [
    pytest.param("cpu", marks=pytest.mark.skipif(
        not dist.is_available() or not dist.is_gloo_available(),
        reason="torch.distributed with gloo is not available")),
    pytest.param("cuda", marks=pytest.mark.skipif(
        not dist.is_available() or not gpus_for_two_ranks(),
        reason="two ranks on GPUs need two visible GPUs and NCCL")),
])
def test_ddp_pieces_run_tile_kernels_on_every_rank(device_type, tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    cache = tmp_path / "cache"
    env = dict(os.environ, TILE_CACHE_DIR=str(cache), TILE_BACKEND_MATMUL="always",
               OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(script), str(tmp_path), device_type],
        env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-6000:]
    tolerance = 1e-5  # relative, float32
    for rank in range(2):
        report = json.loads((tmp_path / f"rank{rank}.json").read_text())
        where = f"rank {rank}: {report}"
        print(where)
        assert report["pieces"] == 2, where
        first, second = report["after_first"], report["after_second"]
        # Tile kernels ran: each was compiled here or loaded from the other rank's entry.
        assert first["misses"] + first["disk_loads"] >= 2, where
        # At most once per rank: the second step finds every kernel in memory.
        assert second["misses"] == first["misses"], where
        assert second["disk_loads"] == first["disk_loads"], where
        assert second["hits"] > first["hits"], where
        assert abs(report["loss"] - report["eager_loss"]) <= tolerance * abs(report["eager_loss"]), where
        assert report["grad_error"] < tolerance, where
    # Both ranks wrote into one cache at once: no half-written entry is left.
    leftovers = [p for p in cache.rglob("*") if ".tmp" in p.name]
    assert not leftovers, leftovers
