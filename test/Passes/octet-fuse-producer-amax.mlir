// RUN: fp8-opt %s -split-input-file --octet-fuse-producer-amax | FileCheck %s

// Dynamic scaling's amax of a GELU's result (the MLP's second Linear's input): one producer_amax
// group.
// CHECK-LABEL: func.func @gelu_then_amax
// CHECK: onnx.Gelu {{.*}}octet.fusion = "producer_amax", octet.fusion_group = 0 : i64
// CHECK: fp8.amax {{.*}}octet.fusion = "producer_amax", octet.fusion_group = 0 : i64
func.func @gelu_then_amax(%x: tensor<64x32xbf16>) -> (tensor<64x32xbf16>, tensor<f32>) {
  %g = onnx.Gelu %x {approximate = "tanh"} : (tensor<64x32xbf16>) -> tensor<64x32xbf16>
  %a = fp8.amax %g : tensor<64x32xbf16> -> tensor<f32>
  return %g, %a : tensor<64x32xbf16>, tensor<f32>
}

// -----

// A Pointwise program (the GELU's gradient) and the amax of its result: one group.
// CHECK-LABEL: func.func @pointwise_then_amax
// CHECK: onnx.node "Pointwise"{{.*}}octet.fusion = "producer_amax", octet.fusion_group = 0 : i64
// CHECK-NEXT: fp8.amax {{.*}}octet.fusion = "producer_amax", octet.fusion_group = 0 : i64
func.func @pointwise_then_amax(%dy: tensor<64x32xbf16>, %h: tensor<64x32xbf16>) -> (tensor<64x32xbf16>, tensor<f32>) {
  %d = onnx.node "Pointwise"(%dy, %h) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet"} : (tensor<64x32xbf16>, tensor<64x32xbf16>) -> tensor<64x32xbf16>
  %a = fp8.amax %d : tensor<64x32xbf16> -> tensor<f32>
  return %d, %a : tensor<64x32xbf16>, tensor<f32>
}

// -----

// A LayerNorm gradient's dX, viewed 2-D, and its amax (an output projection's dY): one group.
// CHECK-LABEL: func.func @layernorm_grad_then_amax
// CHECK: onnx.node "LayerNormalizationGrad"{{.*}}octet.fusion = "producer_amax", octet.fusion_group = 0 : i64
// CHECK: onnx.Reshape
// CHECK-NEXT: fp8.amax {{.*}}octet.fusion = "producer_amax", octet.fusion_group = 0 : i64
func.func @layernorm_grad_then_amax(%x: tensor<2x32x64xf32>, %s: tensor<64xf32>, %dy: tensor<2x32x64xbf16>) -> (tensor<64x64xbf16>, tensor<64xf32>, tensor<64xf32>, tensor<f32>) {
  %dx, %ds, %db = onnx.node "LayerNormalizationGrad"(%x, %s, %dy) {attrs = {axis = -1 : si64}, domain = "octet"} : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<2x32x64xbf16>) -> (tensor<2x32x64xbf16>, tensor<64xf32>, tensor<64xf32>)
  %shape = onnx.Constant {value = dense<[64, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
  %v = onnx.Reshape %dx, %shape : (tensor<2x32x64xbf16>, tensor<2xi64>) -> tensor<64x64xbf16>
  %a = fp8.amax %v : tensor<64x64xbf16> -> tensor<f32>
  return %v, %ds, %db, %a : tensor<64x64xbf16>, tensor<64xf32>, tensor<64xf32>, tensor<f32>
}

// -----

// Two GELUs, each with its amax: two groups, numbered in order.
// CHECK-LABEL: func.func @two_pairs
// CHECK: onnx.Gelu {{.*}}octet.fusion_group = 0 : i64
// CHECK: fp8.amax {{.*}}octet.fusion_group = 0 : i64
// CHECK: onnx.Gelu {{.*}}octet.fusion_group = 1 : i64
// CHECK: fp8.amax {{.*}}octet.fusion_group = 1 : i64
func.func @two_pairs(%x: tensor<64x32xf32>) -> (tensor<f32>, tensor<f32>) {
  %g = onnx.Gelu %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %a = fp8.amax %g : tensor<64x32xf32> -> tensor<f32>
  %h = onnx.Gelu %g : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %b = fp8.amax %h : tensor<64x32xf32> -> tensor<f32>
  return %a, %b : tensor<f32>, tensor<f32>
}

// -----

// No group: a rowwise amax right after a GELU (and a per-tensor one after that, not right after
// the GELU), an amax of an op no producer kind names (Tanh), an amax with an op between it and the
// producer, a Pointwise program already in a chain, and the amax of a LayerNorm gradient's dScale.
// CHECK-LABEL: func.func @no_pairs
// CHECK-NOT: producer_amax
// CHECK: return
func.func @no_pairs(%x: tensor<64x32xf32>, %s: tensor<32xf32>) -> (tensor<64x1xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<64x32xf32>, tensor<f32>, tensor<f32>, tensor<64x32xf32>, tensor<32xf32>) {
  %g = onnx.Gelu %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %r = fp8.amax %g {rowwise = true} : tensor<64x32xf32> -> tensor<64x1xf32>
  %a = fp8.amax %g : tensor<64x32xf32> -> tensor<f32>
  %b = fp8.amax %g : tensor<64x32xf32> -> tensor<f32>
  %t = onnx.Tanh %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %c = fp8.amax %t : tensor<64x32xf32> -> tensor<f32>
  %g2 = onnx.Gelu %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %t2 = onnx.Tanh %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %d = fp8.amax %g2 : tensor<64x32xf32> -> tensor<f32>
  %p = onnx.node "Pointwise"(%x) {attrs = {args = array<i64: 0, -1, -1>, ops = ["Tanh"]}, domain = "octet", octet.fusion = "pointwise_chain", octet.fusion_group = 3 : i64} : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %e = fp8.amax %p : tensor<64x32xf32> -> tensor<f32>
  %dx, %ds, %db = onnx.node "LayerNormalizationGrad"(%x, %s, %x) {attrs = {axis = -1 : si64}, domain = "octet"} : (tensor<64x32xf32>, tensor<32xf32>, tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>)
  %f = fp8.amax %ds : tensor<32xf32> -> tensor<f32>
  return %r, %a, %b, %c, %d, %t2, %e, %f, %dx, %db : tensor<64x1xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<64x32xf32>, tensor<f32>, tensor<f32>, tensor<64x32xf32>, tensor<32xf32>
}
