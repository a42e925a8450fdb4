// RUN: fp8-opt %s -split-input-file --octet-fuse-attention | FileCheck %s

// F.scaled_dot_product_attention(is_causal=True) as torch.onnx.export (dynamo) decomposes it:
// Q and Kt each scaled by the square root of the scale (0.5 * 0.5), Kt as Reshape, Transpose
// [0, 2, 1], Reshape of K, the additive mask Where(Equal(Trilu(Expand(1)), 0), -FLT_MAX, 0),
// and the guard Where(IsNaN(P), 0, P) (IsNaN imported as Not(Equal(P, P))) before P V. All of it
// becomes one Attention node of scale 0.25; nothing of the decomposition stays.
// CHECK-LABEL: func.func @sdpa_is_causal
// CHECK: %[[Y:.+]]:2 = onnx.node "Attention"(%arg0, %arg1, %arg2) {attrs = {is_causal = 1 : si64, scale = 2.500000e-01 : f32}, domain = "octet"}
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.MatMul
// CHECK-NOT: onnx.Trilu
// CHECK-NOT: onnx.Where
// CHECK-NOT: onnx.Reshape
// CHECK: return %[[Y]]#0
func.func @sdpa_is_causal(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %sh3 = onnx.Constant {value = dense<[-1, 4, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %k3 = onnx.Reshape %k, %sh3 : (tensor<1x2x4x8xf32>, tensor<3xi64>) -> tensor<2x4x8xf32>
  %kt3 = onnx.Transpose %k3 {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %sh4 = onnx.Constant {value = dense<[1, 2, 8, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %kt = onnx.Reshape %kt3, %sh4 : (tensor<2x8x4xf32>, tensor<4xi64>) -> tensor<1x2x8x4xf32>
  %half = onnx.Constant {value = dense<0.5> : tensor<1xf32>} : () -> tensor<1xf32>
  %qs = onnx.Mul %q, %half : (tensor<1x2x4x8xf32>, tensor<1xf32>) -> tensor<1x2x4x8xf32>
  %half2 = onnx.Constant {value = dense<0.5> : tensor<1xf32>} : () -> tensor<1xf32>
  %kts = onnx.Mul %kt, %half2 : (tensor<1x2x8x4xf32>, tensor<1xf32>) -> tensor<1x2x8x4xf32>
  %tt = onnx.Constant {value = dense<4> : tensor<2xi64>} : () -> tensor<2xi64>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ones = onnx.Expand %one, %tt : (tensor<f32>, tensor<2xi64>) -> tensor<4x4xf32>
  %none = onnx.none
  %tril = onnx.Trilu %ones, %none {upper = 0 : si64} : (tensor<4x4xf32>, none) -> tensor<4x4xf32>
  %zero = onnx.Constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %hidden = onnx.Equal %tril, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %neg = onnx.Constant {value = dense<-3.40282347E+38> : tensor<f32>} : () -> tensor<f32>
  %zero2 = onnx.Constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %mask = onnx.Where %hidden, %neg, %zero2 : (tensor<4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<4x4xf32>
  %s = onnx.MatMul %qs, %kts : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %sm = onnx.Add %s, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = onnx.Softmax %sm {axis = -1 : si64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %same = onnx.Equal %p, %p : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %nan = onnx.Not %same : (tensor<1x2x4x4xi1>) -> tensor<1x2x4x4xi1>
  %z = onnx.Constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %pg = onnx.Where %nan, %z, %p : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = onnx.MatMul %pg, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// HF's causal mask (sdpa attention at a sequence too long for the import to fold the mask):
// LessOrEqual of the key positions [1, 1, 1, T] and the query positions [1, 1, T, 1], expanded
// over the batch, then Where(visible, 0, -FLT_MAX) added to the scores.
// CHECK-LABEL: func.func @hf_positions_mask
// CHECK: onnx.node "Attention"(%arg0, %arg1, %arg2) {attrs = {is_causal = 1 : si64, scale = 1.000000e+00 : f32}, domain = "octet"}
// CHECK-NOT: onnx.LessOrEqual
// CHECK-NOT: onnx.Softmax
func.func @hf_positions_mask(%q: tensor<2x2x4x8xf32>, %kIn: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %j = onnx.Constant {value = dense<[[[[0, 1, 2, 3]]]]> : tensor<1x1x1x4xi64>} : () -> tensor<1x1x1x4xi64>
  %i = onnx.Constant {value = dense<[[[[0], [1], [2], [3]]]]> : tensor<1x1x4x1xi64>} : () -> tensor<1x1x4x1xi64>
  %vis = onnx.LessOrEqual %j, %i : (tensor<1x1x1x4xi64>, tensor<1x1x4x1xi64>) -> tensor<1x1x4x4xi1>
  %shape = onnx.Constant {value = dense<[2, 1, 4, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %visb = onnx.Expand %vis, %shape : (tensor<1x1x4x4xi1>, tensor<4xi64>) -> tensor<2x1x4x4xi1>
  %zero = onnx.Constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %neg = onnx.Constant {value = dense<-3.40282347E+38> : tensor<f32>} : () -> tensor<f32>
  %mask = onnx.Where %visb, %zero, %neg : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %kt = onnx.Transpose %kIn {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = onnx.MatMul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %sm = onnx.Add %s, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = onnx.Softmax %sm {axis = -1 : si64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %y = onnx.MatMul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// The positions offset against each other (a key may see the next query's key): not causal, so
// it stays as it is.
// CHECK-LABEL: func.func @shifted_positions
// CHECK-NOT: Attention
// CHECK: onnx.Softmax
func.func @shifted_positions(%q: tensor<1x1x4x8xf32>, %kt: tensor<1x1x8x4xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %j = onnx.Constant {value = dense<[[[[0, 1, 2, 3]]]]> : tensor<1x1x1x4xi64>} : () -> tensor<1x1x1x4xi64>
  %i = onnx.Constant {value = dense<[[[[1], [2], [3], [4]]]]> : tensor<1x1x4x1xi64>} : () -> tensor<1x1x4x1xi64>
  %vis = onnx.LessOrEqual %j, %i : (tensor<1x1x1x4xi64>, tensor<1x1x4x1xi64>) -> tensor<1x1x4x4xi1>
  %zero = onnx.Constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %neg = onnx.Constant {value = dense<-3.40282347E+38> : tensor<f32>} : () -> tensor<f32>
  %mask = onnx.Where %vis, %zero, %neg : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x1x4x8xf32>, tensor<1x1x8x4xf32>) -> tensor<1x1x4x4xf32>
  %sm = onnx.Add %s, %mask : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %p = onnx.Softmax %sm {axis = -1 : si64} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %y : tensor<1x1x4x8xf32>
}

// -----

// BERT without padding: its mask Where(all true, 0, -FLT_MAX) adds zeros, so the attention is
// unmasked; the eval-mode dropout (Identity) and a Cast to the type P has go too.
// CHECK-LABEL: func.func @zero_mask
// CHECK: onnx.node "Attention"(%arg0, %arg1, %arg2) {attrs = {is_causal = 0 : si64, scale = 2.500000e-01 : f32}, domain = "octet"}
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.Identity
// CHECK-NOT: onnx.Cast
func.func @zero_mask(%q: tensor<2x2x4x8xf32>, %kIn: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %all = onnx.Constant {value = dense<true> : tensor<2x1x4x4xi1>} : () -> tensor<2x1x4x4xi1>
  %zero = onnx.Constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %zc = onnx.Identity %zero : (tensor<f32>) -> tensor<f32>
  %neg = onnx.Constant {value = dense<-3.40282347E+38> : tensor<f32>} : () -> tensor<f32>
  %mask = onnx.Where %all, %zc, %neg : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %kt = onnx.Transpose %kIn {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = onnx.MatMul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %c = onnx.Constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %s2 = onnx.Mul %s, %c : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %sm = onnx.Add %s2, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = onnx.Softmax %sm {axis = -1 : si64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pc = onnx.Cast %p {to = 1 : si64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pd = onnx.Identity %pc : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %y = onnx.MatMul %pd, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// P read by something besides the NaN guard (here returned too): the decomposition stays.
// CHECK-LABEL: func.func @guard_with_another_reader
// CHECK-NOT: Attention
// CHECK: onnx.Softmax
func.func @guard_with_another_reader(%q: tensor<1x1x4x8xf32>, %kt: tensor<1x1x8x4xf32>, %v: tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>) {
  %s = onnx.MatMul %q, %kt : (tensor<1x1x4x8xf32>, tensor<1x1x8x4xf32>) -> tensor<1x1x4x4xf32>
  %p = onnx.Softmax %s {axis = -1 : si64} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %same = onnx.Equal %p, %p : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xi1>
  %nan = onnx.Not %same : (tensor<1x1x4x4xi1>) -> tensor<1x1x4x4xi1>
  %z = onnx.Constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %pg = onnx.Where %nan, %z, %p : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %y = onnx.MatMul %pg, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %y, %p : tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>
}
