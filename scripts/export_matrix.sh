#!/usr/bin/env bash
# Every export setting users meet, on the committed families (issue 23's matrix, docs/TESTING.md):
# GPT-2, Llama, Mistral, Qwen2, Phi, Gemma, GPT-NeoX and BERT, each with HF's eager and its default
# sdpa attention, exported with random weights by scripts/export_hf_models.py under four settings:
#   dynamo     torch.onnx.export(dynamo=True, optimize=False), opset 20
#   opset23    the same at opset 23 (F.scaled_dot_product_attention as ONNX Attention)
#   torchscript  the legacy exporter (dynamo=False), opset 17
#   optimize   dynamo's default optimize=True (constants folded, equal initializers merged)
# Each model must either train with PyTorch's loss and parameter gradients (float32, 1e-4 relative:
# test/tools/grad_check.py) and have every report layer named after its PyTorch module
# (test/tools/layer_names_check.py), or be refused by `fp8-opt --train` in one line. Prints a line a
# model (`SETTING MODEL trains|refused|not exported|WRONG ...`: `not exported` where PyTorch's own
# exporter fails, e.g. the legacy one on grouped-query SDPA); exit status 1 if any is WRONG. Needs a Python with
# torch, transformers and onnxscript (not CI's venv); nothing it writes is committed.
#   scripts/export_matrix.sh TORCH_PYTHON [BUILD] [OUTDIR]
set -uo pipefail
py=${1:?usage: scripts/export_matrix.sh TORCH_PYTHON [BUILD] [OUTDIR]}
build=${2:-build}
out=${3:-$(mktemp -d)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
bin="$here/$build/bin"
venv_py="$here/.venv/bin/python" # the tools the checks use (numpy, onnx)
models=()
for f in gpt2 llama mistral qwen2 phi gemma gpt_neox bert; do models+=("$f" "$f-sdpa"); done
declare -A flags=([dynamo]="" [opset23]="--opset 23" [torchscript]="--exporter torchscript" [optimize]="--optimize")
status=0
for setting in dynamo opset23 torchscript optimize; do
  dir="$out/$setting"
  # The export script exits 1 where a parameter is no initializer (optimize=True folds some): the
  # models are written all the same, and fp8-opt is what must refuse them.
  "$py" "$here/scripts/export_hf_models.py" --out "$dir" --models "$(IFS=,; echo "${models[*]}")" \
    --keep-going ${flags[$setting]} > "$dir.log" 2>&1
  for m in "${models[@]}"; do
    if [ -f "$dir/$m.export-error" ]; then # PyTorch's exporter, not Octet: reported, not counted
      echo "$setting $m not exported: torch.onnx.export failed: $(cat "$dir/$m.export-error")"; continue
    fi
    if [ ! -f "$dir/$m.onnx" ]; then
      echo "$setting $m WRONG: not exported (see $dir.log)"; status=1; continue
    fi
    if ! err=$("$bin/fp8-opt" "$dir/$m.onnx" --train -o "$dir/$m.plan" 2>&1 >/dev/null); then
      lines=$(printf '%s\n' "$err" | wc -l)
      if [ "$lines" -eq 1 ] && [[ "$err" == *"$m.onnx"* ]]; then
        echo "$setting $m refused: ${err#*error: }"
      else
        echo "$setting $m WRONG: fp8-opt failed without one line naming the file: $err"; status=1
      fi
      continue
    fi
    grads=$(cd "$here/test/tools" && "$venv_py" grad_check.py --bin "$bin" --models "$dir" "$m" --max-rel 1e-4 2>&1)
    g=$?
    names=$(cd "$here/test/tools" && "$venv_py" layer_names_check.py --bin "$bin" --models "$dir" "$m" 2>&1)
    n=$?
    if [ $g -eq 0 ] && [ $n -eq 0 ]; then
      echo "$setting $m trains: $(printf '%s\n' "$grads" | tail -1 | cut -d' ' -f3-); $(printf '%s\n' "$names" | cut -d' ' -f2-)"
    else
      echo "$setting $m WRONG: $(printf '%s\n' "$grads" | tail -2 | tr '\n' ' ') $names"; status=1
    fi
  done
done
exit $status
