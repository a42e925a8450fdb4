#!/usr/bin/env bash
# Issue 66, item 5: Llama-3-8B (bench/export_hf_bench.py llama3-8b) at BATCH x 2048 on one GPU, in one
# device call: Octet's te plan (.devlib/l8/te-bBATCH.plan.gz, compiled from the export with
# --absent-weights zeros), then what a PyTorch user picks to fit 8B on one GPU: BF16 autocast under
# torch.compile and torchao float8 (tensorwise) under torch.compile, both with torchao's AdamW8bit and
# HF's gradient checkpointing; each peer in its own process under its own limit ($LIMIT s, 240).
#   bash bench/run_peers_8b.sh [BATCH]          (torchao from the wheel carried in .whl)
# PLANS: Octet's plans as NAME=PATH ... (default te=.devlib/l8/te-bBATCH.plan; "" runs the peers only,
# as after bench/llama_device.sh, which measures Octet's plans compiled on the GPU host).
set -u
b=${1:-4}
d=.devlib
out=${OUT:-/tmp}
. "$(dirname "$0")/gpu_env.sh"
plans=${PLANS-te=$d/l8/te-b$b.plan}
[ "$plans" != "te=$d/l8/te-b$b.plan" ] || gunzip -kf "$d/l8/te-b$b.plan.gz"
if ls .whl/torchao-*.whl > /dev/null 2>&1 && ! python3 -c "import torchao" 2> /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/torchao-*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
e2e=(python3 bench/e2e_gpt.py --config hf-llama3-8b --batch "$b" --seq 2048 --steps "${STEPS:-5}" --warmup 2
     --fp8-run "$d/fp8-run")
[ -z "$plans" ] || "${e2e[@]}" --skip-torch --plans $plans --json "$out/peers-8b-octet.json" | grep -v "^measured"
peer=(--skip-eager --optimizer adamw8bit --checkpointing)
# PEERS: which peers, in order (default "torchao compile"); each under timeout $LIMIT s, its exit
# status and the end of its stderr printed when it fails.
for p in ${PEERS:-torchao compile}; do
  case $p in
    torchao) args=(--skip-compile --torchao tensorwise) ;;
    compile) args=() ;;
    *) echo "run_peers_8b: unknown peer $p (torchao or compile)"; continue ;;
  esac
  timeout "${LIMIT:-240}" "${e2e[@]}" "${peer[@]}" "${args[@]}" --json "$out/peers-8b-$p.json" > "$out/peers-8b-$p.txt" 2> "$out/peers-8b-$p.err"
  rc=$?
  grep -v "^measured" "$out/peers-8b-$p.txt"
  [ $rc = 0 ] || { echo "$p: exit $rc (limit ${LIMIT:-240} s)"; tail -3 "$out/peers-8b-$p.err"; }
done
