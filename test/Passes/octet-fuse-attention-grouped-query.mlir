// RUN: fp8-opt %s -split-input-file --octet-fuse-attention | FileCheck %s

// Grouped-query attention as HF's repeat_kv writes it (eager attention: Kt a Transpose): K and V
// have 2 heads, each repeated twice for the 4 query heads by Unsqueeze, Expand and Reshape. The
// node reads the 2-head tensors (query head h reads K/V head h / 2) and the repeats go.
// CHECK-LABEL: func.func @grouped_eager
// CHECK: %[[Y:.+]]:2 = onnx.node "Attention"(%arg0, %arg1, %arg2) {attrs = {is_causal = 0 : si64, scale = 2.500000e-01 : f32}, domain = "octet"} : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
// CHECK-NOT: onnx.Expand
// CHECK-NOT: onnx.Unsqueeze
// CHECK: return %[[Y]]#0
func.func @grouped_eager(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %ax = onnx.Constant {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %to5 = onnx.Constant {value = dense<[1, 2, 2, 8, 16]> : tensor<5xi64>} : () -> tensor<5xi64>
  %to4 = onnx.Constant {value = dense<[1, 4, 8, 16]> : tensor<4xi64>} : () -> tensor<4xi64>
  %c = onnx.Constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %ku = onnx.Unsqueeze %k, %ax : (tensor<1x2x8x16xf32>, tensor<1xi64>) -> tensor<1x2x1x8x16xf32>
  %ke = onnx.Expand %ku, %to5 : (tensor<1x2x1x8x16xf32>, tensor<5xi64>) -> tensor<1x2x2x8x16xf32>
  %kc = onnx.Identity %ke : (tensor<1x2x2x8x16xf32>) -> tensor<1x2x2x8x16xf32>
  %kr = onnx.Reshape %kc, %to4 : (tensor<1x2x2x8x16xf32>, tensor<4xi64>) -> tensor<1x4x8x16xf32>
  %vu = onnx.Unsqueeze %v, %ax : (tensor<1x2x8x16xf32>, tensor<1xi64>) -> tensor<1x2x1x8x16xf32>
  %ve = onnx.Expand %vu, %to5 : (tensor<1x2x1x8x16xf32>, tensor<5xi64>) -> tensor<1x2x2x8x16xf32>
  %vr = onnx.Reshape %ve, %to4 : (tensor<1x2x2x8x16xf32>, tensor<4xi64>) -> tensor<1x4x8x16xf32>
  %kt = onnx.Transpose %kr {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %s2 = onnx.Mul %s, %c : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %p = onnx.Softmax %s2 {axis = -1 : si64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = onnx.MatMul %p, %vr : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Heads in place with grouped K and V: Q, K and V are head splits of [B, S, heads, d] tensors
// (K and V with 2 heads, repeated for 4): the node takes the 3-D form, q_num_heads = 4 and
// kv_num_heads = 2, K and V [1, 8, 2 * 16].
// CHECK-LABEL: func.func @grouped_heads_in_place
// CHECK-DAG: %[[Q:.+]] = onnx.Reshape %arg0, %{{.+}} : (tensor<1x8x4x16xf32>, tensor<3xi64>) -> tensor<1x8x64xf32>
// CHECK-DAG: %[[K:.+]] = onnx.Reshape %arg1, %{{.+}} : (tensor<1x8x2x16xf32>, tensor<3xi64>) -> tensor<1x8x32xf32>
// CHECK-DAG: %[[V:.+]] = onnx.Reshape %arg2, %{{.+}} : (tensor<1x8x2x16xf32>, tensor<3xi64>) -> tensor<1x8x32xf32>
// CHECK: onnx.node "Attention"(%[[Q]], %[[K]], %[[V]]) {attrs = {is_causal = 0 : si64, kv_num_heads = 2 : si64, q_num_heads = 4 : si64, scale = 2.500000e-01 : f32}, domain = "octet"} : (tensor<1x8x64xf32>, tensor<1x8x32xf32>, tensor<1x8x32xf32>) -> (tensor<1x8x64xf32>, tensor<1x4x8xf32>)
// CHECK-NOT: onnx.Expand
func.func @grouped_heads_in_place(%qIn: tensor<1x8x4x16xf32>, %kIn: tensor<1x8x2x16xf32>, %vIn: tensor<1x8x2x16xf32>) -> tensor<1x8x4x16xf32> {
  %ax = onnx.Constant {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %to5 = onnx.Constant {value = dense<[1, 2, 2, 8, 16]> : tensor<5xi64>} : () -> tensor<5xi64>
  %to4 = onnx.Constant {value = dense<[1, 4, 8, 16]> : tensor<4xi64>} : () -> tensor<4xi64>
  %c = onnx.Constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %q = onnx.Transpose %qIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x4x16xf32>) -> tensor<1x4x8x16xf32>
  %k = onnx.Transpose %kIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x16xf32>) -> tensor<1x2x8x16xf32>
  %v = onnx.Transpose %vIn {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x16xf32>) -> tensor<1x2x8x16xf32>
  %ku = onnx.Unsqueeze %k, %ax : (tensor<1x2x8x16xf32>, tensor<1xi64>) -> tensor<1x2x1x8x16xf32>
  %ke = onnx.Expand %ku, %to5 : (tensor<1x2x1x8x16xf32>, tensor<5xi64>) -> tensor<1x2x2x8x16xf32>
  %kr = onnx.Reshape %ke, %to4 : (tensor<1x2x2x8x16xf32>, tensor<4xi64>) -> tensor<1x4x8x16xf32>
  %vu = onnx.Unsqueeze %v, %ax : (tensor<1x2x8x16xf32>, tensor<1xi64>) -> tensor<1x2x1x8x16xf32>
  %ve = onnx.Expand %vu, %to5 : (tensor<1x2x1x8x16xf32>, tensor<5xi64>) -> tensor<1x2x2x8x16xf32>
  %vr = onnx.Reshape %ve, %to4 : (tensor<1x2x2x8x16xf32>, tensor<4xi64>) -> tensor<1x4x8x16xf32>
  %kt = onnx.Transpose %kr {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %s2 = onnx.Mul %s, %c : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %p = onnx.Softmax %s2 {axis = -1 : si64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = onnx.MatMul %p, %vr : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  %yt = onnx.Transpose %y {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x8x16xf32>) -> tensor<1x8x4x16xf32>
  return %yt : tensor<1x8x4x16xf32>
}

// -----

// Only K is a repeat (V has 4 heads of its own): no grouping; the node reads the repeated K.
// CHECK-LABEL: func.func @only_k_repeated
// CHECK: %[[K:.+]] = onnx.Reshape
// CHECK: onnx.node "Attention"(%arg0, %[[K]], %arg2) {{.+}} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>)
func.func @only_k_repeated(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %ax = onnx.Constant {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %to5 = onnx.Constant {value = dense<[1, 2, 2, 8, 16]> : tensor<5xi64>} : () -> tensor<5xi64>
  %to4 = onnx.Constant {value = dense<[1, 4, 8, 16]> : tensor<4xi64>} : () -> tensor<4xi64>
  %ku = onnx.Unsqueeze %k, %ax : (tensor<1x2x8x16xf32>, tensor<1xi64>) -> tensor<1x2x1x8x16xf32>
  %ke = onnx.Expand %ku, %to5 : (tensor<1x2x1x8x16xf32>, tensor<5xi64>) -> tensor<1x2x2x8x16xf32>
  %kr = onnx.Reshape %ke, %to4 : (tensor<1x2x2x8x16xf32>, tensor<4xi64>) -> tensor<1x4x8x16xf32>
  %kt = onnx.Transpose %kr {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %p = onnx.Softmax %s {axis = -1 : si64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// A repeat whose copies are not consecutive (Expand at axis 1: head h reads h mod 2, not h / 2) is
// not grouped-query attention's layout: nothing is grouped.
// CHECK-LABEL: func.func @interleaved_repeat
// CHECK: onnx.Expand
// CHECK: onnx.node "Attention"({{.+}} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>)
func.func @interleaved_repeat(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %ax = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %to5 = onnx.Constant {value = dense<[1, 2, 2, 8, 16]> : tensor<5xi64>} : () -> tensor<5xi64>
  %to4 = onnx.Constant {value = dense<[1, 4, 8, 16]> : tensor<4xi64>} : () -> tensor<4xi64>
  %ku = onnx.Unsqueeze %k, %ax : (tensor<1x2x8x16xf32>, tensor<1xi64>) -> tensor<1x1x2x8x16xf32>
  %ke = onnx.Expand %ku, %to5 : (tensor<1x1x2x8x16xf32>, tensor<5xi64>) -> tensor<1x2x2x8x16xf32>
  %kr = onnx.Reshape %ke, %to4 : (tensor<1x2x2x8x16xf32>, tensor<4xi64>) -> tensor<1x4x8x16xf32>
  %vu = onnx.Unsqueeze %v, %ax : (tensor<1x2x8x16xf32>, tensor<1xi64>) -> tensor<1x1x2x8x16xf32>
  %ve = onnx.Expand %vu, %to5 : (tensor<1x1x2x8x16xf32>, tensor<5xi64>) -> tensor<1x2x2x8x16xf32>
  %vr = onnx.Reshape %ve, %to4 : (tensor<1x2x2x8x16xf32>, tensor<4xi64>) -> tensor<1x4x8x16xf32>
  %kt = onnx.Transpose %kr {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %p = onnx.Softmax %s {axis = -1 : si64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = onnx.MatMul %p, %vr : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Multi-query attention by broadcasting (Falcon): K and V [B, 1, T, d] against Q's 4 heads in the
// MatMuls themselves, no repeat. The node reads them as one K/V head for all four.
// CHECK-LABEL: func.func @broadcast_multi_query
// CHECK: onnx.node "Attention"(%arg0, %arg1, %arg2) {{.+}} : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
func.func @broadcast_multi_query(%q: tensor<1x4x8x16xf32>, %k: tensor<1x1x8x16xf32>, %v: tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %c = onnx.Constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %kt = onnx.Transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x1x8x16xf32>) -> tensor<1x1x16x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x1x16x8xf32>) -> tensor<1x4x8x8xf32>
  %s2 = onnx.Mul %s, %c : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %p = onnx.Softmax %s2 {axis = -1 : si64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = onnx.MatMul %p, %v : (tensor<1x4x8x8xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Broadcast along the batch (K and V [1, H, T, d] against Q's [2, H, T, d]) is no head grouping:
// nothing fuses.
// CHECK-LABEL: func.func @broadcast_batch
// CHECK-NOT: onnx.node "Attention"
// CHECK: onnx.Softmax
func.func @broadcast_batch(%q: tensor<2x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = onnx.Transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<2x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %p = onnx.Softmax %s {axis = -1 : si64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %y = onnx.MatMul %p, %v : (tensor<2x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %y : tensor<2x4x8x16xf32>
}
