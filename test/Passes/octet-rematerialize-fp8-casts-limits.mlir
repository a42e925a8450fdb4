// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-rematerialize-fp8-casts{distance=0})'

// A distance below 1 is refused, on every function.
// expected-error @+1 {{octet-rematerialize-fp8-casts: distance=0 must be at least 1}}
func.func @limit(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
