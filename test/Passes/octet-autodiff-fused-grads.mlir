// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-autodiff{fused-grads=true})' -verify-diagnostics | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-autodiff | FileCheck %s --check-prefix=OFF

// fused-grads: LayerNormalization's gradient is one octet LayerNormalizationGrad node
// reading X, Scale and dY, with the axis made non-negative; dX feeds the rest of the backward,
// dScale and dB are the parameters' gradients. Without the option, the ONNX spelling.
// CHECK-LABEL: func.func @ln
// CHECK: %[[G:.*]]:3 = onnx.node "LayerNormalizationGrad"(%{{.*}}, %{{.*}}, %{{.*}}) {attrs = {axis = 2 : si64, epsilon = 9.99999974E-6 : f32}, domain = "octet"} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NOT: onnx.ReduceMean
// CHECK: return {{.*}}%[[G]]#1, %[[G]]#2
// OFF-LABEL: func.func @ln
// OFF-NOT: LayerNormalizationGrad
// OFF: onnx.ReduceMean
func.func @ln(%x: tensor<2x3x8xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %s = onnx.initializer "scale" = dense<1.5> : tensor<8xf32>
  %b = onnx.initializer "bias" = dense<0.1> : tensor<8xf32>
  %w = onnx.initializer "w" = dense<0.5> : tensor<2x3x8xf32>
  %y, %m, %i = onnx.LayerNormalization %x, %s, %b {axis = -1 : si64, epsilon = 1.0e-5 : f32} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, none, none)
  %p = onnx.Mul %y, %w : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %n = onnx.none
  %l = onnx.ReduceSum %p, %n {keepdims = 0 : si64} : (tensor<2x3x8xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The node also serves a LayerNormalization whose input needs a gradient (here an earlier
// parameter's product) and one without B: its third result is left unread.
// CHECK-LABEL: func.func @chain
// CHECK: %[[G:.*]]:3 = onnx.node "LayerNormalizationGrad"
// CHECK-SAME: -> (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK: onnx.Mul {{.*}}%[[G]]#0
// CHECK: return {{.*}}%[[G]]#1
// CHECK-NOT: %[[G]]#2
// OFF-LABEL: func.func @chain
// OFF-NOT: LayerNormalizationGrad
func.func @chain(%x: tensor<4x16xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %a = onnx.initializer "a" = dense<2.0> : tensor<16xf32>
  %s = onnx.initializer "scale" = dense<1.5> : tensor<16xf32>
  %h = onnx.Mul %x, %a : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %none = onnx.none
  %y, %m, %i = onnx.LayerNormalization %h, %s, %none {axis = 1 : si64, epsilon = 1.0e-3 : f32} : (tensor<4x16xf32>, tensor<16xf32>, none) -> (tensor<4x16xf32>, none, none)
  %p = onnx.Mul %y, %y : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = onnx.ReduceSum %p, %none {keepdims = 0 : si64} : (tensor<4x16xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A residual stream: h's gradient is the Add's plus the LayerNormalizationGrad's dX; the walk
// reaches the Add first, and the sum becomes the node's fourth operand (dX_in) instead of an Add.
// CHECK-LABEL: func.func @residual
// CHECK: %[[G:.*]]:3 = onnx.node "LayerNormalizationGrad"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {{.*}} : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK-NOT: onnx.Add {{.*}}%[[G]]#0
// CHECK: onnx.Mul {{.*}}%[[G]]#0
// OFF-LABEL: func.func @residual
// OFF-NOT: LayerNormalizationGrad
func.func @residual(%x: tensor<4x16xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %a = onnx.initializer "a" = dense<2.0> : tensor<16xf32>
  %s = onnx.initializer "scale" = dense<1.5> : tensor<16xf32>
  %w = onnx.initializer "w" = dense<0.5> : tensor<4x16xf32>
  %h = onnx.Mul %x, %a : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %none = onnx.none
  %y, %m, %i = onnx.LayerNormalization %h, %s, %none {axis = -1 : si64, epsilon = 1.0e-5 : f32} : (tensor<4x16xf32>, tensor<16xf32>, none) -> (tensor<4x16xf32>, none, none)
  %yw = onnx.Mul %y, %w : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = onnx.Add %h, %yw : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = onnx.Mul %r, %r : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = onnx.ReduceSum %p, %none {keepdims = 0 : si64} : (tensor<4x16xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A Scale that broadcasts over part of the normalized dims keeps the ONNX spelling, whose
// sums reduce dScale to its shape.
// CHECK-LABEL: func.func @broadcast_scale
// CHECK-NOT: LayerNormalizationGrad
// CHECK: onnx.ReduceMean
func.func @broadcast_scale(%x: tensor<2x3x4xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %s = onnx.initializer "scale" = dense<1.5> : tensor<4xf32>
  %b = onnx.initializer "bias" = dense<0.1> : tensor<3x4xf32>
  %y, %m, %i = onnx.LayerNormalization %x, %s, %b {axis = 1 : si64, epsilon = 1.0e-5 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, none, none)
  %n = onnx.none
  %l = onnx.ReduceSum %y, %n {keepdims = 0 : si64} : (tensor<2x3x4xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The loss: one octet SoftmaxCrossEntropyLossGrad node (scores, labels, dY) with the loss's
// reduction and ignore_index, in place of Softmax, the one-hot Equal/Cast and the arithmetic.
// CHECK-LABEL: func.func @xent
// CHECK: %[[G:.*]] = onnx.node "SoftmaxCrossEntropyLossGrad"(%{{.*}}, %arg1, %{{.*}}) {attrs = {ignore_index = -100 : si64, reduction = "mean"}, domain = "octet"} : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.Equal
// OFF-LABEL: func.func @xent
// OFF-NOT: SoftmaxCrossEntropyLossGrad
// OFF: onnx.Softmax
// OFF: onnx.Equal
func.func @xent(%x: tensor<4x8xf32> {onnx.name = "x"}, %labels: tensor<4xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<8x10xf32>
  %s = onnx.MatMul %x, %w : (tensor<4x8xf32>, tensor<8x10xf32>) -> tensor<4x10xf32>
  %n = onnx.none
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %s, %labels, %n {ignore_index = -100 : si64, reduction = "mean"} : (tensor<4x10xf32>, tensor<4xi64>, none) -> (tensor<f32>, none)
  return %l : tensor<f32>
}

// -----

// fused-grads: RMSNormalization's gradient is one octet RMSNormalizationGrad node (X, Scale, dY)
// -> (dX, dScale); without the option, the ONNX spelling (mean(x^2), its reciprocal root, ...).
// CHECK-LABEL: func.func @rms
// CHECK: %[[G:.*]]:2 = onnx.node "RMSNormalizationGrad"(%{{.*}}, %{{.*}}, %{{.*}}) {attrs = {axis = 2 : si64, epsilon = 9.99999997E-7 : f32}, domain = "octet"} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>)
// CHECK-NOT: onnx.ReduceMean
// CHECK: return {{.*}}%[[G]]#1
// OFF-LABEL: func.func @rms
// OFF-NOT: RMSNormalizationGrad
// OFF: onnx.ReduceMean
// OFF: onnx.Reciprocal
func.func @rms(%x: tensor<2x3x8xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %s = onnx.initializer "scale" = dense<1.5> : tensor<8xf32>
  %w = onnx.initializer "w" = dense<0.5> : tensor<2x3x8xf32>
  %y = onnx.RMSNormalization %x, %s {axis = -1 : si64, epsilon = 1.0e-6 : f32} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %p = onnx.Mul %y, %w : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %n = onnx.none
  %l = onnx.ReduceSum %p, %n {keepdims = 0 : si64} : (tensor<2x3x8xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}
