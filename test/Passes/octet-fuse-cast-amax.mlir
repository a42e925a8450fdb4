// RUN: fp8-opt %s -split-input-file --octet-fuse-cast-amax | FileCheck %s

// Delayed scaling: the amax feeds the scale update before the cast, so the fused op takes
// the amax's place (the cast's scale is state, defined at the top); result names carry over.
// CHECK-LABEL: func.func @delayed
// CHECK: %[[Q:.+]], %[[A:.+]] = fp8.cast_amax %arg0, %{{.+}} {octet.result_names = ["x_fp8", "x_amax"]} : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>
// CHECK-NEXT: fp8.delayed_scale %{{.+}}, %{{.+}}, %[[A]]
// CHECK-NOT: fp8.cast
// CHECK-NOT: fp8.amax
// CHECK: return %[[Q]]
func.func @delayed(%x: tensor<16x64xf32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>) {
  %h = onnx.initializer "h" = dense<0.0> : tensor<16xf32>
  %s = onnx.initializer "s" = dense<1.0> : tensor<f32>
  %si = onnx.initializer "si" = dense<1.0> : tensor<f32>
  %a = fp8.amax %x {octet.result_names = ["x_amax"]} : tensor<16x64xf32> -> tensor<f32>
  %h2, %s2, %si2 = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %q = fp8.cast %x, %si {octet.result_names = ["x_fp8"]} : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>
  return %q, %si2 : tensor<16x64xf8E4M3FN>, tensor<f32>
}

// -----

// Cast first, amax later: the fused op takes the amax's place, saturate carries over.
// CHECK-LABEL: func.func @cast_first
// CHECK-NEXT: onnx.Exp
// CHECK-NEXT: fp8.cast_amax %arg0, %arg1 {saturate = false}
// CHECK-NEXT: return
func.func @cast_first(%x: tensor<8xbf16>, %si: tensor<f32>) -> (tensor<8xf8E5M2>, tensor<f32>, tensor<8xbf16>) {
  %q = fp8.cast %x, %si {saturate = false} : tensor<8xbf16>, tensor<f32> -> tensor<8xf8E5M2>
  %e = onnx.Exp %x : (tensor<8xbf16>) -> tensor<8xbf16>
  %a = fp8.amax %x : tensor<8xbf16> -> tensor<f32>
  return %q, %a, %e : tensor<8xf8E5M2>, tensor<f32>, tensor<8xbf16>
}

// -----

// Current scaling: the cast's scale comes from this amax, so neither place works: both stay.
// CHECK-LABEL: func.func @dynamic
// CHECK: fp8.amax
// CHECK: fp8.dynamic_scale
// CHECK: fp8.cast
// CHECK-NOT: fp8.cast_amax
func.func @dynamic(%x: tensor<16x64xf32>) -> tensor<16x64xf8E4M3FN> {
  %a = fp8.amax %x : tensor<16x64xf32> -> tensor<f32>
  %s, %si = fp8.dynamic_scale %a {format = f8E4M3FN} : tensor<f32>
  %q = fp8.cast %x, %si : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>
  return %q : tensor<16x64xf8E4M3FN>
}

// -----

// Row-wise amax, or an amax of another tensor: no pair.
// CHECK-LABEL: func.func @no_pair
// CHECK: fp8.amax %arg0 {rowwise = true}
// CHECK: fp8.amax %arg2
// CHECK: fp8.cast %arg0
// CHECK-NOT: fp8.cast_amax
func.func @no_pair(%x: tensor<16x64xf32>, %si: tensor<f32>, %y: tensor<16x64xf32>) -> (tensor<16x1xf32>, tensor<f32>, tensor<16x64xf8E4M3FN>) {
  %r = fp8.amax %x {rowwise = true} : tensor<16x64xf32> -> tensor<16x1xf32>
  %a = fp8.amax %y : tensor<16x64xf32> -> tensor<f32>
  %q = fp8.cast %x, %si : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>
  return %r, %a, %q : tensor<16x1xf32>, tensor<f32>, tensor<16x64xf8E4M3FN>
}

// -----

// Two casts of one tensor (E4M3 and E5M2) and one amax: the first cast takes the amax.
// CHECK-LABEL: func.func @two_casts
// CHECK: fp8.cast_amax %arg0, %arg1 : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>, tensor<f32>
// CHECK: fp8.cast %arg0, %arg2 : tensor<8xf32>, tensor<f32> -> tensor<8xf8E5M2>
// CHECK-NOT: fp8.amax
func.func @two_casts(%x: tensor<8xf32>, %s1: tensor<f32>, %s2: tensor<f32>) -> (tensor<8xf8E4M3FN>, tensor<8xf8E5M2>, tensor<f32>) {
  %a = fp8.amax %x : tensor<8xf32> -> tensor<f32>
  %q1 = fp8.cast %x, %s1 : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>
  %q2 = fp8.cast %x, %s2 : tensor<8xf32>, tensor<f32> -> tensor<8xf8E5M2>
  return %q1, %q2, %a : tensor<8xf8E4M3FN>, tensor<8xf8E5M2>, tensor<f32>
}
