#!/usr/bin/env bash
# Plans that must train to the same bits on the GPU (issue 66, items 3 and 5): a 4-block GPT
# (make_gpt_onnx.py --config small --layers 4, 4 x 256, weights drawn by fp8-run) compiled here
# as .devlib/ck/NAME.plan.gz: te and msamp:O2 (ms) as fp8-opt writes them, with
# --checkpoint-blocks all (-ck), with --in-place-updates=false (-copy) and with --free-early=false
# (-late). Every op of the -ck plans and of ms against the CPU reference, then 30 steps of each
# pair, whose losses must agree bit for bit.
#   bash bench/checkpoint_blocks_gpu.sh pack         (on the build machine: the plans, into .devlib/ck/)
#   bash bench/checkpoint_blocks_gpu.sh [PAIRS]      (default "te:te-ck ms:ms-ck ms-copy:ms ms-late:ms")
set -u
d=.devlib
if [ "${1:-}" = pack ]; then
  set -e
  py=.venv/bin/python; b=build/bin; w=$(mktemp -d)
  mkdir -p "$d/ck"
  $py bench/make_gpt_onnx.py --config small --layers 4 --batch 4 --seq 256 --vocab 256 --weights absent -o "$w/s4.onnx" >/dev/null
  $py scripts/make_corpus.py "$d/ck/corpus.bin" >/dev/null
  for r in te ms; do
    rec=(--recipe te); [ $r = te ] || rec=(--recipe msamp --opt-level O2)
    vs=("" -ck); [ $r = te ] || vs+=(-copy -late) # what the pairs below compare
    for v in "${vs[@]}"; do
      x=(); [ "$v" != -ck ] || x=(--checkpoint-blocks all); [ "$v" != -copy ] || x=(--in-place-updates=false)
      [ "$v" != -late ] || x=(--free-early=false)
      $b/fp8-opt "$w/s4.onnx" --absent-weights zeros "${rec[@]}" --train --optimizer adamw "${x[@]}" -o "$w/$r$v.plan"
      gzip -9 -c "$w/$r$v.plan" > "$d/ck/$r$v.plan.gz"
    done
  done
  rm -rf "$w"
  exit 0
fi
. "$(dirname "$0")/gpu_env.sh"
gunzip -kf "$d"/ck/*.plan.gz
for p in te-ck ms-ck ms; do
  "$d/fp8-run" "$d/ck/$p.plan" --device cuda --init-params normal:0.02 --check-against-cpu > "/tmp/ck-$p.check" 2>&1
  echo "$p, every op against the CPU: exit $? ($(tail -1 "/tmp/ck-$p.check"))"
done
for pair in ${1:-te:te-ck ms:ms-ck ms-copy:ms ms-late:ms}; do
  for p in "${pair%%:*}" "${pair##*:}"; do
    [ -f "/tmp/ck-$p.jsonl" ] || "$d/fp8-run" "$d/ck/$p.plan" --device cuda --init-params normal:0.02 \
      --data "$d/ck/corpus.bin" --steps 30 --quiet --log "/tmp/ck-$p.jsonl" || echo "$p: exit $?"
  done
  echo "$pair: $(python3 scripts/compare_curves.py "/tmp/ck-${pair%%:*}.jsonl" "/tmp/ck-${pair##*:}.jsonl" --max-step-dev 0 | tr '\n' ' ')"
done
