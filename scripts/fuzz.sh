#!/usr/bin/env bash
# Builds the fuzz targets with clang (ASan + libFuzzer) and runs each for SECONDS.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   targets: import plan npz tokens config (default: all)
# The runtime's readers (plan npz tokens) link no LLVM: FUZZ_RUNTIME_ONLY=1 builds just them in
# build-fuzz-rt/ without the compiler, as the device run does (config needs the full build). Seeds: the committed
# corpora (test/fuzz/corpus/NAME; the importer's are the test models); each run's new inputs stay
# in the build directory's corpus/NAME. JOBS=N runs N workers per target.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-600}
shift || true
targets=("$@")
bash "$here/scripts/install-deps.sh"
if [ "${FUZZ_RUNTIME_ONLY:-0}" = 1 ]; then
  b="$here/build-fuzz-rt"
  cmake -S "$here" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-16 \
    -DCMAKE_CXX_COMPILER=clang++-16 -DOCTET_ENABLE_FUZZER=ON -DOCTET_ENABLE_CUDA=OFF -DOCTET_BUILD_COMPILER=OFF >/dev/null
  [ ${#targets[@]} -gt 0 ] || targets=(plan npz tokens)
else
  b="$here/build-fuzz"
  cmake -S "$here" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-16 \
    -DCMAKE_CXX_COMPILER=clang++-16 -DOCTET_ENABLE_FUZZER=ON -DOCTET_ENABLE_CUDA=OFF >/dev/null
  [ ${#targets[@]} -gt 0 ] || targets=(import plan npz tokens config)
fi
ninja -C "$b" $(printf 'octet-%s-fuzzer ' "${targets[@]}")
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0
for t in "${targets[@]}"; do
  corpus="$b/corpus/$t"
  mkdir -p "$corpus"
  if [ "$t" = import ]; then
    "$here/.venv/bin/python" "$here/scripts/make_test_models.py" "$b/seeds" >/dev/null
    cp "$b"/seeds/*.onnx "$here"/test/models/exported/*.onnx "$corpus"/
  else
    cp "$here/test/fuzz/corpus/$t"/* "$corpus"/
  fi
  echo "== $t"
  "$b/bin/octet-$t-fuzzer" "$corpus" -max_total_time="$secs" -rss_limit_mb=4096 -malloc_limit_mb=2048 \
    -max_len=1048576 -timeout=30 -print_final_stats=1 ${JOBS:+-jobs=$JOBS -workers=$JOBS} 2>&1 | tail -12
done
