#!/usr/bin/env bash
# Data parallelism on a machine with 2 GPUs (device kind nvidia-h100-x2 / nvidia-h200-x2), one call:
#   correctness  the tiny GPT, te and msamp:O2: 2 NCCL ranks of 4 rows each against one process over
#                the 8 rows (200 steps, 50-step moving average within 1%), launched by fp8-run
#                --nproc-per-node and by torchrun; bytes each rank all-reduced per step
#   faults       a rank killed mid-run (the launcher names it, the other exits within 60 s), and the
#                last checkpoint resumed on 2 ranks
#   scaling      SIZE at BATCH per GPU (default 1.3b 8): te-bf16 (gradient all-reduces overlapping the
#                backward pass, and whole before the optimizer: te-bf16-whole) and msamp:O2 plans
#                compiled with --data-parallel, 1 rank against 2 ranks, tokens/s of both GPUs over one
#   sharded      --shard-optimizer 2: the tiny te and msamp:O2 plans against the replicated ones on 2
#                ranks (within 1%), a sharded checkpoint resumed bit for bit, and SIZE's te-bf16-s2
#                plan's step time and memory per rank against te-bf16-dp's (not in the default PARTS)
#   o3           MS-AMP O3 with --shard-optimizer 2 (FP16 masters sharded, weights gathered as FP8):
#                the tiny plan against replicated O3 on 2 ranks (within 1%), and SIZE's msamp-O2-s2
#                and msamp-O3-s2 plans' step time and memory per rank (not in the default PARTS)
#   curves       real text (the device Python's standard library, byte-level): CURVE_SIZE's
#                te-bf16 and msamp:O2 plans (scripts/pack_devlib.sh CURVE_SIZES) on 2 ranks against
#                one process over the combined batch, CURVE_STEPS steps (default 300), 50-step
#                moving average within 1% (not in the default PARTS)
#   peer         PyTorch DDP (bench/ddp_gpt.py: BF16 autocast, SDPA, torch.compile) on 1 and 2 GPUs,
#                same model and per-GPU batch, in the same call
# Usage (on the device, from the repository root, .devlib carried): bench/run_data_parallel.sh [SIZE BATCH]
# PARTS picks the parts (default "correctness faults scaling peer"); RECIPES the scaling plans
# (default "te-bf16 te-bf16-whole msamp-O2"). Writes $OUT/dp.tar.gz (logs, JSON lines, summary.txt).
set -uo pipefail
d=.devlib
. bench/gpu_env.sh
size=${1:-1.3b} batch=${2:-8}
. bench/gpt_sizes.sh
gpt_size "$size" || exit 2 # t: the size's sequence length (the plans' and the peer's)
w=$(mktemp -d)
run=$d/fp8-run
sum=${OUT:-$w}/summary.txt # in $OUT as it grows: a call cut short keeps what ran
say() { echo "$*" | tee -a "$sum"; }
for f in "$d"/dp/*.plan.gz "$d"/plans/licenses.bin; do
  case $f in *.gz) gunzip -c "$f" > "$w/$(basename "${f%.gz}")" ;; *) cp "$f" "$w/" ;; esac
done
data=$w/licenses.bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$sum"

parts=" ${PARTS:-correctness faults scaling peer} "
# Correctness: one process over 8 rows against 2 ranks of 4.
[[ $parts == *" correctness "* ]] && for r in te msamp-O2; do
  $run "$w/tiny-$r-1.plan" --device cuda --data "$data" --steps 200 --quiet --log "$w/tiny-$r-1.jsonl"
  $run "$w/tiny-$r-dp.plan" --device cuda --nproc-per-node 2 --data "$data" --steps 200 --quiet \
    --log "$w/tiny-$r-2.jsonl"
  say "tiny $r: 2 NCCL ranks (fp8-run --nproc-per-node 2) against 1 process over the combined batch:"
  python3 scripts/compare_curves.py "$w/tiny-$r-1.jsonl" "$w/tiny-$r-2.jsonl" --max-ma-dev 0.01 2>&1 | tee -a "$sum"
  python3 -c "import json; r=json.loads(open('$w/tiny-$r-2.jsonl').readlines()[-1]); print('  comm bytes per step per rank:', r['comm_bytes'])" | tee -a "$sum"
done
if [[ $parts == *" correctness "* ]] && command -v torchrun > /dev/null; then
  torchrun --nproc-per-node 2 --master-port 29533 --no-python -- "$run" "$w/tiny-te-dp.plan" --device cuda --data "$data" \
    --steps 200 --quiet --log "$w/tiny-te-torchrun.jsonl" > "$w/torchrun.out" 2>&1
  say "tiny te under torchrun --nproc-per-node 2 (exit $?) against fp8-run --nproc-per-node 2:"
  python3 scripts/compare_curves.py "$w/tiny-te-2.jsonl" "$w/tiny-te-torchrun.jsonl" --max-step-dev 0 2>&1 | tee -a "$sum"
fi

# Faults: kill rank 1 once a checkpoint exists; resume the checkpoint on 2 ranks.
if [[ $parts == *" faults "* ]]; then
python3 test/fp8-run/Inputs/kill_rank.py 1 "$w/ckpt.npz" "$run" "$w/tiny-te-dp.plan" --device cuda \
  --nproc-per-node 2 --data "$data" --steps 100000 --quiet --checkpoint "$w/ckpt.npz" --checkpoint-every 20 \
  2>&1 | sed 's/^/kill: /' | tee -a "$sum"
$run "$w/tiny-te-dp.plan" --device cuda --nproc-per-node 2 --data "$data" --steps 60 --resume "$w/ckpt.npz" \
  --quiet --log "$w/resumed.jsonl"
say "resumed on 2 ranks (exit $?): $(wc -l < "$w/resumed.jsonl") steps logged"
fi

# Scaling: the same per-GPU batch on 1 and 2 GPUs.
[[ $parts == *" scaling "* ]] && for r in ${RECIPES:-te-bf16 te-bf16-whole msamp-O2}; do
  p=$w/gpt-$size-b$batch-$r-dp.plan
  [ -f "$p" ] || continue
  $run "$p" --device cuda --init-params normal:0.02 --benchmark 10 --warmup 3 > "$w/scale-$r-1.json" 2> "$w/scale-$r-1.err"
  $run "$p" --device cuda --init-params normal:0.02 --benchmark 10 --warmup 3 --nproc-per-node 2 \
    > "$w/scale-$r-2.json" 2> "$w/scale-$r-2.err"
  python3 - "$w/scale-$r-1.json" "$w/scale-$r-2.json" "$size" "$batch" "$r" <<'EOF' | tee -a "$sum"
import json, sys
one = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
two = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
if not one or len(two) != 2:
    print(f"{sys.argv[5]}: missing results ({len(one)} and {len(two)} lines)")
    sys.exit()
t1 = one[0]["tokens_per_s"]
t2 = sum(r["tokens_per_s"] for r in two)
slow = max(r["median_ms"] for r in two)
print(f"{sys.argv[3]} b{sys.argv[4]} {sys.argv[5]}: 1 GPU {one[0]['median_ms']:.1f} ms {t1:.0f} tok/s "
      f"{one[0]['device_bytes'] / 2**30:.2f} GiB; 2 GPUs {slow:.1f} ms (slowest rank) {t2:.0f} tok/s; "
      f"scaling {t2 / t1:.3f}x ({one[0]['device_name']})")
EOF
done
# SIZE's plan NAME on 2 ranks (--benchmark): each rank's step time and device memory.
per_rank() {
  local r=$1 p=$w/gpt-$size-b$batch-$1.plan
  [ -f "$p" ] || return 0
  $run "$p" --device cuda --init-params normal:0.02 --benchmark 10 --warmup 3 --nproc-per-node 2 > "$w/ranks-$r.json" 2> "$w/ranks-$r.err"
  python3 -c "
import json
r = [json.loads(l) for l in open('$w/ranks-$r.json') if l.startswith('{')]
print('$size b$batch $r, 2 GPUs:', ', '.join(f\"rank {x['rank']} {x['median_ms']:.1f} ms {x['device_bytes'] / 2**30:.2f} GiB\" for x in r) or 'missing (see ranks-$r.err)')
" | tee -a "$sum"
}
# The sharded optimizer (--shard-optimizer 2): the tiny plans against the replicated ones on 2
# ranks, a sharded checkpoint resumed, and the SIZE plan's step time and memory per rank against
# the replicated plan's (2 GPUs only: a sharded plan runs on exactly 2 ranks).
if [[ $parts == *" sharded "* ]]; then
  for r in te msamp-O2; do
    $run "$w/tiny-$r-dp.plan" --device cuda --nproc-per-node 2 --data "$data" --steps 200 --quiet --log "$w/tiny-$r-dp2.jsonl"
    $run "$w/tiny-$r-s2.plan" --device cuda --nproc-per-node 2 --data "$data" --steps 200 --quiet --log "$w/tiny-$r-s2.jsonl"
    say "tiny $r sharded (--shard-optimizer 2) against replicated, 2 NCCL ranks:"
    python3 scripts/compare_curves.py "$w/tiny-$r-dp2.jsonl" "$w/tiny-$r-s2.jsonl" --max-ma-dev 0.01 2>&1 | tee -a "$sum"
  done
  $run "$w/tiny-te-s2.plan" --device cuda --nproc-per-node 2 --data "$data" --steps 100 --quiet --checkpoint "$w/s2.npz"
  $run "$w/tiny-te-s2.plan" --device cuda --nproc-per-node 2 --data "$data" --steps 200 --quiet --resume "$w/s2.npz" \
    --log "$w/tiny-te-s2-resumed.jsonl"
  say "sharded checkpoint at step 100 resumed to 200 against the uninterrupted run:"
  python3 scripts/compare_curves.py "$w/tiny-te-s2.jsonl" "$w/tiny-te-s2-resumed.jsonl" --max-step-dev 0 2>&1 | tee -a "$sum"
  for r in te-bf16-dp te-bf16-s2; do per_rank "$r"; done
fi
# MS-AMP O3, sharded: the tiny plan against replicated O3 (2 ranks each), then SIZE's O2 and O3
# sharded plans' step time and memory per rank.
if [[ $parts == *" o3 "* ]]; then
  $run "$w/tiny-msamp-O3-dp.plan" --device cuda --nproc-per-node 2 --data "$data" --steps 200 --quiet --log "$w/tiny-o3-dp.jsonl"
  $run "$w/tiny-msamp-O3-s2.plan" --device cuda --nproc-per-node 2 --data "$data" --steps 200 --quiet --log "$w/tiny-o3-s2.jsonl"
  say "tiny msamp:O3 sharded (--shard-optimizer 2) against replicated O3, 2 NCCL ranks:"
  python3 scripts/compare_curves.py "$w/tiny-o3-dp.jsonl" "$w/tiny-o3-s2.jsonl" --max-ma-dev 0.01 2>&1 | tee -a "$sum"
  python3 -c "import json; r=json.loads(open('$w/tiny-o3-s2.jsonl').readlines()[-1]); print('  comm bytes per step per rank:', r['comm_bytes'])" | tee -a "$sum"
  for r in msamp-O2-s2 msamp-O3-s2; do per_rank "$r"; done
fi
# Loss curves on real text: 2 ranks against one process over the combined batch.
if [[ $parts == *" curves "* ]]; then
  cs=${CURVE_SIZE:-350m} steps=${CURVE_STEPS:-300}
  [ -f "$w/text.bin" ] || python3 scripts/make_corpus.py "$w/text.bin" --source python > "$w/text.txt"
  for r in ${CURVE_RECIPES:-te-bf16 msamp-O2}; do
    [ -f "$w/curve-$cs-$r-1.plan" ] || continue
    t0=$(date +%s)
    $run "$w/curve-$cs-$r-1.plan" --device cuda --init-params normal:0.02 --data "$w/text.bin" --steps "$steps" --quiet \
      --log "$w/curve-$cs-$r-1.jsonl" 2> "$w/curve-$cs-$r-1.err"
    t1=$(date +%s)
    $run "$w/curve-$cs-$r-2.plan" --device cuda --init-params normal:0.02 --nproc-per-node 2 --data "$w/text.bin" \
      --steps "$steps" --quiet --log "$w/curve-$cs-$r-2.jsonl" 2> "$w/curve-$cs-$r-2.err"
    say "$cs $r on real text, 2 NCCL ranks against 1 process over the combined batch ($((t1 - t0)) s and $(($(date +%s) - t1)) s):"
    python3 scripts/compare_curves.py "$w/curve-$cs-$r-1.jsonl" "$w/curve-$cs-$r-2.jsonl" --max-ma-dev 0.01 2>&1 | tee -a "$sum"
    python3 -c "
import json
for n in (1, 2):
    r = [json.loads(l) for l in open('$w/curve-$cs-$r-%d.jsonl' % n)]
    print('  %d: steps %d, loss %.4f -> %.4f' % (n, len(r), r[0]['loss'], r[-1]['loss']))
" 2>&1 | tee -a "$sum"
  done
fi
# The peer: PyTorch DDP, BF16 + torch.compile, on 1 and 2 GPUs.
if [[ $parts == *" peer "* ]]; then
  for n in 1 2; do
    torchrun --nproc-per-node $n --master-port 29544 bench/ddp_gpt.py --config "$size" --batch "$batch" \
      --seq "$t" > "$w/ddp-$n.json" 2> "$w/ddp-$n.err"
  done
  python3 - "$w/ddp-1.json" "$w/ddp-2.json" "$size" "$batch" <<'EOF' | tee -a "$sum"
import json, sys
r = [next((json.loads(l) for l in open(p) if l.startswith("{")), None) for p in sys.argv[1:3]]
if None in r:
    print("pytorch ddp: missing results (see ddp-*.err)")
    sys.exit()
print(f"{sys.argv[3]} b{sys.argv[4]} pytorch DDP bf16+compile: 1 GPU {r[0]['median_ms']:.1f} ms "
      f"{r[0]['tokens_per_s']:.0f} tok/s {r[0]['peak_bytes'] / 2**30:.2f} GiB; 2 GPUs {r[1]['median_ms']:.1f} ms "
      f"{r[1]['tokens_per_s']:.0f} tok/s; scaling {r[1]['tokens_per_s'] / r[0]['tokens_per_s']:.3f}x ({r[0]['device_name']})")
EOF
fi
tar -czf "$OUT/dp.tar.gz" -C "$w" .
cat "$sum"
