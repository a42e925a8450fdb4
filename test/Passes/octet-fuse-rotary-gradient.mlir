// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-rotary,octet-autodiff)' -verify-diagnostics | FileCheck %s

// The fused node's gradient is the node again with inverse = 1 on dY and the same tables:
// dX = dY cos + rotate_half^T(dY sin). It feeds the projection's weight gradient.
// CHECK-LABEL: func.func @rotary_gradient
// CHECK: %[[Y:.+]] = onnx.node "RotaryEmbedding"(%{{.+}}, %arg1, %arg2) {domain = "octet"}
// CHECK: %[[DX:.+]] = onnx.node "RotaryEmbedding"(%{{.+}}, %arg1, %arg2) {attrs = {inverse = 1 : si64}, domain = "octet"} : (tensor<2x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NOT: onnx.Concat
func.func @rotary_gradient(%in: tensor<2x8x16xf32> {onnx.name = "x"}, %cos: tensor<8x16xf32> {onnx.name = "cos"}, %sin: tensor<8x16xf32> {onnx.name = "sin"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<2x8x16xf32>
  %x = onnx.Mul %in, %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %h = onnx.Constant {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant {value = dense<16> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %n0 = onnx.none
  %x1 = onnx.Slice %x, %zero, %h, %ax, %n0 : (tensor<2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x8x8xf32>
  %x2 = onnx.Slice %x, %h, %end, %ax, %n0 : (tensor<2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x8x8xf32>
  %n = onnx.Neg %x2 : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %r = onnx.Concat %n, %x1 {axis = 2 : si64} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x16xf32>
  %a = onnx.Mul %x, %cos : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  %b = onnx.Mul %r, %sin : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  %y = onnx.Add %a, %b : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %none = onnx.none
  %l = onnx.ReduceSum %y, %none {keepdims = 0 : si64} : (tensor<2x8x16xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A table that depends on a trained parameter (here sin itself): the node has no gradient for it,
// so autodiff refuses it by name rather than train the parameter wrongly.
func.func @trained_table(%x: tensor<2x8x16xf32> {onnx.name = "x"}, %cos: tensor<8x16xf32> {onnx.name = "cos"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %sin = onnx.initializer "sin_table" = dense<0.25> : tensor<8x16xf32>
  %h = onnx.Constant {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant {value = dense<16> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %n0 = onnx.none
  %x1 = onnx.Slice %x, %zero, %h, %ax, %n0 : (tensor<2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x8x8xf32>
  %x2 = onnx.Slice %x, %h, %end, %ax, %n0 : (tensor<2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x8x8xf32>
  %n = onnx.Neg %x2 : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %r = onnx.Concat %n, %x1 {axis = -1 : si64} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x16xf32>
  %a = onnx.Mul %x, %cos : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  %b = onnx.Mul %r, %sin : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  // expected-error @+1 {{its cos or sin depends on a trained parameter}}
  %y = onnx.Add %a, %b : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %none = onnx.none
  %l = onnx.ReduceSum %y, %none {keepdims = 0 : si64} : (tensor<2x8x16xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}
