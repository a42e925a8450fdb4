#!/usr/bin/env bash
# Gradient accumulation on the GPU (issue 66, item 2), in two steps:
#   bench/grad_accum.sh pack [BUILD]   on the build machine: fp8-run, liboctet_* and the plans into
#                                      .devlib/ga (carry .devlib)
#   bench/grad_accum.sh run            on the device: (1) the small GPT (256 tokens) at 8 rows a step
#                                      against 4 micro-batches of 2, none and te, 150 steps each on the
#                                      bundled corpus, and the accumulating plans' ops against the CPU
#                                      (--check-against-cpu), and te's 4 micro-batches with each weight
#                                      cast once a step (--reuse-weight-casts, the default) against
#                                      cast in every micro-batch: the same losses; (2) the 1.3B GPT at
#                                      8 x 2048 tokens a step as one batch, 2 x 4 and 4 x 2 (te and ao),
#                                      the last two also with --reuse-weight-casts=false: step time,
#                                      tokens/s and device memory. Results in $OUT (ga-*.jsonl, ga-*.json).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-run}
d=.devlib
if [ "$mode" = pack ]; then
  set -e
  build=${2:-build}
  cd "$here"
  mkdir -p "$d/ga" "$build/bench"
  bash scripts/pack_devlib_runtime.sh "$build" # fp8-run and its libraries
  ninja -C "$build" fp8-opt >/dev/null
  opt="$build/bin/fp8-opt"
  py=.venv/bin/python
  [ -f "$d/ga/licenses.bin" ] || "$py" scripts/make_corpus.py "$d/ga/licenses.bin" >/dev/null
  train=(--train --optimizer adamw --lr 2e-3 --clip-grad-norm 1.0 --weight-decay 0.01)
  for b in 8 2; do
    "$py" bench/make_gpt_onnx.py --config small --batch $b --seq 256 --vocab 256 \
      -o "$build/bench/ga-small-b$b.onnx" >/dev/null
  done
  for r in none te; do
    rec=(); [ $r = none ] || rec=(--recipe $r)
    "$opt" "$build/bench/ga-small-b8.onnx" --absent-weights zeros "${rec[@]}" "${train[@]}" -o "$d/ga/small-$r-b8.plan"
    "$opt" "$build/bench/ga-small-b2.onnx" --absent-weights zeros "${rec[@]}" "${train[@]}" --grad-accum-steps 4 \
      -o "$d/ga/small-$r-b2x4.plan"
  done
  "$opt" "$build/bench/ga-small-b2.onnx" --absent-weights zeros --recipe te "${train[@]}" --grad-accum-steps 4 \
    --reuse-weight-casts=false -o "$d/ga/small-te-b2x4-every.plan"
  for b in ${GA_BATCHES-8 4 2}; do
    g="$build/bench/gpt-1.3b-b$b.onnx"
    [ -f "$g" ] || "$py" bench/make_gpt_onnx.py --config 1.3b --batch $b --seq 2048 -o "$g" >/dev/null
    for r in te ao; do
      "$opt" "$g" --absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 --keep-output-layer=false \
        --recipe $r --keep-gradients=false --grad-accum-steps $((8 / b)) -o "$d/ga/1.3b-$r-b${b}x$((8 / b)).plan"
      [ $b = 8 ] || "$opt" "$g" --absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 \
        --keep-output-layer=false --recipe $r --keep-gradients=false --grad-accum-steps $((8 / b)) \
        --reuse-weight-casts=false -o "$d/ga/1.3b-$r-b${b}x$((8 / b))-every.plan"
    done
  done
  gzip -f "$d"/ga/*.plan
  du -sh "$d"
  exit 0
fi

out=${OUT:-/tmp}
. "$here/bench/gpu_env.sh"
for f in "$d"/ga/*.plan.gz; do gunzip -kf "$f"; done
run=("$d/fp8-run" --device cuda)
echo "== small GPT, 150 steps: one batch of 8 against 4 micro-batches of 2 (none: 1e-4 a step; te: the 10-step"
echo "   average within 5%, its amax histories taking 4 entries a step instead of 1)"
for r in none te; do
  for p in b8 b2x4; do
    "${run[@]}" "$d/ga/small-$r-$p.plan" --init-params normal:0.02 --data "$d/ga/licenses.bin" --steps 150 --labels same --quiet \
      --log "$out/ga-small-$r-$p.jsonl" || echo "small $r $p: exit $?"
  done
  tol=(--max-step-dev 1e-4); [ $r = none ] || tol=(--max-ma-dev 0.05)
  python3 "$here/scripts/compare_curves.py" "$out/ga-small-$r-b8.jsonl" "$out/ga-small-$r-b2x4.jsonl" --window 10 "${tol[@]}"
  "${run[@]}" "$d/ga/small-$r-b2x4.plan" --init-params normal:0.02 --check-against-cpu 2>&1 | tail -2
done
echo "== small GPT te, 4 micro-batches of 2: each weight cast once a step against in every micro-batch"
"${run[@]}" "$d/ga/small-te-b2x4-every.plan" --init-params normal:0.02 --data "$d/ga/licenses.bin" --steps 150 \
  --labels same --quiet --log "$out/ga-small-te-b2x4-every.jsonl" || echo "small te b2x4-every: exit $?"
python3 - "$out/ga-small-te-b2x4.jsonl" "$out/ga-small-te-b2x4-every.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
d = max(abs(x["loss"] - y["loss"]) for x, y in zip(a, b))
g = max(abs(x["grad_norm"] - y["grad_norm"]) for x, y in zip(a, b))
print(f"{len(a)} and {len(b)} steps; largest loss difference {d:.3g}, gradient norm {g:.3g}")
PY
echo "== 1.3B GPT, 8 x 2048 tokens a step"
for r in te ao; do
  for p in b8x1 b4x2 b2x4 b4x2-every b2x4-every; do
    "${run[@]}" "$d/ga/1.3b-$r-$p.plan" --init-params normal:0.02 --benchmark 5 --warmup 2 \
      > "$out/ga-1.3b-$r-$p.json" 2> "$out/ga-1.3b-$r-$p.err"
    python3 - "$out/ga-1.3b-$r-$p.json" "$r $p" <<'PY'
import json, sys
try:
    j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception:
    print(sys.argv[2], "no result:", open(sys.argv[1].replace('.json', '.err')).read()[-600:])
    sys.exit(0)
print(f"{sys.argv[2]}: {j['median_ms']:.1f} ms/step ({j['grad_accum_steps']} micro-batches), "
      f"{j['tokens_per_s']:.0f} tokens/s; device {j['device_bytes'] / 2**30:.1f} GiB")
PY
  done
done
