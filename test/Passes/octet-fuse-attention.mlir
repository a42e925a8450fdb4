// RUN: fp8-opt %s -split-input-file --octet-fuse-attention | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-attention{max-head-dim=256})' | FileCheck %s --check-prefix=WIDE

// The benchmark graphs' attention: MatMul(q, kT), Mul by 1/sqrt(d), Where(causal, s, -1e9),
// Softmax, MatMul(p, v). K comes from the Transpose that made kT, re-permuted.
// CHECK-LABEL: func.func @causal_where
// CHECK: %[[K:.+]] = onnx.Transpose %arg1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK: %[[Y:.+]]:2 = onnx.node "Attention"(%arg0, %[[K]], %arg2) {attrs = {is_causal = 1 : si64, scale = 2.500000e-01 : f32}, domain = "octet"} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.MatMul
// CHECK: return %[[Y]]#0
func.func @causal_where(%q: tensor<2x4x8x16xf32>, %kIn: tensor<2x8x4x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = onnx.Transpose %kIn {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x16x8xf32>
  %mask = onnx.Constant {value = dense<[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]> : tensor<8x8xi1>} : () -> tensor<8x8xi1>
  %neg = onnx.Constant {value = dense<-1.0e+09> : tensor<f32>} : () -> tensor<f32>
  %c = onnx.Constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %s = onnx.MatMul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %s2 = onnx.Mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %s3 = onnx.Where %mask, %s2, %neg : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = onnx.Softmax %s3 {axis = -1 : si64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %y = onnx.MatMul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %y : tensor<2x4x8x16xf32>
}

// -----

// An additive 0/-inf causal mask after a Div, rank 3, kT an argument: K is a Transpose of it.
// CHECK-LABEL: func.func @additive_mask
// CHECK: %[[K:.+]] = onnx.Transpose %arg1 {perm = array<i64: 0, 2, 1>} : (tensor<3x8x4xf32>) -> tensor<3x4x8xf32>
// CHECK: onnx.node "Attention"(%arg0, %[[K]], %arg2) {attrs = {is_causal = 1 : si64, scale = 5.000000e-01 : f32}, domain = "octet"}
// CHECK-NOT: onnx.Softmax
func.func @additive_mask(%q: tensor<3x4x8xf32>, %kt: tensor<3x8x4xf32>, %v: tensor<3x4x8xf32>) -> tensor<3x4x8xf32> {
  %mask = onnx.Constant {value = dense<[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]> : tensor<1x4x4xf32>} : () -> tensor<1x4x4xf32>
  %two = onnx.Constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %s = onnx.MatMul %q, %kt : (tensor<3x4x8xf32>, tensor<3x8x4xf32>) -> tensor<3x4x4xf32>
  %s2 = onnx.Div %s, %two : (tensor<3x4x4xf32>, tensor<f32>) -> tensor<3x4x4xf32>
  %s3 = onnx.Add %mask, %s2 : (tensor<1x4x4xf32>, tensor<3x4x4xf32>) -> tensor<3x4x4xf32>
  %p = onnx.Softmax %s3 {axis = 2 : si64} : (tensor<3x4x4xf32>) -> tensor<3x4x4xf32>
  %y = onnx.MatMul %p, %v : (tensor<3x4x4xf32>, tensor<3x4x8xf32>) -> tensor<3x4x8xf32>
  return %y : tensor<3x4x8xf32>
}

// -----

// No mask, no scale; Tq != Tk. kT = Transpose(Identity(Transpose(x))) as torch exports it: the
// two permutations cancel, so K is the first Transpose's result (the copy goes) and no Transpose
// is added.
// CHECK-LABEL: func.func @unmasked
// CHECK: %[[K:.+]] = onnx.Transpose %arg1
// CHECK-NEXT: %{{.+}}:2 = onnx.node "Attention"(%arg0, %[[K]], %arg2) {attrs = {is_causal = 0 : si64, scale = 1.000000e+00 : f32}, domain = "octet"} : (tensor<1x2x3x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3xf32>)
// CHECK-NOT: onnx.Transpose
// CHECK-NOT: onnx.Identity
func.func @unmasked(%q: tensor<1x2x3x8xf32>, %x: tensor<1x5x2x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x2x3x8xf32> {
  %t = onnx.Transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x5x2x8xf32>) -> tensor<1x2x5x8xf32>
  %i = onnx.Identity %t : (tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  %kt = onnx.Transpose %i {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x5x8xf32>) -> tensor<1x2x8x5xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x2x3x8xf32>, tensor<1x2x8x5xf32>) -> tensor<1x2x3x5xf32>
  %p = onnx.Softmax %s {axis = -1 : si64} : (tensor<1x2x3x5xf32>) -> tensor<1x2x3x5xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x2x3x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x3x8xf32>
  return %y : tensor<1x2x3x8xf32>
}

// -----

// A mask that is not causal (the last row hides a key) stays as it is.
// CHECK-LABEL: func.func @not_causal
// CHECK-NOT: Attention
// CHECK: onnx.Softmax
func.func @not_causal(%q: tensor<1x2x8xf32>, %kt: tensor<1x8x2xf32>, %v: tensor<1x2x8xf32>) -> tensor<1x2x8xf32> {
  %mask = onnx.Constant {value = dense<[[true, false], [false, true]]> : tensor<2x2xi1>} : () -> tensor<2x2xi1>
  %neg = onnx.Constant {value = dense<-1.0e+09> : tensor<f32>} : () -> tensor<f32>
  %s = onnx.MatMul %q, %kt : (tensor<1x2x8xf32>, tensor<1x8x2xf32>) -> tensor<1x2x2xf32>
  %s3 = onnx.Where %mask, %s, %neg : (tensor<2x2xi1>, tensor<1x2x2xf32>, tensor<f32>) -> tensor<1x2x2xf32>
  %p = onnx.Softmax %s3 {axis = -1 : si64} : (tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x2x2xf32>, tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  return %y : tensor<1x2x8xf32>
}

// -----

// The probabilities are also returned: the [T, T] tensor is needed, nothing is fused.
// CHECK-LABEL: func.func @probs_used
// CHECK-NOT: Attention
// CHECK: onnx.Softmax
func.func @probs_used(%q: tensor<1x4x8xf32>, %kt: tensor<1x8x4xf32>, %v: tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x4xf32>) {
  %s = onnx.MatMul %q, %kt : (tensor<1x4x8xf32>, tensor<1x8x4xf32>) -> tensor<1x4x4xf32>
  %p = onnx.Softmax %s {axis = -1 : si64} : (tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x4x4xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return %y, %p : tensor<1x4x8xf32>, tensor<1x4x4xf32>
}

// -----

// A negative scale, and a Softmax over another axis, are not attention as the kernels compute it.
// CHECK-LABEL: func.func @not_attention
// CHECK-NOT: Attention
// CHECK-COUNT-2: onnx.Softmax
func.func @not_attention(%q: tensor<1x4x8xf32>, %kt: tensor<1x8x4xf32>, %v: tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>) {
  %c = onnx.Constant {value = dense<-1.0> : tensor<f32>} : () -> tensor<f32>
  %s = onnx.MatMul %q, %kt : (tensor<1x4x8xf32>, tensor<1x8x4xf32>) -> tensor<1x4x4xf32>
  %s2 = onnx.Mul %s, %c : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %p = onnx.Softmax %s2 {axis = -1 : si64} : (tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x4x4xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %t = onnx.MatMul %q, %kt : (tensor<1x4x8xf32>, tensor<1x8x4xf32>) -> tensor<1x4x4xf32>
  %p2 = onnx.Softmax %t {axis = 1 : si64} : (tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %y2 = onnx.MatMul %p2, %v : (tensor<1x4x4xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return %y, %y2 : tensor<1x4x8xf32>, tensor<1x4x8xf32>
}

// -----

// Heads wider than max-head-dim (128 by default) stay unfused.
// CHECK-LABEL: func.func @wide_head
// CHECK-NOT: Attention
// WIDE-LABEL: func.func @wide_head
// WIDE: onnx.node "Attention"
func.func @wide_head(%q: tensor<1x4x256xf32>, %kt: tensor<1x256x4xf32>, %v: tensor<1x4x256xf32>) -> tensor<1x4x256xf32> {
  %s = onnx.MatMul %q, %kt : (tensor<1x4x256xf32>, tensor<1x256x4xf32>) -> tensor<1x4x4xf32>
  %p = onnx.Softmax %s {axis = -1 : si64} : (tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x4x4xf32>, tensor<1x4x256xf32>) -> tensor<1x4x256xf32>
  return %y : tensor<1x4x256xf32>
}
