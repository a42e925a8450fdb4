// RUN: fp8-opt %s -split-input-file --octet-unmerge-parameters | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-unmerge-parameters)' | FileCheck %s

// The TorchScript exporter's merge: one initializer read by a layer and, through Identity nodes
// named after two other parameters, by theirs. Each Identity becomes an initializer of its own.
// CHECK-LABEL: func.func @merged
// CHECK-DAG: %[[A:.*]] = onnx.initializer "ln_1.weight" = dense<1.000000e+00> : tensor<8xf32>
// CHECK-DAG: %[[B:.*]] = onnx.initializer "ln_2.weight" = dense<1.000000e+00> : tensor<8xf32>
// CHECK-DAG: %[[C:.*]] = onnx.initializer "ln_f.weight" = dense<1.000000e+00> : tensor<8xf32>
// CHECK-NOT: onnx.Identity
// CHECK: onnx.Mul %arg0, %[[A]]
// CHECK: onnx.Mul %{{.*}}, %[[B]]
// CHECK: onnx.Mul %{{.*}}, %[[C]]
func.func @merged(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = onnx.initializer "ln_1.weight" = dense<1.000000e+00> : tensor<8xf32>
  %1 = onnx.Identity %0 {octet.result_names = ["ln_2.weight"]} : (tensor<8xf32>) -> tensor<8xf32>
  %2 = onnx.Identity %0 {octet.result_names = ["ln_f.weight"]} : (tensor<8xf32>) -> tensor<8xf32>
  %3 = onnx.Mul %arg0, %0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = onnx.Mul %3, %1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = onnx.Mul %4, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %5 : tensor<8xf32>
}

// -----

// No parameter's name to give (onnx::...), a name another initializer has, or an Identity that is
// the initializer's only reader (a copy, not a merge): left as they are.
// CHECK-LABEL: func.func @kept
// CHECK: onnx.Identity %{{.*}} {octet.result_names = ["onnx::Identity_7"]}
// CHECK: onnx.Identity %{{.*}} {octet.result_names = ["b"]}
// CHECK: onnx.Identity %{{.*}} {octet.result_names = ["c.weight"]}
func.func @kept(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = onnx.initializer "a" = dense<1.000000e+00> : tensor<8xf32>
  %1 = onnx.initializer "b" = dense<2.000000e+00> : tensor<8xf32>
  %2 = onnx.initializer "c" = dense<3.000000e+00> : tensor<8xf32>
  %3 = onnx.Identity %0 {octet.result_names = ["onnx::Identity_7"]} : (tensor<8xf32>) -> tensor<8xf32>
  %4 = onnx.Identity %0 {octet.result_names = ["b"]} : (tensor<8xf32>) -> tensor<8xf32>
  %5 = onnx.Identity %2 {octet.result_names = ["c.weight"]} : (tensor<8xf32>) -> tensor<8xf32>
  %6 = onnx.Mul %arg0, %0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %7 = onnx.Mul %6, %3 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %8 = onnx.Mul %7, %4 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %9 = onnx.Mul %8, %5 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %10 = onnx.Add %9, %1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %10 : tensor<8xf32>
}
