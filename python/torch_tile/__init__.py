"""torch-tile: custom ops whose kernels are compiled on first call by a built-in tile compiler.

``import torch_tile`` registers ``torch.ops.tile.vector_add``, ``torch.ops.tile.matmul`` and
``torch.ops.tile.matmul_leaky_relu``, and the same ops as ``torch_tile.vector_add``,
``torch_tile.matmul`` and ``torch_tile.matmul_leaky_relu``: functions that call them the way
``torch.add`` calls aten's, at torch's own cost per call.
"""

import sys
from pathlib import Path

import torch

__version__ = "0.1.0"

_LIB_DIR = Path(__file__).resolve().parent / "lib"
_OPS_LIBRARY = _LIB_DIR / "libtorch_tile_ops.so"


def _asking_for_help() -> bool:
    """`python -m torch_tile ... --help` (sys.argv[0] is "-m" while the package loads)."""
    return sys.argv[:1] == ["-m"] and any(arg in ("-h", "--help") for arg in sys.argv[1:])


def _load_ops_library() -> bool:
    """Loads the plugin; False only where it is not built yet and the command line asks
    for the CLI's help, which needs nothing native."""
    if not _OPS_LIBRARY.exists():
        if _asking_for_help():
            return False
        raise ImportError(
            f"torch_tile's native library is missing ({_OPS_LIBRARY}); "
            "build it with `make run` or `make test` at the repository root"
        )
    torch.ops.load_library(str(_OPS_LIBRARY))
    return True


NATIVE_LIBRARY_LOADED = _load_ops_library()

if NATIVE_LIBRARY_LOADED:
    from . import config, direct_calls, inductor, ops, runtime  # noqa: E402,F401  (need the library loaded)

    inductor.install_from_environment()
    _direct = direct_calls.functions(_LIB_DIR)
    vector_add, matmul, matmul_leaky_relu = (_direct[name] for name in direct_calls.THROUGH_TORCH_OPS)

__all__ = ["config", "inductor", "runtime", "library_path", "vector_add", "matmul", "matmul_leaky_relu",
           "__version__"]


def library_path() -> str:
    """Path of the plugin library, for LibTorch C++ programs that load it themselves."""
    return str(_OPS_LIBRARY)
