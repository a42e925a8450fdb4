#!/usr/bin/env bash
# Packs what a GPU run through the `device` tool needs into .devlib/ (ignored by git, carried
# with `carry: [".devlib"]`): fp8-run, the CUDA tests and micro-benchmark, liboctet_{cuda,runtime}
# and the non-system libraries they load, and gzipped plans:
#   (the largest xz-compressed: bench/gpu_env.sh unpacks every .devlib/*.xz and *.gz)
#   .devlib/plans/   the bundled byte-level GPT (examples/bytegpt) compiled for 200 training steps
#                    with each recipe (and te with Accelerate's amax_compute_algo most_recent), the corpus it
#                    trains on, and CPU checkpoints of the te run after 10 and 31 steps
#   .devlib/bench/   the end-to-end GPT benchmark plans (bench/make_gpt_onnx.py graphs without weight
#                    files) for each SIZE[:BATCH] in $SIZES (default: 125m 350m 1.3b 1.3b:8 d4096:4) and
#                    recipe of $BENCH_RECIPES (default none te ao msamp:O2; ao:rowwise gives
#                    gpt-SIZE-ao-rowwise.plan) (and each of $BF16_RECIPES, default te, with --activation-precision=bf16:
#                    `te-bf16`), compiled with
#                    $OPT_FLAGS (default --keep-gradients=false: each gradient is freed after its update),
#                    and te plans of the RMSNorm variants for each size in $RMS_SIZES (default: 1.3b)
# Usage: scripts/pack_devlib.sh [BUILD_DIR]      (run on the build machine; idempotent)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
cd "$here"
. bench/gpt_sizes.sh
d=.devlib
mkdir -p "$d/plans" "$d/bench" "$build/bench"
bash scripts/pack_devlib_runtime.sh "$build" # fp8-run and its libraries
ninja -C "$build" fp8-opt octet-cuda-tests octet-cuda-bench >/dev/null
cp "$build/bin/octet-cuda-bench" "$build/test/octet-cuda-tests" "$d/"
rm -f "$d/octet-cuda-tests.gz"
xz -f -9 -T2 "$d/octet-cuda-tests"

opt="$build/bin/fp8-opt"
py=.venv/bin/python
recipes=(none te ao msamp:O2)
args() { [ "$1" = none ] || echo "--recipe $1"; }
name() { echo "${1/:/-}"; }

train=(--train --optimizer adamw --lr 2e-3 --lr-schedule cosine --warmup-steps 30 --total-steps 200
       --min-lr 2e-4 --clip-grad-norm 1.0 --weight-decay 0.01)
for r in "${recipes[@]}"; do
  # shellcheck disable=SC2046
  "$opt" examples/bytegpt/bytegpt.onnx $(args "$r") "${train[@]}" -o "$d/plans/$(name "$r").plan"
  gzip -f "$d/plans/$(name "$r").plan"
done
# te with Accelerate's default amax_compute_algo, most_recent (the plans above use fp8-opt's, max),
# and CPU checkpoints of the te plan after 10 and 31 steps, from which the GPU continues the CPU's
# own run (bench/run_gpu_e2e.sh check).
"$opt" examples/bytegpt/bytegpt.onnx --recipe te --amax-compute-algo most_recent "${train[@]}" -o "$d/plans/te-recent.plan"
gzip -f "$d/plans/te-recent.plan"
# te for 300 steps with float32 and with BF16 activations (bench/run_gpu_e2e.sh precision).
train300=("${train[@]/200/300}")
"$opt" examples/bytegpt/bytegpt.onnx --recipe te --activation-precision=f32 "${train300[@]}" -o "$d/plans/te-300.plan"
"$opt" examples/bytegpt/bytegpt.onnx --recipe te --activation-precision=bf16 "${train300[@]}" \
  -o "$d/plans/te-bf16-300.plan"
