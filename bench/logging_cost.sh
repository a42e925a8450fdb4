#!/usr/bin/env bash
# What fp8-run's progress and JSONL log cost in training throughput (issue: logging without
# cost). One device call: the 125M GPT's te plan (scripts/pack_devlib.sh with SIZES=125m) trains
# STEPS steps on the license corpus with a JSONL log at --log-every 1, 10 (the default) and 1000,
# and without a log, twice each in alternating order; tokens/s is the log's last row (or the
# progress line without a log). Prints each run and each setting's best against --log-every 1000.
#   bash bench/logging_cost.sh [PLAN] [STEPS]
set -u
d=${DEVLIB:-.devlib}
. "$(dirname "$0")/gpu_env.sh"
plan=${1:-$d/bench/gpt-125m-te.plan}
steps=${2:-300}
out=${OUT:-/tmp}
[ -f "$plan" ] || gunzip -kf "$plan.gz"
run() { # EVERY (or "none")
  local log="$out/log-$1.jsonl"
  rm -f "$log"
  if [ "$1" = none ]; then
    "$d/fp8-run" "$plan" --device cuda --init-params normal:0.02 --data "$d/plans/licenses.bin" --steps "$steps" \
      --log-every "$steps" 2>&1 | sed -n 's/.*| \([0-9]*\) tok\/s.*/\1/p' | tail -1
  else
    "$d/fp8-run" "$plan" --device cuda --init-params normal:0.02 --data "$d/plans/licenses.bin" --steps "$steps" \
      --log "$log" --log-every "$1" --quiet && python3 -c "import json,sys; print(round(json.loads(open(sys.argv[1]).readlines()[-1])['tokens_per_s']))" "$log"
  fi
}
declare -A best
for pass in 1 2; do
  for e in 1000 10 1 none; do
    tps=$(run $e)
    echo "pass $pass, --log-every $e: $tps tokens/s"
    [ -n "$tps" ] && { [ -z "${best[$e]:-}" ] || [ "$tps" -gt "${best[$e]}" ]; } && best[$e]=$tps
  done
done
for e in 10 1 none; do
  python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print('--log-every %s: %.0f tokens/s, %.3fx of --log-every 1000 (%.0f)' % (sys.argv[3], a, a / b, b))" \
    "${best[$e]}" "${best[1000]}" "$e"
done
