// RUN: fp8-opt %s -split-input-file --octet-overlap-collectives | FileCheck %s

// A gradient's all-reduce starts right after the gradient and is waited for right before the
// optimizer's first read; the work in between runs beside it.
// CHECK-LABEL: func.func @gradient
// CHECK: %[[G:.+]] = onnx.Mul %arg0, %arg0
// CHECK-NEXT: %[[F:.+]] = fp8.all_reduce_start %[[G]] {reduction = #fp8.reduction<avg>} : tensor<64xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[B:.+]] = onnx.Exp %arg1
// CHECK-NEXT: %[[C:.+]] = onnx.Exp %[[B]]
// CHECK-NEXT: %[[R:.+]] = fp8.all_reduce_done %[[F]] : tensor<64xf32> -> tensor<64xf32>
// CHECK-NEXT: onnx.Sub %arg0, %[[R]]
// CHECK-NOT: fp8.all_reduce {
func.func @gradient(%w: tensor<64xf32>, %x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %g = onnx.Mul %w, %w : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %b = onnx.Exp %x : (tensor<64xf32>) -> tensor<64xf32>
  %c = onnx.Exp %b : (tensor<64xf32>) -> tensor<64xf32>
  %r = fp8.all_reduce %g {reduction = #fp8.reduction<avg>} : tensor<64xf32> -> tensor<64xf32>
  %n = onnx.Sub %w, %r : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %n, %c : tensor<64xf32>, tensor<64xf32>
}

// -----

// An FP8 payload starts after the later of its codes and its scale; the dequantize of the sum
// moves down to its own first reader, and the done with it.
// CHECK-LABEL: func.func @fp8_payload
// CHECK: %[[Q:.+]] = fp8.cast %arg0, %arg1
// CHECK-NEXT: %[[F:.+]] = fp8.all_reduce_start %[[Q]], %arg1 : tensor<64xf8E4M3FN>, tensor<f32> -> tensor<64xf8E4M3FN>
// CHECK-NEXT: onnx.Exp
// CHECK-NEXT: %[[R:.+]] = fp8.all_reduce_done %[[F]]
// CHECK-NEXT: %[[D:.+]] = fp8.dequantize %[[R]], %arg1
// CHECK-NEXT: onnx.Sub %arg0, %[[D]]
func.func @fp8_payload(%g: tensor<64xf32>, %si: tensor<f32>, %x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %q = fp8.cast %g, %si : tensor<64xf32>, tensor<f32> -> tensor<64xf8E4M3FN>
  %s = fp8.all_reduce %q, %si : tensor<64xf8E4M3FN>, tensor<f32> -> tensor<64xf8E4M3FN>
  %d = fp8.dequantize %s, %si : tensor<64xf8E4M3FN>, tensor<f32> -> tensor<64xf32>
  %e = onnx.Exp %x : (tensor<64xf32>) -> tensor<64xf32>
  %n = onnx.Sub %g, %d : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %n, %e : tensor<64xf32>, tensor<64xf32>
}

// -----

// Nothing between the operand and the reader: the all-reduce stays whole.
// CHECK-LABEL: func.func @adjacent
// CHECK: %[[A:.+]] = fp8.amax %arg0
// CHECK-NEXT: %[[R:.+]] = fp8.all_reduce %[[A]] {reduction = #fp8.reduction<max>}
// CHECK-NEXT: fp8.dynamic_scale %[[R]]
// CHECK-NOT: fp8.all_reduce_start
func.func @adjacent(%g: tensor<64xf32>) -> tensor<f32> {
  %a = fp8.amax %g : tensor<64xf32> -> tensor<f32>
  %r = fp8.all_reduce %a {reduction = #fp8.reduction<max>} : tensor<f32> -> tensor<f32>
  %s, %si = fp8.dynamic_scale %r {format = f8E4M3FN} : tensor<f32>
  return %si : tensor<f32>
}

// -----

// A sharded optimizer's reduce-scatter starts over the whole gradient (in place, as NCCL reduces a
// reduce-scatter in place), is waited for before the shard's first reader, and fp8.shard takes
// this rank's slice of the done.
// CHECK-LABEL: func.func @reduce_scatter
// CHECK: %[[G:.+]] = onnx.Mul %arg0, %arg0
// CHECK-NEXT: %[[F:.+]] = fp8.reduce_scatter_start %[[G]] {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<64xf32> -> tensor<64xf32>
// CHECK-NEXT: onnx.Exp %arg1
// CHECK-NEXT: %[[R:.+]] = fp8.all_reduce_done %[[F]] : tensor<64xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[S:.+]] = fp8.shard %[[R]] {world_size = 2 : i64} : tensor<64xf32> -> tensor<32xf32>
// CHECK-NEXT: onnx.Neg %[[S]]
// CHECK-NOT: fp8.reduce_scatter {
func.func @reduce_scatter(%w: tensor<64xf32>, %x: tensor<64xf32>) -> (tensor<32xf32>, tensor<64xf32>) {
  %g = onnx.Mul %w, %w : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %r = fp8.reduce_scatter %g {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<64xf32> -> tensor<32xf32>
  %b = onnx.Exp %x : (tensor<64xf32>) -> tensor<64xf32>
  %n = onnx.Neg %r : (tensor<32xf32>) -> tensor<32xf32>
  return %n, %b : tensor<32xf32>, tensor<64xf32>
}

// -----

// Two layers' reduce-scatters: the first is waited for where the second starts (not where the
// optimizer first reads its shard), so its whole gradient dies a layer later; the last, where its
// shard is read.
// CHECK-LABEL: func.func @two_reduce_scatters
// CHECK: %[[F1:.+]] = fp8.reduce_scatter_start %{{.+}} {reduction = #fp8.reduction<avg>, world_size = 2 : i64}
// CHECK-NEXT: %[[G2:.+]] = onnx.Exp %arg1
// CHECK-NEXT: %[[R1:.+]] = fp8.all_reduce_done %[[F1]]
// CHECK-NEXT: %[[S1:.+]] = fp8.shard %[[R1]]
// CHECK-NEXT: %[[F2:.+]] = fp8.reduce_scatter_start %[[G2]]
// CHECK-NEXT: onnx.Sin %arg1
// CHECK-NEXT: %[[R2:.+]] = fp8.all_reduce_done %[[F2]]
// CHECK-NEXT: %[[S2:.+]] = fp8.shard %[[R2]]
// CHECK-NEXT: onnx.Add %[[S1]], %[[S2]]
func.func @two_reduce_scatters(%w: tensor<64xf32>, %x: tensor<64xf32>) -> (tensor<32xf32>, tensor<64xf32>) {
  %g1 = onnx.Mul %w, %w : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %r1 = fp8.reduce_scatter %g1 {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<64xf32> -> tensor<32xf32>
  %g2 = onnx.Exp %x : (tensor<64xf32>) -> tensor<64xf32>
  %r2 = fp8.reduce_scatter %g2 {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<64xf32> -> tensor<32xf32>
  %b = onnx.Sin %x : (tensor<64xf32>) -> tensor<64xf32>
  %n = onnx.Add %r1, %r2 : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
  return %n, %b : tensor<32xf32>, tensor<64xf32>
}

// -----

// An updated weight shard's all-gather starts where the shard is complete and is waited for where
// the gathered weight is first read (the return: the next step's weight); the slice and reshape
// that cut the padding off move down with the done, so the updates after it run beside it.
// CHECK-LABEL: func.func @all_gather
// CHECK: %[[U:.+]] = onnx.Neg %arg0
// CHECK-NEXT: %[[F:.+]] = fp8.all_gather_start %[[U]] {world_size = 2 : i64} : tensor<32xf32> -> tensor<64xf32>
// CHECK: onnx.Exp %arg1
// CHECK-NEXT: %[[R:.+]] = fp8.all_reduce_done %[[F]] : tensor<64xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[S:.+]] = onnx.Slice %[[R]]
// CHECK-NEXT: %[[W:.+]] = onnx.Reshape %[[S]]
// CHECK-NEXT: return %[[W]]
func.func @all_gather(%u: tensor<32xf32>, %x: tensor<64xf32>) -> (tensor<6x10xf32>, tensor<64xf32>) {
  %n = onnx.Neg %u : (tensor<32xf32>) -> tensor<32xf32>
  %g = fp8.all_gather %n {world_size = 2 : i64} : tensor<32xf32> -> tensor<64xf32>
  %c0 = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %c60 = onnx.Constant {value = dense<60> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %s = onnx.Slice %g, %c0, %c60, %c0, %none : (tensor<64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<60xf32>
  %shape = onnx.Constant {value = dense<[6, 10]> : tensor<2xi64>} : () -> tensor<2xi64>
  %w = onnx.Reshape %s, %shape : (tensor<60xf32>, tensor<2xi64>) -> tensor<6x10xf32>
  %e = onnx.Exp %x : (tensor<64xf32>) -> tensor<64xf32>
  return %w, %e : tensor<6x10xf32>, tensor<64xf32>
}

// -----

// MS-AMP O3's FP8 weight, gathered at the step's start: the dequantize right after the reshape
// moves down to its first reader (the forward pass's use), and the done with it, so the gather runs
// beside the ops before that use.
// CHECK-LABEL: func.func @fp8_gather_at_start
// CHECK: %[[Q:.+]] = fp8.cast %arg0
// CHECK-NEXT: %[[F:.+]] = fp8.all_gather_start %[[Q]] {world_size = 2 : i64} : tensor<8xf8E4M3FN> -> tensor<16xf8E4M3FN>
// CHECK: onnx.Exp %arg1
// CHECK-NEXT: %[[R:.+]] = fp8.all_reduce_done %[[F]]
// CHECK-NEXT: %[[W8:.+]] = onnx.Reshape %[[R]]
// CHECK-NEXT: %[[W:.+]] = fp8.dequantize %[[W8]], %arg2
// CHECK-NEXT: onnx.MatMul %{{.+}}, %[[W]]
func.func @fp8_gather_at_start(%shard: tensor<8xf32>, %x: tensor<3x4xf32>, %si: tensor<f32>) -> tensor<3x4xf32> {
  %q = fp8.cast %shard, %si : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>
  %g = fp8.all_gather %q {world_size = 2 : i64} : tensor<8xf8E4M3FN> -> tensor<16xf8E4M3FN>
  %shape = onnx.Constant {value = dense<[4, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %w8 = onnx.Reshape %g, %shape : (tensor<16xf8E4M3FN>, tensor<2xi64>) -> tensor<4x4xf8E4M3FN>
  %w = fp8.dequantize %w8, %si : tensor<4x4xf8E4M3FN>, tensor<f32> -> tensor<4x4xf32>
  %e = onnx.Exp %x : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %y = onnx.MatMul %e, %w : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}
