#!/usr/bin/env bash
# fp8-run and the libraries it loads on a GPU host, into .devlib/ (carried with `carry: [".devlib"]`):
# liboctet_{runtime,cuda,collective}, Gloo and what Debian's build of it links, libzip, and OpenBLAS
# (the largest, xz-compressed; bench/gpu_env.sh unpacks every .devlib/*.xz). Used by
# scripts/pack_devlib.sh and bench/grad_accum.sh.
#   scripts/pack_devlib_runtime.sh [BUILD_DIR]     (run on the build machine; idempotent)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
cd "$here"
d=.devlib
mkdir -p "$d"
ninja -C "$build" fp8-run octet_cuda octet_runtime octet_collective >/dev/null
cp "$build/bin/fp8-run" "$d/"
cp -L "$build/lib/liboctet_cuda.so" "$build/lib/liboctet_runtime.so.0.1" "$build/lib/liboctet_collective.so.0.1" "$d/"
# The largest, xz-compressed in place (modes kept; a third of gzip's bytes for OpenBLAS, and the
# carry is limited to 64 MiB with the working tree).
rm -f "$d"/*.so*.gz
xz -f -9 -T2 "$d/liboctet_cuda.so" "$d/liboctet_runtime.so.0.1"
# Gloo (the CPU ranks' collectives) and what Debian's build of it links.
for l in libgloo.so.0 libhiredis.so.0.14 libibverbs.so.1 libnl-route-3.so.200 libnl-3.so.200; do
  cp -L "$(ls /usr/lib/$l /lib/x86_64-linux-gnu/$l 2>/dev/null | head -1)" "$d/"
done
for l in libquadmath.so.0 libzip.so.4; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$d/"
done
# OpenBLAS is most of the carried bytes: xz-compressed, unpacked on the device.
for l in libopenblas.so.0 libgfortran.so.5; do
  rm -f "$d/$l"
  [ -f "$d/$l.xz" ] || xz -9 -T2 -c "/lib/x86_64-linux-gnu/$l" > "$d/$l.xz"
done
