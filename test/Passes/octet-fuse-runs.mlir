// RUN: fp8-opt %s -split-input-file --octet-fuse-runs | FileCheck %s

// The optimizer's sums of squares, side by side: one group; a second run after an op of another
// kind is a second group; a sum over some axes (no whole-tensor norm) is no member.
// CHECK-LABEL: func.func @sums_of_squares
// CHECK: onnx.node "ReduceSumSquare"{{.*}}octet.fusion = "sum_squares_list", octet.fusion_group = 0 : i64
// CHECK: onnx.node "ReduceSumSquare"{{.*}}octet.fusion = "sum_squares_list", octet.fusion_group = 0 : i64
// CHECK: onnx.Tanh
// CHECK: onnx.node "ReduceSumSquare"{{.*}}octet.fusion_group = 1 : i64
// CHECK: onnx.node "ReduceSumSquare"{{.*}}octet.fusion_group = 1 : i64
// CHECK: onnx.node "ReduceSumSquare"
// CHECK-NOT: octet.fusion
// CHECK: return
func.func @sums_of_squares(%a: tensor<64x32xf32>, %b: tensor<32xf32>, %c: tensor<7xf32>, %axes: tensor<1xi64>) -> (tensor<f32>, tensor<f32>, tensor<7xf32>, tensor<f32>, tensor<f32>, tensor<64xf32>) {
  %sa = onnx.node "ReduceSumSquare"(%a) {attrs = {keepdims = 0 : si64}} : (tensor<64x32xf32>) -> tensor<f32>
  %sb = onnx.node "ReduceSumSquare"(%b) {attrs = {keepdims = 0 : si64}} : (tensor<32xf32>) -> tensor<f32>
  %t = onnx.Tanh %c : (tensor<7xf32>) -> tensor<7xf32>
  %sc = onnx.node "ReduceSumSquare"(%c) {attrs = {keepdims = 0 : si64}} : (tensor<7xf32>) -> tensor<f32>
  %sd = onnx.node "ReduceSumSquare"(%b) {attrs = {keepdims = 0 : si64}} : (tensor<32xf32>) -> tensor<f32>
  %rows = onnx.node "ReduceSumSquare"(%a, %axes) {attrs = {keepdims = 0 : si64}} : (tensor<64x32xf32>, tensor<1xi64>) -> tensor<64xf32>
  return %sa, %sb, %t, %sc, %sd, %rows : tensor<f32>, tensor<f32>, tensor<7xf32>, tensor<f32>, tensor<f32>, tensor<64xf32>
}

// -----

// Delayed-scaling updates of one history length and setting: one group. One with another margin
// ends it (and starts the next group with the update after it); constants between members do not
// count.
// CHECK-LABEL: func.func @delayed_scales
// CHECK: fp8.delayed_scale {{.*}}octet.fusion = "delayed_scale_list", octet.fusion_group = 0 : i64
// CHECK: fp8.delayed_scale {{.*}}octet.fusion = "delayed_scale_list", octet.fusion_group = 0 : i64
// CHECK: fp8.delayed_scale {{.*}}octet.fusion = "delayed_scale_list", octet.fusion_group = 1 : i64
// CHECK: fp8.delayed_scale {{.*}}octet.fusion = "delayed_scale_list", octet.fusion_group = 1 : i64
func.func @delayed_scales(%h: tensor<16xf32>, %s: tensor<f32>, %a: tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %h0, %s0, %i0 = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %c = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %h1, %s1, %i1 = fp8.delayed_scale %h, %s, %c {format = f8E5M2} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %h2, %s2, %i2 = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN, margin = 1 : si64} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %h3, %s3, %i3 = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN, margin = 1 : si64} : tensor<16xf32>, tensor<f32>, tensor<f32>
  return %h0, %h1, %h2, %h3 : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A member that reads another member's result (an update of the history the previous update
// wrote) runs after it, not with it: the run ends there.
// CHECK-LABEL: func.func @reads_the_run
// CHECK: fp8.delayed_scale
// CHECK-NOT: octet.fusion
// CHECK: fp8.delayed_scale
// CHECK-NOT: octet.fusion
// CHECK: return
func.func @reads_the_run(%h: tensor<16xf32>, %s: tensor<f32>, %a: tensor<f32>) -> tensor<16xf32> {
  %h0, %s0, %i0 = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %h1, %s1, %i1 = fp8.delayed_scale %h0, %s0, %a {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  return %h1 : tensor<16xf32>
}
