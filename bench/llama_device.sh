#!/usr/bin/env bash
# Issue 66, item 4, on the GPU host: a Llama-3-8B-shaped model exported there the way a user does
# (bench/export_hf_bench.py: transformers' LlamaForCausalLM, HF's sdpa attention, the dynamo
# exporter; the weights' external data dropped), compiled there by the self-contained fp8-opt
# (scripts/build_static_fp8opt.sh) and trained there by fp8-run with weights drawn on the GPU.
#   bench/llama_device.sh [MODEL] [BATCH] [RECIPES]     (MODEL default llama3-8b-L2: 2 of its 32 layers)
# RECIPES: te, ao, none or msamp:O2 (a level after the colon); FLAGS: more fp8-opt flags for every
# plan (FLAGS="--memory-budget 79GiB"); TAG: a suffix of the plans' and reports' names.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-llama3-8b-L2}
batch=${2:-4}
seq=${SEQ:-2048}
out=${OUT:-/tmp}
d=.devlib
. "$here/bench/gpu_env.sh"
t0=$(date +%s)
. "$here/bench/llama_export.sh"
for r in ${3:-te}; do
  t0=$(date +%s)
  rec=(); [ "$r" = none ] || rec=(--recipe "${r%%:*}")
  [ "${r#*:}" = "$r" ] || rec+=(--opt-level "${r#*:}")
  r=${r/:/-}${TAG:-}
  "$d/fp8-opt" "$out/$model.onnx" --absent-weights zeros --input-shape "input_ids=${batch}x$seq,labels=${batch}x$seq" \
    "${rec[@]}" --train --optimizer adamw --clip-grad-norm 1.0 --keep-gradients=false ${FLAGS:-} --report \
    -o "$out/$model-$r-b$batch.plan" > "$out/$model-$r.report" 2>&1 || { echo "fp8-opt $r: exit $?"; tail -3 "$out/$model-$r.report"; continue; }
  echo "fp8-opt $r: $(($(date +%s) - t0)) s, plan $(du -h "$out/$model-$r-b$batch.plan" | cut -f1)"
  grep -E "Linear layers in FP8|peak activation|lm_head|attention:|checkpointing:|memory budget" "$out/$model-$r.report" | head -7
  "$d/fp8-run" "$out/$model-$r-b$batch.plan" --device cuda --init-params normal:0.02 --benchmark 5 --warmup 2 \
    > "$out/$model-$r.json" 2> "$out/$model-$r.err" || { echo "fp8-run $r: exit $?"; tail -3 "$out/$model-$r.err"; }
  python3 -c "import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(sys.argv[2], 'batch $batch', f\"{j['median_ms']:.1f} ms/step, {j['tokens_per_s']:.0f} tokens/s, device {j['device_bytes']/2**30:.2f} GiB (predicted {j['predicted_device_bytes']/2**30:.2f}), host peak {j['host_peak_bytes']/1e9:.2f} GB, first step after {j['seconds_to_first_step']:.1f} s\")" "$out/$model-$r.json" "$r" 2>/dev/null
done
