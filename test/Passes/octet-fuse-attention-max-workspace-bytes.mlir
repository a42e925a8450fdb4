// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-attention{max-workspace-bytes=1048576})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-attention)' | FileCheck %s --check-prefix=NONE

// A bound on the attention's scratch rides on the fused node (its gradient copies the node's
// attributes); without one (0, the default) the node carries none.
// CHECK-LABEL: func.func @bounded
// CHECK: onnx.node "Attention"(%{{.*}}) {attrs = {is_causal = 0 : si64, max_workspace_bytes = 1048576 : si64, scale = 2.500000e-01 : f32}, domain = "octet"}
// NONE-LABEL: func.func @bounded
// NONE-NOT: max_workspace_bytes
// NONE: onnx.node "Attention"
func.func @bounded(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %c = onnx.Constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %s = onnx.MatMul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %s2 = onnx.Mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = onnx.Softmax %s2 {axis = -1 : si64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %y = onnx.MatMul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %y : tensor<2x4x8x16xf32>
}
