// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-rematerialize-casts{distance=8})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-rematerialize-casts | FileCheck %s --check-prefix=DEFAULT
// RUN: not fp8-opt %s -o /dev/null --pass-pipeline='builtin.module(octet-rematerialize-casts{distance=0})' 2>&1 | FileCheck %s --check-prefix=BAD

// A Cast of a weight read at the start and again 11 ops later: it moves before its first
// reader, and the late reader gets its own copy; the default distance (64) keeps one Cast.
// CHECK-LABEL: func.func @far
// CHECK: onnx.initializer "w"
// CHECK-NEXT: %[[A:.+]] = onnx.Cast %{{.+}} {to = 1 : si64}
// CHECK-NEXT: onnx.Mul %arg0, %[[A]]
// CHECK: %[[B:.+]] = onnx.Cast %{{.+}} {to = 1 : si64}
// CHECK-NEXT: onnx.Sub %{{.+}}, %[[B]]
// DEFAULT-LABEL: func.func @far
// DEFAULT-COUNT-1: onnx.Cast
// DEFAULT-NOT: onnx.Cast
// DEFAULT-LABEL: func.func @near
// BAD: error: octet-rematerialize-casts: distance=0 must be at least 1
func.func @far(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = onnx.initializer "w" = dense<1.0> : tensor<4xf16>
  %c = onnx.Cast %w {to = 1 : si64} : (tensor<4xf16>) -> tensor<4xf32>
  %a = onnx.Mul %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b0 = onnx.Exp %a : (tensor<4xf32>) -> tensor<4xf32>
  %b1 = onnx.Exp %b0 : (tensor<4xf32>) -> tensor<4xf32>
  %b2 = onnx.Exp %b1 : (tensor<4xf32>) -> tensor<4xf32>
  %b3 = onnx.Exp %b2 : (tensor<4xf32>) -> tensor<4xf32>
  %b4 = onnx.Exp %b3 : (tensor<4xf32>) -> tensor<4xf32>
  %b5 = onnx.Exp %b4 : (tensor<4xf32>) -> tensor<4xf32>
  %b6 = onnx.Exp %b5 : (tensor<4xf32>) -> tensor<4xf32>
  %b7 = onnx.Exp %b6 : (tensor<4xf32>) -> tensor<4xf32>
  %b8 = onnx.Exp %b7 : (tensor<4xf32>) -> tensor<4xf32>
  %b9 = onnx.Exp %b8 : (tensor<4xf32>) -> tensor<4xf32>
  %s = onnx.Sub %b9, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Readers close together share one Cast; a Cast of an activation is left alone.
// CHECK-LABEL: func.func @near
// CHECK-COUNT-2: onnx.Cast
// CHECK-NOT: onnx.Cast
func.func @near(%x: tensor<4xf16>) -> tensor<4xf32> {
  %w = onnx.initializer "w" = dense<1.0> : tensor<4xf16>
  %c = onnx.Cast %w {to = 1 : si64} : (tensor<4xf16>) -> tensor<4xf32>
  %xc = onnx.Cast %x {to = 1 : si64} : (tensor<4xf16>) -> tensor<4xf32>
  %a = onnx.Mul %xc, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = onnx.Add %a, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %d = onnx.Add %b, %xc : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %d : tensor<4xf32>
}
