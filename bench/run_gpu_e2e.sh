#!/usr/bin/env bash
# Device-side sequence for the CUDA executor (issue 5), in parts that fit one device call each:
#   check   every kernel of the bundled GPT's training plans against the CPU reference, the
#           200-step GPU training curves (te and te-recent with three batch seeds) and the GPU's
#           continuations of CPU te checkpoints (compared with the CPU's logs by
#           scripts/compare_curves.py here)
#   precision  the bundled GPT's te plan trained 300 steps on the GPU with float32 and with BF16
#           activations (fp8-opt --activation-precision), three batch seeds each, and the float32
#           plan on the CPU reference (the same arithmetic summed in other orders: how far two
#           float32 runs drift apart, the floor under any comparison); the curves are compared by
#           scripts/compare_curves.py (moving averages within 1%) there and here
#   fusions the convergence benchmark's 125M plans (te, te-bf16, ao-bf16, msamp-O2-bf16: CONV_SIZES=125m
#           scripts/pack_devlib.sh) at 8 x 1024, 3 steps from the same weights and batches, with the
#           executor's fused passes and with them off (OCTET_CUDA_CAST_SOURCES=0 OCTET_CUDA_CAST_SUMS=0
#           OCTET_CUDA_CHAINS=0 OCTET_CUDA_FOLD_BIAS=0: each op as the plan has it, the runs that match
#           the CPU reference): every step's loss and gradient norm within 1e-3 (exit 1 otherwise). A
#           fused pass that reads or writes outside its ops' lifetimes shows here first: the one-op
#           check (--check-against-cpu) runs the ops as they were
#   e2e-S   bench/e2e_gpt.py for model size S (125m, 350m, 1.3b, d4096) at its default batch: PyTorch
#           BF16 eager / torch.compile (SDPA) and Octet none / te / ao / msamp:O2 in one process, then a
#           GPU profile of Octet te (by op type, and by op type and shape); the peer comparison at any
#           batch, torchao included, is bench/run_peers.sh; NORM=rms: the RMSNorm GPT (make_gpt_onnx.py --norm rms), Octet te
#           with and without OCTET_CUDA_CAST_SOURCES against PyTorch BF16 with nn.RMSNorm
#   ablate-S  Octet te on model size S with each optimization of issue 5 switched off in turn
#           (generated Pointwise kernels: OCTET_CUDA_JIT=0; BF16 attention: a plan with --attention-precision=tf32;
#           bias gradients in the cast's pass: OCTET_CUDA_CAST_SUMS=0; GEMM biases added by their
#           readers: OCTET_CUDA_FOLD_BIAS=0; casts of one tensor in one pass that computes it (the
#           LayerNorm's and GELU's FP8 output): OCTET_CUDA_CAST_SOURCES=0;
#           fused cast+amax, in-place state updates, cast-transpose, sunk scale updates, fused
#           LayerNorm gradients, attention reading the heads in place and grouped casts: plans compiled without
#           them by scripts/pack_devlib.sh), then all of them, ratios to the full plan;
#           VARIANTS="all no-jit ..." runs only those
# Binaries, libraries and (gzipped) plans are built here and carried in .devlib/ (docs/BENCHMARKS.md
# says how). Logs go to $OUT.
set -u
part=$1
d=${2:-.devlib}
out=${OUT:-/tmp}
. "$(dirname "$0")/gpu_env.sh"
. "$(dirname "$0")/gpt_sizes.sh"
for f in "$d"/plans/*.gz "$d"/bench/*.gz; do [ -e "$f" ] && gunzip -kf "$f"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
case $part in
fusions)
  bad=0
  for r in ${FUSION_PLANS:-te te-bf16 ao-bf16 msamp-O2-bf16}; do
    gunzip -c "$d/conv/125m-$r.plan.gz" > "$out/f-$r.plan"
    for v in fused apart; do
      env $([ $v = apart ] && echo OCTET_CUDA_CAST_SOURCES=0 OCTET_CUDA_CAST_SUMS=0 OCTET_CUDA_CHAINS=0 OCTET_CUDA_FOLD_BIAS=0) \
        "$d/fp8-run" "$out/f-$r.plan" --device cuda --data "$d/plans/licenses.bin" --steps 3 --seed 1 \
        --init-params normal:0.02:1 --labels shifted --log "$out/f-$r-$v.jsonl" --quiet 2> "$out/f-$r-$v.err"
    done
    python3 - "$out/f-$r-fused.jsonl" "$out/f-$r-apart.jsonl" "$r" <<'PY' || bad=1
import json, math, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
close = lambda x, y: x is not None and y is not None and abs(x - y) <= 1e-3 * max(abs(y), 1e-12)
ok = len(a) == len(b) == 3 and all(close(p[k], q[k]) for p, q in zip(a, b) for k in ("loss", "grad_norm"))
print(sys.argv[3], "fused", [(p["loss"], p["grad_norm"]) for p in a], "apart", [(q["loss"], q["grad_norm"]) for q in b],
      "match" if ok else "DIFFER")
sys.exit(0 if ok else 1)
PY
    rm -f "$out/f-$r.plan"
  done
  echo "fusions: exit $bad"
  ;;
precision)
  for seed in 1234 1 2; do
    for r in te-300 te-bf16-300; do
      "$d/fp8-run" "$d/plans/$r.plan" --device cuda --data "$d/plans/licenses.bin" --steps 300 --labels same \
        --seed $seed --log "$out/gpu-$r-s$seed.jsonl" --quiet
      echo "train $r seed $seed: exit $?"
    done
    "$d/fp8-run" "$d/plans/te-300.plan" --device cpu --data "$d/plans/licenses.bin" --steps 300 --labels same \
      --seed $seed --log "$out/cpu-te-300-s$seed.jsonl" --quiet
    echo "train te-300 on the CPU, seed $seed: exit $?"
    echo "seed $seed: BF16 against float32 (GPU)"
    python3 scripts/compare_curves.py "$out/gpu-te-300-s$seed.jsonl" "$out/gpu-te-bf16-300-s$seed.jsonl" --max-ma-dev 0.01
    echo "seed $seed: compare exit $?"
    echo "seed $seed: float32 on the CPU against float32 on the GPU (reordering only)"
    python3 scripts/compare_curves.py "$out/gpu-te-300-s$seed.jsonl" "$out/cpu-te-300-s$seed.jsonl" --max-ma-dev 0.01
    echo "seed $seed: compare exit $?"
  done
  ;;
check)
  for r in none te ao msamp-O2 gpt-small-te gpt-small-te-bf16 gpt-small-ao-bf16 gpt-small-ao-rowwise-bf16 \
    gpt-small-autocast gpt-small-rms-te \
    gpt-small-pad-te; do
    "$d/fp8-run" "$d/plans/$r.plan" --check-against-cpu > "$out/check-$r.txt" 2>&1
    echo "check $r: exit $?"; grep -v ' ok$' "$out/check-$r.txt" | tail -5
  done
  for seed in 1234 1 2; do
    for r in none te te-recent ao msamp-O2; do
      [ "$seed" = 1234 ] || [ "$r" = te ] || [ "$r" = te-recent ] || continue # other seeds: te only
      "$d/fp8-run" "$d/plans/$r.plan" --device cuda --data "$d/plans/licenses.bin" --steps 200 --labels same \
        --seed $seed --log "$out/gpu-$r-s$seed.jsonl" --quiet
      echo "train $r seed $seed: exit $?"
    done
  done
  # The RMSNorm GPT's te plan for 30 steps (the CPU runs the same here: scripts/compare_curves.py).
  "$d/fp8-run" "$d/plans/gpt-small-rms-te.plan" --device cuda --data "$d/plans/licenses.bin" --steps 30 \
    --log "$out/gpu-small-rms-te.jsonl" --quiet
  echo "train gpt-small-rms-te: exit $?"
  # The same state on both: the GPU continues the CPU's te run from its checkpoints after 10 and 31 steps.
  for n in 10 31; do
    cp "$d/plans/te-cpu-$n.npz" "$out/te-cpu-$n.npz"
    "$d/fp8-run" "$d/plans/te.plan" --device cuda --data "$d/plans/licenses.bin" --steps 40 --labels same \
      --resume "$out/te-cpu-$n.npz" --log "$out/gpu-te-from-cpu-$n.jsonl" --quiet
    echo "continue te from CPU step $n: exit $?"
    rm "$out/te-cpu-$n.npz"
  done
  for r in none te; do
    "$d/fp8-run" "$d/plans/$r.plan" --device cuda --benchmark 50 | tee -a "$out/graphs.jsonl"
    OCTET_CUDA_GRAPHS=0 "$d/fp8-run" "$d/plans/$r.plan" --device cuda --benchmark 50 | tee -a "$out/graphs.jsonl"
  done
  OCTET_CUDA_FAKE_CC=80 "$d/fp8-run" "$d/plans/te.plan" --device cuda --benchmark 1 2>&1 | tee "$out/fake-cc.txt"
  ;;
e2e-*)
  s=${part#e2e-}
  gpt_size "$s" || exit 2
  if [ "${NORM:-layer}" = rms ]; then # the RMSNorm GPT: te, and te without the casts computing their sources
    p="$d/bench/gpt-$s-rms-te.plan"
    OCTET_CUDA_CAST_SOURCES=0 python3 bench/e2e_gpt.py --config "$s" --batch $b --seq $t --steps "${STEPS:-10}" \
      --fp8-run "$d/fp8-run" --norm rms --skip-torch --plans te-no-cast-sources="$p" --json "$out/e2e-$s-rms-off.json" \
      2>&1 | tee "$out/e2e-$s-rms-off.txt"
    python3 bench/e2e_gpt.py --config "$s" --batch $b --seq $t --steps "${STEPS:-10}" --fp8-run "$d/fp8-run" \
      --norm rms --plans te="$p" --json "$out/e2e-$s-rms.json" 2>&1 | tee "$out/e2e-$s-rms.txt"
    OCTET_CUDA_PROFILE=2 "$d/fp8-run" "$p" --device cuda --init-params normal:0.02 \
      --benchmark 3 --warmup 1 > /dev/null 2> "$out/profile-$s-rms-te.txt"
    head -40 "$out/profile-$s-rms-te.txt"
    exit 0
  fi
  python3 bench/e2e_gpt.py --config "$s" --batch $b --seq $t --steps "${STEPS:-10}" --fp8-run "$d/fp8-run" \
    --plans none="$d/bench/gpt-$s-none.plan" te="$d/bench/gpt-$s-te.plan" ao="$d/bench/gpt-$s-ao.plan" \
    msamp:O2="$d/bench/gpt-$s-msamp-O2.plan" --json "$out/e2e-$s.json" 2>&1 | tee "$out/e2e-$s.txt"
  OCTET_CUDA_PROFILE=2 "$d/fp8-run" "$d/bench/gpt-$s-te.plan" --device cuda --init-params normal:0.02 \
    --benchmark 3 --warmup 1 > /dev/null 2> "$out/profile-$s-te.txt"
  head -60 "$out/profile-$s-te.txt"
  ;;
ablate-*)
  s=${part#ablate-}
  p="$d/bench/gpt-$s"
  : > "$out/ablate-$s.jsonl"
  variant() { # NAME PLAN [ENV=VALUE]: one fp8-run benchmark, tagged with the variant's name
    local name=$1 plan=$2; shift 2
    case " ${VARIANTS:-$name} " in *" $name "*) ;; *) return 0 ;; esac # VARIANTS="all ...": only those
    env "$@" OCTET_CUDA_VERBOSE=1 "$d/fp8-run" "$plan" --device cuda --init-params normal:0.02 \
      --benchmark "${STEPS:-10}" --warmup 2 2> "$out/ablate-$s-$name.err" |
      sed "s/^{/{\"variant\": \"$name\", /" | tee -a "$out/ablate-$s.jsonl"
    grep -h "generated\|note:" "$out/ablate-$s-$name.err"
  }
  variant all "$p-te.plan"
  variant no-jit "$p-te.plan" OCTET_CUDA_JIT=0
  variant tf32-attention "$p-te-tf32-attention.plan"
  variant no-cast-amax "$p-te-no-fuse-cast-amax.plan"
  variant no-in-place "$p-te-no-in-place-updates.plan"
  variant no-cast-transpose "$p-te-no-cast-transpose.plan"
  variant no-sink-scales "$p-te-no-sink-scale-updates.plan"
  variant no-fuse-grads "$p-te-no-fuse-grads.plan"
  variant no-fold-heads "$p-te-no-fold-head-transposes.plan"
  variant no-cast-sums "$p-te.plan" OCTET_CUDA_CAST_SUMS=0
  variant no-fold-bias "$p-te.plan" OCTET_CUDA_FOLD_BIAS=0
  variant no-group-casts "$p-te-no-group-casts.plan"
  variant no-cast-sources "$p-te.plan" OCTET_CUDA_CAST_SOURCES=0
  variant none-of-them "$p-te-no-all.plan" OCTET_CUDA_JIT=0 OCTET_CUDA_CAST_SUMS=0 \
    OCTET_CUDA_FOLD_BIAS=0 OCTET_CUDA_CAST_SOURCES=0
  python3 - "$out/ablate-$s.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = next(r for r in rows if r["variant"] == "all")
print(f"{'variant':<14}{'ms/step':>10}{'GiB':>8}{'speed vs all':>14}{'memory vs all':>15}")
for r in rows:
    print(f"{r['variant']:<14}{r['median_ms']:>10.1f}{r['device_bytes'] / 2**30:>8.2f}"
          f"{base['median_ms'] / r['median_ms']:>14.3f}{r['device_bytes'] / base['device_bytes']:>15.3f}")
PY
  ;;
esac
