#!/usr/bin/env bash
# A self-contained fp8-opt for machines without LLVM (the lent GPU hosts, issue 66): linked against
# Debian's static MLIR and LLVM component archives (OCTET_STATIC_MLIR, build-static/), then packed
# into .devlib/ with the shared libraries it still loads that such a host lacks (ONNX's protobuf
# classes, protobuf, yaml-cpp), xz-compressed (bench/gpu_env.sh unpacks them): about 4 MB to carry
# instead of libMLIR and libLLVM's 165 MB.
#   scripts/build_static_fp8opt.sh            (idempotent; ccache keeps its Clang objects)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
b=build-static
# Clang 16, the compiler Debian built the MLIR archives with: an inline function's lambda that both
# they and Octet's objects instantiate (AsmParser::parseTypeList's) is laid out differently by GCC,
# and the linker keeps one copy for both, so a GCC build aborts parsing any MLIR text.
if [ -f "$b/CMakeCache.txt" ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++-16' "$b/CMakeCache.txt"; then
  rm -rf "$b" # configured by an earlier version of this script with GCC
fi
[ -f "$b/build.ninja" ] || cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOCTET_STATIC_MLIR=ON \
  -DOCTET_BUILD_TESTS=OFF -DOCTET_ENABLE_CUDA=OFF -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 >/dev/null
ninja -C "$b" fp8-opt >/dev/null
if ldd "$b/bin/fp8-opt" | grep -q -e libLLVM -e libMLIR; then
  echo "build_static_fp8opt: $b/bin/fp8-opt still loads libLLVM or libMLIR" >&2
  exit 1
fi
d=.devlib
mkdir -p "$d"
strip -o "$d/fp8-opt" "$b/bin/fp8-opt"
xz -f -9 -T2 "$d/fp8-opt"
for l in libonnx.so.1 libonnx_proto.so.1 libprotobuf.so.32 libyaml-cpp.so.0.7; do
  xz -9 -T2 -c "/lib/x86_64-linux-gnu/$l" > "$d/$l.xz"
done
ls -la "$d"/fp8-opt.xz "$d"/libonnx*.xz "$d"/libprotobuf*.xz "$d"/libyaml*.xz | awk '{s += $5} END {print "carried for fp8-opt:", s, "bytes"}'
