// RUN: fp8-opt %s -split-input-file --octet-checkpoint-blocks | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-checkpoint-blocks='blocks=1' | FileCheck %s --check-prefix=ONE
// RUN: fp8-opt %s -split-input-file --octet-checkpoint-blocks='blocks=0' | FileCheck %s --check-prefix=OFF

// Three blocks (layers.0, layers.1, layers.2) and a backward that reads each block's Tanh. Blocks
// 0 and 1 are checkpointed: before the first backward op that reads the block's values, a copy of
// the block's forward from its input (the residual, kept: the next block reads it) up to the Tanh;
// the backward reads the copies. The weight's Cast (parameters only) is not copied. The last
// block's backward comes first: it keeps its values.
// CHECK-LABEL: module attributes {octet.checkpointed_blocks = {blocks = 2 : i64, first = 0 : i64, last = 1 : i64, of = 2 : i64, prefix = "model.layers"}}
// CHECK-LABEL: func.func @three_blocks
// CHECK: %[[W0:.+]] = onnx.initializer "model.layers.0.w"
// CHECK: %[[W1:.+]] = onnx.initializer "model.layers.1.w"
// CHECK: %[[C0:.+]] = onnx.Cast %[[W0]]
// CHECK: %[[M0:.+]] = onnx.Mul %arg0, %[[C0]]
// CHECK: %[[T0:.+]] = onnx.Tanh %[[M0]] {octet.result_names = ["t0"]}
// CHECK: %[[R1:.+]] = onnx.Add %arg0, %[[T0]]
// CHECK: %[[M1:.+]] = onnx.Mul %[[R1]], %[[W1]]
// CHECK: %[[T1:.+]] = onnx.Tanh %[[M1]]
// CHECK: %[[R2:.+]] = onnx.Add %[[R1]], %[[T1]]
// CHECK: %[[T2:.+]] = onnx.Tanh
// CHECK: %[[L:.+]] = onnx.node "ReduceSum"
// CHECK-NEXT: %[[G2:.+]] = onnx.Mul %[[T2]], %[[T2]]
// CHECK-NEXT: %[[M1C:.+]] = onnx.Mul %[[R1]], %[[W1]] {octet.recompute_block = 1 : i64}
// CHECK-NEXT: %[[T1C:.+]] = onnx.Tanh %[[M1C]] {octet.recompute_block = 1 : i64}
// CHECK-NEXT: %[[G1:.+]] = onnx.Mul %[[G2]], %[[T1C]]
// CHECK-NEXT: %[[M0C:.+]] = onnx.Mul %arg0, %[[C0]] {octet.recompute_block = 0 : i64}
// CHECK-NEXT: %[[T0C:.+]] = onnx.Tanh %[[M0C]] {octet.recompute_block = 0 : i64, octet.result_names = ["t0.recomputed"]}
// CHECK-NEXT: %[[G0:.+]] = onnx.Mul %[[G1]], %[[T0C]]
// CHECK-NEXT: return %[[L]], %[[G0]]
// ONE-LABEL: module attributes {octet.checkpointed_blocks = {blocks = 1 : i64, first = 0 : i64, last = 0 : i64, of = 2 : i64, prefix = "model.layers"}}
// ONE-LABEL: func.func @three_blocks
// ONE-NOT: octet.recompute_block = 1
// ONE: octet.recompute_block = 0
// OFF-LABEL: module attributes {octet.checkpointed_blocks = {blocks = 0 : i64, first = -1 : i64, last = -1 : i64, of = 2 : i64, prefix = "model.layers"}}
// OFF-LABEL: func.func @three_blocks
// OFF-NOT: octet.recompute_block
module {
func.func @three_blocks(%x: tensor<4xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4xf32> {octet.grad_of = "model.layers.0.w"}) {
  %w0 = onnx.initializer "model.layers.0.w" = dense<1.0> : tensor<4xf16>
  %w1 = onnx.initializer "model.layers.1.w" = dense<1.0> : tensor<4xf32>
  %w2 = onnx.initializer "model.layers.2.w" = dense<1.0> : tensor<4xf32>
  %c0 = onnx.Cast %w0 {to = 1 : si64} : (tensor<4xf16>) -> tensor<4xf32>
  %m0 = onnx.Mul %x, %c0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %t0 = onnx.Tanh %m0 {octet.result_names = ["t0"]} : (tensor<4xf32>) -> tensor<4xf32>
  %r1 = onnx.Add %x, %t0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m1 = onnx.Mul %r1, %w1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %t1 = onnx.Tanh %m1 : (tensor<4xf32>) -> tensor<4xf32>
  %r2 = onnx.Add %r1, %t1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m2 = onnx.Mul %r2, %w2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %t2 = onnx.Tanh %m2 : (tensor<4xf32>) -> tensor<4xf32>
  %l = onnx.node "ReduceSum"(%t2) {attrs = {keepdims = 0 : si64}} : (tensor<4xf32>) -> tensor<f32>
  %g2 = onnx.Mul %t2, %t2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g1 = onnx.Mul %g2, %t1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g0 = onnx.Mul %g1, %t0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %l, %g0 : tensor<f32>, tensor<4xf32>
}
}

