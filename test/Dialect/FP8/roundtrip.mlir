// RUN: fp8-opt %s -split-input-file | fp8-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @delayed
// CHECK: %[[A:.+]] = fp8.amax %{{.+}} : tensor<16x64xbf16> -> tensor<f32>
// CHECK: fp8.delayed_scale %{{.+}}, %{{.+}}, %[[A]] {algo = #fp8.amax_algo<most_recent>, format = f8E4M3FN, margin = 1 : si64}
// CHECK: fp8.cast %{{.+}}, %{{.+}} : tensor<16x64xbf16>, tensor<f32> -> tensor<16x64xf8E4M3FN>
// CHECK: fp8.dequantize
func.func @delayed(%x: tensor<16x64xbf16>, %h: tensor<1024xf32>, %s0: tensor<f32>) -> tensor<16x64xbf16> {
  %a = fp8.amax %x : tensor<16x64xbf16> -> tensor<f32>
  %h2, %s, %si = fp8.delayed_scale %h, %s0, %a {format = f8E4M3FN, margin = 1 : si64, algo = #fp8.amax_algo<most_recent>} : tensor<1024xf32>, tensor<f32>, tensor<f32>
  %q = fp8.cast %x, %si : tensor<16x64xbf16>, tensor<f32> -> tensor<16x64xf8E4M3FN>
  %d = fp8.dequantize %q, %si : tensor<16x64xf8E4M3FN>, tensor<f32> -> tensor<16x64xbf16>
  return %d : tensor<16x64xbf16>
}

// -----

// CHECK-LABEL: func.func @dynamic_rowwise
// CHECK: fp8.amax %{{.+}} {rowwise = true} : tensor<16x64xf32> -> tensor<16x1xf32>
// CHECK: fp8.dynamic_scale %{{.+}} {format = f8E4M3FN, power_of_two = true} : tensor<16x1xf32>
// CHECK: fp8.cast {{.*}} {saturate = false}
func.func @dynamic_rowwise(%x: tensor<16x64xf32>) -> tensor<16x64xf8E4M3FN> {
  %a = fp8.amax %x {rowwise = true} : tensor<16x64xf32> -> tensor<16x1xf32>
  %s, %si = fp8.dynamic_scale %a {format = f8E4M3FN, power_of_two = true} : tensor<16x1xf32>
  %q = fp8.cast %x, %si {saturate = false} : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf8E4M3FN>
  return %q : tensor<16x64xf8E4M3FN>
}

// -----

// CHECK-LABEL: func.func @gemms
// CHECK: fp8.gemm %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
// CHECK: fp8.gemm {{.*}} bias %{{.+}} {accumulation = #fp8.accumulation<split>, transpose_b = true, with_amax = true}
// CHECK-SAME: -> (tensor<16x32xf32>, tensor<f32>)
// CHECK: fp8.gemm {{.*}} d_scale %{{.+}} :
// CHECK: fp8.gemm {{.*}} accumulate %[[E:.+]] {transpose_b = true} : {{.*}} -> tensor<16x32xf32>
// CHECK: fp8.all_reduce %{{.+}}, %{{.+}} {reduction = #fp8.reduction<max>} : tensor<32x64xf8E5M2>
func.func @gemms(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %g: tensor<32x64xf8E5M2>,
                 %s: tensor<f32>, %bias: tensor<32xf32>) -> (tensor<16x32xbf16>, tensor<16x32xf32>, tensor<f32>, tensor<16x32xf8E4M3FN>, tensor<32x64xf8E5M2>) {
  %d = fp8.gemm %a, %b, %s, %s : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
  %e, %amax = fp8.gemm %a, %g, %s, %s bias %bias {transpose_b = true, accumulation = #fp8.accumulation<split>, with_amax = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E5M2>, tensor<f32>, tensor<f32>, tensor<32xf32>) -> (tensor<16x32xf32>, tensor<f32>)
  %f = fp8.gemm %a, %b, %s, %s d_scale %s : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<16x32xf8E4M3FN>
  %h = fp8.gemm %a, %g, %s, %s accumulate %e {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E5M2>, tensor<f32>, tensor<f32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  %r = fp8.all_reduce %g, %s {reduction = #fp8.reduction<max>} : tensor<32x64xf8E5M2>, tensor<f32> -> tensor<32x64xf8E5M2>
  return %d, %h, %amax, %f, %r : tensor<16x32xbf16>, tensor<16x32xf32>, tensor<f32>, tensor<16x32xf8E4M3FN>, tensor<32x64xf8E5M2>
}

// -----

// CHECK-LABEL: func.func @collectives
// CHECK: %[[N:.+]] = fp8.world_size : tensor<f32>
// CHECK: fp8.all_reduce %{{.+}} {reduction = #fp8.reduction<avg>} : tensor<32x64xf32> -> tensor<32x64xf32>
// CHECK: fp8.all_reduce %{{.+}}, %{{.+}} : tensor<32x64xf8E5M2>, tensor<f32> -> tensor<32x64xf8E5M2>
// CHECK: %[[F:.+]] = fp8.all_reduce_start %{{.+}} {reduction = #fp8.reduction<max>} : tensor<32x64xf32> -> tensor<32x64xf32>
// CHECK-NEXT: fp8.all_reduce_done %[[F]] : tensor<32x64xf32> -> tensor<32x64xf32>
func.func @collectives(%x: tensor<32x64xf32>, %g: tensor<32x64xf8E5M2>, %s: tensor<f32>) -> (tensor<f32>, tensor<32x64xf32>, tensor<32x64xf8E5M2>, tensor<32x64xf32>) {
  %n = fp8.world_size : tensor<f32>
  %a = fp8.all_reduce %x {reduction = #fp8.reduction<avg>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %q = fp8.all_reduce %g, %s : tensor<32x64xf8E5M2>, tensor<f32> -> tensor<32x64xf8E5M2>
  %f = fp8.all_reduce_start %x {reduction = #fp8.reduction<max>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %m = fp8.all_reduce_done %f : tensor<32x64xf32> -> tensor<32x64xf32>
  return %n, %a, %q, %m : tensor<f32>, tensor<32x64xf32>, tensor<32x64xf8E5M2>, tensor<32x64xf32>
}

// -----

// CHECK-LABEL: func.func @rowwise_gemm_and_step
// CHECK: fp8.gemm {{.*}} {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<16x1xf32>, tensor<32x1xf32>)
// CHECK: fp8.delayed_scale %{{.+}}, %{{.+}}, %{{.+}} step %{{.+}} : tensor<i64> {format = f8E5M2, interval = 4 : si64}
func.func @rowwise_gemm_and_step(%a: tensor<16x64xf8E4M3FN>, %b: tensor<32x64xf8E4M3FN>, %sa: tensor<16x1xf32>, %sb: tensor<32x1xf32>,
                                 %h: tensor<8xf32>, %s: tensor<f32>, %step: tensor<i64>) -> (tensor<16x32xf32>, tensor<f32>) {
  %d = fp8.gemm %a, %b, %sa, %sb {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<16x1xf32>, tensor<32x1xf32>) -> tensor<16x32xf32>
  %h2, %s2, %si = fp8.delayed_scale %h, %s, %s step %step : tensor<i64> {format = f8E5M2, interval = 4 : si64} : tensor<8xf32>, tensor<f32>, tensor<f32>
  return %d, %s2 : tensor<16x32xf32>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @linears
// CHECK: fp8.linear "model.h.0.mlp.c_fc" %{{.+}}, %{{.+}} bias %{{.+}} {grad_format = f8E5M2, input_format = f8E4M3FN, recipe = "ao", rowwise = true, scaling = #fp8.scaling<dynamic>, weight_format = f8E4M3FN}
// CHECK: fp8.linear "fc2" %{{.+}}, %{{.+}} state(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}})
func.func @linears(%x: tensor<16x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>, %h: tensor<16xf32>, %s: tensor<f32>) -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %y = fp8.linear "model.h.0.mlp.c_fc" %x, %w bias %b {recipe = "ao", rowwise = true, scaling = #fp8.scaling<dynamic>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %z = fp8.linear "fc2" %x, %w state(%h, %s, %s, %h, %s, %s) {recipe = "te", scaling = #fp8.scaling<delayed>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<16x64xf32>, tensor<64x32xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  return %y, %z : tensor<16x32xf32>, tensor<16x32xf32>
}

// -----

// CHECK-LABEL: func.func @cast_amax
// CHECK: %{{.+}}, %{{.+}} = fp8.cast_amax %{{.+}}, %{{.+}} {saturate = false} : tensor<16x64xbf16>, tensor<f32> -> tensor<16x64xf8E5M2>, tensor<f32>
func.func @cast_amax(%x: tensor<16x64xbf16>, %s: tensor<f32>) -> (tensor<16x64xf8E5M2>, tensor<f32>) {
  %q, %a = fp8.cast_amax %x, %s {saturate = false} : tensor<16x64xbf16>, tensor<f32> -> tensor<16x64xf8E5M2>, tensor<f32>
  return %q, %a : tensor<16x64xf8E5M2>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @cast_amax_transposed
// CHECK: %{{.+}}, %{{.+}}, %{{.+}} = fp8.cast_amax %{{.+}}, %{{.+}} : tensor<2x8x64xf32>, tensor<f32> -> tensor<2x8x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
func.func @cast_amax_transposed(%x: tensor<2x8x64xf32>, %s: tensor<f32>) -> tensor<64x16xf8E4M3FN> {
  %q, %a, %t = fp8.cast_amax %x, %s : tensor<2x8x64xf32>, tensor<f32> -> tensor<2x8x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>
  return %t : tensor<64x16xf8E4M3FN>
}

// -----

// CHECK-LABEL: func.func @adam_step
// CHECK: fp8.adam_step %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, eps = 9.99999993E-9 : f32, one_minus_beta1 = 1.000000e-01 : f32, one_minus_beta2 = 1.000000e-03 : f32} : (tensor<64x32xf16>, tensor<64x32xf32>, tensor<f32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<64x32xf16>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)
func.func @adam_step(%w: tensor<64x32xf16>, %g: tensor<64x32xf32>, %m: tensor<64x32xf8E4M3FN>, %v: tensor<64x32xf16>, %s: tensor<f32>) -> (tensor<64x32xf16>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>) {
  %w2, %m2, %ms, %v2, %vs = fp8.adam_step %w, %g, %s, %m, %s, %v, %s, %s, %s, %s, %s {beta1 = 0.9 : f32, one_minus_beta1 = 0.1 : f32, beta2 = 0.999 : f32, one_minus_beta2 = 1.0e-3 : f32, eps = 1.0e-8 : f32} : (tensor<64x32xf16>, tensor<64x32xf32>, tensor<f32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<64x32xf16>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)
  return %w2, %m2, %ms, %v2, %vs : tensor<64x32xf16>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @sharding
// CHECK: fp8.reduce_scatter %{{.+}} {reduction = #fp8.reduction<avg>, world_size = 4 : i64} : tensor<64xf32> -> tensor<16xf32>
// CHECK: fp8.reduce_scatter %{{.+}}, %{{.+}} {world_size = 4 : i64} : tensor<64xf8E4M3FN>, tensor<f32> -> tensor<16xf8E4M3FN>
// CHECK: fp8.shard %{{.+}} {world_size = 4 : i64} : tensor<64xf16> -> tensor<16xf16>
// CHECK: fp8.all_gather %{{.+}} {world_size = 4 : i64} : tensor<16xf16> -> tensor<64xf16>
func.func @sharding(%g: tensor<64xf32>, %q: tensor<64xf8E4M3FN>, %s: tensor<f32>, %w: tensor<64xf16>) -> (tensor<16xf32>, tensor<16xf8E4M3FN>, tensor<64xf16>) {
  %a = fp8.reduce_scatter %g {reduction = #fp8.reduction<avg>, world_size = 4 : i64} : tensor<64xf32> -> tensor<16xf32>
  %b = fp8.reduce_scatter %q, %s {world_size = 4 : i64} : tensor<64xf8E4M3FN>, tensor<f32> -> tensor<16xf8E4M3FN>
  %c = fp8.shard %w {world_size = 4 : i64} : tensor<64xf16> -> tensor<16xf16>
  %d = fp8.all_gather %c {world_size = 4 : i64} : tensor<16xf16> -> tensor<64xf16>
  return %a, %b, %d : tensor<16xf32>, tensor<16xf8E4M3FN>, tensor<64xf16>
}

// -----

// CHECK-LABEL: func.func @stochastic_round
// CHECK: fp8.stochastic_round %{{.+}}, %{{.+}} {salt = 7 : i64} : tensor<64x32xf32>, tensor<i64> -> tensor<64x32xf16>
func.func @stochastic_round(%x: tensor<64x32xf32>, %step: tensor<i64>) -> tensor<64x32xf16> {
  %y = fp8.stochastic_round %x, %step {salt = 7 : i64} : tensor<64x32xf32>, tensor<i64> -> tensor<64x32xf16>
  return %y : tensor<64x32xf16>
}

// -----

// CHECK-LABEL: func.func @adam_step_stochastic
// CHECK: fp8.adam_step {{.+}}, %{{.+}}, %{{.+}} {{.*}}rounding_salt = 3 : i64{{.*}} : (tensor<64x32xf16>, tensor<64x32xf32>, tensor<f32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<i64>) -> (tensor<64x32xf16>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)
func.func @adam_step_stochastic(%w: tensor<64x32xf16>, %g: tensor<64x32xf32>, %m: tensor<64x32xf8E4M3FN>, %v: tensor<64x32xf16>, %s: tensor<f32>, %step: tensor<i64>) -> tensor<64x32xf16> {
  %w2, %m2, %ms, %v2, %vs = fp8.adam_step %w, %g, %s, %m, %s, %v, %s, %s, %s, %s, %s, %step {beta1 = 0.9 : f32, one_minus_beta1 = 0.1 : f32, beta2 = 0.999 : f32, one_minus_beta2 = 1.0e-3 : f32, eps = 1.0e-8 : f32, rounding_salt = 3 : i64} : (tensor<64x32xf16>, tensor<64x32xf32>, tensor<f32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<i64>) -> (tensor<64x32xf16>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)
  return %w2 : tensor<64x32xf16>
}
