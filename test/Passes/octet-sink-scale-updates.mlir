// RUN: fp8-opt %s -split-input-file --octet-sink-scale-updates | FileCheck %s

// Two updates, each right after its amax: both move, in order, to just before the return; the
// casts and the GEMM keep their places.
// CHECK-LABEL: func.func @two_tensors
// CHECK: %[[QX:.+]], %[[AX:.+]] = fp8.cast_amax %arg0
// CHECK-NEXT: %[[QW:.+]], %[[AW:.+]] = fp8.cast_amax %arg1
// CHECK-NEXT: %[[Y:.+]] = fp8.gemm %[[QX]], %[[QW]]
// CHECK-NEXT: fp8.delayed_scale %{{.+}}, %{{.+}}, %[[AX]]
// CHECK-NEXT: fp8.delayed_scale %{{.+}}, %{{.+}}, %[[AW]]
// CHECK-NEXT: return %[[Y]]
func.func @two_tensors(%x: tensor<16x64xf32>, %w: tensor<32x64xf32>, %h: tensor<16xf32>, %s: tensor<f32>, %si: tensor<f32>) -> (tensor<16x32xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<f32>) {
  %qx, %ax = fp8.cast_amax %x, %si : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>
  %h1, %s1, %si1 = fp8.delayed_scale %h, %s, %ax {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %qw, %aw = fp8.cast_amax %w, %si : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>, tensor<f32>
  %h2, %s2, %si2 = fp8.delayed_scale %h, %s, %aw {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %y = fp8.gemm %qx, %qw, %si, %si {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  return %y, %h1, %s1, %si1, %h2, %s2, %si2 : tensor<16x32xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<f32>
}

// -----

// An update whose scale the step itself reads stays where it is.
// CHECK-LABEL: func.func @read_in_step
// CHECK: %{{.+}}, %[[S:.+]], %[[SI:.+]] = fp8.delayed_scale
// CHECK-NEXT: fp8.cast %arg0, %[[SI]]
func.func @read_in_step(%x: tensor<16x64xf32>, %h: tensor<16xf32>, %s: tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<16xf32>, tensor<f32>) {
  %a = fp8.amax %x : tensor<16x64xf32> -> tensor<f32>
  %h1, %s1, %si1 = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %q = fp8.cast %x, %si1 : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>
  return %q, %h1, %s1 : tensor<16x64xf8E4M3FN>, tensor<16xf32>, tensor<f32>
}
