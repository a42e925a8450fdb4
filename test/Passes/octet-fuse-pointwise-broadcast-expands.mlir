// RUN: fp8-opt %s -split-input-file --octet-fuse-pointwise | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-pointwise{broadcast-expands=false})' | FileCheck %s --check-prefix=KEEP

// A ReduceMean's gradient: dy [2, 8, 1] expanded to [2, 8, 16] for one product chain. The Expand
// goes and the program reads dy as a column (broadcast).
// CHECK-LABEL: func.func @reduce_mean_grad
// CHECK-NOT: onnx.Expand
// CHECK: onnx.node "Pointwise"(%arg0, %arg1, %{{.+}}) {{.+}} : (tensor<2x8x1xf32>, tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
// KEEP-LABEL: func.func @reduce_mean_grad
// KEEP: onnx.Expand
func.func @reduce_mean_grad(%dy: tensor<2x8x1xf32>, %x: tensor<2x8x16xf32>, %shape: tensor<3xi64>) -> tensor<2x8x16xf32> {
  %c = onnx.Constant {value = dense<0.0625> : tensor<f32>} : () -> tensor<f32>
  %e = onnx.Expand %dy, %shape : (tensor<2x8x1xf32>, tensor<3xi64>) -> tensor<2x8x16xf32>
  %m = onnx.Mul %e, %x : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %y = onnx.Mul %m, %c : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// A reader that would no longer have the Expand's shape from its operands (the expanded tensor
// times a scalar): the Expand stays.
// CHECK-LABEL: func.func @reader_needs_the_shape
// CHECK: onnx.Expand
func.func @reader_needs_the_shape(%dy: tensor<2x8x1xf32>, %shape: tensor<3xi64>) -> tensor<2x8x16xf32> {
  %c = onnx.Constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %e = onnx.Expand %dy, %shape : (tensor<2x8x1xf32>, tensor<3xi64>) -> tensor<2x8x16xf32>
  %y = onnx.Mul %e, %c : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// A reader that is not elementwise (a ReduceSum) needs the tensor itself: the Expand stays.
// CHECK-LABEL: func.func @other_reader
// CHECK: onnx.Expand
func.func @other_reader(%dy: tensor<2x8x1xf32>, %x: tensor<2x8x16xf32>, %shape: tensor<3xi64>, %axes: tensor<1xi64>) -> (tensor<2x8x16xf32>, tensor<2x1x16xf32>) {
  %e = onnx.Expand %dy, %shape : (tensor<2x8x1xf32>, tensor<3xi64>) -> tensor<2x8x16xf32>
  %m = onnx.Mul %e, %x : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %s = onnx.ReduceSum %e, %axes : (tensor<2x8x16xf32>, tensor<1xi64>) -> tensor<2x1x16xf32>
  return %m, %s : tensor<2x8x16xf32>, tensor<2x1x16xf32>
}
