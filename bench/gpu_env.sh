#!/usr/bin/env bash
# Sourced by the device-side scripts (run_cuda_checks.sh, run_gpu_e2e.sh) with $d the carried library
# folder (.devlib): unpacks its gzipped libraries and puts on LD_LIBRARY_PATH the carried libraries,
# the CUDA toolkit's, and where the toolkit lacks them the NVRTC (generated Pointwise kernels) and
# cuDNN 9 (fused attention, opened at run time) and NCCL (data-parallel ranks) of the CUDA wheels
# PyTorch uses. NVLink multicast stays off (the device rules): NCCL_NVLS_ENABLE=0.
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$PWD/$d:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Compressed libraries and binaries (scripts/pack_devlib.sh: xz, a third of gzip's bytes for
# OpenBLAS; gzip), unpacked where missing or older, through a rename: a job already running maps
# the old file, which overwriting in place would tear (SIGBUS when several jobs start at once).
# Without an xz command Python's lzma module unpacks.
unxz_c() {
  if command -v xz > /dev/null; then xz -dc "$1"
  else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; fi
}
for f in "$d"/*.gz "$d"/*.xz; do
  t=${f%.*}
  if [ -e "$f" ] && { [ ! -e "$t" ] || [ "$f" -nt "$t" ]; }; then
    case $f in *.xz) unxz_c "$f" ;; *) gunzip -c "$f" ;; esac > "$t.tmp.$$" &&
      chmod --reference="$f" "$t.tmp.$$" && mv -f "$t.tmp.$$" "$t" || { echo "$f: cannot unpack" >&2; rm -f "$t.tmp.$$"; }
  fi
done
for lib in libnvrtc.so.1 libcudnn.so.9 libnccl.so.2; do
  if ! ls /usr/local/cuda/lib64/$lib* > /dev/null 2>&1; then
    w=$(python3 -c "import glob, site; print(next(iter(sorted(glob.glob(site.getsitepackages()[0] + '/nvidia/**/$lib*', recursive=True))), ''))" 2> /dev/null)
    [ -n "$w" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$w")"
  fi
done
