// RUN: fp8-opt %s -split-input-file --octet-fuse-gelu-recompute | FileCheck %s

// The MLP's backward with the GELU recomputed: GELU(h) cast for the second Linear's weight gradient
// (transposed codes only), then the GELU gradient (a chain of h and dY) and its cast with the
// transposed copy and the bias gradient. The GELU and its cast move to the chain, the weight
// gradient after the gradient's cast; the GELU and its cast are one gelu_recompute_cast group.
// CHECK-LABEL: func.func @recomputed
// CHECK: onnx.ReduceSum %arg4
// CHECK-NEXT: onnx.Gelu %arg0 {{.*}}octet.fusion = "gelu_recompute_cast", octet.fusion_group = 0 : i64
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.fusion = "gelu_recompute_cast", octet.fusion_group = 0 : i64
// CHECK-NEXT: onnx.node "Pointwise"
// CHECK-NEXT: onnx.node "Pointwise"
// CHECK-NEXT: %[[Q:.+]], %{{.+}}, %[[QT:.+]] = fp8.cast_amax
// CHECK-NEXT: fp8.gemm
// CHECK-NEXT: onnx.ReduceSum
// CHECK-NEXT: return
func.func @recomputed(%h: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %c: tensor<f32>, %si: tensor<f32>, %dyo: tensor<64x16xbf16>, %dyt: tensor<16x64xf8E5M2>) -> (tensor<32x16xf32>, tensor<16xf32>, tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>, tensor<32xf32>) {
  %g = onnx.Gelu %h {approximate = "tanh"} : (tensor<64x32xbf16>) -> tensor<64x32xbf16>
  %gq, %ga, %gqt = fp8.cast_amax %g, %si : tensor<64x32xbf16>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %w = fp8.gemm %gqt, %dyt, %si, %si {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<16x64xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<32x16xf32>
  %axes = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %b2 = onnx.ReduceSum %dyo, %axes {keepdims = 0 : si64} : (tensor<64x16xbf16>, tensor<1xi64>) -> tensor<16xf32>
  %t = onnx.node "Pointwise"(%h, %c) {attrs = {args = array<i64: 0, 1, -1, 2, -1, -1>, ops = ["Mul", "Tanh"]}, domain = "octet", octet.fusion = "pointwise_chain", octet.fusion_group = 0 : i64} : (tensor<64x32xbf16>, tensor<f32>) -> tensor<64x32xbf16>
  %d = onnx.node "Pointwise"(%dy, %t, %h) {attrs = {args = array<i64: 0, 1, -1, 2, 1, -1, 3, 4, -1>, ops = ["Mul", "Mul", "Add"]}, domain = "octet", octet.fusion = "pointwise_chain", octet.fusion_group = 0 : i64} : (tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<64x32xbf16>) -> tensor<64x32xbf16>
  %q, %a, %qt = fp8.cast_amax %d, %si : tensor<64x32xbf16>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  %b1 = onnx.ReduceSum %d, %axes {keepdims = 0 : si64} : (tensor<64x32xbf16>, tensor<1xi64>) -> tensor<32xf32>
  return %w, %b2, %q, %qt, %b1 : tensor<32x16xf32>, tensor<16xf32>, tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>, tensor<32xf32>
}

// -----

// One program (no chain) of h computes the gradient, its result viewed [2, 32, 32] before the
// cast: a group, the GELU and its cast just before the program.
// CHECK-LABEL: func.func @one_program
// CHECK: onnx.Gelu {{.*}}octet.fusion_group = 0 : i64
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.fusion_group = 0 : i64
// CHECK-NEXT: onnx.node "Pointwise"
// CHECK: onnx.Reshape
// CHECK-NEXT: fp8.cast_amax
// CHECK-NEXT: fp8.gemm
func.func @one_program(%h: tensor<64x32xf32>, %dy: tensor<64x32xf32>, %si: tensor<f32>, %dyt: tensor<16x64xf8E5M2>) -> (tensor<32x16xf32>, tensor<2x32x32xf8E5M2>, tensor<32x64xf8E5M2>) {
  %g = onnx.Gelu %h : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %gq, %ga, %gqt = fp8.cast_amax %g, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %w = fp8.gemm %gqt, %dyt, %si, %si {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<16x64xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<32x16xf32>
  %d = onnx.node "Pointwise"(%dy, %h) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet"} : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %shape = onnx.Constant {value = dense<[2, 32, 32]> : tensor<3xi64>} : () -> tensor<3xi64>
  %v = onnx.Reshape %d, %shape : (tensor<64x32xf32>, tensor<3xi64>) -> tensor<2x32x32xf32>
  %q, %a, %qt = fp8.cast_amax %v, %si : tensor<2x32x32xf32>, tensor<f32> -> tensor<2x32x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  return %w, %q, %qt : tensor<32x16xf32>, tensor<2x32x32xf8E5M2>, tensor<32x64xf8E5M2>
}

// -----

// No group, nothing moves: the GELU's codes are read (the forward's cast, for the Linear's own
// GEMM); the gradient reads what the cast's reader computed; the gradient's cast has no
// transposed copy; the GELU's input is read by no program.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: octet.fusion
// CHECK: onnx.Gelu %arg0
// CHECK-NEXT: fp8.cast_amax
// CHECK-NEXT: fp8.gemm
// CHECK-NEXT: onnx.node "Pointwise"
// CHECK-NEXT: fp8.cast_amax
// CHECK-NEXT: onnx.Gelu %arg0
// CHECK-NEXT: fp8.cast_amax
// CHECK-NEXT: fp8.gemm
// CHECK-NEXT: onnx.node "Pointwise"
// CHECK-NEXT: fp8.cast_amax
// CHECK-NEXT: onnx.Gelu %arg0
// CHECK-NEXT: fp8.cast_amax
// CHECK-NEXT: onnx.node "Pointwise"
// CHECK-NEXT: fp8.cast_amax
// CHECK-NEXT: onnx.Gelu %arg1
// CHECK-NEXT: fp8.cast_amax
// CHECK-NEXT: onnx.node "Pointwise"
// CHECK-NEXT: fp8.cast_amax
// CHECK-NOT: octet.fusion
// CHECK: return
func.func @left_alone(%h: tensor<64x32xf32>, %k: tensor<64x32xf32>, %dy: tensor<64x32xf32>, %si: tensor<f32>, %dyt: tensor<32x64xf8E5M2>, %sq: tensor<32x32xf8E5M2>) -> (tensor<64x32xf8E4M3FN>, tensor<32x32xf32>, tensor<32x64xf8E5M2>, tensor<32x64xf8E5M2>, tensor<64x32xf8E5M2>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E5M2>) {
  %g1 = onnx.Gelu %h : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %q1, %a1, %qt1 = fp8.cast_amax %g1, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %w1 = fp8.gemm %qt1, %dyt, %si, %si {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<32x64xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<32x32xf32>
  %d1 = onnx.node "Pointwise"(%dy, %h) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet"} : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %r1, %b1, %rt1 = fp8.cast_amax %d1, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  %g2 = onnx.Gelu %h : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %q2, %a2, %qt2 = fp8.cast_amax %g2, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %w2 = fp8.gemm %qt2, %sq, %si, %si {transpose_a = true} : (tensor<32x64xf8E4M3FN>, tensor<32x32xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<64x32xf32>
  %d2 = onnx.node "Pointwise"(%w2, %h) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet"} : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %r2, %b2, %rt2 = fp8.cast_amax %d2, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  %g3 = onnx.Gelu %h : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %q3, %a3, %qt3 = fp8.cast_amax %g3, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %d3 = onnx.node "Pointwise"(%dy, %h) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet"} : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %r3, %b3 = fp8.cast_amax %d3, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>
  %g4 = onnx.Gelu %k : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %q4, %a4, %qt4 = fp8.cast_amax %g4, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %d4 = onnx.node "Pointwise"(%dy, %dy) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet"} : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %r4, %b4, %rt4 = fp8.cast_amax %d4, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  return %q1, %w1, %rt1, %rt2, %r3, %qt3, %qt4, %rt4 : tensor<64x32xf8E4M3FN>, tensor<32x32xf32>, tensor<32x64xf8E5M2>, tensor<32x64xf8E5M2>, tensor<64x32xf8E5M2>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E5M2>
}
