#!/usr/bin/env bash
# Sourced by the benchmark scripts (scripts/pack_devlib.sh, bench/run_gpu_e2e.sh, bench/run_peers.sh):
# gpt_size SIZE sets b (the size's default batch) and t (sequence length) for the GPTs of
# bench/make_gpt_onnx.py, or says the size is unknown and returns 2.
gpt_size() {
  case $1 in
  125m) b=8 t=1024 ;;
  350m) b=4 t=1024 ;;
  1.3b) b=1 t=2048 ;;
  d4096) b=4 t=2048 ;;
  6.7b) b=4 t=2048 ;;
  hf-gpt2) b=16 t=1024 ;;       # Hugging Face models (bench/export_hf_bench.py)
  hf-llama-300m) b=8 t=2048 ;;
  *) echo "unknown size $1 (125m, 350m, 1.3b, d4096, 6.7b, hf-gpt2, hf-llama-300m)" >&2; return 2 ;;
  esac
}
