// RUN: fp8-opt %s -split-input-file --octet-cast-transpose | FileCheck %s

// wgrad: A = x read transposed, B = dy read as [K, N]. Both casts gain the transposed copy, the
// GEMM reads it with the flags flipped (TN), and the copy is named after the cast's output.
// CHECK-LABEL: func.func @wgrad
// CHECK: %[[Q:.+]], %{{.+}}, %[[QT:.+]] = fp8.cast_amax %arg0, %arg2 {octet.result_names = ["x_fp8", "x_amax", "x_fp8_t"]} : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
// CHECK: %{{.+}}, %{{.+}}, %[[GT:.+]] = fp8.cast_amax %arg1, %arg3 : tensor<16x32xf32>, tensor<f32> -> tensor<16x32xf8E5M2>, tensor<f32>, tensor<32x16xf8E5M2>
// CHECK: fp8.gemm %[[QT]], %[[GT]], %arg2, %arg3 {accumulation = #fp8.accumulation<split>, transpose_b = true}
// CHECK: fp8.gemm %[[Q]], %{{.+}}, %arg2
func.func @wgrad(%x: tensor<16x64xf32>, %dy: tensor<16x32xf32>, %si: tensor<f32>, %sj: tensor<f32>, %w: tensor<32x64xf8E4M3FN>) -> (tensor<64x32xf32>, tensor<16x32xf32>) {
  %q, %a = fp8.cast_amax %x, %si {octet.result_names = ["x_fp8", "x_amax"]} : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>
  %g, %b = fp8.cast_amax %dy, %sj : tensor<16x32xf32>, tensor<f32> -> tensor<16x32xf8E5M2>, tensor<f32>
  %d = fp8.gemm %q, %g, %si, %sj {transpose_a = true, accumulation = #fp8.accumulation<split>} : (tensor<16x64xf8E4M3FN>, tensor<16x32xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<64x32xf32>
  %y = fp8.gemm %q, %w, %si, %si {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  return %d, %y : tensor<64x32xf32>, tensor<16x32xf32>
}

// -----

// dgrad with the weight as [K, N] read by two GEMMs that both want it transposed: one copy.
// CHECK-LABEL: func.func @shared_copy
// CHECK-COUNT-1: fp8.cast_amax
// CHECK-NOT: fp8.cast_amax
// CHECK: fp8.gemm %arg0, %[[WT:[^,]+]], {{.+}} {transpose_b = true}
// CHECK: fp8.gemm %arg0, %[[WT]], {{.+}} {transpose_b = true}
func.func @shared_copy(%g: tensor<16x64xf8E5M2>, %w: tensor<64x32xf32>, %s: tensor<f32>) -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %q, %a = fp8.cast_amax %w, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>
  %d1 = fp8.gemm %g, %q, %s, %s : (tensor<16x64xf8E5M2>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %d2 = fp8.gemm %g, %q, %s, %s : (tensor<16x64xf8E5M2>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  return %d1, %d2 : tensor<16x32xf32>, tensor<16x32xf32>
}

// -----

// Operands already K-contiguous stay as they are.
// CHECK-LABEL: func.func @already_tn
// CHECK: %{{.+}}, %{{.+}} = fp8.cast_amax %arg0, %arg2 : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>
// CHECK-NEXT: fp8.gemm %{{.+}}, %arg1, %arg2, %arg2 {transpose_b = true}
func.func @already_tn(%x: tensor<16x64xf32>, %w: tensor<32x64xf8E4M3FN>, %s: tensor<f32>) -> tensor<16x32xf32> {
  %q, %a = fp8.cast_amax %x, %s : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>
  %y = fp8.gemm %q, %w, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

// A plain per-tensor cast (current scaling: its scale comes from an amax taken before it) gains
// the copy too, as an fp8.cast_amax whose amax nothing reads. Codes that are a block argument
// keep the GEMM's flags, and the backend transposes.
// CHECK-LABEL: func.func @plain_cast
// CHECK: %[[Q:.+]], %{{.+}}, %[[QT:.+]] = fp8.cast_amax %arg0, %arg2 {octet.result_names = ["x_fp8", "", "x_fp8_t"]} : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
// CHECK-NOT: fp8.cast %
// CHECK: fp8.gemm %[[QT]], %arg1, %arg2, %arg2 :
// CHECK: fp8.gemm %arg3, %arg3, %arg2, %arg2 {transpose_a = true}
func.func @plain_cast(%x: tensor<16x64xf32>, %w: tensor<16x32xf8E4M3FN>, %s: tensor<f32>, %b: tensor<16x16xf8E4M3FN>) -> (tensor<64x32xf32>, tensor<16x16xf32>) {
  %q = fp8.cast %x, %s {octet.result_names = ["x_fp8"]} : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>
  %y = fp8.gemm %q, %w, %s, %s {transpose_a = true} : (tensor<16x64xf8E4M3FN>, tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x32xf32>
  %u = fp8.gemm %b, %b, %s, %s {transpose_a = true} : (tensor<16x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x16xf32>
  return %y, %u : tensor<64x32xf32>, tensor<16x16xf32>
}

// -----

// A Linear of a [B, S, K] activation: its wgrad GEMM reads the codes through a Reshape to
// [B*S, K] (B without transpose_b). The cast's transposed copy of its input as 2-D, [K, B*S], is
// that operand transposed: the GEMM reads it, and the Reshape goes. The fprop GEMM keeps the codes.
// CHECK-LABEL: func.func @through_reshape
// CHECK: %[[Q:.+]], %{{.+}}, %[[QT:.+]] = fp8.cast_amax %arg0, %arg2 : tensor<2x8x64xf32>, tensor<f32> -> tensor<2x8x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
// CHECK-NOT: onnx.Reshape
// CHECK: fp8.gemm %arg1, %[[QT]], %arg2, %arg2 {accumulation = #fp8.accumulation<split>, transpose_b = true}
// CHECK: fp8.gemm %[[Q]], %arg3
func.func @through_reshape(%x: tensor<2x8x64xf32>, %gt: tensor<32x16xf8E5M2>, %s: tensor<f32>, %w: tensor<32x64xf8E4M3FN>, %shape: tensor<2xi64>) -> (tensor<32x64xf32>, tensor<2x8x32xf32>) {
  %q, %a = fp8.cast_amax %x, %s : tensor<2x8x64xf32>, tensor<f32> -> tensor<2x8x64xf8E4M3FN>, tensor<f32>
  %q2 = onnx.Reshape %q, %shape : (tensor<2x8x64xf8E4M3FN>, tensor<2xi64>) -> tensor<16x64xf8E4M3FN>
  %d = fp8.gemm %gt, %q2, %s, %s {accumulation = #fp8.accumulation<split>} : (tensor<32x16xf8E5M2>, tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %y = fp8.gemm %q, %w, %s, %s {transpose_b = true} : (tensor<2x8x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<2x8x32xf32>
  return %d, %y : tensor<32x64xf32>, tensor<2x8x32xf32>
}

// -----

// A Reshape that moves the last dim ([2, 8, 64] as [32, 32]) is not the codes as 2-D: unchanged.
// CHECK-LABEL: func.func @reshape_not_2d_view
// CHECK-NOT: tensor<64x16xf8E4M3FN>
// CHECK: onnx.Reshape
// CHECK: fp8.gemm %arg1, %{{.+}}, %arg2, %arg2 :
func.func @reshape_not_2d_view(%x: tensor<2x8x64xf32>, %gt: tensor<32x32xf8E5M2>, %s: tensor<f32>, %shape: tensor<2xi64>) -> tensor<32x32xf32> {
  %q, %a = fp8.cast_amax %x, %s : tensor<2x8x64xf32>, tensor<f32> -> tensor<2x8x64xf8E4M3FN>, tensor<f32>
  %q2 = onnx.Reshape %q, %shape : (tensor<2x8x64xf8E4M3FN>, tensor<2xi64>) -> tensor<32x32xf8E4M3FN>
  %d = fp8.gemm %gt, %q2, %s, %s : (tensor<32x32xf8E5M2>, tensor<32x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x32xf32>
  return %d : tensor<32x32xf32>
}