gzip -f "$d/plans/te-300.plan" "$d/plans/te-bf16-300.plan"
[ -f "$d/plans/licenses.bin" ] || "$py" scripts/make_corpus.py "$d/plans/licenses.bin"
gunzip -c "$d/plans/te.plan.gz" > "$build/bench/te.plan"
for n in 10 31; do
  "$build/bin/fp8-run" "$build/bench/te.plan" --device cpu --data "$d/plans/licenses.bin" --steps $n --labels same \
    --checkpoint "$d/plans/te-cpu-$n.npz" --quiet
done
# A small GPT (128-wide heads, 256 tokens) whose fused attention the GPU check compares with the CPU.
"$py" bench/make_gpt_onnx.py --config small --batch 2 --seq 256 --vocab 256 --weights random \
  -o "$build/bench/gpt-small.onnx" >/dev/null
"$opt" "$build/bench/gpt-small.onnx" --recipe te --activation-precision=f32 "${train[@]}" -o "$d/plans/gpt-small-te.plan"
gzip -f "$d/plans/gpt-small-te.plan"
# The same with BF16 activations (--activation-precision=bf16): cuDNN attention, the LayerNorm
# gradient and the FP8 GEMMs' epilogues on BF16 tensors, compared op by op with the CPU.
"$opt" "$build/bench/gpt-small.onnx" --recipe te --activation-precision=bf16 "${train[@]}" \
  -o "$d/plans/gpt-small-te-bf16.plan"
gzip -f "$d/plans/gpt-small-te-bf16.plan"
# No recipe with BF16 activations (BF16 autocast, the convergence benchmark's baseline): every
# Linear's GEMMs on BF16 operands, compared op by op with the CPU.
"$opt" "$build/bench/gpt-small.onnx" --activation-precision=bf16 "${train[@]}" -o "$d/plans/gpt-small-autocast.plan"
gzip -f "$d/plans/gpt-small-autocast.plan"
# Its output layer in FP8 over 4 chunks of 128 tokens (octet-chunk-loss): the loss, its gradient
# and the weight gradient's in-place accumulation compared with the CPU.
"$opt" "$build/bench/gpt-small.onnx" --recipe te --activation-precision=bf16 --keep-output-layer=false \
  --loss-chunk-bytes=65536 "${train[@]}" -o "$d/plans/gpt-small-te-chunks.plan"
gzip -f "$d/plans/gpt-small-te-chunks.plan"
# ao with BF16 activations: current scaling's amaxes and casts (with transposed copies), its first
# and last layers' BF16 GEMMs and the BF16 logits they give.
"$opt" "$build/bench/gpt-small.onnx" --recipe ao --activation-precision=bf16 "${train[@]}" \
  -o "$d/plans/gpt-small-ao-bf16.plan"
gzip -f "$d/plans/gpt-small-ao-bf16.plan"
# ao rowwise with BF16 activations: rowwise amaxes, scales and casts and the rowwise GEMMs
# (cuBLASLt's outer-vector scales), compared op by op with the CPU.
"$opt" "$build/bench/gpt-small.onnx" --recipe ao --ao-recipe rowwise --activation-precision=bf16 "${train[@]}" \
  -o "$d/plans/gpt-small-ao-rowwise-bf16.plan"
gzip -f "$d/plans/gpt-small-ao-rowwise-bf16.plan"
# A vocabulary of 250, no multiple of 8 (GPT-2's 50257 in small): the kept lm_head's BF16 GEMMs
# over N padded to 256 (--pad-kept-gemms), the result sliced back, compared op by op with the CPU.
"$py" bench/make_gpt_onnx.py --config small --batch 2 --seq 256 --vocab 250 --weights random \
  -o "$build/bench/gpt-small-v250.onnx" >/dev/null
"$opt" "$build/bench/gpt-small-v250.onnx" --recipe te "${train[@]}" -o "$d/plans/gpt-small-pad-te.plan"
gzip -f "$d/plans/gpt-small-pad-te.plan"
# Its RMSNorm variant (HF's LlamaRMSNorm ops): the casts that compute the normalized tensor.
"$py" bench/make_gpt_onnx.py --config small --batch 2 --seq 256 --vocab 256 --weights random --norm rms \
  -o "$build/bench/gpt-small-rms.onnx" >/dev/null
