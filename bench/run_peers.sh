#!/usr/bin/env bash
# One device call of the peer comparison (issue 21): for a GPT size and batch, Octet's plans, then
# PyTorch BF16 torch.compile (SDPA) and torchao float8 + compile, each in its own process under its
# own time limit (a torch.compile that outlasts it leaves the other rows), then a GPU profile of
# Octet te. Plans come from scripts/pack_devlib.sh (SIZES with SIZE:BATCH), torchao from the wheel
# carried in .whl. Rows land in $OUT/peers-STEM-*.json; bench/peers_table.py merges them.
#   bash bench/run_peers.sh 1.3b 8            (RECIPES="te ao msamp:O2", TORCHAO="tensorwise",
#                                              EAGER=1 adds PyTorch eager, OWN_ATTENTION=1 te on
#                                              Attention.cu's kernels, COMPILE=0 skips torch.compile,
#                                              PROFILE=0 skips the profiles, PROFILE_RECIPES="te"
#                                              names the plans profiled)
set -u
s=$1
d=${DEVLIB:-.devlib}
out=${OUT:-/tmp}
. "$(dirname "$0")/gpu_env.sh"
. "$(dirname "$0")/gpt_sizes.sh"
for f in "$d"/bench/*.gz; do [ -e "$f" ] && gunzip -kf "$f"; done
if ls .whl/torchao-*.whl > /dev/null 2>&1 && ! python3 -c "import torchao" 2> /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/torchao-*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
stem=gpt-$s
gpt_size "$s" || exit 2
[ "$b" = "$2" ] || stem=gpt-$s-b$2
b=$2
e2e=(python3 bench/e2e_gpt.py --config "$s" --batch "$b" --seq "$t" --steps "${STEPS:-10}" --fp8-run "$d/fp8-run")
row() { # NAME LIMIT ARGS...: one e2e_gpt.py process
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "${e2e[@]}" "$@" --json "$out/peers-$stem-$name.json" > "$out/peers-$stem-$name.txt" 2>&1
  echo "$name: exit $? $(grep -h '^measured' "$out/peers-$stem-$name.txt" | cut -c10- | tr '\n' ' ')"
}
plans=()
for r in ${RECIPES:-te ao msamp:O2}; do plans+=("$r=$d/bench/$stem-${r/:/-}.plan"); done
row octet "${OCTET_LIMIT:-240}" --skip-torch --plans "${plans[@]}"
# OWN_ATTENTION=1: te with Attention.cu's kernels in place of cuDNN's (OCTET_CUDA_CUDNN=0)
[ "${OWN_ATTENTION:-0}" = 1 ] && OCTET_CUDA_CUDNN=0 row own-attention 120 --skip-torch --plans te-own-attention="$d/bench/$stem-te.plan"
[ "${EAGER:-0}" = 1 ] && row eager 120 --skip-compile
[ "${COMPILE:-1}" = 1 ] && row compile "${COMPILE_LIMIT:-200}" --skip-eager
for r in ${TORCHAO-tensorwise}; do row "torchao-$r" "${TORCHAO_LIMIT:-300}" --skip-eager --skip-compile --torchao "$r"; done
if [ "${PROFILE:-1}" = 1 ]; then
  for r in ${PROFILE_RECIPES:-te}; do
    OCTET_CUDA_PROFILE=2 timeout 90 "$d/fp8-run" "$d/bench/$stem-${r/:/-}.plan" --device cuda --init-params normal:0.02 \
      --benchmark 3 --warmup 1 > /dev/null 2> "$out/profile-$stem-${r/:/-}.txt"
    echo "== profile $r"; head -"${PROFILE_LINES:-25}" "$out/profile-$stem-${r/:/-}.txt"
  done
fi
