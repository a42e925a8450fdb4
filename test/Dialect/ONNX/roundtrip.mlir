// RUN: fp8-opt %s -split-input-file | fp8-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @linear
// CHECK: %[[W:.+]] = onnx.initializer "fc.weight" = dense<{{.*}}> : tensor<4x8xf32>
// CHECK: onnx.MatMul %{{.+}}, %[[W]] : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK: onnx.Gemm {{.*}} {transB = 1 : si64}
func.func @linear(%x: tensor<2x4xf32>, %b: tensor<8x4xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %w = onnx.initializer "fc.weight" = dense<1.0> : tensor<4x8xf32>
  %y = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %n = onnx.none
  %z = onnx.Gemm %x, %b, %n {transB = 1 : si64} : (tensor<2x4xf32>, tensor<8x4xf32>, none) -> tensor<2x8xf32>
  return %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @norms
// CHECK: onnx.LayerNormalization {{.*}} {axis = -1 : si64, epsilon = 9.99999974E-6 : f32}
// CHECK: onnx.Gelu {{.*}} {approximate = "tanh"}
// CHECK: onnx.Softmax {{.*}} {axis = -1 : si64}
// CHECK: onnx.RMSNormalization {{.*}} {epsilon = 9.99999997E-7 : f32}
func.func @norms(%x: tensor<2x16x64xf32>, %s: tensor<64xf32>) -> tensor<2x16x64xf32> {
  %n = onnx.none
  %y, %m, %i = onnx.LayerNormalization %x, %s, %n {axis = -1 : si64, epsilon = 1.0e-5 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, none) -> (tensor<2x16x64xf32>, none, none)
  %g = onnx.Gelu %y {approximate = "tanh"} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %p = onnx.Softmax %g {axis = -1 : si64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %r = onnx.RMSNormalization %p, %s {epsilon = 1.0e-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return %r : tensor<2x16x64xf32>
}

// -----

// CHECK-LABEL: func.func @shapes
// CHECK: onnx.Reshape
// CHECK: onnx.Transpose {{.*}} {perm = array<i64: 0, 2, 1>}
// CHECK: onnx.Split {{.*}} -> (tensor<2x2x8xf32>, tensor<2x2x8xf32>)
// CHECK: onnx.Concat {{.*}} {axis = 1 : si64}
func.func @shapes(%x: tensor<2x16xf32>) -> tensor<2x4x8xf32> {
  %s = onnx.initializer "shape" = dense<[2, 8, 2]> : tensor<3xi64>
  %r = onnx.Reshape %x, %s : (tensor<2x16xf32>, tensor<3xi64>) -> tensor<2x8x2xf32>
  %t = onnx.Transpose %r {perm = array<i64: 0, 2, 1>} : (tensor<2x8x2xf32>) -> tensor<2x2x8xf32>
  %n = onnx.none
  %a = onnx.Concat %t, %t {axis = 1 : si64} : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %p:2 = onnx.Split %a, %n {axis = 1 : si64, num_outputs = 2 : si64} : (tensor<2x4x8xf32>, none) -> (tensor<2x2x8xf32>, tensor<2x2x8xf32>)
  %c = onnx.Concat %p#0, %p#1 {axis = 1 : si64} : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  return %c : tensor<2x4x8xf32>
}

// -----

// Float8 QDQ as ONNX writes it (opset 19).
// CHECK-LABEL: func.func @qdq
// CHECK: onnx.QuantizeLinear {{.*}} -> tensor<4xf8E4M3FN>
// CHECK: onnx.DequantizeLinear {{.*}} (tensor<4xf8E4M3FN>, tensor<f32>, none) -> tensor<4xf32>
func.func @qdq(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  %zp = onnx.initializer "zp" = dense<0.0> : tensor<f8E4M3FN>
  %q = onnx.QuantizeLinear %x, %s, %zp {saturate = 1 : si64} : (tensor<4xf32>, tensor<f32>, tensor<f8E4M3FN>) -> tensor<4xf8E4M3FN>
  %n = onnx.none
  %d = onnx.DequantizeLinear %q, %s, %n : (tensor<4xf8E4M3FN>, tensor<f32>, none) -> tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

// The generic node keeps any op: attributes, domain and subgraph regions.
// CHECK-LABEL: func.func @generic
// CHECK: onnx.node "If"(%{{.+}}) {subgraph_attrs = ["then_branch", "else_branch"]} subgraphs
// CHECK: onnx.yield
// CHECK: onnx.node "FusedMatMul"({{.*}}) {attrs = {alpha = 2.000000e+00 : f32, transA = 0 : si64}, domain = "com.microsoft"}
// CHECK: !onnx.seq<tensor<*xf32>>
func.func @generic(%c: tensor<i1>, %x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, !onnx.seq<tensor<*xf32>>) {
  %r = onnx.node "If"(%c) {subgraph_attrs = ["then_branch", "else_branch"]} subgraphs {
    %n = onnx.Neg %x : (tensor<2x2xf32>) -> tensor<2x2xf32>
    onnx.yield %n : tensor<2x2xf32>
  }, {
    onnx.yield %x : tensor<2x2xf32>
  } : (tensor<i1>) -> tensor<2x2xf32>
  %f = onnx.node "FusedMatMul"(%x, %x) {attrs = {alpha = 2.0 : f32, transA = 0 : si64}, domain = "com.microsoft"} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %s = onnx.node "SplitToSequence"(%x) : (tensor<2x2xf32>) -> !onnx.seq<tensor<*xf32>>
  return %r, %f, %s : tensor<2x2xf32>, tensor<2x2xf32>, !onnx.seq<tensor<*xf32>>
}
