// RUN: fp8-opt %s -split-input-file --octet-fuse-cast-sources | FileCheck %s

// A LayerNorm's output, viewed as [rows, cols], cast three times (the Q, K and V projections'
// inputs, each with its scale): the LayerNorm and the three casts are one cast pass.
// CHECK-LABEL: func.func @layernorm
// CHECK: onnx.LayerNormalization {{.*}}octet.cast_pass = 0 : i64
// CHECK: onnx.Reshape
// CHECK-NOT: octet.cast_pass
// CHECK: fp8.cast_amax {{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: return
func.func @layernorm(%x: tensor<2x32x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %s: tensor<f32>) -> (tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E5M2>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E5M2>) {
  %y, %m, %i = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64, epsilon = 1.0e-05 : f32} : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x32x64xf32>, none, none)
  %shape = onnx.Constant {value = dense<[64, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
  %v = onnx.Reshape %y, %shape : (tensor<2x32x64xf32>, tensor<2xi64>) -> tensor<64x64xf32>
  %q1, %a1, %t1 = fp8.cast_amax %v, %s : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>
  %q2, %a2, %t2 = fp8.cast_amax %v, %s : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>
  %q3, %a3, %t3 = fp8.cast_amax %v, %s : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E5M2>, tensor<f32>, tensor<64x64xf8E5M2>
  return %q1, %q2, %t1, %q3, %t2, %t3 : tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E5M2>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E5M2>
}

// -----

// Dynamic scaling: the amax of the LayerNorm's output and the scale made from it sit between the
// LayerNorm and its casts. The amax joins the pass (it takes the statistics and max |y|), the scale
// does not.
// CHECK-LABEL: func.func @layernorm_amax
// CHECK: onnx.LayerNormalization {{.*}}octet.cast_pass = 0 : i64
// CHECK: onnx.Reshape
// CHECK-NOT: octet.cast_pass
// CHECK: fp8.amax {{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: fp8.dynamic_scale
// CHECK-NOT: octet.cast_pass
// CHECK-SAME: tensor<f32>
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: return
func.func @layernorm_amax(%x: tensor<2x32x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>) {
  %y, %m, %i = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64, epsilon = 1.0e-05 : f32} : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x32x64xf32>, none, none)
  %shape = onnx.Constant {value = dense<[64, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
  %v = onnx.Reshape %y, %shape : (tensor<2x32x64xf32>, tensor<2xi64>) -> tensor<64x64xf32>
  %a = fp8.amax %v : tensor<64x64xf32> -> tensor<f32>
  %s, %si = fp8.dynamic_scale %a {format = f8E4M3FN} : tensor<f32>
  %q, %qa, %t = fp8.cast_amax %v, %si : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>
  return %q, %t : tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>
}

// -----

// No amax in a pass: an amax another op reads too; a rowwise amax; an amax of a GELU's output
// (recomputing the GELU costs more than storing it: producer_amax's); an amax of another tensor.
// CHECK-LABEL: func.func @amax_left_alone
// CHECK-NOT: octet.cast_pass
// CHECK: return
func.func @amax_left_alone(%x: tensor<64x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>) {
  %y1, %m1, %i1 = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64} : (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<64x64xf32>, none, none)
  %a1 = fp8.amax %y1 : tensor<64x64xf32> -> tensor<f32>
  %s1, %si1 = fp8.dynamic_scale %a1 {format = f8E4M3FN} : tensor<f32>
  %q1, %qa1, %t1 = fp8.cast_amax %y1, %si1 : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>
  %y2, %m2, %i2 = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64} : (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<64x64xf32>, none, none)
  %a2 = fp8.amax %y2 {rowwise = true} : tensor<64x64xf32> -> tensor<64x1xf32>
  %s2, %si2 = fp8.dynamic_scale %a2 {format = f8E4M3FN} : tensor<64x1xf32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %q2, %qa2, %t2 = fp8.cast_amax %y2, %one : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>
  %ge = onnx.Gelu %x : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %a3 = fp8.amax %ge : tensor<64x64xf32> -> tensor<f32>
  %s3, %si3 = fp8.dynamic_scale %a3 {format = f8E4M3FN} : tensor<f32>
  %q3, %qa3, %t3 = fp8.cast_amax %ge, %si3 : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>
  %y4, %m4, %i4 = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64} : (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<64x64xf32>, none, none)
  %a4 = fp8.amax %x : tensor<64x64xf32> -> tensor<f32>
  %s4, %si4 = fp8.dynamic_scale %a4 {format = f8E4M3FN} : tensor<f32>
  %q4, %qa4, %t4 = fp8.cast_amax %y4, %si4 : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>
  return %t1, %a1, %t2, %t3, %t4 : tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>
}

