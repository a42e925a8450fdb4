// RUN: fp8-opt %s -split-input-file --octet-fold-residual-adds | FileCheck %s

// x + Linear(h) with a bias, through the Reshape that restores the batch dims: the GEMM takes x
// (reshaped to its [M, N]) as its accumulate and stands where the Add stood; the Add and the
// Reshape between them go, and the result is reshaped back.
// CHECK-LABEL: func.func @residual_through_reshape
// CHECK: %[[C:.*]] = onnx.Reshape %arg0
// CHECK-SAME: -> tensor<16x32xf32>
// CHECK: %[[D:.*]] = fp8.gemm %arg1, %arg2, %arg3, %arg3 bias %arg4 accumulate %[[C]] {{{.*}}octet.residual_add{{.*}}} : {{.*}} -> tensor<16x32xf32>
// CHECK: %[[R:.*]] = onnx.Reshape %[[D]]
// CHECK-SAME: -> tensor<2x8x32xf32>
// CHECK-NOT: onnx.Add
// CHECK: return %[[R]]
func.func @residual_through_reshape(%x: tensor<2x8x32xf32>, %a: tensor<16x64xf8E4M3FN>, %b: tensor<32x64xf8E4M3FN>, %s: tensor<f32>, %bias: tensor<32xf32>) -> tensor<2x8x32xf32> {
  %d = fp8.gemm %a, %b, %s, %s bias %bias {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<32xf32>) -> tensor<16x32xf32>
  %shape = onnx.Constant {value = dense<[2, 8, 32]> : tensor<3xi64>} : () -> tensor<3xi64>
  %y = onnx.Reshape %d, %shape : (tensor<16x32xf32>, tensor<3xi64>) -> tensor<2x8x32xf32>
  %r = onnx.Add %x, %y : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return %r : tensor<2x8x32xf32>
}

// -----

// The GEMM's result first, no bias, no Reshape, and C computed after the GEMM: the folded GEMM
// comes after C's producer.
// CHECK-LABEL: func.func @gemm_first
// CHECK: %[[T:.*]] = onnx.Tanh %arg0
// CHECK: %[[D:.*]] = fp8.gemm %arg1, %arg2, %arg3, %arg3 accumulate %[[T]]
// CHECK-NOT: onnx.Add
// CHECK: return %[[D]]
func.func @gemm_first(%x: tensor<16x32xf32>, %a: tensor<16x64xf8E4M3FN>, %b: tensor<32x64xf8E4M3FN>, %s: tensor<f32>) -> tensor<16x32xf32> {
  %d = fp8.gemm %a, %b, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %t = onnx.Tanh %x : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %r = onnx.Add %d, %t : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}

// -----

// Not folded: the GEMM's result has another reader; a BF16 result; a broadcast operand (a bias
// row); rowwise scales; a GEMM that already accumulates.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: octet.residual_add
// CHECK-COUNT-5: onnx.Add
// CHECK: return
func.func @kept(%x: tensor<16x32xf32>, %xb: tensor<16x32xbf16>, %row: tensor<32xf32>, %a: tensor<16x64xf8E4M3FN>, %b: tensor<32x64xf8E4M3FN>, %s: tensor<f32>, %sa: tensor<16x1xf32>, %sb: tensor<32x1xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xbf16>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) {
  %d0 = fp8.gemm %a, %b, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %r0 = onnx.Add %x, %d0 : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  %d1 = fp8.gemm %a, %b, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
  %r1 = onnx.Add %xb, %d1 : (tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x32xbf16>
  %d2 = fp8.gemm %a, %b, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %r2 = onnx.Add %d2, %row : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %d3 = fp8.gemm %a, %b, %sa, %sb {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<16x1xf32>, tensor<32x1xf32>) -> tensor<16x32xf32>
  %r3 = onnx.Add %x, %d3 : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  %d4 = fp8.gemm %a, %b, %s, %s accumulate %x {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  %r4 = onnx.Add %x, %d4 : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %d0, %r0, %r1, %r2, %r3, %r4 : tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xbf16>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>
}