// -----

// A block with a Dropout (a copy would draw another mask) keeps its values; the next one is
// checkpointed in its place.
// CHECK-LABEL: module attributes {octet.checkpointed_blocks = {blocks = 1 : i64, first = 1 : i64, last = 1 : i64, of = 2 : i64, prefix = "h"}}
// CHECK-LABEL: func.func @dropout
// CHECK-NOT: octet.recompute_block = 0
// CHECK: onnx.Tanh {{.+}} {octet.recompute_block = 1 : i64}
module {
func.func @dropout(%x: tensor<4xf32>) -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4xf32>) {
  %w0 = onnx.initializer "h.0.w" = dense<1.0> : tensor<4xf32>
  %w1 = onnx.initializer "h.1.w" = dense<1.0> : tensor<4xf32>
  %w2 = onnx.initializer "h.2.w" = dense<1.0> : tensor<4xf32>
  %m0 = onnx.Mul %x, %w0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %d0 = onnx.node "Dropout"(%m0) : (tensor<4xf32>) -> tensor<4xf32>
  %t0 = onnx.Tanh %d0 : (tensor<4xf32>) -> tensor<4xf32>
  %m1 = onnx.Mul %t0, %w1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %t1 = onnx.Tanh %m1 : (tensor<4xf32>) -> tensor<4xf32>
  %a1 = onnx.Add %t0, %t1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m2 = onnx.Mul %a1, %w2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = onnx.node "ReduceSum"(%m2) {attrs = {keepdims = 0 : si64}} : (tensor<4xf32>) -> tensor<f32>
  %g1 = onnx.Mul %t1, %t1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g0 = onnx.Mul %g1, %d0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %l, %g0 : tensor<f32>, tensor<4xf32>
}
}

// -----

// What has no blocks is left as it is, and the module says why: no loss; no numbered names; a
// block read after a later one began (a shared weight).
// CHECK-LABEL: module attributes {octet.checkpointed_blocks = {blocks = 0 : i64, first = -1 : i64, last = -1 : i64, of = 0 : i64, prefix = "", why = "not a training step (no loss result)"}}
// CHECK-LABEL: func.func @no_loss
// CHECK-NOT: octet.recompute_block
module {
func.func @no_loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w0 = onnx.initializer "h.0.w" = dense<1.0> : tensor<4xf32>
  %m0 = onnx.Mul %x, %w0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %m0 : tensor<4xf32>
}
}

// -----

// CHECK-LABEL: module attributes {octet.checkpointed_blocks = {{{.+}}why = "no parameters named <prefix>.<N>.<name>"}}
// CHECK-LABEL: func.func @no_numbers
// CHECK-NOT: octet.recompute_block
module {
func.func @no_numbers(%x: tensor<4xf32>) -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4xf32>) {
  %w = onnx.initializer "encoder.w" = dense<1.0> : tensor<4xf32>
  %m = onnx.Mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %t = onnx.Tanh %m : (tensor<4xf32>) -> tensor<4xf32>
  %l = onnx.node "ReduceSum"(%t) {attrs = {keepdims = 0 : si64}} : (tensor<4xf32>) -> tensor<f32>
  %g = onnx.Mul %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}
}

// -----

// CHECK-LABEL: module attributes {octet.checkpointed_blocks = {{{.+}}why = "onnx.Mul reads tensors of h.0 after h.1 began"}}
// CHECK-LABEL: func.func @shared_weight
// CHECK-NOT: octet.recompute_block
module {
func.func @shared_weight(%x: tensor<4xf32>) -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4xf32>) {
  %w0 = onnx.initializer "h.0.w" = dense<1.0> : tensor<4xf32>
  %w1 = onnx.initializer "h.1.w" = dense<1.0> : tensor<4xf32>
  %m0 = onnx.Mul %x, %w0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m1 = onnx.Mul %m0, %w1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m2 = onnx.Mul %m1, %w0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = onnx.node "ReduceSum"(%m2) {attrs = {keepdims = 0 : si64}} : (tensor<4xf32>) -> tensor<f32>
  %g = onnx.Mul %m1, %m0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}
}