// -----

// A GELU (BF16) and its cast; then a Pointwise program whose result a cast with a column sum
// (cast_column_sum) reads, and the sum: the program and the cast are the second pass, the sum
// stays out of it (its group puts it in the cast's pass).
// CHECK-LABEL: func.func @gelu_and_pointwise
// CHECK: onnx.Gelu {{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: onnx.node "Pointwise"{{.*}}octet.cast_pass = 1 : i64
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.cast_pass = 1 : i64
// CHECK: onnx.ReduceSum
// CHECK-NOT: octet.cast_pass
// CHECK-SAME: tensor<32xf32>
// CHECK-NEXT: return
func.func @gelu_and_pointwise(%h: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %s: tensor<f32>) -> (tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>, tensor<32xf32>) {
  %g = onnx.Gelu %h : (tensor<64x32xbf16>) -> tensor<64x32xbf16>
  %gq, %ga, %gt = fp8.cast_amax %g, %s : tensor<64x32xbf16>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %d = onnx.node "Pointwise"(%dy, %h) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet"} : (tensor<64x32xbf16>, tensor<64x32xbf16>) -> tensor<64x32xbf16>
  %q, %a, %t = fp8.cast_amax %d, %s {octet.fusion = "cast_column_sum", octet.fusion_group = 0 : i64} : tensor<64x32xbf16>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  %axes = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %sum = onnx.ReduceSum %d, %axes {keepdims = 0 : si64, octet.fusion = "cast_column_sum", octet.fusion_group = 0 : i64} : (tensor<64x32xbf16>, tensor<1xi64>) -> tensor<32xf32>
  return %gq, %gt, %q, %t, %sum : tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>, tensor<32xf32>
}

// -----

// A pointwise_chain group (a GELU gradient's two programs) whose last result is cast: every member
// of the chain joins the cast's pass.
// CHECK-LABEL: func.func @chain
// CHECK: onnx.node "Pointwise"{{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: onnx.node "Pointwise"{{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.cast_pass = 0 : i64
func.func @chain(%h: tensor<64x32xf32>, %dy: tensor<64x32xf32>, %s: tensor<f32>) -> (tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>) {
  %t = onnx.node "Pointwise"(%h) {attrs = {args = array<i64: 0, -1, -1>, ops = ["Tanh"]}, domain = "octet", octet.fusion = "pointwise_chain", octet.fusion_group = 0 : i64} : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %d = onnx.node "Pointwise"(%dy, %t) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet", octet.fusion = "pointwise_chain", octet.fusion_group = 0 : i64} : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %q, %a, %qt = fp8.cast_amax %d, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  return %q, %qt : tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>
}

// -----

// Casts of a function argument (no producer): two in a row share a pass; of four in a row, the
// first three do (a pass casts at most three) and the fourth is left alone.
// CHECK-LABEL: func.func @shared
// CHECK: fp8.cast_amax %arg0{{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: fp8.cast_amax %arg0{{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: fp8.cast_amax %arg1{{.*}}octet.cast_pass = 1 : i64
// CHECK-NEXT: fp8.cast_amax %arg1{{.*}}octet.cast_pass = 1 : i64
// CHECK-NEXT: fp8.cast_amax %arg1{{.*}}octet.cast_pass = 1 : i64
// CHECK-NEXT: fp8.cast_amax %arg1
// CHECK-NOT: octet.cast_pass
// CHECK-SAME: tensor<32x64xf8E4M3FN>
func.func @shared(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>, %s: tensor<f32>) -> (tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>) {
  %q1, %a1, %t1 = fp8.cast_amax %x, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %q2, %a2, %t2 = fp8.cast_amax %x, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %q3, %a3, %t3 = fp8.cast_amax %y, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %q4, %a4, %t4 = fp8.cast_amax %y, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %q5, %a5, %t5 = fp8.cast_amax %y, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %q6, %a6, %t6 = fp8.cast_amax %y, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  return %t1, %t2, %t3, %t4, %t5, %t6 : tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>
}

