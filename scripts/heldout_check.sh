#!/usr/bin/env bash
# Models the compiler was not written against, tried on a build (docs/TESTING.md): Hugging Face
# families outside the committed test models (HF's default sdpa attention, the dynamo exporter),
# each exported with random weights and checked against PyTorch's parameter gradients: float32 (max
# relative error 1e-4) and te (SQNR of all gradients, 20 dB). The committed families under every
# exporter setting: scripts/export_matrix.sh. Needs a Python with torch, transformers and onnxscript (not CI's
# venv); nothing it writes is committed.
#   scripts/heldout_check.sh TORCH_PYTHON [BUILD] [OUTDIR]
set -uo pipefail
py=${1:?usage: scripts/heldout_check.sh TORCH_PYTHON [BUILD] [OUTDIR]}
build=${2:-build}
out=${3:-$(mktemp -d)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
check=("$here/.venv/bin/python" "$here/test/tools/grad_check.py" --bin "$here/$build/bin")
families=(opt-sdpa falcon-sdpa gptj-sdpa qwen3-sdpa stablelm-sdpa olmo-sdpa starcoder2-sdpa)
if ! "$py" "$here/scripts/export_hf_models.py" --out "$out/hf" --models "$(IFS=,; echo "${families[*]}")" \
  > "$out/hf.log" 2>&1; then
  echo "heldout_check: the held-out export failed: see $out/hf.log" >&2
  exit 1
fi
status=0
for m in "${families[@]}"; do # each alone, so that one failure does not hide the others
  (cd "$here/test/tools" && "${check[@]}" --models "$out/hf" "$m" --max-rel 1e-4 | tail -1) || status=1
  (cd "$here/test/tools" && "${check[@]}" --models "$out/hf" "$m" --recipes te --min-sqnr 20 | tail -1) || status=1
done
exit $status
