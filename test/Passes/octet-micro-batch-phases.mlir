// RUN: fp8-opt %s -split-input-file --octet-micro-batch-phases | FileCheck %s

// Under gradient accumulation (grad_accum_steps in the module's training section) what each
// result is for decides where its ops run. Every micro-batch: the loss, the accumulator's update
// (the gradient mean) and delayed scaling of activations (x.h, y.h: each micro-batch's amax enters
// the history). The last micro-batch only (octet.last_micro_batch): the parameter update, the
// learning rate, and delayed scaling of weights (w.h, v.h: state marked octet.fp8_weight_scaling).
// The run of delayed-scale updates is split by phase, the last phase's part after the other.
// CHECK-LABEL: func.func @step
// CHECK: %[[Y:.+]] = onnx.Mul %arg0, %{{.+}} : (
// CHECK: onnx.node "ReduceSum"(%[[Y]]) {attrs = {keepdims = 0 : si64}} :
// CHECK: %[[S:.+]] = onnx.Add %{{.+}}, %[[Y]] :
// CHECK: %[[M:.+]] = onnx.Where %arg1, %[[Y]], %[[S]] :
// CHECK: onnx.Mul %{{.+}}, %{{.+}} {octet.last_micro_batch}
// CHECK: onnx.Mul %[[M]], %{{.+}} {octet.last_micro_batch}
// CHECK: onnx.Sub %{{.+}}, %{{.+}} {octet.last_micro_batch}
// CHECK: fp8.delayed_scale %[[XH:.+]], %{{.+}}, %arg2 {format = f8E4M3FN, octet.fusion = "delayed_scale_list", octet.fusion_group = 0 : i64}
// CHECK: fp8.delayed_scale %[[YH:.+]], %{{.+}}, %arg2 {format = f8E4M3FN, octet.fusion = "delayed_scale_list", octet.fusion_group = 0 : i64}
// CHECK: fp8.delayed_scale %[[WH:.+]], %{{.+}}, %arg3 {format = f8E4M3FN, octet.fusion = "delayed_scale_list", octet.fusion_group = 1 : i64, octet.last_micro_batch}
// CHECK: fp8.delayed_scale %[[VH:.+]], %{{.+}}, %arg3 {format = f8E4M3FN, octet.fusion = "delayed_scale_list", octet.fusion_group = 1 : i64, octet.last_micro_batch}
// CHECK: return
module attributes {octet.training = {grad_accum_steps = "4"}} {
func.func @step(%x: tensor<4xf32>, %first: tensor<i1>, %a: tensor<f32>, %aw: tensor<f32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<4xf32> {octet.grad_of = "w", onnx.name = "w.grad"},
        tensor<4xf32> {octet.state_update = "w.grad_accum", onnx.name = "w.grad_accum.next"},
        tensor<4xf32> {octet.state_update = "w", onnx.name = "w.next"},
        tensor<16xf32> {octet.state_update = "x.h", onnx.name = "x.h.next"},
        tensor<16xf32> {octet.state_update = "w.h", onnx.name = "w.h.next"},
        tensor<16xf32> {octet.state_update = "y.h", onnx.name = "y.h.next"},
        tensor<16xf32> {octet.state_update = "v.h", onnx.name = "v.h.next"},
        tensor<f32> {onnx.name = "octet.lr"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<4xf32> {octet.fp8_state, octet.role = "weight"}
  %acc = onnx.initializer "w.grad_accum" = dense<0.0> : tensor<4xf32> {octet.fp8_state, octet.role = "grad_accum"}
  %xh = onnx.initializer "x.h" = dense<0.0> : tensor<16xf32> {octet.fp8_state}
  %wh = onnx.initializer "w.h" = dense<0.0> : tensor<16xf32> {octet.fp8_state, octet.fp8_weight_scaling}
  %yh = onnx.initializer "y.h" = dense<0.0> : tensor<16xf32> {octet.fp8_state}
  %vh = onnx.initializer "v.h" = dense<0.0> : tensor<16xf32> {octet.fp8_state, octet.fp8_weight_scaling}
  %s = onnx.initializer "s" = dense<1.0> : tensor<f32> {octet.fp8_state}
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %y = onnx.Mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = onnx.node "ReduceSum"(%y) {attrs = {keepdims = 0 : si64}} : (tensor<4xf32>) -> tensor<f32>
  %sum = onnx.Add %acc, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %mean = onnx.Where %first, %y, %sum : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %lr = onnx.Mul %c, %c : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %d = onnx.Mul %mean, %lr : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %w2 = onnx.Sub %w, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %h0, %s0, %i0 = fp8.delayed_scale %xh, %s, %a {format = f8E4M3FN, octet.fusion = "delayed_scale_list", octet.fusion_group = 0 : i64} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %h1, %s1, %i1 = fp8.delayed_scale %wh, %s, %aw {format = f8E4M3FN, octet.fusion = "delayed_scale_list", octet.fusion_group = 0 : i64} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %h2, %s2, %i2 = fp8.delayed_scale %yh, %s, %a {format = f8E4M3FN, octet.fusion = "delayed_scale_list", octet.fusion_group = 0 : i64} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %h3, %s3, %i3 = fp8.delayed_scale %vh, %s, %aw {format = f8E4M3FN, octet.fusion = "delayed_scale_list", octet.fusion_group = 0 : i64} : tensor<16xf32>, tensor<f32>, tensor<f32>
  return %l, %mean, %mean, %w2, %h0, %h1, %h2, %h3, %lr : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>
}
}

// -----

// A fusion group other than a run whose members fall in both phases (a pointwise chain from the
// gradient into the update) is dissolved: its ops run one by one.
// CHECK-LABEL: func.func @chain
// CHECK: onnx.Mul %arg0, %{{.+}} :
// CHECK-NOT: octet.fusion
// CHECK: onnx.Sub %{{.+}}, %{{.+}} {octet.last_micro_batch}
// CHECK-NEXT: return
module attributes {octet.training = {grad_accum_steps = "2"}} {
func.func @chain(%x: tensor<4xf32>)
    -> (tensor<4xf32> {octet.state_update = "w.grad_accum", onnx.name = "w.grad_accum.next"},
        tensor<4xf32> {octet.state_update = "w", onnx.name = "w.next"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<4xf32> {octet.fp8_state, octet.role = "weight"}
  %acc = onnx.initializer "w.grad_accum" = dense<0.0> : tensor<4xf32> {octet.fp8_state, octet.role = "grad_accum"}
  %g = onnx.Mul %x, %acc {octet.fusion = "pointwise_chain", octet.fusion_group = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %w2 = onnx.Sub %w, %g {octet.fusion = "pointwise_chain", octet.fusion_group = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g, %w2 : tensor<4xf32>, tensor<4xf32>
}
}

// -----

// Without gradient accumulation the pass marks nothing.
// CHECK-LABEL: func.func @one_batch
// CHECK-NOT: octet.last_micro_batch
// CHECK: return
func.func @one_batch(%x: tensor<4xf32>) -> (tensor<4xf32> {octet.state_update = "w", onnx.name = "w.next"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<4xf32> {octet.fp8_state, octet.role = "weight"}
  %w2 = onnx.Sub %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %w2 : tensor<4xf32>
}
