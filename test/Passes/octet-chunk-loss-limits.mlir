// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-chunk-loss{max-chunk-bytes=0})'

// A chunk of at most 0 bytes is refused, on every function.
// expected-error @+1 {{octet-chunk-loss: max-chunk-bytes=0 must be at least 1}}
func.func @limit(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
