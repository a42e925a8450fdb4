#!/usr/bin/env bash
# Issue 66, item 4, the whole user path on the GPU host: Llama-3-8B exported WITH its weights
# (bench/export_hf_bench.py, KEEP_WEIGHTS=1: transformers' own initialization, 32 GB of float32
# external data, as torch.onnx.export writes past 2 GB), compiled there by the self-contained
# fp8-opt (no --absent-weights: it maps the external data), then trained by fp8-run from the plan's
# weights. Checks: fp8-opt's peak RSS and time (/usr/bin/time -v), the first training step's loss on
# a fixed sequence against PyTorch's float32 loss of the same weights (SAMPLE_NPZ), then STEPS steps on
# real text with the host RSS and tokens/s.
#   bench/llama_weights.sh [BATCH] [RECIPE] [STEPS]       (4, msamp:O2, 30)
# MODEL: export_hf_bench.py's name (default llama3-8b; llama3-8b-L1 for a quick run).
# BIG: a folder with room for the export (32 GB) and the plan (32 GB); default: /tmp, or /dev/shm
# for the export's data when /tmp cannot hold both. The export and plan are deleted at the end
# (KEEP=1 keeps them); the weightless graph stays as $OUT/MODEL.onnx for llama_loss.sh.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
batch=${1:-4}
r=${2:-msamp:O2}
steps=${3:-30}
seq=2048
model=${MODEL:-llama3-8b}
out=${OUT:-/tmp}
d=.devlib
. "$here/bench/gpu_env.sh"
free_gb() { df -Pk "$1" 2> /dev/null | awk 'NR == 2 {print int($4 / 1e6)}'; }
big=${BIG:-/tmp}
echo "free: /tmp $(free_gb /tmp) GB, /dev/shm $(free_gb /dev/shm) GB, host memory $(awk '/MemAvailable/ {print int($2 / 1e6)}' /proc/meminfo) GB available"
exp=$big
[ "$(free_gb "$big")" -ge 70 ] || { [ "$(free_gb /dev/shm)" -ge 34 ] && exp=/dev/shm; }
tv() { if [ -x /usr/bin/time ]; then /usr/bin/time -v -o "$1" "${@:2}"; else "${@:2}"; fi; }
rss() { awk -F': ' '/Maximum resident/ {printf "%.2f GB", $2 / 1e6} /Elapsed/ {printf ", %s wall", $2}' "$1" 2> /dev/null; }
t0=$(date +%s)
KEEP_WEIGHTS=1 SAMPLE_NPZ="$out/llama-sample.npz:${batch}x$seq" EXPORT_DEVICE=cuda \
  python3 "$here/bench/export_hf_bench.py" "$model" "$exp/$model-w.onnx" 2>&1 | tail -2
echo "export with weights: $(($(date +%s) - t0)) s, $(du -sh "$exp/$model-w.onnx.data" | cut -f1) of external data in $exp"
rec=(--recipe "${r%%:*}"); [ "${r#*:}" = "$r" ] || rec+=(--opt-level "${r#*:}")
plan="$big/$model-w-${r/:/-}.plan"
t0=$(date +%s)
tv "$out/time-opt.txt" "$d/fp8-opt" "$exp/$model-w.onnx" --input-shape "input_ids=${batch}x$seq,labels=${batch}x$seq" \
  "${rec[@]}" --train --optimizer adamw --clip-grad-norm 1.0 --lr 3e-4 --keep-gradients=false --memory-budget auto \
  --report -o "$plan" > "$out/weights-opt.report" 2>&1 || { echo "fp8-opt: exit $?"; tail -3 "$out/weights-opt.report"; }
echo "fp8-opt: $(($(date +%s) - t0)) s, peak RSS $(rss "$out/time-opt.txt"), plan $(du -h "$plan" | cut -f1)"
grep -E "Linear layers in FP8|lm_head|checkpointing:|memory budget" "$out/weights-opt.report" | head -5
[ -f "$out/corpus.bin" ] || python3 "$here/scripts/make_corpus.py" "$out/corpus.bin" --source python-all \
  --max-bytes 20000000 | tail -1
# One step on the sample batch: fp8-run prints the graph's outputs, the loss (computed before the
# update) first; the rest (every updated state tensor's summary) is cut off.
tv "$out/time-run1.txt" "$d/fp8-run" "$plan" --device cuda --inputs "$out/llama-sample.npz" 2> "$out/weights-run1.err" |
  head -1 > "$out/weights-sample.txt"
python3 -c "
import sys
ref = float(open(sys.argv[1] + '.loss').read())
line = open(sys.argv[2]).read()
got = float(line.split('=')[-1]) if line.startswith('loss:') else float('nan')
print(f'first step on the sample batch: Octet $r loss {got:.6f}, PyTorch float32 {ref:.6f}, relative {(got - ref) / ref:+.2e}')
" "$out/llama-sample.npz" "$out/weights-sample.txt" 2>&1 | tail -1
echo "  (fp8-run peak RSS $(rss "$out/time-run1.txt"))"
tv "$out/time-run.txt" "$d/fp8-run" "$plan" --device cuda --data "$out/corpus.bin" --labels same --steps "$steps" --quiet \
  --log "$out/weights-train.jsonl" > "$out/weights-run.err" 2>&1 || { echo "fp8-run train: exit $?"; tail -3 "$out/weights-run.err"; }
python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = rows[-10:]
print(f'trained {len(rows)} steps: loss {rows[0][\"loss\"]:.4f} -> {rows[-1][\"loss\"]:.4f}, last 10 steps {sum(r[\"tokens_per_s\"] for r in last) / len(last):.0f} tokens/s')
" "$out/weights-train.jsonl" 2>&1 | tail -1
echo "  (fp8-run peak RSS $(rss "$out/time-run.txt"))"
if [ "${KEEP:-0}" != 1 ]; then
  rm -f "$plan" "$exp/$model-w.onnx.data"
  [ -f "$out/$model.onnx" ] || mv "$exp/$model-w.onnx" "$out/$model.onnx"
fi