// -----

// The LayerNorm's output is also the function's result: the two casts share a pass without it.
// CHECK-LABEL: func.func @kept
// CHECK: onnx.LayerNormalization
// CHECK-NOT: octet.cast_pass
// CHECK-SAME: tensor<64x64xf32>
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.cast_pass = 0 : i64
// CHECK-NEXT: fp8.cast_amax {{.*}}octet.cast_pass = 0 : i64
func.func @kept(%x: tensor<64x64xf32>, %g: tensor<64xf32>, %s: tensor<f32>) -> (tensor<64x64xf32>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>) {
  %none = onnx.none
  %y, %m, %i = onnx.LayerNormalization %x, %g, %none {axis = -1 : si64} : (tensor<64x64xf32>, tensor<64xf32>, none) -> (tensor<64x64xf32>, none, none)
  %q1, %a1, %t1 = fp8.cast_amax %y, %s : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>
  %q2, %a2, %t2 = fp8.cast_amax %y, %s : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>
  return %y, %t1, %t2 : tensor<64x64xf32>, tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>
}

// -----

// No pass: a single cast of an argument; a cast with no transposed copy; a LayerNorm over the
// last two axes; a BF16 LayerNorm; a GELU whose amax dynamic scaling takes in its pass
// (producer_amax); a GEMM between a GELU and its cast; a GELU the column-summed cast reads.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: octet.cast_pass
// CHECK: return
func.func @left_alone(%x: tensor<64x32xf32>, %xb: tensor<64x32xbf16>, %g2: tensor<64x32xf32>, %g: tensor<32xbf16>, %s: tensor<f32>) -> (tensor<32x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x32xf32>, tensor<32x64xf8E5M2>, tensor<32xf32>) {
  %q1, %a1, %t1 = fp8.cast_amax %x, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %y = onnx.Gelu %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %q2, %a2 = fp8.cast_amax %y, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>
  %none = onnx.none
  %n, %nm, %ni = onnx.LayerNormalization %x, %g2, %none {axis = 0 : si64} : (tensor<64x32xf32>, tensor<64x32xf32>, none) -> (tensor<64x32xf32>, none, none)
  %q3, %a3, %t3 = fp8.cast_amax %n, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %nb, %bm, %bi = onnx.LayerNormalization %xb, %g, %none {axis = -1 : si64} : (tensor<64x32xbf16>, tensor<32xbf16>, none) -> (tensor<64x32xbf16>, none, none)
  %q4, %a4, %t4 = fp8.cast_amax %nb, %s : tensor<64x32xbf16>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %ga = onnx.Gelu %x {octet.fusion = "producer_amax", octet.fusion_group = 0 : i64} : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %am = fp8.amax %ga {octet.fusion = "producer_amax", octet.fusion_group = 0 : i64} : tensor<64x32xf32> -> tensor<f32>
  %q5, %a5, %t5 = fp8.cast_amax %ga, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %gg = onnx.Gelu %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %w = fp8.gemm %t1, %t1, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x32xf32>
  %q6, %a6, %t6 = fp8.cast_amax %gg, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  %gs = onnx.Gelu %x : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %q7, %a7, %t7 = fp8.cast_amax %gs, %s {octet.fusion = "cast_column_sum", octet.fusion_group = 0 : i64} : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  %axes = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %sum = onnx.ReduceSum %gs, %axes {keepdims = 0 : si64, octet.fusion = "cast_column_sum", octet.fusion_group = 0 : i64} : (tensor<64x32xf32>, tensor<1xi64>) -> tensor<32xf32>
  return %t1, %q2, %t3, %t4, %am, %t5, %t6, %w, %t7, %sum : tensor<32x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<32x32xf32>, tensor<32x64xf8E5M2>, tensor<32xf32>
}
