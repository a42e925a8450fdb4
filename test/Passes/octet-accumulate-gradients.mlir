// RUN: fp8-opt %s -split-input-file -verify-diagnostics --octet-accumulate-gradients='steps=4' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-accumulate-gradients='steps=1' | FileCheck %s --check-prefix=OFF
// RUN: not fp8-opt %s -o /dev/null --octet-accumulate-gradients='steps=0' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: octet-accumulate-gradients: steps=0 is not valid; use 1 to 1048576

// Each gradient becomes the running mean of the step's micro-batches: a float32 state per
// parameter (role grad_accum) that the first micro-batch (the new bool argument) overwrites with
// g / 4 and later ones add g / 4 to; the gradient result and the state's update are that value,
// placed where the gradient is complete (a gradient that is an argument: before the return).
// CHECK-LABEL: module attributes {octet.training = {grad_accum_steps = "4"}}
// CHECK-LABEL: func.func @gradients
// CHECK-SAME: %[[FIRST:[a-z0-9]+]]: tensor<i1> {onnx.name = "octet.first_micro_batch"}
// CHECK-SAME: {octet.state_update = "w.grad_accum", onnx.name = "w.grad_accum.next"}
// CHECK-SAME: {octet.state_update = "b.grad_accum", onnx.name = "b.grad_accum.next"}
// CHECK-DAG: %[[AW:.+]] = onnx.initializer "w.grad_accum" = dense<0.000000e+00> : tensor<8x4xf32> {octet.fp8_state, octet.role = "grad_accum"}
// CHECK-DAG: %[[AB:.+]] = onnx.initializer "b.grad_accum" = dense<0.000000e+00> : tensor<4xf32> {octet.fp8_state, octet.role = "grad_accum"}
// CHECK: %[[G:.+]] = onnx.Mul %arg0
// CHECK-NEXT: %[[Q:.+]] = onnx.Constant {value = dense<2.500000e-01> : tensor<f32>}
// CHECK-NEXT: %[[P:.+]] = onnx.Mul %[[G]], %[[Q]]
// CHECK-NEXT: %[[S:.+]] = onnx.Add %[[AW]], %[[P]]
// CHECK-NEXT: %[[MW:.+]] = onnx.Where %[[FIRST]], %[[P]], %[[S]] {octet.result_names = ["w.grad_mean"]}
// CHECK: %[[L:.+]] = onnx.node "ReduceSum"
// CHECK: %[[MB:.+]] = onnx.Where %[[FIRST]], %{{.+}}, %{{.+}} {octet.result_names = ["b.grad_mean"]}
// CHECK-NEXT: return %[[L]], %[[MW]], %[[MB]], %[[MW]], %[[MB]]
// OFF-LABEL: func.func @gradients
// OFF-NOT: grad_accum
// OFF: return
module {
func.func @gradients(%x: tensor<8x4xf32>, %gb: tensor<4xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<8x4xf32> {octet.grad_of = "w", onnx.name = "w.grad"},
        tensor<4xf32> {octet.grad_of = "b", onnx.name = "b.grad"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<8x4xf32>
  %b = onnx.initializer "b" = dense<0.0> : tensor<4xf32>
  %gw = onnx.Mul %x, %w : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %l = onnx.node "ReduceSum"(%gw) {attrs = {keepdims = 0 : si64}} : (tensor<8x4xf32>) -> tensor<f32>
  return %l, %gw, %gb : tensor<f32>, tensor<8x4xf32>, tensor<4xf32>
}
}

// -----

// A parameter the loss does not use has a zero constant gradient: nothing to accumulate.
// CHECK-LABEL: func.func @unused
// CHECK-NOT: grad_accum
// CHECK: return
func.func @unused(%l: tensor<f32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4xf32> {octet.grad_of = "b", onnx.name = "b.grad"}) {
  %b = onnx.initializer "b" = dense<0.0> : tensor<4xf32>
  %z = onnx.Constant {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  return %l, %z : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{octet-accumulate-gradients: the gradient of 'h' is 'tensor<4xf16>'; gradients are accumulated in float32 only}}
func.func @half(%l: tensor<f32>, %g: tensor<4xf16>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4xf16> {octet.grad_of = "h", onnx.name = "h.grad"}) {
  %h = onnx.initializer "h" = dense<0.0> : tensor<4xf16>
  return %l, %g : tensor<f32>, tensor<4xf16>
}

// -----

// expected-error @+1 {{octet-accumulate-gradients: the function has no gradients; run octet-autodiff first}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
