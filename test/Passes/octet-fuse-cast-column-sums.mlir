// RUN: fp8-opt %s -split-input-file --octet-fuse-cast-column-sums | FileCheck %s

// A Linear's backward: dY cast with its transposed copy for the dgrad and wgrad GEMMs, then the
// bias gradient (dY summed over every axis but the last, float32): one cast_column_sum group.
// CHECK-LABEL: func.func @bias_gradient
// CHECK: fp8.cast_amax {{.*}}octet.fusion = "cast_column_sum", octet.fusion_group = 0 : i64
// CHECK: onnx.Tanh
// CHECK: onnx.ReduceSum {{.*}}octet.fusion = "cast_column_sum", octet.fusion_group = 0 : i64
func.func @bias_gradient(%dy: tensor<2x64x32xf32>, %si: tensor<f32>) -> (tensor<2x64x32xf8E5M2>, tensor<32x128xf8E5M2>, tensor<2x64x32xf32>, tensor<32xf32>) {
  %q, %a, %qt = fp8.cast_amax %dy, %si : tensor<2x64x32xf32>, tensor<f32> -> tensor<2x64x32xf8E5M2>, tensor<f32>, tensor<32x128xf8E5M2>
  %t = onnx.Tanh %dy : (tensor<2x64x32xf32>) -> tensor<2x64x32xf32>
  %axes = onnx.Constant {value = dense<[0, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %b = onnx.ReduceSum %dy, %axes {keepdims = 0 : si64} : (tensor<2x64x32xf32>, tensor<2xi64>) -> tensor<32xf32>
  return %q, %qt, %t, %b : tensor<2x64x32xf8E5M2>, tensor<32x128xf8E5M2>, tensor<2x64x32xf32>, tensor<32xf32>
}

// -----

// No pair: a cast without the transposed copy, a sum over the last axis, a sum of another tensor,
// and a sum before the cast.
// CHECK-LABEL: func.func @no_pairs
// CHECK-NOT: octet.fusion
// CHECK: return
func.func @no_pairs(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>, %si: tensor<f32>) -> (tensor<32xf32>, tensor<64x32xf8E5M2>, tensor<64xf32>, tensor<32xf32>, tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>) {
  %axes0 = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %axes1 = onnx.Constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %before = onnx.ReduceSum %y, %axes0 {keepdims = 0 : si64} : (tensor<64x32xf32>, tensor<1xi64>) -> tensor<32xf32>
  %q, %a = fp8.cast_amax %x, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>
  %rows = onnx.ReduceSum %x, %axes1 {keepdims = 0 : si64} : (tensor<64x32xf32>, tensor<1xi64>) -> tensor<64xf32>
  %other = onnx.ReduceSum %x, %axes0 {keepdims = 0 : si64} : (tensor<64x32xf32>, tensor<1xi64>) -> tensor<32xf32>
  %q2, %a2, %qt2 = fp8.cast_amax %y, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  return %before, %q, %rows, %other, %q2, %qt2 : tensor<32xf32>, tensor<64x32xf8E5M2>, tensor<64xf32>, tensor<32xf32>, tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>
}