"$opt" "$build/bench/gpt-small-rms.onnx" --recipe te "${train[@]}" -o "$d/plans/gpt-small-rms-te.plan"
gzip -f "$d/plans/gpt-small-rms-te.plan"

# The convergence benchmark's plans (bench/convergence.sh) for each size in $CONV_SIZES (default
# none): the byte-level GPT (vocabulary 256) at 8 x 1024, AdamW (betas 0.9/0.95, weight decay 0.1),
# clipping at 1.0, 100 warm-up steps and a cosine to a tenth of the size's peak rate over $CONV_STEPS
# (2000) steps: GPT-3's (its Table 2.1), 6e-4 for 125M and 3e-4 for 350M ($CONV_LR overrides: at
# 6e-4 the 350M trained worse than the 125M and its runs parted by up to 10% between plans of one
# seed, docs/BENCHMARKS.md);
# the float32 baseline (no recipe), te (the output layer kept with BF16 GEMMs, the default),
# te-f32head (kept with float32 GEMMs: --kept-gemm-precision=f32), te-all (every Linear in
# FP8: --keep-output-layer=false, Accelerate's rules), ao (tensorwise, first and last kept),
# msamp:O2 (with MS-AMP's storage, --msamp-float32=none: the logs' msamp-O2 plans predate the
# float32-weight default, which msamp-O2-w32-bf16 is), and the float32 forward plan that computes
# the held-out loss; and te-bf16, ao-bf16 and msamp-O2-bf16, the same recipes with BF16 activations (--activation-precision=bf16, what the
# speed benchmarks run), against their float32-activation twins and bf16, the BF16 baseline (no
# recipe with BF16 activations: PyTorch's BF16 autocast, every Linear's GEMMs on BF16 operands).
for s in ${CONV_SIZES-}; do
  case $s in 350m) lr=3e-4 ;; *) lr=6e-4 ;; esac
  lr=${CONV_LR:-$lr}
  conv=(--absent-weights zeros --train --optimizer adamw --lr "$lr" --beta2 0.95 --weight-decay 0.1 --clip-grad-norm 1.0
        --lr-schedule cosine --warmup-steps 100 --total-steps "${CONV_STEPS:-2000}"
        --min-lr "$(python3 -c "print('%g' % ($lr / 10))")" --keep-gradients=false)
  g="$build/bench/gpt-$s-v256-b8.onnx"
  mkdir -p "$d/conv"
  [ -f "$g" ] || "$py" bench/make_gpt_onnx.py --config "$s" --batch 8 --seq 1024 --vocab 256 -o "$g" >/dev/null
  "$opt" "$g" "${conv[@]}" -o "$d/conv/$s-f32.plan"
  f32=(--activation-precision=f32) # the float32-activation twins (an FP8 recipe's default is bf16)
  "$opt" "$g" "${conv[@]}" "${f32[@]}" --recipe te -o "$d/conv/$s-te.plan"
  "$opt" "$g" "${conv[@]}" "${f32[@]}" --recipe te --kept-gemm-precision=f32 -o "$d/conv/$s-te-f32head.plan"
  "$opt" "$g" "${conv[@]}" "${f32[@]}" --recipe te --keep-output-layer=false -o "$d/conv/$s-te-all.plan"
  "$opt" "$g" "${conv[@]}" "${f32[@]}" --recipe ao --round-scales-to-power-of-2=false -o "$d/conv/$s-ao.plan"
  "$opt" "$g" "${conv[@]}" "${f32[@]}" --recipe msamp:O2 --msamp-float32=none -o "$d/conv/$s-msamp-O2.plan"
  "$opt" "$g" "${conv[@]}" --activation-precision=bf16 -o "$d/conv/$s-bf16.plan"
  for r in te ao msamp:O2; do
    # MS-AMP's storage and torchao's unrounded scales, as the logs' msamp-O2 and ao ran
    ms=(); [ "$r" = msamp:O2 ] && ms=(--msamp-float32=none); [ "$r" = ao ] && ms=(--round-scales-to-power-of-2=false)
    "$opt" "$g" "${conv[@]}" --recipe "$r" "${ms[@]}" --activation-precision=bf16 -o "$d/conv/$s-${r/:/-}-bf16.plan"
  done
  # te-recent-bf16: Accelerate's amax_compute_algo, the most recent amax (one step late: clipped
  # whenever a tensor's amax grows; fp8-opt's default is the history's max, TransformerEngine's);
  # msamp-O1-bf16: MS-AMP's FP16 weights with float32 moments (O2's moments in FP8 and FP16);
  # msamp-O2-sr-bf16: O2 with its updated FP16 weights rounded stochastically (MS-AMP's: to nearest);
  # msamp-O2-w32-bf16 and msamp-O2-g32-bf16: O2 with float32 weights, or float32 weight gradients
  # (--msamp-float32), which part of MS-AMP's storage costs loss; msamp-O1-wg32-bf16: O1 with both,
  # float32 storage throughout (O1's default since its FP8 weight gradients cost loss);
  # msamp-O1-e5m2-bf16: O1's float32 weights with E5M2 weight gradients (not better than E4M3)
  "$opt" "$g" "${conv[@]}" --recipe te --amax-compute-algo most_recent --activation-precision=bf16 -o "$d/conv/$s-te-recent-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe msamp:O1 --msamp-float32=none --activation-precision=bf16 -o "$d/conv/$s-msamp-O1-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe msamp:O2 --msamp-float32=none --msamp-weight-rounding stochastic --activation-precision=bf16 \
    -o "$d/conv/$s-msamp-O2-sr-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe msamp:O2 --msamp-float32 weights --activation-precision=bf16 -o "$d/conv/$s-msamp-O2-w32-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe msamp:O2 --msamp-float32 gradients --activation-precision=bf16 -o "$d/conv/$s-msamp-O2-g32-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe msamp:O1 --msamp-float32 weights,gradients --activation-precision=bf16 \
    -o "$d/conv/$s-msamp-O1-wg32-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe msamp:O1 --msamp-float32 weights --fp8-all-reduce-format e5m2 --activation-precision=bf16 \
    -o "$d/conv/$s-msamp-O1-e5m2-bf16.plan"
  # ao-p2-bf16: ao tensorwise with its scales rounded down to powers of 2 (torchao's
  # round_scales_to_power_of_2; Octet's default): a tensor's FP8 grid moves only when its amax
  # crosses a power of 2
  "$opt" "$g" "${conv[@]}" --recipe ao --round-scales-to-power-of-2 --activation-precision=bf16 -o "$d/conv/$s-ao-p2-bf16.plan"
  # The benchmark's other recipes, each at its default: ao rowwise, msamp O3 (float32 masters:
  # msamp-O3-w32-bf16; msamp-O3-bf16 MS-AMP's FP16 masters, as the logs' msamp-O3 ran), te's scaling
  # with MS-AMP's O2 storage (te+msamp:O2); and msamp O1's former default (float32 weights, FP8 weight
  # gradients: msamp-O1-w32-bf16; its default now is msamp-O1-wg32-bf16 above)
  "$opt" "$g" "${conv[@]}" --recipe ao --ao-recipe rowwise --activation-precision=bf16 -o "$d/conv/$s-ao-rowwise-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe msamp:O1 --msamp-float32 weights --activation-precision=bf16 -o "$d/conv/$s-msamp-O1-w32-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe msamp:O3 --activation-precision=bf16 -o "$d/conv/$s-msamp-O3-w32-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe msamp:O3 --msamp-float32=none --activation-precision=bf16 -o "$d/conv/$s-msamp-O3-bf16.plan"
  "$opt" "$g" "${conv[@]}" --recipe te+msamp:O2 --activation-precision=bf16 -o "$d/conv/$s-te-msamp-O2-bf16.plan"
  "$opt" "$g" --absent-weights zeros -o "$d/conv/$s-eval.plan"
  gzip -f "$d"/conv/"$s"-*.plan
