// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-attention-precision{precision=tf32})'

// BF16 operands (BF16 activations) cannot be computed on as TF32: refused, naming the op.
func.func @bf16_operands(%q: tensor<1x4x8xbf16>, %k: tensor<1x4x8xbf16>, %v: tensor<1x4x8xbf16>) -> tensor<1x4x8xbf16> {
  // expected-error @+1 {{octet-attention-precision: precision=tf32, but this octet::Attention reads BF16 operands; use bf16 or auto, or float32 activations}}
  %y, %lse = onnx.node "Attention"(%q, %k, %v) {attrs = {is_causal = 0 : si64, scale = 2.500000e-01 : f32}, domain = "octet"} : (tensor<1x4x8xbf16>, tensor<1x4x8xbf16>, tensor<1x4x8xbf16>) -> (tensor<1x4x8xbf16>, tensor<1x4xf32>)
  return %y : tensor<1x4x8xbf16>
}
