import os
import tempfile
import zlib

import pytest
import torch

# Kernels compiled by the tests go to a folder of this run, not the user's cache.
os.environ["TILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="torch-tile-test-cache-")

import torch_tile  # noqa: E402,F401  (registers torch.ops.tile)


@pytest.fixture(autouse=True)
def fresh_seed(request):
    """Each test draws its own random inputs, reproducible from the test's id."""
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
