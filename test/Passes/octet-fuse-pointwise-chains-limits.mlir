// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-fuse-pointwise-chains{max-ops=0})'
// RUN: not fp8-opt %s -o /dev/null --pass-pipeline='builtin.module(octet-fuse-pointwise-chains{small-elements=-1})' 2>&1 | FileCheck %s

// A group holds at least one program: limits below that are refused, naming the options.
// CHECK: error: octet-fuse-pointwise-chains: max-ops=4 max-small-ops=12 small-elements=-1: the limits must be positive
// expected-error @+1 {{octet-fuse-pointwise-chains: max-ops=0 max-small-ops=12 small-elements=65536: the limits must be positive}}
func.func @limits(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = onnx.Tanh %x : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
