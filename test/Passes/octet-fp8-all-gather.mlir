// RUN: fp8-opt %s -split-input-file --octet-fp8-all-gather | FileCheck %s

// Delayed scaling (te): the weight's cast moves onto its shard, with last step's scale; the codes
// are gathered (a byte an element) and reshaped as the weight was; the transposed copy becomes a
// Transpose of the gathered codes where it is first read; the shard's amax goes to delayed_scale
// as it is (octet-reduce-amaxes all-reduces the amaxes delayed_scale records).
// CHECK: module attributes {octet.fp8_weight_gathers = 1 : i64}
// CHECK-LABEL: func.func @delayed
// CHECK: %[[S:.+]] = onnx.initializer "w"
// CHECK: %[[SI:.+]] = onnx.initializer "w.scale_inv"
// CHECK: %[[Q:.+]], %[[A:.+]] = fp8.cast_amax %[[S]], %[[SI]] : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>, tensor<f32>
// CHECK-NEXT: %[[G:.+]] = fp8.all_gather %[[Q]] {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf8E4M3FN> -> tensor<16xf8E4M3FN>
// CHECK: %[[W:.+]] = onnx.Reshape %[[G]], %{{.+}} : (tensor<16xf8E4M3FN>, tensor<2xi64>) -> tensor<4x4xf8E4M3FN>
// CHECK-NOT: fp8.all_gather
// CHECK: %[[T:.+]] = onnx.Transpose %[[W]] {perm = array<i64: 1, 0>} : (tensor<4x4xf8E4M3FN>) -> tensor<4x4xf8E4M3FN>
// CHECK-NEXT: fp8.gemm %arg0, %[[T]]
// CHECK: fp8.gemm %arg0, %[[W]]
// CHECK: fp8.delayed_scale %{{.+}}, %{{.+}}, %[[A]]
// CHECK-NOT: fp8.cast_amax
module {
func.func @delayed(%x: tensor<4x4xf8E4M3FN>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<1024xf32>) {
  %s = onnx.initializer "w" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %h = onnx.initializer "w.amax_history" = dense<0.0> : tensor<1024xf32> {octet.fp8_state}
  %sc = onnx.initializer "w.scale" = dense<1.0> : tensor<f32> {octet.fp8_state}
  %si = onnx.initializer "w.scale_inv" = dense<1.0> : tensor<f32> {octet.fp8_state}
  %g = fp8.all_gather %s {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %c = onnx.Constant {value = dense<4> : tensor<2xi64>} : () -> tensor<2xi64>
  %w = onnx.Reshape %g, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %q, %a, %t = fp8.cast_amax %w, %si : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf8E4M3FN>, tensor<f32>, tensor<4x4xf8E4M3FN>
  %y = fp8.gemm %x, %t, %si, %si {transpose_b = true} : (tensor<4x4xf8E4M3FN>, tensor<4x4xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<4x4xf32>
  %dx = fp8.gemm %x, %q, %si, %si {transpose_b = true} : (tensor<4x4xf8E4M3FN>, tensor<4x4xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<4x4xf32>
  %h2, %s2, %si2 = fp8.delayed_scale %h, %sc, %a {format = f8E4M3FN, margin = 0 : si64, algo = #fp8.amax_algo<max>} : tensor<1024xf32>, tensor<f32>, tensor<f32>
  return %y, %dx, %h2 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<1024xf32>
}
}

// -----

// Current scaling (ao tensorwise, MS-AMP): each weight's amax is the maximum of its shards', all
// weights' in one all-reduce (max) at the step's start, where the scales and the shards' casts go;
// a shard with padding (9 elements over 2 ranks: 5 each) has it cut off its gathered codes.
// CHECK: module attributes {octet.fp8_weight_gathers = 2 : i64}
// CHECK-LABEL: func.func @current
// CHECK: %[[S1:.+]] = onnx.initializer "w1"
// CHECK: %[[S2:.+]] = onnx.initializer "w2"
// CHECK: %[[A1:.+]] = fp8.amax %[[S1]] : tensor<8xf32> -> tensor<f32>
// CHECK-NEXT: %[[A2:.+]] = fp8.amax %[[S2]] : tensor<5xf32> -> tensor<f32>
// CHECK: %[[CAT:.+]] = onnx.Concat %{{.+}}, %{{.+}} {axis = 0 : si64} : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[M:.+]] = fp8.all_reduce %[[CAT]] {reduction = #fp8.reduction<max>} : tensor<2xf32> -> tensor<2xf32>
// CHECK: %[[M1:.+]] = onnx.Gather %[[M]]
// CHECK: %[[M2:.+]] = onnx.Gather %[[M]]
// CHECK: %{{.+}}, %[[SI1:.+]] = fp8.dynamic_scale %[[M1]]
// CHECK-NEXT: %[[Q1:.+]] = fp8.cast %[[S1]], %[[SI1]] : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>
// CHECK-NEXT: fp8.all_gather %[[Q1]] {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf8E4M3FN> -> tensor<16xf8E4M3FN>
// CHECK: onnx.Reshape
// CHECK: %{{.+}}, %[[SI2:.+]] = fp8.dynamic_scale %[[M2]]
// CHECK-NEXT: %[[Q2:.+]] = fp8.cast %[[S2]], %[[SI2]] : tensor<5xf32>, tensor<f32> -> tensor<5xf8E4M3FN>
// CHECK-NEXT: %[[G2:.+]] = fp8.all_gather %[[Q2]] {octet.parameter_gather, world_size = 2 : i64} : tensor<5xf8E4M3FN> -> tensor<10xf8E4M3FN>
// CHECK: %[[CUT:.+]] = onnx.Slice %[[G2]], {{.+}} : (tensor<10xf8E4M3FN>, {{.+}}) -> tensor<9xf8E4M3FN>
// CHECK: onnx.Reshape %[[CUT]], %{{.+}} -> tensor<3x3xf8E4M3FN>
// CHECK-NOT: fp8.amax
// CHECK: return
module {
func.func @current(%x: tensor<4x4xf8E4M3FN>, %z: tensor<3x3xf8E4M3FN>) -> (tensor<4x4xf32>, tensor<3x3xf32>) {
  %s1 = onnx.initializer "w1" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %s2 = onnx.initializer "w2" = dense<0.0> : tensor<5xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<3x3xf32>, octet.shards = 2 : i64}
  %g1 = fp8.all_gather %s1 {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %c = onnx.Constant {value = dense<4> : tensor<2xi64>} : () -> tensor<2xi64>
  %w1 = onnx.Reshape %g1, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %g2 = fp8.all_gather %s2 {octet.parameter_gather, world_size = 2 : i64} : tensor<5xf32> -> tensor<10xf32>
  %b0 = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %b9 = onnx.Constant {value = dense<9> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %cut = onnx.Slice %g2, %b0, %b9, %b0, %none : (tensor<10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<9xf32>
  %c3 = onnx.Constant {value = dense<3> : tensor<2xi64>} : () -> tensor<2xi64>
  %w2 = onnx.Reshape %cut, %c3 : (tensor<9xf32>, tensor<2xi64>) -> tensor<3x3xf32>
  %a1 = fp8.amax %w1 : tensor<4x4xf32> -> tensor<f32>
  %sc1, %si1 = fp8.dynamic_scale %a1 {format = f8E4M3FN, power_of_two = true} : tensor<f32>
  %q1 = fp8.cast %w1, %si1 : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf8E4M3FN>
  %y = fp8.gemm %x, %q1, %si1, %si1 {transpose_b = true} : (tensor<4x4xf8E4M3FN>, tensor<4x4xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<4x4xf32>
  %a2 = fp8.amax %w2 : tensor<3x3xf32> -> tensor<f32>
  %sc2, %si2 = fp8.dynamic_scale %a2 {format = f8E4M3FN, power_of_two = true} : tensor<f32>
  %q2 = fp8.cast %w2, %si2 : tensor<3x3xf32>, tensor<f32> -> tensor<3x3xf8E4M3FN>
  %v = fp8.gemm %z, %q2, %si2, %si2 {transpose_b = true} : (tensor<3x3xf8E4M3FN>, tensor<3x3xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<3x3xf32>
  return %y, %v : tensor<4x4xf32>, tensor<3x3xf32>
}
}

// -----

// An FP16 shard (MS-AMP's weights, widened where they are read): the widening moves onto the shard,
// before its cast.
// CHECK-LABEL: func.func @widened
// CHECK: %[[S:.+]] = onnx.initializer "w"
// CHECK: %[[F:.+]] = onnx.Cast %[[S]] {to = 1 : si64} : (tensor<8xf16>) -> tensor<8xf32>
// CHECK: %[[Q:.+]] = fp8.cast %[[F]], %{{.+}} : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>
// CHECK-NEXT: fp8.all_gather %[[Q]] {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf8E4M3FN> -> tensor<16xf8E4M3FN>
// CHECK-NOT: onnx.Cast
// CHECK: return
module {
func.func @widened(%x: tensor<4x4xf8E4M3FN>) -> tensor<4x4xf32> {
  %s = onnx.initializer "w" = dense<0.0> : tensor<8xf16> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf16>, octet.shards = 2 : i64}
  %si = onnx.initializer "w.scale_inv" = dense<1.0> : tensor<f32> {octet.fp8_state}
  %g = fp8.all_gather %s {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf16> -> tensor<16xf16>
  %c = onnx.Constant {value = dense<4> : tensor<2xi64>} : () -> tensor<2xi64>
  %r = onnx.Reshape %g, %c : (tensor<16xf16>, tensor<2xi64>) -> tensor<4x4xf16>
  %w = onnx.Cast %r {to = 1 : si64} : (tensor<4x4xf16>) -> tensor<4x4xf32>
  %q = fp8.cast %w, %si : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf8E4M3FN>
  %y = fp8.gemm %x, %q, %si, %si {transpose_b = true} : (tensor<4x4xf8E4M3FN>, tensor<4x4xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
}

// -----

// Gathered as they are: a weight also read in high precision (a Linear kept in BF16 reads the
// same tensor), one cast with rowwise scales, and a norm's weight that no FP8 cast reads (not
// listed). The module names the two an FP8 cast reads, with why.
// CHECK: module attributes {octet.fp8_gather_kept = ["w1: also read in high precision (onnx.node)", "w2: rowwise scales (a row's amax spans the ranks' shards)"]}
// CHECK-LABEL: func.func @kept
// CHECK: fp8.all_gather %{{.+}} {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32>
// CHECK: fp8.all_gather %{{.+}} {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32>
// CHECK: fp8.all_gather %{{.+}} {octet.parameter_gather, world_size = 2 : i64} : tensor<2xf32>
// CHECK-NOT: f8E4M3FN> -> tensor<16xf8E4M3FN>
module {
func.func @kept(%x: tensor<4x4xf32>, %xq: tensor<4x4xf8E4M3FN>, %r: tensor<4x1xf32>) -> (tensor<4x4xf32>, tensor<4x4xf8E4M3FN>, tensor<4x4xf8E4M3FN>, tensor<4xf32>) {
  %s1 = onnx.initializer "w1" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %s2 = onnx.initializer "w2" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %s3 = onnx.initializer "ln.weight" = dense<0.0> : tensor<2xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4xf32>, octet.shards = 2 : i64}
  %si = onnx.initializer "w.scale_inv" = dense<1.0> : tensor<f32> {octet.fp8_state}
  %c = onnx.Constant {value = dense<4> : tensor<2xi64>} : () -> tensor<2xi64>
  %g1 = fp8.all_gather %s1 {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %w1 = onnx.Reshape %g1, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %g2 = fp8.all_gather %s2 {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %w2 = onnx.Reshape %g2, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %ln = fp8.all_gather %s3 {octet.parameter_gather, world_size = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
  %q1 = fp8.cast %w1, %si : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf8E4M3FN>
  %m = onnx.node "MatMul"(%x, %w1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %q2 = fp8.cast %w2, %r : tensor<4x4xf32>, tensor<4x1xf32> -> tensor<4x4xf8E4M3FN>
  return %m, %q1, %q2, %ln : tensor<4x4xf32>, tensor<4x4xf8E4M3FN>, tensor<4x4xf8E4M3FN>, tensor<4xf32>
}
}
