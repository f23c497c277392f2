"""Packaging for torch_tile. The native libraries are built by CMake (see CMakeLists.txt)
into python/torch_tile/lib, so an editable install imports them from the source tree."""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def build_native() -> None:
    build_dir = ROOT / "build"
    if not (build_dir / "build.ninja").exists():
        import torch.utils

        subprocess.check_call(
            [
                "cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
                "-DCMAKE_BUILD_TYPE=Release",
                f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
                f"-DPython3_EXECUTABLE={sys.executable}",
            ]
        )
    jobs = os.environ.get("TILE_BUILD_JOBS", str(os.cpu_count() or 2))
    subprocess.check_call(["cmake", "--build", str(build_dir), "-j", jobs])


class BuildPyWithNative(build_py):
    def run(self):
        build_native()
        super().run()


setup(
    name="torch_tile",
    version="0.1.0",
    description="PyTorch custom ops compiled on first call by an embedded MLIR/LLVM tile compiler",
    package_dir={"": "python"},
    packages=["torch_tile"],
    package_data={"torch_tile": ["lib/*.so"]},
    python_requires=">=3.10",
    install_requires=["torch"],
    # torch.compile(backend="tile") finds the backend here, with no import by the user
    # (torch/_dynamo/backends/registry.py reads this group on its first lookup).
    entry_points={"torch_dynamo_backends": ["tile = torch_tile.backend:tile_backend"]},
    cmdclass={"build_py": BuildPyWithNative},
)
