#!/usr/bin/env bash
# One device call: Octet's CUDA tests, and 3 training steps of the bundled GPT's te plan, under
# compute-sanitizer's memcheck, racecheck, synccheck and initcheck. Each tool's report goes to
# $OUT/cs-TOOL.txt; the summary counts each tool's errors by kernel, Octet's (namespace octet::)
# apart from the libraries' (cuBLASLt, cuDNN). Exit 1 when any tool finds an error in Octet's
# kernels (cuDNN's kernels are left out of synccheck and racecheck, see below). Binaries come from .devlib (scripts/pack_devlib.sh); the past-2^31 tests (CudaLarge*)
# are left out by default: each takes minutes under a tool (FILTER overrides the gtest filter).
#   bash scripts/gpu_sanitize.sh [.devlib]
set -u
d=${1:-.devlib}
. "$(dirname "$0")/../bench/gpu_env.sh"
out=${OUT:-/tmp}
cs=${CS:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
filter=${FILTER:--CudaLarge*}
tools=${TOOLS:-memcheck racecheck synccheck initcheck}
gunzip -kf "$d/plans/te.plan.gz" 2>/dev/null
bad=0
for tool in $tools; do
  log="$out/cs-$tool.txt"
  extra=""
  # cuDNN's warp-specialized attention kernels trip synccheck (named barriers) and racecheck, and
  # a synccheck error aborts the kernel, failing every later test: those two tools skip them.
  [ "$tool" = synccheck ] && extra="--kernel-name-exclude kns=cudnn"
  [ "$tool" = racecheck ] && extra="--racecheck-report hazard --kernel-name-exclude kns=cudnn"
  echo "== $tool" > "$log"
  timeout "${TOOL_TIMEOUT:-900}" "$cs" --tool "$tool" $extra --print-limit 50 "$d/octet-cuda-tests" --gtest_filter="$filter" >> "$log" 2>&1
  echo "== $tool: fp8-run, 3 te steps" >> "$log"
  timeout "${TOOL_TIMEOUT:-900}" "$cs" --tool "$tool" $extra --print-limit 50 "$d/fp8-run" "$d/plans/te.plan" --device cuda \
    --data "$d/plans/licenses.bin" --steps 3 --quiet >> "$log" 2>&1
  python3 - "$log" "$tool" <<'PY' || bad=1
import collections, re, sys
text = open(sys.argv[1], errors="replace").read()
# A report starts with a line "========= <what>"; the kernel is named in a following line
# "=========     at KERNEL(args)+0x..." (racecheck: "...Thread (x,y,z) at KERNEL+0x...").
kernels, pending = collections.Counter(), False
for line in text.splitlines():
    if not line.startswith("========="):
        continue
    body = line[9:].rstrip()
    if body[:1] == " " and body[1:2] not in ("", " ") and "SUMMARY" not in body and not body.startswith(
            (" COMPUTE-SANITIZER", " Saved host backtrace", " Target application")):
        pending = True
    elif pending:
        m = re.search(r"\bat (?:0x[0-9a-f]+ in )?(?:void )?([^(+\s][^(+]*)", body)
        if m:
            name = m.group(1).replace("<unnamed>::", "").strip()
            kernels[name[:140]] += 1
            pending = False
summaries = re.findall(r"(?:ERROR|RACECHECK) SUMMARY: (\d+ (?:errors?|hazards displayed \(\d+ errors))", text)
gtest = re.findall(r"\[  (PASSED|FAILED)  \] (\d+) test", text)
ours = {k: v for k, v in kernels.items() if k.startswith("octet::")}
print("%-10s summaries %s; gtest %s" % (sys.argv[2], summaries, gtest))
for k, v in kernels.most_common():
    print("    %4d reports  %s%s" % (v, k, "   <- Octet's" if k in ours else ""))
sys.exit(1 if ours else 0)
PY
done
echo "octet kernels clean under: $tools -> $([ $bad = 0 ] && echo yes || echo NO)"
exit $bad
