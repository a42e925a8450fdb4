# Sourced by bench/llama_device.sh and bench/llama_loss.sh: $out/$model.onnx exported once per GPU
# host, as a user does (bench/export_hf_bench.py: transformers on the GPU, HF's sdpa, the dynamo
# exporter; the external data dropped: fp8-run draws the weights).
if [ ! -f "$out/$model.onnx" ]; then
  t_export=$(date +%s)
  EXPORT_DEVICE=${EXPORT_DEVICE:-cuda} python3 "$here/bench/export_hf_bench.py" "$model" "$out/$model.onnx" 2>&1 | tail -1
  echo "export: $(($(date +%s) - t_export)) s"
fi
