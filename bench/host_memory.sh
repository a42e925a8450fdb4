#!/usr/bin/env bash
# Host memory and time to the first step of the GPU path at one size (issue 66): for each recipe
# in $RECIPES (default te ao msamp-O2), fp8-run's benchmark of .devlib/bench/gpt-$STEM-RECIPE.plan
# (scripts/pack_devlib.sh with SIZES=STEM, weights absent: drawn on the device by --init-params)
# under /usr/bin/time -v where it exists. Prints one line per recipe: peak host RSS (fp8-run's own
# VmHWM, and time's), seconds to the first step, step time, tokens/s and device bytes; the JSON and
# time's report go to $OUT.
# Usage: bench/host_memory.sh [STEM]   (STEM default 6.7b: GPT-3 6.7B at 4 x 2048)
set -u
stem=${1:-6.7b}
d=.devlib
out=${OUT:-/tmp}
. "$(dirname "$0")/gpu_env.sh"
for r in ${RECIPES:-te ao msamp-O2}; do
  p=$d/bench/gpt-$stem-$r.plan
  [ -f "$p" ] || gunzip -kf "$p.gz"
  tv=(); [ -x /usr/bin/time ] && tv=(/usr/bin/time -v -o "$out/time-$stem-$r.txt")
  "${tv[@]}" "$d/fp8-run" "$p" --device cuda --init-params normal:0.02 --benchmark "${STEPS:-5}" --warmup 2 \
    > "$out/host-$stem-$r.json" 2> "$out/host-$stem-$r.err"
  rc=$?
  python3 - "$out/host-$stem-$r.json" "$out/time-$stem-$r.txt" "$r" "$rc" <<'PY'
import json, re, sys
jf, tf, r, rc = sys.argv[1:5]
try:
    j = json.loads(open(jf).read().strip().splitlines()[-1])
except Exception:
    print(f"{r}: exit {rc}, no result:", open(jf.replace('.json', '.err')).read()[-600:])
    sys.exit(0)
rss = ""
try:
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(tf).read())
    rss = f", time -v {int(m.group(1)) / 1e6:.2f} GB" if m else ""
except OSError:
    pass
print(f"{r}: host peak {j['host_peak_bytes'] / 1e9:.2f} GB{rss}; first step after {j['seconds_to_first_step']:.1f} s; "
      f"{j['median_ms']:.1f} ms/step, {j['tokens_per_s']:.0f} tokens/s; device {j['device_bytes'] / 2**30:.1f} GiB")
PY
done
