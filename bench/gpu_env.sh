#!/usr/bin/env bash
# Sourced by the device-side scripts (run_cuda_checks.sh, run_gpu_e2e.sh) with $d the carried library
# folder (.devlib): unpacks its gzipped libraries and puts on LD_LIBRARY_PATH the carried libraries,
# the CUDA toolkit's, and where the toolkit lacks them the NVRTC (generated Pointwise kernels) and
# cuDNN 9 (fused attention, opened at run time) and NCCL (data-parallel ranks) of the CUDA wheels
# PyTorch uses. NVLink multicast stays off (the device rules): NCCL_NVLS_ENABLE=0.
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$PWD/$d:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Gzipped libraries (scripts/pack_devlib.sh), unpacked where missing or older, through a rename: a
# job already running maps the old file, which overwriting in place would tear (SIGBUS when several
# jobs start at once).
for f in "$d"/*.gz; do
  t=${f%.gz}
  if [ -e "$f" ] && { [ ! -e "$t" ] || [ "$f" -nt "$t" ]; }; then
    gunzip -c "$f" > "$t.tmp.$$" && chmod --reference="$f" "$t.tmp.$$" && mv -f "$t.tmp.$$" "$t"
  fi
done
for lib in libnvrtc.so.1 libcudnn.so.9 libnccl.so.2; do
  if ! ls /usr/local/cuda/lib64/$lib* > /dev/null 2>&1; then
    w=$(python3 -c "import glob, site; print(next(iter(sorted(glob.glob(site.getsitepackages()[0] + '/nvidia/**/$lib*', recursive=True))), ''))" 2> /dev/null)
    [ -n "$w" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$w")"
  fi
done
