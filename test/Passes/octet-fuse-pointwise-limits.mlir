// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-fuse-pointwise{max-ops=100})'
// RUN: not fp8-opt %s -o /dev/null --pass-pipeline='builtin.module(octet-fuse-pointwise{max-inputs=9})' 2>&1 | FileCheck %s

// The limits are the runtimes' (the CUDA kernel's fixed arguments): larger
// values are refused, naming both options and their ranges.
// CHECK: error: octet-fuse-pointwise: max-ops=32 max-inputs=9 is outside what runtimes run; use max-ops in [2, 48] and max-inputs in [1, 8]
// expected-error @+1 {{octet-fuse-pointwise: max-ops=100 max-inputs=8 is outside what runtimes run; use max-ops in [2, 48] and max-inputs in [1, 8]}}
func.func @limits(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = onnx.Mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = onnx.Add %a, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
