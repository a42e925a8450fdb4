// RUN: fp8-opt %s -split-input-file --octet-fold-widening-casts | FileCheck %s

// MS-AMP O2's FP16 weight, widened for the forward pass: its amax and its cast read the FP16
// tensor, and the Cast, with no reader left, goes.
// CHECK-LABEL: func.func @fp16_weight
// CHECK-NOT: onnx.Cast
// CHECK: fp8.amax %arg0 : tensor<64x32xf16> -> tensor<f32>
// CHECK: fp8.cast_amax %arg0, %{{.*}} : tensor<64x32xf16>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
func.func @fp16_weight(%w: tensor<64x32xf16>) -> (tensor<f32>, tensor<32x64xf8E4M3FN>) {
  %up = onnx.Cast %w {to = 1 : si64} : (tensor<64x32xf16>) -> tensor<64x32xf32>
  %a = fp8.amax %up : tensor<64x32xf32> -> tensor<f32>
  %s, %si = fp8.dynamic_scale %a {format = f8E4M3FN, power_of_two = true} : tensor<f32>
  %q, %b, %t = fp8.cast_amax %up, %si : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>
  return %a, %t : tensor<f32>, tensor<32x64xf8E4M3FN>
}

// -----

// A BF16 source and fp8.cast: the same; the Cast stays where another op reads the float32 value.
// CHECK-LABEL: func.func @bf16_kept
// CHECK: %[[UP:.*]] = onnx.Cast %arg0 {to = 1 : si64} : (tensor<16x8xbf16>) -> tensor<16x8xf32>
// CHECK: fp8.cast %arg0, %arg1 : tensor<16x8xbf16>, tensor<f32> -> tensor<16x8xf8E5M2>
// CHECK: onnx.Relu %[[UP]]
func.func @bf16_kept(%x: tensor<16x8xbf16>, %si: tensor<f32>) -> (tensor<16x8xf8E5M2>, tensor<16x8xf32>) {
  %up = onnx.Cast %x {to = 1 : si64} : (tensor<16x8xbf16>) -> tensor<16x8xf32>
  %q = fp8.cast %up, %si : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xf8E5M2>
  %r = onnx.Relu %up : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %q, %r : tensor<16x8xf8E5M2>, tensor<16x8xf32>
}

// -----

// Not folded: a narrowing Cast (float32 to FP16, then read as FP16) and a widening to float64.
// CHECK-LABEL: func.func @not_widening
// CHECK: %[[DOWN:.*]] = onnx.Cast %arg0 {to = 10 : si64}
// CHECK: fp8.amax %[[DOWN]] : tensor<16x8xf16>
// CHECK: onnx.Cast %arg0 {to = 11 : si64}
func.func @not_widening(%x: tensor<16x8xf32>) -> (tensor<f32>, tensor<16x8xf64>) {
  %down = onnx.Cast %x {to = 10 : si64} : (tensor<16x8xf32>) -> tensor<16x8xf16>
  %a = fp8.amax %down : tensor<16x8xf16> -> tensor<f32>
  %wide = onnx.Cast %x {to = 11 : si64} : (tensor<16x8xf32>) -> tensor<16x8xf64>
  return %a, %wide : tensor<f32>, tensor<16x8xf64>
}
