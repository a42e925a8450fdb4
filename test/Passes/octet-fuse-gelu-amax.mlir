// RUN: fp8-opt %s -split-input-file --octet-fuse-gelu-amax | FileCheck %s

// Dynamic scaling's amax of a GELU's result (the MLP's second Linear's input): one gelu_amax group.
// CHECK-LABEL: func.func @gelu_then_amax
// CHECK: onnx.Gelu {{.*}}octet.fusion = "gelu_amax", octet.fusion_group = 0 : i64
// CHECK: fp8.amax {{.*}}octet.fusion = "gelu_amax", octet.fusion_group = 0 : i64
func.func @gelu_then_amax(%x: tensor<64x32xbf16>) -> (tensor<64x32xbf16>, tensor<f32>) {
  %g = onnx.Gelu %x {approximate = "tanh"} : (tensor<64x32xbf16>) -> tensor<64x32xbf16>
  %a = fp8.amax %g : tensor<64x32xbf16> -> tensor<f32>
  return %g, %a : tensor<64x32xbf16>, tensor<f32>
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

// No group: a rowwise amax of a GELU's result, an amax of another op's result, and a second amax
// of a GELU that already has one (the first pairs).
// CHECK-LABEL: func.func @no_pairs
// CHECK: onnx.Gelu {{.*}}octet.fusion_group = 0 : i64
// CHECK: fp8.amax %{{.*}}rowwise = true
// CHECK-NOT: octet.fusion
// CHECK: fp8.amax {{.*}}octet.fusion_group = 0 : i64
// CHECK-NOT: octet.fusion
// CHECK: return
func.func @no_pairs(%x: tensor<64x32xf32>) -> (tensor<64x1xf32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %g = onnx.Gelu %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %r = fp8.amax %g {rowwise = true} : tensor<64x32xf32> -> tensor<64x1xf32>
  %a = fp8.amax %g : tensor<64x32xf32> -> tensor<f32>
  %b = fp8.amax %g : tensor<64x32xf32> -> tensor<f32>
  %t = onnx.Tanh %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %c = fp8.amax %t : tensor<64x32xf32> -> tensor<f32>
  return %r, %a, %b, %c : tensor<64x1xf32>, tensor<f32>, tensor<f32>, tensor<f32>
}
