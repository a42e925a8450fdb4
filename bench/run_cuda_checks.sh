#!/usr/bin/env bash
# One device call: the CUDA kernels' GoogleTests against the CPU reference, then the
# micro-benchmarks. Binaries and non-system libraries are built here and carried in .devlib/
# (scripts: cp them as in docs/BENCHMARKS.md). Writes logs under $OUT.
set -u
d=${1:-.devlib}
export LD_LIBRARY_PATH="$PWD/$d:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for f in "$d"/*.gz; do [ -e "$f" ] && gunzip -kf "$f"; done # gzipped libraries (scripts/pack_devlib.sh)
# NVRTC (generated Pointwise kernels) from the toolkit, else from the CUDA wheels PyTorch uses.
if ! ls /usr/local/cuda/lib64/libnvrtc.so.1* > /dev/null 2>&1; then
  nv=$(python3 -c "import glob, site; print(next(iter(sorted(glob.glob(site.getsitepackages()[0] + '/nvidia/**/libnvrtc.so.1*', recursive=True))), ''))" 2> /dev/null)
  [ -n "$nv" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$nv")"
fi
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
"$d/octet-cuda-tests" 2>&1 | tee "$out/cuda-tests.txt" | tail -25
python3 bench/fp8_micro.py --bench "$d/octet-cuda-bench" --json "$out/micro.json" 2>&1 | tee "$out/micro.txt"
