// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-fuse-attention{max-workspace-bytes=-1})'

// A negative bound is refused, on every function.
// expected-error @+1 {{octet-fuse-attention: max-workspace-bytes=-1 must be 0 (no bound) or more}}
func.func @limit(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
