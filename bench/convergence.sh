#!/usr/bin/env bash
# The convergence benchmark (issue 26), device side: each FP8 plan against the float32 baseline on
# real text, several seeds, the same initial weights and batches per seed for every plan.
#
#   bash bench/convergence.sh [DEVLIB]        (plans: CONV_SIZES=125m bash scripts/pack_devlib.sh)
#
# Environment: SIZE (125m), RUNS ("f32 te te-all ao msamp-O2"), SEEDS ("1 2 3"), GPU_RUNS (parallel
# streams, below), STEPS (2000, the plans' cosine length), BUDGET_S (seconds this call may train,
# default 540), STATE (.conv: logs and checkpoints; gitignored, so a warm device keeps it between
# calls), DEVICE (cuda), CORPUS (a token file to use instead of the Python source), SOURCE
# (make_corpus.py's --source, python-all), MAX_BYTES (its --max-bytes, 100000000), EVERY (250:
# checkpoint and held-out loss), CKPT_EVERY (EVERY; 0: no checkpoints, for a machine that will not
# stay warm until the next call: a 125M checkpoint writes 1 GB).
#
# The text is the device Python's source, standard library then site-packages (scripts/make_corpus.py
# --source python-all, the first 100 MB, byte-level: a 2000-step run reads 16.4M tokens, so no text
# is trained on twice in expectation), its last 10% held out. Jobs run seed by seed (every plan of
# seed 1 first), each in pieces: a checkpoint every 250 steps, and a job stopped by the budget resumes
# from its checkpoint at the next call (fp8-run --resume: the same batches as an unbroken run).
# Every call writes $OUT/convergence-logs.tar.gz (all logs so far: RUN-sSEED.jsonl, with the
# held-out loss every 250 steps) and the corpus's description; here,
# bench/convergence_report.py reads them.
set -u
d=${1:-.devlib}
out=${OUT:-/tmp}
size=${SIZE:-125m}
steps=${STEPS:-2000}
state=${STATE:-.conv}
budget=${BUDGET_S:-540}
every=${EVERY:-250}
device=${DEVICE:-cuda}
. "$(dirname "$0")/gpu_env.sh"
mkdir -p "$state/logs" "$state/ckpt"
start=$(date +%s)
[ "$device" = cpu ] || nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for f in "$d"/conv/"$size"-*.plan.gz; do
  p=$state/$(basename "${f%.gz}")
  [ -f "$p" ] || gunzip -c "$f" > "$p"
done
if [ -n "${CORPUS:-}" ] && [ "$CORPUS" != "$state/corpus.bin" ]; then
  [ -f "$CORPUS" ] || { echo "CORPUS=$CORPUS: no such file; give a token file, or leave CORPUS unset to build one" >&2; exit 1; }
  cp "$CORPUS" "$state/corpus.bin" && echo "$CORPUS" > "$state/corpus.txt" || exit 1
elif [ ! -f "$state/corpus.bin" ]; then
  python3 scripts/make_corpus.py "$state/corpus.bin" --source "${SOURCE:-python-all}" \
    --max-bytes "${MAX_BYTES:-100000000}" > "$state/corpus.txt" || exit 1
fi
cat "$state/corpus.txt" | tee "$out/corpus.txt"

# Streams: GPU_RUNS="0:bf16,te-bf16 1:ao-bf16,msamp-O2-bf16" runs, for each entry and each of SEEDS,
# one copy of this script (that GPU only, those runs in order, that seed) at the same time; a GPU may
# appear in several entries ("0:bf16 0:te-bf16"), and an entry may name its own seeds
# ("0:f32@3 0:bf16,te-bf16@1,2": SEEDS for the entries without), and seeds joined by + run in one
# stream, in order ("0:bf16@1+2+3 0:te-bf16@1+2+3": a stream a plan, every plan's seed 1 before any
# seed 2, so a budget that ends early leaves whole seeds). One 125M run leaves most of an H200 idle:
# three streams on it finished 12 runs in 680 s. Each stream has the whole BUDGET_S.
if [ -n "${GPU_RUNS:-}" ]; then
  k=0
  for spec in $GPU_RUNS; do
    runs=${spec#*:} seeds=${SEEDS:-1 2 3}
    case $runs in *@*) seeds=$(echo "${runs#*@}" | tr , ' ') runs=${runs%@*} ;; esac
    for seed in $seeds; do
      k=$((k + 1))
      o=$state/stream-$k && mkdir -p "$o"
      CUDA_VISIBLE_DEVICES=${spec%%:*} GPU_RUNS= RUNS="$(echo "$runs" | tr , ' ')" SEEDS="${seed//+/ }" OUT=$o \
        CORPUS=$state/corpus.bin \
        bash "$0" "$d" > "$state/logs/stream-$k.txt" 2>&1 &
    done
  done
  wait
  grep -h "exit\|budget" "$state"/logs/stream-*.txt
  tar -czf "$out/convergence-logs.tar.gz" -C "$state/logs" .
  ls "$state/logs" | grep -c '\.done$' | sed 's/^/jobs done: /'
  exit 0
fi

for seed in ${SEEDS:-1 2 3}; do
  for r in ${RUNS:-f32 te te-all ao msamp-O2}; do
    job=$size-$r-s$seed
    [ -f "$state/logs/$job.done" ] && continue
    left=$((budget - ($(date +%s) - start)))
    if [ "$left" -lt 30 ]; then echo "budget spent; $job waits for the next call"; break 2; fi
    ck=$state/ckpt/$job.npz
    resume=(); [ -f "$ck" ] && resume=(--resume "$ck")
    ckpt=(--checkpoint "$ck" --checkpoint-every "${CKPT_EVERY:-$every}")
    [ "${CKPT_EVERY:-$every}" = 0 ] && ckpt=()
    timeout --signal=INT "$left" "$d/fp8-run" "$state/$size-$r.plan" --device "$device" --data "$state/corpus.bin" \
      --steps "$steps" --seed "$seed" --init-params "normal:0.02:$seed" --labels shifted \
      --eval-plan "$state/$size-eval.plan" --eval-every "$every" --eval-batches 16 \
      "${ckpt[@]}" "${resume[@]}" \
      --log "$state/logs/$job.jsonl" --log-every "$every" --quiet 2> "$state/logs/$job.err"
    rc=$?
    echo "$job: exit $rc, $(wc -l < "$state/logs/$job.jsonl") log lines, $(($(date +%s) - start)) s into the call"
    tail -2 "$state/logs/$job.err"
    if [ $rc = 0 ]; then touch "$state/logs/$job.done"; rm -f "$ck"; fi
    # A run that failed by itself (exit 1: a non-finite loss, fp8-run names the step) is over; one
    # stopped by the budget (124, 130) or killed by a signal (a crash: 128 + N) runs again next call.
    if [ $rc = 1 ]; then touch "$state/logs/$job.done"; rm -f "$ck"; fi
  done
done
tar -czf "$out/convergence-logs.tar.gz" -C "$state/logs" .
ls "$state/logs" | grep -c '\.done$' | sed 's/^/jobs done: /'
