// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-attention-precision{precision=fp16})'

// A precision no backend has is refused.
// expected-error @below {{octet-attention-precision: precision='fp16' is not auto, bf16 or tf32}}
module {
  func.func @any(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
