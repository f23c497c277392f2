"""The tile ops as plain functions: ``torch_tile.matmul(a, b)`` is ``torch.ops.tile.matmul(a, b)``.

Calling through ``torch.ops`` costs a Python frame and a boxed call (each argument
converted against the schema) on every call: about a microsecond more than ``torch.add``
on a CPU, whose generated binding parses its arguments and calls the dispatcher directly.
These functions are that kind of binding (``torch_tile._C``, built beside the plugin), so a
small op costs what torch's own does. They dispatch the same op: autograd, fake tensors,
``__torch_function__`` overrides and ``torch.compile`` see ``torch.ops.tile.*``.

Where ``torch_tile._C`` was not built (a Python without its development headers), the
same names call ``torch.ops.tile.*`` from Python.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import torch


def vector_add_through_torch_ops(a, b):
    return torch.ops.tile.vector_add(a, b)


def matmul_through_torch_ops(a, b, *, out_dtype=None, bias=None):
    return torch.ops.tile.matmul(a, b, out_dtype=out_dtype, bias=bias)


def matmul_leaky_relu_through_torch_ops(a, b, negative_slope=0.01, *, out_dtype=None, bias=None):
    return torch.ops.tile.matmul_leaky_relu(a, b, negative_slope, out_dtype=out_dtype, bias=bias)


THROUGH_TORCH_OPS = {
    "vector_add": vector_add_through_torch_ops,
    "matmul": matmul_through_torch_ops,
    "matmul_leaky_relu": matmul_leaky_relu_through_torch_ops,
}


def load_extension(lib_dir: Path):
    """torch_tile._C, where it was built for this Python; None otherwise."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = lib_dir / f"_C{suffix}"
        if path.exists():
            spec = importlib.util.spec_from_file_location("torch_tile._C", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[spec.name] = module
            return module
    return None


def substitute_for_dynamo(extension) -> None:
    """Dynamo traces through Python, not C: it is told that each C function is the
    torch.ops call of the same name, so a compiled graph holds the tile op."""
    for name, through_torch_ops in THROUGH_TORCH_OPS.items():
        torch.compiler.substitute_in_graph(getattr(extension, name), skip_signature_check=True)(
            through_torch_ops)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a callback once a module has been imported: a hook for torch._dynamo, whose
    import costs about a second that `import torch_tile` should not pay."""

    def __init__(self, module_name, callback):
        self.module_name, self.callback = module_name, callback

    def find_spec(self, name, path, target=None):
        if name != self.module_name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute, callback = spec.loader.exec_module, self.callback

        def execute_then_call_back(module):
            execute(module)
            callback()

        spec.loader.exec_module = execute_then_call_back
        return spec


def functions(lib_dir: Path) -> dict:
    """The public functions by name: the extension's where it loads, else Python's."""
    extension = load_extension(lib_dir)
    if extension is None:
        return dict(THROUGH_TORCH_OPS)
    if "torch._dynamo" in sys.modules:
        substitute_for_dynamo(extension)
    else:
        sys.meta_path.insert(0, _AfterImport("torch._dynamo", lambda: substitute_for_dynamo(extension)))
    return {name: getattr(extension, name) for name in THROUGH_TORCH_OPS}
