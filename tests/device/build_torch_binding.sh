#!/usr/bin/env bash
# On a GPU machine without LLVM 22: run the plugin there with the compiler core built on
# the CPU machine. Unpacks Debian's LLVM/MLIR runtime packages into /tmp/tile-llvm,
# builds only the torch binding against this machine's torch (with its GPU support), and
# prints the LD_LIBRARY_PATH to use.
#
#   bash tests/device/build_torch_binding.sh .gpu-carry
# .gpu-carry holds libtorch_tile_core.so and the .deb files of libllvm22, libmlir-22 and
# their libraries (apt-get download libllvm22 libmlir-22 libz3-4 libedit2 libbsd0 libmd0).
set -euo pipefail
carry=${1:?usage: build_torch_binding.sh CARRY_FOLDER}
runtime=/tmp/tile-llvm
mkdir -p "$runtime"
for deb in "$carry"/*.deb; do dpkg -x "$deb" "$runtime"; done
export LD_LIBRARY_PATH="$runtime/usr/lib/llvm-22/lib:$runtime/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"

lib=python/torch_tile/lib
mkdir -p "$lib"
cp "$carry/libtorch_tile_core.so" "$lib/"
torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
cuda_home=${CUDA_HOME:-/usr/local/cuda}
rocm=$(python3 -c 'import torch; print(1 if torch.version.hip else 0)')
gpu_libs=(-ltorch_cuda -lc10_cuda)
defines=()
if [ "$rocm" = 1 ]; then gpu_libs=(-ltorch_hip -lc10_hip); defines=(-DUSE_ROCM); fi

g++ -O2 -std=c++17 -shared -fPIC -fopenmp -D_GLIBCXX_USE_CXX11_ABI="$abi" "${defines[@]}" \
  -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" -I"$cuda_home/include" \
  -Icsrc -Iops/include -Icompiler/include \
  csrc/torch/*.cpp \
  -L"$lib" -ltorch_tile_core -L"$torch_dir/lib" -ltorch -ltorch_cpu -lc10 "${gpu_libs[@]}" \
  -Wl,-rpath,'$ORIGIN' -Wl,-rpath,"$torch_dir/lib" \
  -o "$lib/libtorch_tile_ops.so"

# torch_tile._C (the ops as C functions of Python, csrc/python) where Python's headers are
# here; without it torch_tile.<op> calls torch.ops.tile.<op> from Python.
py_include=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
py_suffix=$(python3 -c 'import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])')
if [ -f "$py_include/Python.h" ]; then
  g++ -O2 -std=c++17 -shared -fPIC -D_GLIBCXX_USE_CXX11_ABI="$abi" "${defines[@]}" \
    -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" -I"$py_include" \
    csrc/python/DirectCalls.cpp \
    -L"$torch_dir/lib" -ltorch_python -ltorch -ltorch_cpu -lc10 -Wl,-rpath,"$torch_dir/lib" \
    -o "$lib/_C$py_suffix"
else
  echo "build_torch_binding: no $py_include/Python.h; torch_tile.<op> will call torch.ops" >&2
fi
echo "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
