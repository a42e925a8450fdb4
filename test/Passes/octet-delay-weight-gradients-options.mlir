// RUN: fp8-opt %s --pass-pipeline='builtin.module(octet-delay-weight-gradients{link-gbps=0})' -verify-diagnostics

// A bandwidth of zero (or any option that is not positive) is refused, naming the options.
// expected-error@+1 {{octet-delay-weight-gradients: link-gbps, gemm-tflops and hbm-gbps must be positive}}
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