done
# The speed benchmarks' plans convert every Linear, the lm_head too, as their torchao peer does
# (convert_to_float8_training on the whole model): Octet's default keeps the output layer in high
# precision (--keep-output-layer), which the convergence benchmark (bench/convergence.sh) measures.
peer=(--keep-output-layer=false)
# SIZE or SIZE:BATCH; a batch other than the size's default is part of the plans' names (gpt-1.3b-b8-te.plan).
for spec in ${SIZES-125m 350m 1.3b 1.3b:8 d4096:4}; do
  s=${spec%%:*}
  gpt_size "$s" || exit 2
  stem=gpt-$s
  if [ "$spec" != "$s" ] && [ "${spec#*:}" != "$b" ]; then b=${spec#*:}; stem=gpt-$s-b$b; fi
  g="$build/bench/$stem.onnx"
  [ -f "$g" ] || "$py" bench/make_gpt_onnx.py --config "$s" --batch "$b" --seq "$t" -o "$g"
  for r in ${BENCH_RECIPES-${recipes[*]}}; do
    # shellcheck disable=SC2046
    "$opt" "$g" --absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 "${peer[@]}" $(args "$r") \
      ${OPT_FLAGS---keep-gradients=false} -o "$d/bench/$stem-$(name "$r").plan"
    gzip -f "$d/bench/$stem-$(name "$r").plan"
  done
  # Each recipe of $BF16_RECIPES (default te) with BF16 activations (run_peers.sh RECIPES="te te-bf16").
  for r in ${BF16_RECIPES-te}; do
    "$opt" "$g" --absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 "${peer[@]}" --recipe "$r" \
      --activation-precision=bf16 ${OPT_FLAGS---keep-gradients=false} -o "$d/bench/$stem-$(name "$r")-bf16.plan"
    gzip -f "$d/bench/$stem-$(name "$r")-bf16.plan"
  done
done
# The 1.3B te plan without each compiler-side optimization of issue 5 (fourth and sixth passes), for
# the ablation of bench/run_gpu_e2e.sh (the generated Pointwise kernels are switched off at run time).
case " ${SIZES-125m 350m 1.3b 1.3b:8 d4096:4} " in *" 1.3b "*)
  for v in fuse-cast-amax in-place-updates cast-transpose sink-scale-updates fuse-grads fold-head-transposes group-casts; do
    "$opt" "$build/bench/gpt-1.3b.onnx" --absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 "${peer[@]}" \
      --recipe te ${OPT_FLAGS---keep-gradients=false} --$v=false -o "$d/bench/gpt-1.3b-te-no-$v.plan"
    gzip -f "$d/bench/gpt-1.3b-te-no-$v.plan"
  done
  "$opt" "$build/bench/gpt-1.3b.onnx" --absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 "${peer[@]}" \
    --recipe te ${OPT_FLAGS---keep-gradients=false} --attention-precision=tf32 -o "$d/bench/gpt-1.3b-te-tf32-attention.plan"
  gzip -f "$d/bench/gpt-1.3b-te-tf32-attention.plan"
  "$opt" "$build/bench/gpt-1.3b.onnx" --absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 "${peer[@]}" \
    --recipe te ${OPT_FLAGS---keep-gradients=false} --fuse-cast-amax=false --in-place-updates=false \
    --sink-scale-updates=false --fuse-grads=false --fold-head-transposes=false --group-casts=false \
    --attention-precision=tf32 -o "$d/bench/gpt-1.3b-te-no-all.plan"
  rm -f "$d/bench/gpt-1.3b-te-no-both.plan.gz"
  gzip -f "$d/bench/gpt-1.3b-te-no-all.plan" ;;
