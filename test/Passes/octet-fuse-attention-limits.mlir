// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-fuse-attention{max-head-dim=0})'

// A head-width limit below 1 is refused, on every function.
// expected-error @+1 {{octet-fuse-attention: max-head-dim=0 must be at least 1}}
func.func @limit(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
