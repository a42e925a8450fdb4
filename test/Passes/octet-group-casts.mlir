// RUN: fp8-opt %s -split-input-file --octet-group-casts | FileCheck %s

// Three Linears read one tensor: the second and third casts of it move up, in order, to just
// after the first; the weights' casts (each of its own weight) and the GEMMs keep their order.
// CHECK-LABEL: func.func @three_readers
// CHECK: %[[Q0:.+]], %{{.+}}, %[[T0:.+]] = fp8.cast_amax %arg0, %arg2
// CHECK-NEXT: %[[Q1:.+]], %{{.+}}, %[[T1:.+]] = fp8.cast_amax %arg0, %arg3
// CHECK-NEXT: %[[Q2:.+]], %{{.+}}, %[[T2:.+]] = fp8.cast_amax %arg0, %arg4
// CHECK-NEXT: %[[W0:.+]], %{{.+}} = fp8.cast_amax %arg1, %arg2
// CHECK-NEXT: fp8.gemm %[[Q0]], %[[W0]]
// CHECK-NEXT: %[[W1:.+]], %{{.+}} = fp8.cast_amax %arg5, %arg3
// CHECK-NEXT: fp8.gemm %[[Q1]], %[[W1]]
// CHECK-NEXT: %[[W2:.+]], %{{.+}} = fp8.cast_amax %arg6, %arg4
// CHECK-NEXT: fp8.gemm %[[Q2]], %[[W2]]
func.func @three_readers(%x: tensor<16x64xf32>, %w: tensor<32x64xf32>, %s0: tensor<f32>, %s1: tensor<f32>, %s2: tensor<f32>, %v: tensor<32x64xf32>, %u: tensor<32x64xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<64x16xf8E4M3FN>, tensor<64x16xf8E4M3FN>, tensor<64x16xf8E4M3FN>) {
  %q0, %a0, %t0 = fp8.cast_amax %x, %s0 : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
  %w0, %b0 = fp8.cast_amax %w, %s0 : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>, tensor<f32>
  %y0 = fp8.gemm %q0, %w0, %s0, %s0 {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %q1, %a1, %t1 = fp8.cast_amax %x, %s1 : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
  %w1, %b1 = fp8.cast_amax %v, %s1 : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>, tensor<f32>
  %y1 = fp8.gemm %q1, %w1, %s1, %s1 {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %q2, %a2, %t2 = fp8.cast_amax %x, %s2 : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
  %w2, %b2 = fp8.cast_amax %u, %s2 : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>, tensor<f32>
  %y2 = fp8.gemm %q2, %w2, %s2, %s2 {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  return %y0, %y1, %y2, %t0, %t1, %t2 : tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<64x16xf8E4M3FN>, tensor<64x16xf8E4M3FN>, tensor<64x16xf8E4M3FN>
}

// -----

// A cast whose scale the step computes after the first cast stays where it is; the next one,
// whose scale is an argument, still joins the first.
// CHECK-LABEL: func.func @scale_defined_later
// CHECK: fp8.cast_amax %arg0, %arg1
// CHECK-NEXT: fp8.cast_amax %arg0, %arg2
// CHECK-NEXT: %[[S:.+]] = onnx.Mul %arg1, %arg1
// CHECK-NEXT: fp8.cast_amax %arg0, %[[S]]
func.func @scale_defined_later(%x: tensor<16x64xf32>, %s0: tensor<f32>, %s2: tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>) {
  %q0, %a0 = fp8.cast_amax %x, %s0 : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>
  %s1 = onnx.Mul %s0, %s0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %q1, %a1 = fp8.cast_amax %x, %s1 : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>
  %q2, %a2 = fp8.cast_amax %x, %s2 : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>
  return %q0, %q1, %q2 : tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>
}

// -----

// Casts of different tensors, and a tensor cast once, keep their places.
// CHECK-LABEL: func.func @distinct_tensors
// CHECK: fp8.cast_amax %arg0
// CHECK-NEXT: onnx.Exp
// CHECK-NEXT: fp8.cast_amax %arg1
func.func @distinct_tensors(%x: tensor<8xf32>, %y: tensor<8xf32>, %s: tensor<f32>) -> (tensor<8xf8E4M3FN>, tensor<8xf8E4M3FN>, tensor<8xf32>) {
  %q0, %a0 = fp8.cast_amax %x, %s : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>, tensor<f32>
  %e = onnx.Exp %x : (tensor<8xf32>) -> tensor<8xf32>
  %q1, %a1 = fp8.cast_amax %y, %s : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>, tensor<f32>
  return %q0, %q1, %e : tensor<8xf8E4M3FN>, tensor<8xf8E4M3FN>, tensor<8xf32>
}

// -----

// RUN: fp8-opt %s -split-input-file --octet-group-casts='distance=2' | FileCheck %s --check-prefix=NEAR
// With distance=2, a cast three ops after the previous one stays, and so do the ones after it.
// CHECK-LABEL: func.func @far_apart
// CHECK: fp8.cast_amax %arg0
// CHECK-NEXT: fp8.cast_amax %arg0
// CHECK-NEXT: onnx.Exp
// NEAR-LABEL: func.func @far_apart
// NEAR: fp8.cast_amax %arg0
// NEAR-NEXT: onnx.Exp
// NEAR-NEXT: onnx.Exp
// NEAR-NEXT: onnx.Exp
// NEAR-NEXT: fp8.cast_amax %arg0
func.func @far_apart(%x: tensor<8xf32>, %s: tensor<f32>) -> (tensor<8xf8E4M3FN>, tensor<8xf8E4M3FN>, tensor<8xf32>) {
  %q0, %a0 = fp8.cast_amax %x, %s : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>, tensor<f32>
  %e0 = onnx.Exp %x : (tensor<8xf32>) -> tensor<8xf32>
  %e1 = onnx.Exp %e0 : (tensor<8xf32>) -> tensor<8xf32>
  %e2 = onnx.Exp %e1 : (tensor<8xf32>) -> tensor<8xf32>
  %q1, %a1 = fp8.cast_amax %x, %s : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>, tensor<f32>
  return %q0, %q1, %e2 : tensor<8xf8E4M3FN>, tensor<8xf8E4M3FN>, tensor<8xf32>
}
