#!/usr/bin/env bash
# The bundled example end to end: import a GPT-2 exported by torch.onnx.export
# (it returns its loss), show what it holds, write the round-tripped model and
# check under onnxruntime that it computes bit-identical outputs.
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
