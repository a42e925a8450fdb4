// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-delay-weight-gradients{link-gbps=200})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-delay-weight-gradients | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-delay-weight-gradients{link-gbps=10})' | FileCheck %s --check-prefix=ALL

// The backward ends with two weight gradients (%wa, %wb: 2^31 FLOPs each, 2.1 us at the default
// 1000 TFLOP/s) and the first layer's gradient %e, whose all-reduce (256 KiB) is the last. At 200
// GB/s it takes 1.3 us (at the default 300 GB/s, 0.9 us: the same): walking back from its start, %wb's all-reduce start (no time) and %wb's
// GEMM move after it, and that covers it; %wa stays. At 10 GB/s (26 us) both move, in their order.
// What %e needs (the dgrad %dx, the Mul) stays before it.
// CHECK-LABEL: func.func @embedding_last
// CHECK: %[[WA:.+]] = fp8.gemm %arg0, %arg1
// CHECK-NEXT: %[[SA:.+]] = fp8.all_reduce_start %[[WA]]
// CHECK-NEXT: %[[DX:.+]] = fp8.gemm %arg3, %arg1
// CHECK-NEXT: %[[E:.+]] = onnx.Mul %[[DX]], %[[DX]]
// CHECK-NEXT: %[[SE:.+]] = fp8.all_reduce_start %[[E]] {octet.delayed_gemms = 1 : i64
// CHECK-NEXT: %[[WB:.+]] = fp8.gemm %arg0, %arg2
// CHECK-NEXT: %[[SB:.+]] = fp8.all_reduce_start %[[WB]]
// CHECK-NEXT: fp8.all_reduce_done %[[SA]]
// ALL-LABEL: func.func @embedding_last
// ALL: %[[DX:.+]] = fp8.gemm %arg3, %arg1
// ALL-NEXT: %[[E:.+]] = onnx.Mul %[[DX]], %[[DX]]
// ALL-NEXT: %[[SE:.+]] = fp8.all_reduce_start %[[E]] {octet.delayed_gemms = 2 : i64
// ALL-NEXT: %[[WA:.+]] = fp8.gemm %arg0, %arg1
// ALL-NEXT: %[[SA:.+]] = fp8.all_reduce_start %[[WA]]
// ALL-NEXT: %[[WB:.+]] = fp8.gemm %arg0, %arg2
// ALL-NEXT: %[[SB:.+]] = fp8.all_reduce_start %[[WB]]
// ALL-NEXT: fp8.all_reduce_done %[[SA]]
func.func @embedding_last(%a: tensor<1024x1024xf8E4M3FN>, %b: tensor<1024x1024xf8E4M3FN>, %c: tensor<1024x1024xf8E4M3FN>,
                          %d: tensor<64x1024xf8E4M3FN>, %s: tensor<f32>) -> (tensor<1024x1024xf32>, tensor<1024x1024xf32>, tensor<64x1024xf32>) {
  %wa = fp8.gemm %a, %b, %s, %s : (tensor<1024x1024xf8E4M3FN>, tensor<1024x1024xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<1024x1024xf32>
  %sa = fp8.all_reduce_start %wa {reduction = #fp8.reduction<avg>} : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %wb = fp8.gemm %a, %c, %s, %s : (tensor<1024x1024xf8E4M3FN>, tensor<1024x1024xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<1024x1024xf32>
  %sb = fp8.all_reduce_start %wb {reduction = #fp8.reduction<avg>} : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %dx = fp8.gemm %d, %b, %s, %s : (tensor<64x1024xf8E4M3FN>, tensor<1024x1024xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x1024xf32>
  %e = onnx.Mul %dx, %dx : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %se = fp8.all_reduce_start %e {reduction = #fp8.reduction<avg>} : tensor<64x1024xf32> -> tensor<64x1024xf32>
  %ra = fp8.all_reduce_done %sa : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %rb = fp8.all_reduce_done %sb : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %re = fp8.all_reduce_done %se : tensor<64x1024xf32> -> tensor<64x1024xf32>
  return %ra, %rb, %re : tensor<1024x1024xf32>, tensor<1024x1024xf32>, tensor<64x1024xf32>
}

// -----

// The last start that is a gradient's: the loss's mean (one value) and an amax's max after it are
// not. %g's is: the GEMM it does not need and that GEMM's all-reduce start move after it, the
// other starts stay where they were.
// CHECK-LABEL: func.func @loss_after
// CHECK: %[[G:.+]] = onnx.Mul %arg2, %arg2
// CHECK-NEXT: %[[SG:.+]] = fp8.all_reduce_start %[[G]] {octet.delayed_gemms = 1 : i64
// CHECK-NEXT: %[[W:.+]] = fp8.gemm %arg0, %arg0
// CHECK-NEXT: fp8.all_reduce_start %[[W]]
// CHECK-NEXT: fp8.all_reduce_start %arg3 {reduction = #fp8.reduction<avg>}
// CHECK-NEXT: fp8.all_reduce_start %arg1 {reduction = #fp8.reduction<max>}
// ALL-LABEL: func.func @loss_after
func.func @loss_after(%a: tensor<1024x1024xf8E4M3FN>, %s: tensor<f32>, %g0: tensor<64xf32>, %l: tensor<f32>) -> (tensor<1024x1024xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>) {
  %w = fp8.gemm %a, %a, %s, %s : (tensor<1024x1024xf8E4M3FN>, tensor<1024x1024xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<1024x1024xf32>
  %sw = fp8.all_reduce_start %w {reduction = #fp8.reduction<avg>} : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %g = onnx.Mul %g0, %g0 : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %sg = fp8.all_reduce_start %g {reduction = #fp8.reduction<avg>} : tensor<64xf32> -> tensor<64xf32>
  %sl = fp8.all_reduce_start %l {reduction = #fp8.reduction<avg>} : tensor<f32> -> tensor<f32>
  %sm = fp8.all_reduce_start %s {reduction = #fp8.reduction<max>} : tensor<f32> -> tensor<f32>
  %rw = fp8.all_reduce_done %sw : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %rg = fp8.all_reduce_done %sg : tensor<64xf32> -> tensor<64xf32>
  %rl = fp8.all_reduce_done %sl : tensor<f32> -> tensor<f32>
  %rm = fp8.all_reduce_done %sm : tensor<f32> -> tensor<f32>
  return %rw, %rg, %rl, %rm : tensor<1024x1024xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>
}
