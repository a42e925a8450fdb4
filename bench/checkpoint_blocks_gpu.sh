#!/usr/bin/env bash
# octet-checkpoint-blocks on the GPU (issue 66, item 3): a 4-block GPT (make_gpt_onnx.py --config
# small --layers 4, 4 x 256) compiled here with and without --checkpoint-blocks all
# (.devlib/ck/{te,ao,msamp}[-ck].plan.gz, weights drawn by fp8-run): every op of the checkpointed
# plans against the CPU reference, then 30 steps of each pair on the GPU, whose losses must agree.
#   bash bench/checkpoint_blocks_gpu.sh
set -u
d=.devlib
. "$(dirname "$0")/gpu_env.sh"
gunzip -kf "$d"/ck/*.plan.gz
for r in te ao msamp; do
  "$d/fp8-run" "$d/ck/$r-ck.plan" --device cuda --init-params normal:0.02 --check-against-cpu > "/tmp/ck-$r.check" 2>&1
  echo "$r checkpointed, every op against the CPU: exit $? ($(tail -1 "/tmp/ck-$r.check"))"
  for p in $r $r-ck; do
    "$d/fp8-run" "$d/ck/$p.plan" --device cuda --init-params normal:0.02 --data "$d/ck/corpus.bin" --steps 30 --quiet \
      --log "/tmp/ck-$p.jsonl" || echo "$p: exit $?"
  done
  echo "$r: $(python3 scripts/compare_curves.py "/tmp/ck-$r.jsonl" "/tmp/ck-$r-ck.jsonl" --max-step-dev 0 | tr '\n' ' ')"
done
