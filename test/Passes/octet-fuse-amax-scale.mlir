// RUN: fp8-opt %s -split-input-file --octet-fuse-amax-scale | FileCheck %s

// Dynamic scaling's amax and the scale computed from it: one amax_scale group.
// CHECK-LABEL: func.func @amax_then_scale
// CHECK: fp8.amax {{.*}}octet.fusion = "amax_scale", octet.fusion_group = 0 : i64
// CHECK: fp8.dynamic_scale {{.*}}octet.fusion = "amax_scale", octet.fusion_group = 0 : i64
func.func @amax_then_scale(%x: tensor<64x32xbf16>) -> tensor<f32> {
  %a = fp8.amax %x : tensor<64x32xbf16> -> tensor<f32>
  %s, %si = fp8.dynamic_scale %a {format = f8E4M3FN} : tensor<f32>
  return %si : tensor<f32>
}

// -----

// Two pairs: two groups, numbered in order.
// CHECK-LABEL: func.func @two_pairs
// CHECK: fp8.amax {{.*}}octet.fusion_group = 0 : i64
// CHECK: fp8.dynamic_scale {{.*}}octet.fusion_group = 0 : i64
// CHECK: fp8.amax {{.*}}octet.fusion_group = 1 : i64
// CHECK: fp8.dynamic_scale {{.*}}octet.fusion_group = 1 : i64
func.func @two_pairs(%x: tensor<64x32xf32>, %y: tensor<8xf16>) -> (tensor<f32>, tensor<f32>) {
  %a = fp8.amax %x : tensor<64x32xf32> -> tensor<f32>
  %s, %si = fp8.dynamic_scale %a {format = f8E4M3FN} : tensor<f32>
  %b = fp8.amax %y : tensor<8xf16> -> tensor<f32>
  %t, %ti = fp8.dynamic_scale %b {format = f8E5M2, power_of_two = true} : tensor<f32>
  return %si, %ti : tensor<f32>, tensor<f32>
}

// -----

// No group: a rowwise amax, an amax another op also reads, an amax with an op between it and its
// scale, and an amax already in a producer_amax group.
// CHECK-LABEL: func.func @no_pairs
// CHECK-NOT: amax_scale
// CHECK: return
func.func @no_pairs(%x: tensor<64x32xf32>) -> (tensor<64x1xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<64x32xf32>) {
  %r = fp8.amax %x {rowwise = true} : tensor<64x32xf32> -> tensor<64x1xf32>
  %rs, %rsi = fp8.dynamic_scale %r {format = f8E4M3FN} : tensor<64x1xf32>
  %a = fp8.amax %x : tensor<64x32xf32> -> tensor<f32>
  %s, %si = fp8.dynamic_scale %a {format = f8E4M3FN} : tensor<f32>
  %b = fp8.amax %x : tensor<64x32xf32> -> tensor<f32>
  %t = onnx.Tanh %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %bs, %bsi = fp8.dynamic_scale %b {format = f8E4M3FN} : tensor<f32>
  %g = onnx.Gelu %x {octet.fusion = "producer_amax", octet.fusion_group = 0 : i64} : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %c = fp8.amax %g {octet.fusion = "producer_amax", octet.fusion_group = 0 : i64} : tensor<64x32xf32> -> tensor<f32>
  %cs, %csi = fp8.dynamic_scale %c {format = f8E4M3FN} : tensor<f32>
  return %rsi, %a, %bsi, %csi, %t : tensor<64x1xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<64x32xf32>
}