esac
# Hugging Face models as users export them (HF's default attention, dynamic axes, weights absent),
# for each NAME[:BATCH] in $HF_SIZES (default: none; hf-gpt2, hf-llama-300m): te, ao and msamp:O2
# plans at the size's batch and sequence (bench/run_peers.sh NAME BATCH). The export needs PyTorch
# and transformers: python bench/export_hf_bench.py NAME build/bench/NAME.onnx (gpt2, llama-300m).
for spec in ${HF_SIZES-}; do
  s=${spec%%:*}
  gpt_size "$s" || exit 2
  [ "$spec" = "$s" ] || b=${spec#*:}
  g="$build/bench/$s.onnx"
  [ -f "$g" ] || { echo "$g: export it first: python bench/export_hf_bench.py ${s#hf-} $g (needs PyTorch)" >&2; exit 2; }
  stem=gpt-$s
  [ "$spec" = "$s" ] || stem=gpt-$s-b$b
  for r in te ao msamp:O2; do
    "$opt" "$g" --absent-weights zeros --input-shape input_ids=${b}x$t,labels=${b}x$t --train --optimizer adamw \
      --clip-grad-norm 1.0 --keep-gradients=false "${peer[@]}" --recipe "$r" -o "$d/bench/$stem-$(name "$r").plan"
    gzip -f "$d/bench/$stem-$(name "$r").plan"
  done
done
# The same GPTs with RMSNorm in place of LayerNorm (make_gpt_onnx.py --norm rms, HF's LlamaRMSNorm ops)
# for each size in $RMS_SIZES (default: 1.3b), te only (bench/run_gpu_e2e.sh e2e-S with NORM=rms).
for s in ${RMS_SIZES-1.3b}; do
  gpt_size "$s" || exit 2
  g="$build/bench/gpt-$s-rms.onnx"
  [ -f "$g" ] || "$py" bench/make_gpt_onnx.py --config "$s" --batch "$b" --seq "$t" --norm rms -o "$g"
  "$opt" "$g" --absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 "${peer[@]}" --recipe te \
    ${OPT_FLAGS---keep-gradients=false} -o "$d/bench/gpt-$s-rms-te.plan"
  gzip -f "$d/bench/gpt-$s-rms-te.plan"
done
# Data parallelism (bench/run_data_parallel.sh): the tiny GPT over 8 rows in one process and over
# 4 rows a rank compiled with --data-parallel, te and msamp:O2; and for each SIZE:BATCH in $DP_SIZES
# (default: 1.3b:8) te-bf16 (also with --overlap-collectives=false: te-bf16-whole; with --delay-weight-gradients: te-bf16-delay; with
# --shard-optimizer 2: te-bf16-s2, as the tiny te and msamp:O2 -s2 plans), msamp:O2 plans
# compiled with --data-parallel, and msamp:O2 and msamp:O3 with --shard-optimizer 2 (msamp-O2-s2,
# msamp-O3-s2); $DP_PLANS picks among these names (default: all). For each SIZE:BATCH in
# $CURVE_SIZES (default: none; bench/run_data_parallel.sh curves) te-bf16 and msamp:O2 plans for
# 2 ranks of BATCH rows and for one process over 2 x BATCH, with a warmup and cosine schedule
# (peak CURVE_LR, default 6e-4; a tenth of it at the end).
mkdir -p "$d/dp"
for b in 8 4; do
  "$py" bench/make_gpt_onnx.py --config tiny --batch $b --seq 128 --vocab 256 --weights random \
    -o "$build/bench/gpt-tiny-b$b.onnx" >/dev/null
done
"$opt" "$build/bench/gpt-tiny-b4.onnx" --recipe msamp:O3 "${train[@]}" --data-parallel -o "$d/dp/tiny-msamp-O3-dp.plan"
"$opt" "$build/bench/gpt-tiny-b4.onnx" --recipe msamp:O3 "${train[@]}" --data-parallel --shard-optimizer 2 \
  --gradient-bucket-bytes 4096 -o "$d/dp/tiny-msamp-O3-s2.plan"
for r in te msamp:O2; do
  "$opt" "$build/bench/gpt-tiny-b8.onnx" --recipe "$r" "${train[@]}" -o "$d/dp/tiny-$(name "$r")-1.plan"
  "$opt" "$build/bench/gpt-tiny-b4.onnx" --recipe "$r" "${train[@]}" --data-parallel -o "$d/dp/tiny-$(name "$r")-dp.plan"
  "$opt" "$build/bench/gpt-tiny-b4.onnx" --recipe "$r" "${train[@]}" --data-parallel --shard-optimizer 2 \
    --gradient-bucket-bytes 4096 -o "$d/dp/tiny-$(name "$r")-s2.plan"
done
gzip -f "$d"/dp/tiny-*.plan
dp_plan() { # NAME FLAGS...: one of the SIZE plans, if $DP_PLANS picks it
  local n=$1
  shift
  [[ " ${DP_PLANS:-$n} " == *" $n "* ]] || return 0
  "$opt" "$g" --absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 "${peer[@]}" --keep-gradients=false \
    "$@" -o "$d/dp/gpt-$s-b$b-$n.plan"
  gzip -f "$d/dp/gpt-$s-b$b-$n.plan"
}
for spec in ${DP_SIZES-1.3b:8}; do
  s=${spec%%:*}
  gpt_size "$s" || exit 2
  b=${spec#*:}
  g="$build/bench/gpt-$s-b$b.onnx"
  [ -f "$g" ] || "$py" bench/make_gpt_onnx.py --config "$s" --batch "$b" --seq "$t" -o "$g"
  dp_plan te-bf16-dp --recipe te --activation-precision=bf16 --data-parallel
  dp_plan te-bf16-whole-dp --recipe te --activation-precision=bf16 --data-parallel --overlap-collectives=false
  dp_plan te-bf16-delay-dp --recipe te --activation-precision=bf16 --data-parallel --delay-weight-gradients
  dp_plan msamp-O2-dp --recipe msamp:O2 --data-parallel
  dp_plan te-bf16-s2 --recipe te --activation-precision=bf16 --data-parallel --shard-optimizer 2
  dp_plan msamp-O2-s2 --recipe msamp:O2 --data-parallel --shard-optimizer 2
  dp_plan msamp-O3-s2 --recipe msamp:O3 --data-parallel --shard-optimizer 2
done
for spec in ${CURVE_SIZES-}; do
  s=${spec%%:*}
  gpt_size "$s" || exit 2
  b=${spec#*:}
  lr=${CURVE_LR:-6e-4} # GPT-3's rate for 125M-350M; CURVE_LR=2e-4 is its 1.3B's
  sched=(--lr "$lr" --lr-schedule cosine --warmup-steps 50 --total-steps 1000
    --min-lr "$(python3 -c "print($lr / 10)")" --weight-decay 0.1)
  for n in $b $((2 * b)); do
    g="$build/bench/gpt-$s-b$n.onnx"
    [ -f "$g" ] || "$py" bench/make_gpt_onnx.py --config "$s" --batch "$n" --seq "$t" -o "$g"
  done
  for r in te-bf16 msamp-O2; do
    case $r in te-bf16) rf=(--recipe te --activation-precision=bf16) ;; *) rf=(--recipe msamp:O2) ;; esac
    common=(--absent-weights zeros --train --optimizer adamw --clip-grad-norm 1.0 "${peer[@]}" --keep-gradients=false "${sched[@]}" "${rf[@]}")
    "$opt" "$build/bench/gpt-$s-b$((2 * b)).onnx" "${common[@]}" -o "$d/dp/curve-$s-$r-1.plan"
    "$opt" "$build/bench/gpt-$s-b$b.onnx" "${common[@]}" --data-parallel -o "$d/dp/curve-$s-$r-2.plan"
    gzip -f "$d/dp/curve-$s-$r-1.plan" "$d/dp/curve-$s-$r-2.plan"
  done
done
du -sh "$d"
