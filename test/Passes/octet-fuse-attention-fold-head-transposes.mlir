// RUN: fp8-opt %s -split-input-file --octet-fuse-attention | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-attention{fold-head-transposes=false})' | FileCheck %s --check-prefix=OFF

// The benchmark graphs' attention: Q, K and V split from [B, S, H, d] projections by
// Transpose [0, 2, 1, 3] (K by [0, 2, 3, 1], already transposed), Y merged back by
// Transpose [0, 2, 1, 3]. The node reads the projections in place as [B, S, H * d] and Y's
// merge is a Reshape: no Transpose is left.
// CHECK-LABEL: func.func @heads_in_place
// CHECK-DAG: %[[Q:.+]] = onnx.Reshape %arg0, %{{.+}} : (tensor<2x8x4x16xf32>, tensor<3xi64>) -> tensor<2x8x64xf32>
// CHECK-DAG: %[[K:.+]] = onnx.Reshape %arg1, %{{.+}} : (tensor<2x8x4x16xf32>, tensor<3xi64>) -> tensor<2x8x64xf32>
// CHECK-DAG: %[[V:.+]] = onnx.Reshape %arg2, %{{.+}} : (tensor<2x8x4x16xf32>, tensor<3xi64>) -> tensor<2x8x64xf32>
// CHECK: %[[A:.+]]:2 = onnx.node "Attention"(%[[Q]], %[[K]], %[[V]]) {attrs = {is_causal = 1 : si64, kv_num_heads = 4 : si64, q_num_heads = 4 : si64, scale = 2.500000e-01 : f32}, domain = "octet"} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x4x8xf32>)
// CHECK: %[[Y:.+]] = onnx.Reshape %[[A]]#0, %{{.+}} : (tensor<2x8x64xf32>, tensor<4xi64>) -> tensor<2x8x4x16xf32>
// CHECK-NOT: onnx.Transpose
// CHECK: return %[[Y]]
// OFF-LABEL: func.func @heads_in_place
// OFF-COUNT-3: onnx.Transpose
// OFF: onnx.node "Attention"({{.+}}) {attrs = {is_causal = 1 : si64, scale = 2.500000e-01 : f32}, domain = "octet"} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// OFF: onnx.Transpose
func.func @heads_in_place(%qIn: tensor<2x8x4x16xf32>, %kIn: tensor<2x8x4x16xf32>, %vIn: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  %q = onnx.Transpose %qIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %kt = onnx.Transpose %kIn {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x16x8xf32>
  %v = onnx.Transpose %vIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %mask = onnx.Constant {value = dense<[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]> : tensor<8x8xi1>} : () -> tensor<8x8xi1>
  %neg = onnx.Constant {value = dense<-1.0e+09> : tensor<f32>} : () -> tensor<f32>
  %c = onnx.Constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %s = onnx.MatMul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %s2 = onnx.Mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %s3 = onnx.Where %mask, %s2, %neg : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = onnx.Softmax %s3 {axis = -1 : si64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %y = onnx.MatMul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %m = onnx.Transpose %y {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  return %m : tensor<2x8x4x16xf32>
}

// -----

// Y is also read head-major (returned as it is): that reader gets Y through one Transpose of
// the merged view; the merge itself is still the view. Q's split is read elsewhere too, so it stays.
// CHECK-LABEL: func.func @head_major_reader
// CHECK: %[[A:.+]]:2 = onnx.node "Attention"({{.+}}) {attrs = {is_causal = 0 : si64, kv_num_heads = 2 : si64, q_num_heads = 2 : si64, scale = 1.000000e+00 : f32}, domain = "octet"} : (tensor<1x3x16xf32>, tensor<1x5x16xf32>, tensor<1x5x16xf32>) -> (tensor<1x3x16xf32>, tensor<1x2x3xf32>)
// CHECK: %[[Y4:.+]] = onnx.Reshape %[[A]]#0, %{{.+}} : (tensor<1x3x16xf32>, tensor<4xi64>) -> tensor<1x3x2x8xf32>
// CHECK: %[[YH:.+]] = onnx.Transpose %[[Y4]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
// CHECK: return %[[Y4]], %[[YH]], %{{.+}} : tensor<1x3x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
func.func @head_major_reader(%qIn: tensor<1x3x2x8xf32>, %kIn: tensor<1x5x2x8xf32>, %vIn: tensor<1x5x2x8xf32>) -> (tensor<1x3x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) {
  %q = onnx.Transpose %qIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %kt = onnx.Transpose %kIn {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x5x2x8xf32>) -> tensor<1x2x8x5xf32>
  %v = onnx.Transpose %vIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x5x2x8xf32>) -> tensor<1x2x5x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x2x3x8xf32>, tensor<1x2x8x5xf32>) -> tensor<1x2x3x5xf32>
  %p = onnx.Softmax %s {axis = -1 : si64} : (tensor<1x2x3x5xf32>) -> tensor<1x2x3x5xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x2x3x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x3x8xf32>
  %m = onnx.Transpose %y {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x3x8xf32>) -> tensor<1x3x2x8xf32>
  return %m, %y, %q : tensor<1x3x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
}

// -----

// Q is not a head split (an argument): the node keeps the head-major form, K a Transpose of its source.
// CHECK-LABEL: func.func @query_not_split
// CHECK: %[[K:.+]] = onnx.Transpose %arg1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK: onnx.node "Attention"(%arg0, %[[K]], %{{.+}}) {attrs = {is_causal = 0 : si64, scale = 1.000000e+00 : f32}, domain = "octet"} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
// CHECK-NOT: q_num_heads
func.func @query_not_split(%q: tensor<1x2x4x8xf32>, %kIn: tensor<1x4x2x8xf32>, %vIn: tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32> {
  %kt = onnx.Transpose %kIn {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x8x4xf32>
  %v = onnx.Transpose %vIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %p = onnx.Softmax %s {axis = -1 : si64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// The exporter's SDPA ends in a Reshape of Y to its own shape (and a copy may follow) before the
// merge: those are Y, so the merge is still the view and no Transpose is left.
// CHECK-LABEL: func.func @merge_through_copy
// CHECK: %[[A:.+]]:2 = onnx.node "Attention"
// CHECK: %[[Y:.+]] = onnx.Reshape %[[A]]#0, %{{.+}} : (tensor<2x8x64xf32>, tensor<4xi64>) -> tensor<2x8x4x16xf32>
// CHECK-NOT: onnx.Transpose
// CHECK: return %[[Y]]
// OFF-LABEL: func.func @merge_through_copy
// OFF: onnx.node "Attention"
func.func @merge_through_copy(%qIn: tensor<2x8x4x16xf32>, %kIn: tensor<2x8x4x16xf32>, %vIn: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  %q = onnx.Transpose %qIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %kt = onnx.Transpose %kIn {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x16x8xf32>
  %v = onnx.Transpose %vIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %mask = onnx.Constant {value = dense<[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]> : tensor<8x8xi1>} : () -> tensor<8x8xi1>
  %neg = onnx.Constant {value = dense<-1.0e+09> : tensor<f32>} : () -> tensor<f32>
  %c = onnx.Constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %s = onnx.MatMul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %s2 = onnx.Mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %s3 = onnx.Where %mask, %s2, %neg : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = onnx.Softmax %s3 {axis = -1 : si64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %y = onnx.MatMul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %shape = onnx.Constant {value = dense<[2, 4, 8, 16]> : tensor<4xi64>} : () -> tensor<4xi64>
  %view = onnx.Reshape %y, %shape : (tensor<2x4x8x16xf32>, tensor<4xi64>) -> tensor<2x4x8x16xf32>
  %copy = onnx.Identity %view : (tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %m = onnx.Transpose %copy {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  return %m : tensor<2x8x4x16xf32>
}
