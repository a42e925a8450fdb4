#!/usr/bin/env bash
# Builds the importer fuzzer with clang (ASan + libFuzzer) in build-fuzz/ and runs it.
#   scripts/fuzz.sh [SECONDS]   (default 600)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-600}
bash "$here/scripts/install-deps.sh"
cmake -S "$here" -B "$here/build-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DOCTET_ENABLE_FUZZER=ON \
  -DOCTET_ENABLE_CUDA=OFF >/dev/null
ninja -C "$here/build-fuzz" octet-import-fuzzer
# Seed corpus: every test model.
corpus="$here/build-fuzz/corpus"
mkdir -p "$corpus"
"$here/.venv/bin/python" "$here/scripts/make_test_models.py" "$here/build-fuzz/seeds" >/dev/null
cp "$here"/build-fuzz/seeds/*.onnx "$here"/test/models/exported/*.onnx "$corpus"/
exec "$here/build-fuzz/bin/octet-import-fuzzer" "$corpus" -max_total_time="$secs" -rss_limit_mb=4096 \
  -max_len=1048576 -print_final_stats=1 -timeout=30
