#!/usr/bin/env bash
# The bundled example end to end: import a GPT-2 exported by torch.onnx.export
# (it returns its loss), show what it holds, write the round-tripped model and
# check under onnxruntime that it computes bit-identical outputs; then FP8
# reports, FP8 vs FP32, and training the bundled byte-level GPT with FP32 and te.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
out="$here/$build/demo"
mkdir -p "$out"
model="$here/examples/gpt2-tiny.onnx"
echo "== fp8-opt $model --octet-model-summary -o $out/gpt2-tiny.roundtrip.onnx"
"$here/$build/bin/fp8-opt" "$model" --octet-model-summary -o "$out/gpt2-tiny.roundtrip.onnx"
echo
echo "== onnxruntime: original vs round-tripped, on the inputs PyTorch used"
"$here/.venv/bin/python" "$here/test/tools/ort_compare.py" "$model" "$out/gpt2-tiny.roundtrip.onnx" \
  --inputs "$here/test/models/exported/gpt2.ref.npz"
echo
echo "wrote $out/gpt2-tiny.roundtrip.onnx"
echo
echo "== fp8-opt $model --recipe te --report -o $out/gpt2-tiny.te.plan"
"$here/$build/bin/fp8-opt" "$model" --recipe te --report -o "$out/gpt2-tiny.te.plan"
echo
echo "== fp8-opt $model --recipe ao --report -o $out/gpt2-tiny.ao.onnx   (QDQ ONNX for onnxruntime / Netron)"
"$here/$build/bin/fp8-opt" "$model" --recipe ao --report -o "$out/gpt2-tiny.ao.onnx"
echo
echo "== FP8 forward vs FP32 (PyTorch's logits), CPU reference runtime (fp8-run)"
"$here/.venv/bin/python" "$here/test/tools/fp8_compare.py" --bin "$here/$build/bin" \
  --models "$here/test/models/exported" gpt2
echo
echo "== Training: the bundled byte-level GPT (examples/bytegpt, 4 layers, batch 8 x 64) on the"
echo "   license texts in /usr/share/common-licenses, FP32 and te side by side on the CPU"
corpus="$out/licenses.bin"
"$here/.venv/bin/python" "$here/scripts/make_corpus.py" "$corpus"
steps=${DEMO_STEPS:-150}
flags=(--train --optimizer adamw --lr 2e-3 --lr-schedule cosine --warmup-steps 30 --total-steps "$steps"
       --min-lr 2e-4 --clip-grad-norm 1.0 --weight-decay 0.01)
for r in none te; do
  plan="$out/bytegpt.$r.plan"
  recipe=(); [ "$r" = none ] || recipe=(--recipe "$r")
  echo "-- fp8-opt examples/bytegpt/bytegpt.onnx ${recipe[*]} ${flags[*]} -o $plan"
  "$here/$build/bin/fp8-opt" "$here/examples/bytegpt/bytegpt.onnx" "${recipe[@]}" "${flags[@]}" -o "$plan"
  echo "-- fp8-run $plan --data $corpus --steps $steps --log $out/bytegpt.$r.jsonl"
  "$here/$build/bin/fp8-run" "$plan" --data "$corpus" --steps "$steps" --log-every 10 \
    --log "$out/bytegpt.$r.jsonl"
done
echo
"$here/.venv/bin/python" "$here/scripts/print_loss_curves.py" "fp32=$out/bytegpt.none.jsonl" "te=$out/bytegpt.te.jsonl" \
  --every 15
echo
echo "== Figures: python -m octet.plot fp32=$out/bytegpt.none.jsonl te=$out/bytegpt.te.jsonl -o $out"
PYTHONPATH="$here/python" "$here/.venv/bin/python" -m octet.plot "fp32=$out/bytegpt.none.jsonl" \
  "te=$out/bytegpt.te.jsonl" -o "$out"
echo
"$here/$build/bin/fp8-run" "$out/bytegpt.te.plan" --report-memory
