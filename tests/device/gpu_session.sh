#!/usr/bin/env bash
# One device call's worth of GPU work on the plugin, each part in its own time box:
#   bash tests/device/gpu_session.sh .gpu-carry checks   # test_gpu.py, then an ncu profile
#   bash tests/device/gpu_session.sh .gpu-carry bench    # bench_matmul fp16 + bf16, config sweep
# Results (logs, JSON, PNG, the ncu report) go to $OUT/gpu (or /tmp/gpu-out without $OUT).
set -uo pipefail
carry=${1:?usage: gpu_session.sh CARRY_FOLDER checks|bench}
part=${2:?usage: gpu_session.sh CARRY_FOLDER checks|bench}
out=${OUT:-/tmp/gpu-out}/gpu
mkdir -p "$out"
root=$(pwd)
bash tests/device/build_torch_binding.sh "$carry" > /tmp/env.sh 2> "$out/build.log" || {
  tail -20 "$out/build.log"; exit 1; }
source <(tail -1 /tmp/env.sh)
export PYTHONPATH="$root/python" TILE_CACHE_DIR=/tmp/tile-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$out/gpu.txt" 2>&1

case "$part" in
checks)
  timeout 540 python3 -m pytest -q -rs tests/python/test_gpu.py 2>&1 | tee "$out/test_gpu.log" | tail -15
  # Counters of the default fp16 kernel at 4096^3: tensor-pipe use, shared-memory bank
  # conflicts, stall reasons (ncu, clocks left alone).
  timeout 200 ncu --clock-control none -k regex:matmul -s 2 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
    python3 benchmarks/profile_matmul.py > "$out/ncu_matmul_4096.txt" 2>&1
  grep -E "bank_conflicts|hmma|Duration|Registers|Achieved Occupancy|Stall" "$out/ncu_matmul_4096.txt" | head -30
  ;;
bench)
  cd benchmarks
  timeout 220 python3 bench_matmul.py --device cuda --dtype float16 --samples 7 2>&1 | tail -13
  timeout 160 python3 bench_matmul.py --device cuda --dtype bfloat16 --samples 7 --skip-largest 2>&1 | tail -11
  timeout 180 python3 bench_matmul_configs.py --shape 4096 4096 4096 --shape 8192 8192 8192 \
    --samples 5 --batch-ms 10 2>&1 | tail -22
  cp results/bench_matmul_cuda_float16.* results/bench_matmul_cuda_bfloat16.* \
    results/bench_matmul_configs_float16.* "$out/" 2>/dev/null
  ;;
*)
  echo "unknown part '$part': checks or bench"; exit 2 ;;
esac
