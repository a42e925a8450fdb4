// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-rematerialize-fp8-casts{sources=gelu,everything})'

// An unknown kind of copy is refused, on every function.
// expected-error @+1 {{octet-rematerialize-fp8-casts: sources='everything' is not one of weight, activation, gelu, layernorm}}
func.func @unknown_source(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{octet-rematerialize-fp8-casts: sources='everything' is not one of weight, activation, gelu, layernorm}}
func.func @again(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
