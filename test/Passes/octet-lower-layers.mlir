// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-lower-layers)' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-lower-layers)' | FileCheck %s --check-prefix=BODY
// RUN: fp8-opt %S/Inputs/mlp.mlir --octet-raise-layers --octet-lower-layers | FileCheck %s --check-prefix=FLAG
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-lower-layers{gelu-op=true})' | FileCheck %s --check-prefix=GELUOP

// Raising then lowering gives back the original ops.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: nn.
// CHECK: onnx.LayerNormalization
// CHECK: onnx.MatMul
// CHECK: onnx.Relu
// CHECK: onnx.MatMul
// CHECK: onnx.Transpose
// CHECK: onnx.MatMul

// BODY-LABEL: func.func @gelu_body
// BODY-NEXT: %[[G:.+]] = onnx.Gelu %arg0 {approximate = "tanh"}
// BODY-NEXT: return %[[G]]
// gelu-op: whatever the body holds (here its decomposed tanh form), one Gelu op.
// GELUOP-LABEL: func.func @gelu_body
// GELUOP-NEXT: %[[G:.+]] = onnx.Gelu %arg0 {approximate = "tanh"}
// GELUOP-NEXT: return %[[G]]
// GELUOP-LABEL: func.func @gelu_decomposed
// GELUOP-NEXT: %[[G:.+]] = onnx.Gelu %arg0 {approximate = "tanh"}
// GELUOP-NEXT: return %[[G]]
func.func @gelu_body(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = nn.gelu "act"(%x) {approximate = "tanh"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %g = onnx.Gelu %a {approximate = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
    nn.yield %g : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// FLAG-LABEL: func.func @main_graph
// FLAG-NOT: nn.
// FLAG: onnx.LayerNormalization

// -----

// BODY-LABEL: func.func @gelu_decomposed
// BODY: onnx.Tanh
func.func @gelu_decomposed(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = nn.gelu "act"(%x) {approximate = "tanh"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %k = onnx.Constant {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
    %s = onnx.Mul %a, %k : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %t = onnx.Tanh %s : (tensor<4xf32>) -> tensor<4xf32>
    %g = onnx.Mul %a, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    nn.yield %g : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}
