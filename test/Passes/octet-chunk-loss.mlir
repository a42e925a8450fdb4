// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-chunk-loss{max-chunk-bytes=1024 verbose=true})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-chunk-loss | FileCheck %s --check-prefix=DEFAULT

// A te output layer: scores [64 tokens, 32 classes] in BF16 (4096 bytes) from an FP8 GEMM, the
// mean loss with ignore_index, its gradient cast with delayed scaling (the scale is an
// argument), the dgrad and the wgrad. At most 1024 bytes of scores per chunk: 4 chunks of 16
// tokens. The mean counts the labels not ignored; each chunk's loss is a sum, its gradient
// takes dY / count; the amax is the Max over chunks, the dgrad's rows are concatenated and the
// wgrad of each chunk adds to the previous ones' (accumulate).
// At the default 256 MiB, 4096 bytes of scores stay whole.
// DEFAULT-LABEL: func.func @chunked
// DEFAULT-NOT: onnx.Slice
// DEFAULT: return
// CHECK-LABEL: func.func @chunked
// CHECK: %[[EQ:.*]] = onnx.Equal %arg4
// CHECK: %[[KEPT:.*]] = onnx.Not %[[EQ]]
// CHECK: %[[ONES:.*]] = onnx.Cast %[[KEPT]] {to = 1 : si64}
// CHECK: %[[COUNT:.*]] = onnx.ReduceSum %[[ONES]]
// CHECK: %[[DY:.*]] = onnx.Div %{{.*}}, %[[COUNT]]
// CHECK: onnx.Slice %arg0, {{.*}} -> tensor<16x16xf8E4M3FN>
// CHECK: onnx.Slice %arg4, {{.*}} -> tensor<16xi64>
// CHECK: onnx.Slice %arg1, {{.*}} -> tensor<16x16xf8E4M3FN>
// CHECK: fp8.gemm {{.*}} -> tensor<16x32xbf16>
// CHECK: onnx.SoftmaxCrossEntropyLoss {{.*}}reduction = "sum"
// CHECK: onnx.node "SoftmaxCrossEntropyLossGrad"(%{{.*}}, %{{.*}}, %[[DY]]) {attrs = {ignore_index = -100 : si64, reduction = "sum"}
// CHECK: fp8.cast_amax {{.*}} -> tensor<16x32xf8E5M2>, tensor<f32>, tensor<32x16xf8E5M2>
// CHECK: fp8.gemm {{.*}} -> tensor<16x16xbf16>
// CHECK: %[[DW0:.*]] = fp8.gemm {{.*}} -> tensor<16x32xf32>
// CHECK: onnx.Add
// CHECK: onnx.Max
// CHECK: %[[DW1:.*]] = fp8.gemm {{.*}} accumulate %[[DW0]]
// CHECK: %[[DW2:.*]] = fp8.gemm {{.*}} accumulate %[[DW1]]
// CHECK: %[[AMAX:.*]] = onnx.Max
// CHECK: %[[DW3:.*]] = fp8.gemm {{.*}} accumulate %[[DW2]]
// CHECK-NOT: fp8.gemm
// CHECK: %[[DX:.*]] = onnx.Concat {{.*}} {axis = 0 : si64} : (tensor<16x16xbf16>, tensor<16x16xbf16>, tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<64x16xbf16>
// CHECK: %[[LOSS:.*]] = onnx.Div %{{.*}}, %[[COUNT]]
// CHECK: return %[[LOSS]], %[[AMAX]], %[[DX]], %[[DW3]]
func.func @chunked(%xq: tensor<64x16xf8E4M3FN>, %xqt: tensor<16x64xf8E4M3FN>, %wt: tensor<32x16xf8E4M3FN>, %w: tensor<16x32xf8E4M3FN>, %labels: tensor<64xi64>, %s: tensor<f32>, %gs: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<64x16xbf16>, tensor<16x32xf32>) {
  %scores = fp8.gemm %xq, %wt, %s, %s {transpose_b = true} : (tensor<64x16xf8E4M3FN>, tensor<32x16xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x32xbf16>
  %none = onnx.none
  // expected-remark @+1 {{octet-chunk-loss: the output layer and its loss run over 4 chunks of 16 tokens}}
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %scores, %labels, %none {ignore_index = -100 : si64, reduction = "mean"} : (tensor<64x32xbf16>, tensor<64xi64>, none) -> (tensor<f32>, none)
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ds = onnx.node "SoftmaxCrossEntropyLossGrad"(%scores, %labels, %one) {attrs = {ignore_index = -100 : si64, reduction = "mean"}, domain = "octet"} : (tensor<64x32xbf16>, tensor<64xi64>, tensor<f32>) -> tensor<64x32xbf16>
  %g, %gamax, %gt = fp8.cast_amax %ds, %gs : tensor<64x32xbf16>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  %dx = fp8.gemm %g, %w, %gs, %s {transpose_b = true} : (tensor<64x32xf8E5M2>, tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x16xbf16>
  %dw = fp8.gemm %xqt, %gt, %s, %gs {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  return %loss, %gamax, %dx, %dw : tensor<f32>, tensor<f32>, tensor<64x16xbf16>, tensor<16x32xf32>
}

// -----

// A sum over the tokens without ignore_index: no count, dY as it is, the loss the sum of the
// chunks' sums. 4096 bytes of scores in chunks of at most 1024 bytes; the output GEMM's input
// codes [64, 16] are cut by rows, the labels too.
// CHECK-LABEL: func.func @sum
// CHECK-NOT: onnx.ReduceSum
// CHECK-NOT: onnx.Div
// CHECK: onnx.node "SoftmaxCrossEntropyLossGrad"(%{{.*}}, %{{.*}}, %arg5) {attrs = {reduction = "sum"}
// CHECK-COUNT-3: onnx.Add
// CHECK-NOT: onnx.Div
// CHECK: return
func.func @sum(%xq: tensor<64x16xf8E4M3FN>, %xqt: tensor<16x64xf8E4M3FN>, %wt: tensor<32x16xf8E4M3FN>, %w: tensor<16x32xf8E4M3FN>, %labels: tensor<64xi64>, %dy: tensor<f32>, %s: tensor<f32>) -> (tensor<f32>, tensor<64x16xbf16>, tensor<16x32xf32>) {
  %scores = fp8.gemm %xq, %wt, %s, %s {transpose_b = true} : (tensor<64x16xf8E4M3FN>, tensor<32x16xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x32xbf16>
  %none = onnx.none
  // expected-remark @+1 {{run over 4 chunks of 16 tokens}}
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %scores, %labels, %none {reduction = "sum"} : (tensor<64x32xbf16>, tensor<64xi64>, none) -> (tensor<f32>, none)
  %ds = onnx.node "SoftmaxCrossEntropyLossGrad"(%scores, %labels, %dy) {attrs = {reduction = "sum"}, domain = "octet"} : (tensor<64x32xbf16>, tensor<64xi64>, tensor<f32>) -> tensor<64x32xbf16>
  %g, %gamax, %gt = fp8.cast_amax %ds, %s : tensor<64x32xbf16>, tensor<f32> -> tensor<64x32xf8E5M2>, tensor<f32>, tensor<32x64xf8E5M2>
  %dx = fp8.gemm %g, %w, %s, %s {transpose_b = true} : (tensor<64x32xf8E5M2>, tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x16xbf16>
  %dw = fp8.gemm %xqt, %gt, %s, %s {transpose_b = true} : (tensor<16x64xf8E4M3FN>, tensor<32x64xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  return %loss, %dx, %dw : tensor<f32>, tensor<64x16xbf16>, tensor<16x32xf32>
}

// -----

// Current scaling: the gradient's scale comes from the amax of the whole gradient, so no chunk
// can cast before every chunk is computed. The loss stays whole, and says why.
// CHECK-LABEL: func.func @current_scaling
// CHECK-NOT: onnx.Slice
// CHECK: onnx.SoftmaxCrossEntropyLoss %{{.*}} : (tensor<64x32xbf16>
func.func @current_scaling(%xq: tensor<64x16xf8E4M3FN>, %wt: tensor<32x16xf8E4M3FN>, %w: tensor<16x32xf8E4M3FN>, %labels: tensor<64xi64>, %s: tensor<f32>) -> (tensor<f32>, tensor<64x16xbf16>) {
  %scores = fp8.gemm %xq, %wt, %s, %s {transpose_b = true} : (tensor<64x16xf8E4M3FN>, tensor<32x16xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x32xbf16>
  %none = onnx.none
  // expected-remark @+1 {{reads a value split by tokens}}
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %scores, %labels, %none : (tensor<64x32xbf16>, tensor<64xi64>, none) -> (tensor<f32>, none)
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ds = onnx.node "SoftmaxCrossEntropyLossGrad"(%scores, %labels, %one) {attrs = {}, domain = "octet"} : (tensor<64x32xbf16>, tensor<64xi64>, tensor<f32>) -> tensor<64x32xbf16>
  %a = fp8.amax %ds : tensor<64x32xbf16> -> tensor<f32>
  %sc, %si = fp8.dynamic_scale %a {format = f8E5M2} : tensor<f32>
  %g = fp8.cast %ds, %si : tensor<64x32xbf16>, tensor<f32> -> tensor<64x32xf8E5M2>
  %dx = fp8.gemm %g, %w, %si, %s {transpose_b = true} : (tensor<64x32xf8E5M2>, tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x16xbf16>
  return %loss, %dx : tensor<f32>, tensor<64x16xbf16>
}

// -----

// A high-precision output layer (onnx.Gemm) stays whole: its weight gradient would add BF16
// partial sums.
// CHECK-LABEL: func.func @high_precision
// CHECK-NOT: onnx.Slice
func.func @high_precision(%x: tensor<64x16xbf16>, %w: tensor<16x32xbf16>, %labels: tensor<64xi64>) -> (tensor<f32>, tensor<64x32xbf16>) {
  %none = onnx.none
  %scores = onnx.Gemm %x, %w, %none : (tensor<64x16xbf16>, tensor<16x32xbf16>, none) -> tensor<64x32xbf16>
  // expected-remark @+1 {{octet-chunk-loss: the loss stays whole: the scores do not come from an FP8 GEMM}}
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %scores, %labels, %none : (tensor<64x32xbf16>, tensor<64xi64>, none) -> (tensor<f32>, none)
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ds = onnx.node "SoftmaxCrossEntropyLossGrad"(%scores, %labels, %one) {attrs = {}, domain = "octet"} : (tensor<64x32xbf16>, tensor<64xi64>, tensor<f32>) -> tensor<64x32xbf16>
  return %loss, %ds : tensor<f32>, tensor<64x32xbf16>
}

// -----

// Scores within max-chunk-bytes (16 tokens x 32 classes x 2 bytes = 1024) need no chunks; 48
// tokens of 1536 bytes would need chunks of a whole multiple of 16 rows within 1024 bytes, and
// 48 = 3 x 16 gives one: 3 chunks.
// CHECK-LABEL: func.func @small
// CHECK-NOT: onnx.Slice
// CHECK: return
func.func @small(%xq: tensor<16x16xf8E4M3FN>, %wt: tensor<32x16xf8E4M3FN>, %labels: tensor<16xi64>, %s: tensor<f32>) -> tensor<f32> {
  %scores = fp8.gemm %xq, %wt, %s, %s {transpose_b = true} : (tensor<16x16xf8E4M3FN>, tensor<32x16xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
  %none = onnx.none
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %scores, %labels, %none : (tensor<16x32xbf16>, tensor<16xi64>, none) -> (tensor<f32>, none)
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @three_chunks
// CHECK-COUNT-3: onnx.SoftmaxCrossEntropyLoss {{.*}} -> (tensor<f32>, none)
// CHECK: return
func.func @three_chunks(%xq: tensor<48x16xf8E4M3FN>, %wt: tensor<32x16xf8E4M3FN>, %labels: tensor<48xi64>, %s: tensor<f32>) -> tensor<f32> {
  %scores = fp8.gemm %xq, %wt, %s, %s {transpose_b = true} : (tensor<48x16xf8E4M3FN>, tensor<32x16xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<48x32xbf16>
  %none = onnx.none
  // expected-remark @+1 {{run over 3 chunks of 16 tokens}}
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %scores, %labels, %none : (tensor<48x32xbf16>, tensor<48xi64>, none) -> (tensor<f32>, none)
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ds = onnx.node "SoftmaxCrossEntropyLossGrad"(%scores, %labels, %one) {attrs = {}, domain = "octet"} : (tensor<48x32xbf16>, tensor<48xi64>, tensor<f32>) -> tensor<48x32xbf16>
  return %loss : tensor<f32>
}

// -----

// Rowwise scales (one per token row of the output GEMM's input) stay whole.
// CHECK-LABEL: func.func @rowwise
// CHECK-NOT: onnx.Slice
// CHECK: return
func.func @rowwise(%xq: tensor<64x16xf8E4M3FN>, %wt: tensor<32x16xf8E4M3FN>, %labels: tensor<64xi64>, %sx: tensor<64x1xf32>, %sw: tensor<32x1xf32>) -> tensor<f32> {
  %scores = fp8.gemm %xq, %wt, %sx, %sw {transpose_b = true} : (tensor<64x16xf8E4M3FN>, tensor<32x16xf8E4M3FN>, tensor<64x1xf32>, tensor<32x1xf32>) -> tensor<64x32xbf16>
  %none = onnx.none
  // expected-remark @+1 {{octet-chunk-loss: the loss stays whole: the output GEMM's input is not [tokens, features] with per-tensor scales}}
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %scores, %labels, %none : (tensor<64x32xbf16>, tensor<64xi64>, none) -> (tensor<f32>, none)
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ds = onnx.node "SoftmaxCrossEntropyLossGrad"(%scores, %labels, %one) {attrs = {}, domain = "octet"} : (tensor<64x32xbf16>, tensor<64xi64>, tensor<f32>) -> tensor<64x32xbf16>
  return %loss : tensor<f32>
}
