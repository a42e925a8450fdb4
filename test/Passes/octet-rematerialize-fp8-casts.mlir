// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-rematerialize-fp8-casts{distance=4})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-rematerialize-fp8-casts | FileCheck %s --check-prefix=DEFAULT
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-rematerialize-fp8-casts{distance=4 sources=gelu})' | FileCheck %s --check-prefix=GELU

// A weight's codes read by the forward GEMM and again 7 ops later by the dgrad: the late
// reader gets its own fp8.cast of the weight with the same scale, placed just before it, and
// named after the original; the default distance (16) keeps one cast.
// CHECK-LABEL: func.func @weight
// CHECK: %[[W:.+]] = fp8.cast %arg1, %arg2 {octet.result_names = ["w.codes"]
// CHECK-NEXT: fp8.gemm %{{.+}}, %[[W]]
// CHECK: %[[W2:.+]] = fp8.cast %arg1, %arg2 {octet.result_names = ["w.codes.recomputed"]
// CHECK-NEXT: fp8.gemm %arg3, %[[W2]], %arg2, %arg2 :
// DEFAULT-LABEL: func.func @weight
// DEFAULT-COUNT-1: fp8.cast
// DEFAULT-NOT: fp8.cast
// DEFAULT-LABEL: func.func @gelu
// sources=gelu: the weight's cast is not copied; the GELU's is.
// GELU-LABEL: func.func @weight
// GELU-COUNT-1: fp8.cast
// GELU-NOT: fp8.cast
// GELU-LABEL: func.func @gelu
// GELU-COUNT-2: onnx.Gelu
// GELU-LABEL: func.func @layer_norm
// GELU-COUNT-1: onnx.LayerNormalization
// GELU-NOT: onnx.LayerNormalization
// GELU-LABEL: func.func @layer_norm_mean_read
func.func @weight(%x: tensor<16x64xf8E4M3FN>, %w: tensor<32x64xf32>, %s: tensor<f32>, %d: tensor<16x32xf8E4M3FN>) -> (tensor<16x32xf32>, tensor<16x64xf32>) {
  %c = fp8.cast %w, %s {octet.result_names = ["w.codes"]} : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>
  %y = fp8.gemm %x, %c, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %e0 = onnx.Exp %y : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e1 = onnx.Exp %e0 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e2 = onnx.Exp %e1 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e3 = onnx.Exp %e2 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e4 = onnx.Exp %e3 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %dx = fp8.gemm %d, %c, %s, %s {transpose_b = false} : (tensor<16x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x64xf32>
  return %e4, %dx : tensor<16x32xf32>, tensor<16x64xf32>
}

// -----

// The transposed codes of a GELU output, read by the wgrad far from the forward: the GELU is
// recomputed from its input (an argument, available all step) and cast again with its
// transposed result, which the wgrad reads; the forward keeps the original codes.
// CHECK-LABEL: func.func @gelu
// CHECK: %[[Q:.+]], %{{.+}}, %{{.+}} = fp8.cast_amax %[[G:.+]], %arg1
// CHECK-NEXT: fp8.gemm %[[Q]]
// CHECK: %[[G2:.+]] = onnx.Gelu %arg0 {approximate = "tanh"}
// CHECK-NEXT: %{{.+}}, %{{.+}}, %[[T2:.+]] = fp8.cast_amax %[[G2]], %arg1 {octet.result_names = ["g.codes.recomputed", "g.amax.recomputed", "g.t.recomputed"]
// CHECK-NEXT: fp8.gemm %[[T2]]
func.func @gelu(%x: tensor<16x64xf32>, %s: tensor<f32>, %w: tensor<32x64xf8E4M3FN>, %d: tensor<16x32xf8E4M3FN>) -> (tensor<16x32xf32>, tensor<64x32xf32>) {
  %g = onnx.Gelu %x {approximate = "tanh"} : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %q, %a, %t = fp8.cast_amax %g, %s {octet.result_names = ["g.codes", "g.amax", "g.t"]} : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
  %y = fp8.gemm %q, %w, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %e0 = onnx.Exp %y : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e1 = onnx.Exp %e0 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e2 = onnx.Exp %e1 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e3 = onnx.Exp %e2 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e4 = onnx.Exp %e3 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %dw = fp8.gemm %t, %d, %s, %s : (tensor<64x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x32xf32>
  return %e4, %dw : tensor<16x32xf32>, tensor<64x32xf32>
}

// -----

// The transposed codes of a LayerNorm's output (through a Reshape): the LayerNorm forward and
// the Reshape run again on their inputs before the far wgrad, and the copy casts their result.
// CHECK-LABEL: func.func @layer_norm
// CHECK: onnx.LayerNormalization %arg0, %arg1, %arg2
// CHECK: onnx.Exp
// CHECK: %[[Y2:.+]], %{{.+}}, %{{.+}} = onnx.LayerNormalization %arg0, %arg1, %arg2
// CHECK-NEXT: %[[R2:.+]] = onnx.Reshape %[[Y2]], %arg3
// CHECK-NEXT: %{{.+}}, %{{.+}}, %[[T2:.+]] = fp8.cast_amax %[[R2]], %arg4
// CHECK-NEXT: fp8.gemm %[[T2]], %arg5
func.func @layer_norm(%x: tensor<4x4x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %shape: tensor<2xi64>, %s: tensor<f32>, %d: tensor<16x32xf8E4M3FN>, %w: tensor<32x64xf8E4M3FN>) -> (tensor<16x32xf32>, tensor<64x32xf32>) {
  %y, %m, %i = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64, epsilon = 1.0e-5 : f32} : (tensor<4x4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<4x4x64xf32>, none, none)
  %r = onnx.Reshape %y, %shape : (tensor<4x4x64xf32>, tensor<2xi64>) -> tensor<16x64xf32>
  %q, %a, %t = fp8.cast_amax %r, %s : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
  %o = fp8.gemm %q, %w, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %e0 = onnx.Exp %o : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e1 = onnx.Exp %e0 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e2 = onnx.Exp %e1 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e3 = onnx.Exp %e2 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e4 = onnx.Exp %e3 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %dw = fp8.gemm %t, %d, %s, %s : (tensor<64x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x32xf32>
  return %e4, %dw : tensor<16x32xf32>, tensor<64x32xf32>
}

// -----

// A LayerNorm whose mean is read too is not run again (its copy would compute a second mean
// nobody reads while the first is kept anyway): the codes are kept.
// CHECK-LABEL: func.func @layer_norm_mean_read
// CHECK-COUNT-1: onnx.LayerNormalization
// CHECK-NOT: onnx.LayerNormalization
// CHECK-COUNT-1: fp8.cast_amax
// CHECK-NOT: fp8.cast_amax
func.func @layer_norm_mean_read(%x: tensor<16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %s: tensor<f32>, %d: tensor<16x32xf8E4M3FN>, %w: tensor<32x64xf8E4M3FN>) -> (tensor<16x32xf32>, tensor<64x32xf32>, tensor<16x1xf32>) {
  %y, %m, %i = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64, epsilon = 1.0e-5 : f32} : (tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<16x64xf32>, tensor<16x1xf32>, none)
  %q, %a, %t = fp8.cast_amax %y, %s : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
  %o = fp8.gemm %q, %w, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %e0 = onnx.Exp %o : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e1 = onnx.Exp %e0 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e2 = onnx.Exp %e1 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e3 = onnx.Exp %e2 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e4 = onnx.Exp %e3 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %dw = fp8.gemm %t, %d, %s, %s : (tensor<64x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x32xf32>
  return %e4, %dw, %m : tensor<16x32xf32>, tensor<64x32xf32>, tensor<16x1xf32>
}

// -----

// The cast's input is an Exp of an argument: neither it nor its input's op (not a Reshape,
// Cast or Gelu) can be had at the far reader without keeping it, so the codes are kept.
// CHECK-LABEL: func.func @not_recomputable
// CHECK-COUNT-1: fp8.cast
// CHECK-NOT: fp8.cast
func.func @not_recomputable(%x: tensor<32x64xf32>, %s: tensor<f32>, %a: tensor<16x64xf8E4M3FN>, %d: tensor<16x32xf8E4M3FN>) -> (tensor<16x32xf32>, tensor<16x64xf32>) {
  %v = onnx.Exp %x : (tensor<32x64xf32>) -> tensor<32x64xf32>
  %c = fp8.cast %v, %s : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>
  %y = fp8.gemm %a, %c, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %e0 = onnx.Exp %y : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e1 = onnx.Exp %e0 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e2 = onnx.Exp %e1 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e3 = onnx.Exp %e2 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e4 = onnx.Exp %e3 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %dx = fp8.gemm %d, %c, %s, %s {transpose_b = false} : (tensor<16x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x64xf32>
  return %e4, %dx : tensor<16x32xf32>, tensor<16x64xf32>
}

// -----

// Readers within the distance share the cast.
// CHECK-LABEL: func.func @near
// CHECK-COUNT-1: fp8.cast
// CHECK-NOT: fp8.cast
func.func @near(%w: tensor<32x64xf32>, %s: tensor<f32>, %a: tensor<16x64xf8E4M3FN>, %d: tensor<16x32xf8E4M3FN>) -> (tensor<16x32xf32>, tensor<16x64xf32>) {
  %c = fp8.cast %w, %s : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>
  %y = fp8.gemm %a, %c, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %e0 = onnx.Exp %y : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %dx = fp8.gemm %d, %c, %s, %s {transpose_b = false} : (tensor<16x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x64xf32>
  return %e0, %dx : tensor<16x32xf32>, tensor<16x64xf32>
}

// -----

// MS-AMP O3's weight: its float32 master cast to FP8 and dequantized at the step's start, then cast
// again (with a scale of its own) for the forward GEMM. The late dgrad's codes are made again from
// the master (a state, available all step): cast, dequantize, cast, the scales (scalars) read as
// they are; nothing of the weight stays alive between the forward and the backward.
// CHECK-LABEL: func.func @msamp_o3_weight
// CHECK: %[[C:.+]] = fp8.cast %{{.+}}, %[[SI:.+]] {octet.result_names = ["w.codes"]
// CHECK-NEXT: fp8.gemm %{{.+}}, %[[C]]
// CHECK: %[[M2:.+]] = fp8.cast %arg1, %arg2 :
// CHECK-NEXT: %[[W2:.+]] = fp8.dequantize %[[M2]], %arg2
// CHECK-NEXT: %[[C2:.+]] = fp8.cast %[[W2]], %[[SI]] {octet.result_names = ["w.codes.recomputed"]
// CHECK-NEXT: fp8.gemm %arg3, %[[C2]]
// GELU-LABEL: func.func @msamp_o3_weight
// GELU-COUNT-1: fp8.dequantize
// GELU-NOT: fp8.dequantize
func.func @msamp_o3_weight(%x: tensor<16x64xf8E4M3FN>, %master: tensor<32x64xf32>, %s0: tensor<f32>, %d: tensor<16x32xf8E4M3FN>) -> (tensor<16x32xf32>, tensor<16x64xf32>) {
  %m8 = fp8.cast %master, %s0 : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>
  %w = fp8.dequantize %m8, %s0 : tensor<32x64xf8E4M3FN>, tensor<f32> -> tensor<32x64xf32>
  %a = fp8.amax %w : tensor<32x64xf32> -> tensor<f32>
  %sc, %si = fp8.dynamic_scale %a {format = f8E4M3FN, power_of_two = true} : tensor<f32>
  %c = fp8.cast %w, %si {octet.result_names = ["w.codes"]} : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>
  %y = fp8.gemm %x, %c, %s0, %si {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %e0 = onnx.Exp %y : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e1 = onnx.Exp %e0 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e2 = onnx.Exp %e1 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e3 = onnx.Exp %e2 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %e4 = onnx.Exp %e3 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %dx = fp8.gemm %d, %c, %s0, %si {transpose_b = false} : (tensor<16x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x64xf32>
  return %e4, %dx : tensor<16x32xf32>, tensor<16x64xf32>
}
