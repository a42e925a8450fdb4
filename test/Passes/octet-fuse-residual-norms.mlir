// RUN: fp8-opt %s -split-input-file --octet-fuse-residual-norms | FileCheck %s

// A pre-LN block's residual stream: x + the sublayer's result (viewed back to x's shape), then
// the next block's LayerNorm of the sum, which the next residual Add also reads. The Add and the
// LayerNorm are one residual_norm group.
// CHECK-LABEL: func.func @residual_then_norm
// CHECK: onnx.Add {{.*}}octet.fusion = "residual_norm", octet.fusion_group = 0 : i64
// CHECK: onnx.LayerNormalization {{.*}}octet.fusion = "residual_norm", octet.fusion_group = 0 : i64
// CHECK: onnx.Add
// CHECK-NOT: octet.fusion
// CHECK: return
func.func @residual_then_norm(%x: tensor<2x8x64xf32>, %h: tensor<16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %shape = onnx.Constant {value = dense<[2, 8, 64]> : tensor<3xi64>} : () -> tensor<3xi64>
  %h3 = onnx.Reshape %h, %shape : (tensor<16x64xf32>, tensor<3xi64>) -> tensor<2x8x64xf32>
  %s = onnx.Add %x, %h3 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %y, %m, %i = onnx.LayerNormalization %s, %g, %b {axis = -1 : si64, epsilon = 1.0e-05 : f32} : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, none, none)
  %next = onnx.Add %s, %y : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return %y, %next : tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// -----

// Views between the Add and the LayerNorm move nothing: the pair is still a group. Two pairs are
// two groups, numbered in order.
// CHECK-LABEL: func.func @through_a_view
// CHECK: onnx.Add {{.*}}octet.fusion_group = 0 : i64
// CHECK: onnx.Reshape
// CHECK: onnx.LayerNormalization {{.*}}octet.fusion_group = 0 : i64
// CHECK: onnx.Add {{.*}}octet.fusion_group = 1 : i64
// CHECK: onnx.LayerNormalization {{.*}}octet.fusion_group = 1 : i64
func.func @through_a_view(%x: tensor<16x64xf32>, %h: tensor<16x64xf32>, %g: tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<16x64xf32>) {
  %none = onnx.none
  %shape = onnx.Constant {value = dense<[2, 8, 64]> : tensor<3xi64>} : () -> tensor<3xi64>
  %s = onnx.Add %x, %h : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %s3 = onnx.Reshape %s, %shape : (tensor<16x64xf32>, tensor<3xi64>) -> tensor<2x8x64xf32>
  %y, %m, %i = onnx.LayerNormalization %s3, %g, %none {axis = 2 : si64, epsilon = 1.0e-05 : f32} : (tensor<2x8x64xf32>, tensor<64xf32>, none) -> (tensor<2x8x64xf32>, none, none)
  %t = onnx.Add %s, %x : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %z, %zm, %zi = onnx.LayerNormalization %t, %g, %none {axis = -1 : si64, epsilon = 1.0e-05 : f32} : (tensor<16x64xf32>, tensor<64xf32>, none) -> (tensor<16x64xf32>, none, none)
  return %y, %z : tensor<2x8x64xf32>, tensor<16x64xf32>
}

// -----

// No group: an Add that broadcasts (the position embedding over the batch), an op between the
// Add and the LayerNorm, a BF16 LayerNorm, a LayerNorm over two axes, and a LayerNorm already in
// another group.
// CHECK-LABEL: func.func @no_pairs
// CHECK-NOT: residual_norm
// CHECK: return
func.func @no_pairs(%x: tensor<2x8x64xf32>, %p: tensor<8x64xf32>, %g: tensor<64xf32>, %xb: tensor<2x8x64xbf16>, %gb: tensor<64xbf16>, %g2: tensor<8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xbf16>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %none = onnx.none
  %e = onnx.Add %x, %p : (tensor<2x8x64xf32>, tensor<8x64xf32>) -> tensor<2x8x64xf32>
  %y1, %m1, %i1 = onnx.LayerNormalization %e, %g, %none {axis = -1 : si64, epsilon = 1.0e-05 : f32} : (tensor<2x8x64xf32>, tensor<64xf32>, none) -> (tensor<2x8x64xf32>, none, none)
  %s = onnx.Add %x, %y1 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %t = onnx.Tanh %x : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %y2, %m2, %i2 = onnx.LayerNormalization %s, %g, %none {axis = -1 : si64, epsilon = 1.0e-05 : f32} : (tensor<2x8x64xf32>, tensor<64xf32>, none) -> (tensor<2x8x64xf32>, none, none)
  %sb = onnx.Add %xb, %xb : (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>) -> tensor<2x8x64xbf16>
  %y3, %m3, %i3 = onnx.LayerNormalization %sb, %gb, %none {axis = -1 : si64, epsilon = 1.0e-05 : f32} : (tensor<2x8x64xbf16>, tensor<64xbf16>, none) -> (tensor<2x8x64xbf16>, none, none)
  %s4 = onnx.Add %x, %t : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %y4, %m4, %i4 = onnx.LayerNormalization %s4, %g2, %none {axis = 1 : si64, epsilon = 1.0e-05 : f32} : (tensor<2x8x64xf32>, tensor<8x64xf32>, none) -> (tensor<2x8x64xf32>, none, none)
  %s5 = onnx.Add %x, %y4 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %y5, %m5, %i5 = onnx.LayerNormalization %s5, %g, %none {axis = -1 : si64, epsilon = 1.0e-05 : f32, octet.fusion = "producer_amax", octet.fusion_group = 0 : i64} : (tensor<2x8x64xf32>, tensor<64xf32>, none) -> (tensor<2x8x64xf32>, none, none)
  return %y1, %y2, %t, %y3, %y4, %y5 : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xbf16>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// -----

// A Llama's RMSNormalization of the residual sum is a group as well; Gemma's scale (1 + w), computed
// from parameters between the Add and the norm, moves before the Add so that the pair is adjacent.
// CHECK-LABEL: func.func @rms_norm_gemma_scale
// CHECK: %[[SC:.+]] = onnx.Add %{{.+}}, %{{.+}} : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
// CHECK-NEXT: onnx.Add {{.*}}octet.fusion = "residual_norm", octet.fusion_group = 0 : i64
// CHECK-NEXT: onnx.RMSNormalization %{{.+}}, %[[SC]] {{.*}}octet.fusion = "residual_norm", octet.fusion_group = 0 : i64
func.func @rms_norm_gemma_scale(%x: tensor<2x8x64xf32>, %h: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %w = onnx.initializer "model.layers.0.input_layernorm.weight" = dense<0.1> : tensor<64xf32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %s = onnx.Add %x, %h : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %sc = onnx.Add %w, %one : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
  %y = onnx.RMSNormalization %s, %sc {axis = -1 : si64, epsilon = 1.0e-06 : f32} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// An op between that reads an activation does not move: no group.
// CHECK-LABEL: func.func @rms_norm_op_between
// CHECK-NOT: octet.fusion
// CHECK: return
func.func @rms_norm_op_between(%x: tensor<2x8x64xf32>, %h: tensor<2x8x64xf32>, %g: tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %w = onnx.initializer "model.layers.0.input_layernorm.weight" = dense<0.1> : tensor<64xf32>
  %s = onnx.Add %x, %h : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %n = onnx.Neg %h : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %y = onnx.RMSNormalization %s, %w {axis = -1 : si64, epsilon = 1.0e-06 : f32} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return %y, %n : tensor<2x8x64xf32>, tensor<2x8x64xf32>
}
