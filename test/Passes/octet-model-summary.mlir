// RUN: fp8-opt %s -split-input-file --octet-model-summary -o /dev/null | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-model-summary='format=json' -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: not fp8-opt %s -split-input-file --octet-model-summary='format=xml' -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADFORMAT
// Each split rewrites the file: the last one's summary remains.
// RUN: fp8-opt %s -split-input-file --octet-model-summary="output=%t.txt" -o /dev/null && FileCheck %s --check-prefix=FILE < %t.txt
// FILE: model @rms: 2 inputs

// BADFORMAT: octet-model-summary: format must be 'text' or 'json', got 'xml'

// A Linear through MatMul and one through Gemm(transB), a LayerNorm.
// CHECK-LABEL: model @main_graph: 1 inputs, 1 outputs, 4 initializers, 2120 float parameters
// CHECK: ops: Gemm=1 LayerNormalization=1 MatMul=1
// CHECK: linear candidates: 2
// CHECK-NEXT: fc1  weight=fc1.weight  [K,N]=[64,16]
// CHECK-NEXT: fc2  weight=fc2.weight  [K,N]=[16,64]
// CHECK: norm candidates: 1
// CHECK-NEXT: LayerNorm  ln  scale=ln.weight
// JSON: "kind": "Linear"
// JSON-NEXT: "name": "fc1"
// JSON-NEXT: "shape": [
// JSON-NEXT: 64,
// JSON-NEXT: 16
// JSON: "function": "main_graph"
// JSON: "parameters": 2120
func.func @main_graph(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %w1 = onnx.initializer "fc1.weight" = dense<0.5> : tensor<64x16xf32>
  %w2 = onnx.initializer "fc2.weight" = dense<0.5> : tensor<64x16xf32>
  %s = onnx.initializer "ln.weight" = dense<1.0> : tensor<64xf32>
  %b = onnx.initializer "ln.bias" = dense<0.0> : tensor<8xf32>
  %h = onnx.MatMul %x, %w1 : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32> loc("fc1")
  %n = onnx.none
  %y = onnx.Gemm %h, %w2, %n {transB = 1 : si64} : (tensor<8x16xf32>, tensor<64x16xf32>, none) -> tensor<8x64xf32> loc("fc2")
  %z, %m, %i = onnx.LayerNormalization %y, %s, %n : (tensor<8x64xf32>, tensor<64xf32>, none) -> (tensor<8x64xf32>, none, none) loc("ln")
  return %z : tensor<8x64xf32>
}

// -----

// RMSNorm spelled out as the Llama export writes it; a MatMul on an activation is not a Linear.
// CHECK-LABEL: model @rms: 2 inputs, 1 outputs, 1 initializers, 1 float parameters
// CHECK: linear candidates: 0
// CHECK: norm candidates: 1
// CHECK-NEXT: RMSNorm  rms_core
func.func @rms(%x: tensor<2x8xf32>, %k: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %two = onnx.initializer "two" = dense<2.0> : tensor<f32>
  %axes = onnx.Constant {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %eps = onnx.Constant {value = dense<1.0e-6> : tensor<f32>} : () -> tensor<f32>
  %p = onnx.Pow %x, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = onnx.ReduceMean %p, %axes {keepdims = 1 : si64} : (tensor<2x8xf32>, tensor<1xi64>) -> tensor<2x1xf32>
  %a = onnx.Add %m, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = onnx.Sqrt %a : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %r = onnx.Reciprocal %s : (tensor<2x1xf32>) -> tensor<2x1xf32> loc("rms_core")
  %y = onnx.Mul %x, %r : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %z = onnx.MatMul %y, %k : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %z : tensor<2x8xf32>
}
