// RUN: fp8-opt %s -split-input-file --octet-fold-gemm-bias | FileCheck %s

// A Q/K/V projection viewed [B, T, H*d] and read only by BF16 attention (forward and gradient):
// the attention adds the bias.
// CHECK-LABEL: func.func @attention
// CHECK: fp8.gemm {{.*}}octet.bias_fold = "attention"
func.func @attention(%a: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %s: tensor<f32>, %bias: tensor<64xf32>, %dy: tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x64xf32>) {
  %q = fp8.gemm %a, %w, %s, %s bias %bias {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<64xf32>) -> tensor<32x64xf32>
  %shape = onnx.Constant {value = dense<[2, 16, 64]> : tensor<3xi64>} : () -> tensor<3xi64>
  %v = onnx.Reshape %q, %shape : (tensor<32x64xf32>, tensor<3xi64>) -> tensor<2x16x64xf32>
  %y, %lse = onnx.node "Attention"(%v, %v, %v) {attrs = {is_causal = 1 : si64, q_num_heads = 4 : si64, kv_num_heads = 4 : si64, precision = "bf16"}, domain = "octet"} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = onnx.node "AttentionGrad"(%v, %v, %v, %y, %lse, %dy) {attrs = {is_causal = 1 : si64, q_num_heads = 4 : si64, kv_num_heads = 4 : si64, precision = "bf16"}, domain = "octet"} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x4x16xf32>, tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>)
  return %y, %dq : tensor<2x16x64xf32>, tensor<2x16x64xf32>
}

// -----

// The MLP: a float32 GELU reads the result first (the GELU gradient reads it again later): the
// GELU adds the bias in place.
// CHECK-LABEL: func.func @gelu
// CHECK: fp8.gemm {{.*}}octet.bias_fold = "gelu"
func.func @gelu(%a: tensor<32x64xf8E4M3FN>, %w: tensor<128x64xf8E4M3FN>, %s: tensor<f32>, %bias: tensor<128xf32>) -> (tensor<32x128xf32>, tensor<32x128xf32>) {
  %h = fp8.gemm %a, %w, %s, %s bias %bias {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<128xf32>) -> tensor<32x128xf32>
  %g = onnx.Gelu %h : (tensor<32x128xf32>) -> tensor<32x128xf32>
  return %g, %h : tensor<32x128xf32>, tensor<32x128xf32>
}

// -----

// The residual Add (through a view) and the head-split Transpose, the one reader of each result.
// CHECK-LABEL: func.func @add_and_copy
// CHECK: fp8.gemm {{.*}}octet.bias_fold = "add"
// CHECK: fp8.gemm {{.*}}octet.bias_fold = "copy"
func.func @add_and_copy(%a: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %s: tensor<f32>, %bias: tensor<64xf32>, %x: tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<64x32xf32>) {
  %y = fp8.gemm %a, %w, %s, %s bias %bias {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<64xf32>) -> tensor<32x64xf32>
  %shape = onnx.Constant {value = dense<[2, 16, 64]> : tensor<3xi64>} : () -> tensor<3xi64>
  %v = onnx.Reshape %y, %shape : (tensor<32x64xf32>, tensor<3xi64>) -> tensor<2x16x64xf32>
  %r = onnx.Add %x, %v : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %z = fp8.gemm %a, %w, %s, %s bias %bias {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<64xf32>) -> tensor<32x64xf32>
  %t = onnx.Transpose %z {perm = array<i64: 1, 0>} : (tensor<32x64xf32>) -> tensor<64x32xf32>
  return %r, %t : tensor<2x16x64xf32>, tensor<64x32xf32>
}

// -----

// Rowwise scales (ao's rowwise recipes: a scale_inv per row of A and of B) fold as per-tensor ones.
// CHECK-LABEL: func.func @rowwise_add
// CHECK: fp8.gemm {{.*}}octet.bias_fold = "add"
func.func @rowwise_add(%a: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %sa: tensor<32x1xf32>, %sw: tensor<64x1xf32>, %bias: tensor<64xf32>, %x: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %y = fp8.gemm %a, %w, %sa, %sw bias %bias {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<32x1xf32>, tensor<64x1xf32>, tensor<64xf32>) -> tensor<32x64xf32>
  %r = onnx.Add %x, %y : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  return %r : tensor<32x64xf32>
}

// -----

// Left alone: a BF16 result (cuBLASLt's epilogue adds a BF16 bias); an Add whose operand has a
// second reader; a GEMM read by TF32 attention; B not transposed; an Add of a broadcast row.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: octet.bias_fold
// CHECK: return
func.func @left_alone(%a: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %s: tensor<f32>, %bias: tensor<64xf32>, %bb: tensor<64xbf16>, %x: tensor<32x64xf32>, %row: tensor<64xf32>) -> (tensor<32x64xbf16>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<2x16x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>) {
  %b16 = fp8.gemm %a, %w, %s, %s bias %bb {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<64xbf16>) -> tensor<32x64xbf16>
  %y = fp8.gemm %a, %w, %s, %s bias %bias {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<64xf32>) -> tensor<32x64xf32>
  %r = onnx.Add %x, %y : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %q = fp8.gemm %a, %w, %s, %s bias %bias {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<64xf32>) -> tensor<32x64xf32>
  %shape = onnx.Constant {value = dense<[2, 16, 64]> : tensor<3xi64>} : () -> tensor<3xi64>
  %v = onnx.Reshape %q, %shape : (tensor<32x64xf32>, tensor<3xi64>) -> tensor<2x16x64xf32>
  %o, %lse = onnx.node "Attention"(%v, %v, %v) {attrs = {is_causal = 1 : si64, q_num_heads = 4 : si64, kv_num_heads = 4 : si64, precision = "tf32"}, domain = "octet"} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x4x16xf32>)
  %n = fp8.gemm %a, %w, %s, %s bias %bias : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<64xf32>) -> tensor<32x64xf32>
  %m = onnx.Add %x, %n : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %p = fp8.gemm %a, %w, %s, %s bias %bias {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<64xf32>) -> tensor<32x64xf32>
  %pr = onnx.Add %p, %row : (tensor<32x64xf32>, tensor<64xf32>) -> tensor<32x64xf32>
  return %b16, %r, %y, %o, %m, %pr : tensor<32x64xbf16>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<2x16x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>
}
