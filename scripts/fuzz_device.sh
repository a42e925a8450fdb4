#!/usr/bin/env bash
# The runtime's fuzz targets (plan, npz, tokens; they link no LLVM) on the device machine's CPU
# cores, one libFuzzer worker per core, seeded from the committed corpora. Built here with
#   FUZZ_RUNTIME_ONLY=1 BUILD_ONLY=1 bash scripts/fuzz.sh && bash scripts/fuzz_device.sh pack
# and carried as .fuzzrt (with the libraries the runtime loads that the device lacks). On the device:
#   bash scripts/fuzz_device.sh run "plan:200 npz:60 tokens:30"    (target:seconds)
# prints, per target, the executions summed over the workers and any crash, OOM or timeout.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = pack ]; then
  rm -rf "$here/.fuzzrt" && mkdir -p "$here/.fuzzrt"
  cp "$here"/build-fuzz-rt/bin/octet-{plan,npz,tokens}-fuzzer "$here/.fuzzrt/"
  cp -L "$here/build-fuzz-rt/lib/liboctet_runtime.so.0.1" "$here/.fuzzrt/"
  strip --strip-debug "$here/.fuzzrt/liboctet_runtime.so.0.1"
  for l in libzip.so.4 libquadmath.so.0; do cp -L "/lib/x86_64-linux-gnu/$l" "$here/.fuzzrt/"; done
  for l in libopenblas.so.0 libgfortran.so.5; do gzip -c "/lib/x86_64-linux-gnu/$l" > "$here/.fuzzrt/$l.gz"; done
  cp -r "$here/test/fuzz/corpus" "$here/.fuzzrt/"
  du -sh "$here/.fuzzrt"
  exit 0
fi
d=.fuzzrt
. "$here/bench/gpu_env.sh" # unpacks the gzipped libraries, puts $d on LD_LIBRARY_PATH
out=${OUT:-/tmp}
cores=$(nproc)
for spec in ${2:-plan:200 npz:60 tokens:30}; do
  t=${spec%%:*} secs=${spec##*:}
  w="$out/fuzz-$t" && mkdir -p "$w/corpus" && cp .fuzzrt/corpus/$t/* "$w/corpus/"
  (cd "$w" && "$here/.fuzzrt/octet-$t-fuzzer" corpus -jobs="$cores" -workers="$cores" -max_total_time="$secs" \
    -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=1048576 -timeout=30 -print_final_stats=1 > /dev/null 2>&1)
  execs=$(cat "$w"/fuzz-*.log 2>/dev/null | sed -n 's/^stat::number_of_executed_units: //p' | awk '{s+=$1} END {print s+0}')
  found=$(ls "$w" | grep -E '^(crash|oom|timeout|leak)-' | tr '\n' ' ')
  echo "$t: $execs executions on $cores workers in ${secs} s; corpus $(ls "$w/corpus" | wc -l) inputs; findings: ${found:-none}"
done
