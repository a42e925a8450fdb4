#!/usr/bin/env bash
# Issue 66, item 6, on the GPU host: Llama-3-8B (bench/export_hf_bench.py llama3-8b) trained STEPS
# steps on real text (the host's Python sources, byte-level: scripts/make_corpus.py), each recipe
# from the same weights (fp8-run --init-params draws each by seed and name) on the same batches,
# against Octet's BF16 plan (no recipe: autocast BF16, float32 masters and moments). Every plan is
# compiled with --memory-budget auto, so the compiler checkpoints what it must to fit the GPU (the
# BF16 plan's 12 bytes a parameter of state leave its activations little room). One seed: at 8B a
# step is the cost; the comparison is of the mean loss of the last 20 steps.
#   bench/llama_loss.sh [STEPS] [BATCH] [RECIPES]      (300, 1, "none te msamp:O2")
# SEED: a second trajectory (default 1: the weights' seed of --init-params normal:0.02:SEED, the
# batches' --seed 1234 + SEED - 1); logs loss-RECIPE[TAG][-sSEED].jsonl. FLAGS: more fp8-opt flags for
# every plan but the BF16 one (FLAGS="--amax-compute-algo most_recent" TAG=-recent). LABELS: fp8-run's
# --labels (default same: HF's LlamaForCausalLM shifts its labels itself; the runs before 2026-12-03's
# fourth session used fp8-run's default, shifted, which made the task the token after next).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
model=llama3-8b
steps=${1:-300}
batch=${2:-1}
seq=2048
out=${OUT:-/tmp}
d=.devlib
. "$here/bench/gpu_env.sh"
. "$here/bench/llama_export.sh"
[ -f "$out/corpus.bin" ] || python3 "$here/scripts/make_corpus.py" "$out/corpus.bin" --source python-all \
  --max-bytes 20000000 | tail -1
for r in ${3:-none te msamp:O2}; do
  t0=$(date +%s)
  rec=(--activation-precision bf16); [ "$r" = none ] || rec=(--recipe "${r%%:*}") # none: BF16 autocast
  [ "${r#*:}" = "$r" ] || rec+=(--opt-level "${r#*:}")
  [ "$r" = none ] || rec+=(${FLAGS:-})
  r=${r/:/-}; [ "$r" = none ] || r=$r${TAG:-}
  seed=${SEED:-1}; log=$r; [ "$seed" = 1 ] || log=$r-s$seed
  "$d/fp8-opt" "$out/$model.onnx" --absent-weights zeros --input-shape "input_ids=${batch}x$seq,labels=${batch}x$seq" \
    "${rec[@]}" --train --optimizer adamw --clip-grad-norm 1.0 --lr 3e-4 --lr-schedule cosine --warmup-steps 30 \
    --total-steps "$steps" --min-lr 3e-5 --keep-gradients=false --memory-budget auto --report \
    -o "$out/loss-$r.plan" > "$out/loss-$r.report" 2>&1 || { echo "fp8-opt $r: exit $?"; tail -2 "$out/loss-$r.report"; continue; }
  echo "fp8-opt $r: $(($(date +%s) - t0)) s; $(grep -E "checkpointing:|memory budget" "$out/loss-$r.report" | tr '\n' ' ')"
  t0=$(date +%s)
  timeout "${LIMIT:-240}" "$d/fp8-run" "$out/loss-$r.plan" --device cuda --init-params "normal:0.02$([ "$seed" = 1 ] || echo ":$seed")" \
    --seed $((1233 + seed)) --data "$out/corpus.bin" --labels "${LABELS:-same}" --steps "$steps" --quiet --log "$out/loss-$log.jsonl" > "$out/loss-$r.err" 2>&1 || { echo "fp8-run $r: exit $?"; tail -2 "$out/loss-$r.err"; }
  python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = rows[-20:]
print(sys.argv[2], f'{len(rows)} steps in {sys.argv[3]} s, loss at step 1 {rows[0][\"loss\"]:.4f}, mean of steps {last[0][\"step\"]}-{last[-1][\"step\"]} {sum(r[\"loss\"] for r in last) / len(last):.4f}, {sum(r[\"tokens_per_s\"] for r in last) / len(last):.0f} tokens/s')
" "$out/loss-$log.jsonl" "$log" "$(($(date +%s) - t0))" 2> /dev/null
done
for r in ${3:-none te msamp:O2}; do
  r=${r/:/-}; [ "$r" = none ] || r=$r${TAG:-}
  seed=${SEED:-1}; log=$r; [ "$seed" = 1 ] || log=$r-s$seed
  base=none${log#$r}
  [ "$r" = none ] || [ ! -f "$out/loss-$base.jsonl" ] || [ ! -f "$out/loss-$log.jsonl" ] ||
    echo "$log vs BF16: $(python3 "$here/scripts/compare_curves.py" "$out/loss-$base.jsonl" "$out/loss-$log.jsonl" --window 20 | head -1)"
done
