#!/usr/bin/env bash
# One device call: the CUDA kernels' GoogleTests against the CPU reference, then the
# micro-benchmarks. Binaries and non-system libraries are built here and carried in .devlib/
# (scripts: cp them as in docs/BENCHMARKS.md). Writes logs under $OUT.
set -u
d=${1:-.devlib}
. "$(dirname "$0")/gpu_env.sh"
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
"$d/octet-cuda-tests" 2>&1 | tee "$out/cuda-tests.txt" | tail -25
python3 bench/fp8_micro.py --bench "$d/octet-cuda-bench" --json "$out/micro.json" 2>&1 | tee "$out/micro.txt"
