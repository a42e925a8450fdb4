#!/usr/bin/env bash
# The whole CPU suite (lit and GoogleTest, through ctest) on a build whose own code runs under
# AddressSanitizer and UndefinedBehaviorSanitizer, in build-asan/ (CUDA off). A heap or stack
# use after free, an overflow or undefined behaviour in Octet's code fails the test that
# hit it; memory bugs that Release builds hide count.
#   scripts/sanitize.sh            (idempotent: reconfigures only when build-asan/ has no build)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
b="$here/build-asan"
bash "$here/scripts/install-deps.sh"
[ -f "$b/build.ninja" ] || cmake -S "$here" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DOCTET_SANITIZE=address,undefined -DOCTET_ENABLE_CUDA=OFF >/dev/null
cmake --build "$b" -j "${JOBS:-$(nproc)}"
# Python tests load liboctet_runtime through ctypes: the ASan runtime comes in with it, after
# Python's own libraries (verify_asan_link_order=0 lets it). Leaks are not checked: LeakSanitizer
# would report Python's and MLIR's allocations of their process's lifetime. The quarantine (freed
# memory held back from reuse, so that an access through a dangling pointer is caught) is 64 MB
# instead of ASan's 256: a freed block stays poisoned until 64 MB more has been freed after it,
# and the larger one cost each of the suite's ~1,000 short tool runs ~0.4 s of page faults.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:verify_asan_link_order=0:quarantine_size_mb=64}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$b" && ctest --output-on-failure -j "${JOBS:-$(nproc)}"
