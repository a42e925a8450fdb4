// RUN: fp8-opt %s -split-input-file --octet-reduce-amaxes | FileCheck %s

// Updates sunk to the end of the step (octet-sink-scale-updates) share one all-reduce(max): their
// amaxes concatenated, reduced, and each update reads its own element back.
// CHECK-LABEL: func.func @sunk
// CHECK: %[[QX:.+]], %[[AX:.+]] = fp8.cast_amax %arg0
// CHECK: %[[QW:.+]], %[[AW:.+]] = fp8.cast_amax %arg1
// CHECK: fp8.gemm
// CHECK: %[[RX:.+]] = onnx.Reshape %[[AX]]
// CHECK: %[[RW:.+]] = onnx.Reshape %[[AW]]
// CHECK: %[[CAT:.+]] = onnx.Concat %[[RX]], %[[RW]] {axis = 0 : si64} : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[ALL:.+]] = fp8.all_reduce %[[CAT]] {reduction = #fp8.reduction<max>} : tensor<2xf32> -> tensor<2xf32>
// CHECK: %[[X:.+]] = onnx.Gather %[[ALL]], %{{.+}} {axis = 0 : si64} : (tensor<2xf32>, tensor<i64>) -> tensor<f32>
// CHECK: %[[W:.+]] = onnx.Gather %[[ALL]], %{{.+}} {axis = 0 : si64}
// CHECK: fp8.delayed_scale %{{.+}}, %{{.+}}, %[[X]]
// CHECK-NEXT: fp8.delayed_scale %{{.+}}, %{{.+}}, %[[W]]
// CHECK-NEXT: return
// CHECK-NOT: fp8.all_reduce
func.func @sunk(%x: tensor<16x64xf32>, %w: tensor<32x64xf32>, %h: tensor<16xf32>, %s: tensor<f32>, %si: tensor<f32>) -> (tensor<16x32xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<f32>) {
  %qx, %ax = fp8.cast_amax %x, %si : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>
  %qw, %aw = fp8.cast_amax %w, %si : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>, tensor<f32>
  %y = fp8.gemm %qx, %qw, %si, %si {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  %h1, %s1, %si1 = fp8.delayed_scale %h, %s, %ax {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %h2, %s2, %si2 = fp8.delayed_scale %h, %s, %aw {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  return %y, %h1, %s1, %si1, %h2, %s2, %si2 : tensor<16x32xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<f32>
}

// -----

// An update left after its amax (one the step reads, or with --sink-scale-updates=false) gets its
// own all-reduce right before it.
// CHECK-LABEL: func.func @in_place
// CHECK: %[[A:.+]] = fp8.amax %arg0
// CHECK-NEXT: %[[R:.+]] = fp8.all_reduce %[[A]] {reduction = #fp8.reduction<max>} : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %{{.+}}, %{{.+}}, %[[SI:.+]] = fp8.delayed_scale %arg1, %arg2, %[[R]]
// CHECK-NEXT: fp8.cast %arg0, %[[SI]]
func.func @in_place(%x: tensor<16x64xf32>, %h: tensor<16xf32>, %s: tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<16xf32>, tensor<f32>) {
  %a = fp8.amax %x : tensor<16x64xf32> -> tensor<f32>
  %h1, %s1, %si1 = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  %q = fp8.cast %x, %si1 : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>
  return %q, %h1, %s1 : tensor<16x64xf8E4M3FN>, tensor<16xf32>, tensor<f32>
}

// -----

// A single sunk update needs no concatenation.
// CHECK-LABEL: func.func @one
// CHECK-NOT: onnx.Concat
// CHECK: %[[R:.+]] = fp8.all_reduce %{{.+}} {reduction = #fp8.reduction<max>}
// CHECK-NEXT: fp8.delayed_scale %{{.+}}, %{{.+}}, %[[R]]
func.func @one(%x: tensor<16x64xf32>, %h: tensor<16xf32>, %s: tensor<f32>) -> (tensor<16xf32>, tensor<f32>, tensor<f32>) {
  %a = fp8.amax %x : tensor<16x64xf32> -> tensor<f32>
  %h1, %s1, %si1 = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN} : tensor<16xf32>, tensor<f32>, tensor<f32>
  return %h1, %s1, %si1 : tensor<16xf32>, tensor<f32>, tensor<f32>
}
