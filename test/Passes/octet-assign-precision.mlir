// RUN: fp8-opt %s -split-input-file --octet-assign-precision | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-assign-precision=activations=f32 | FileCheck %s --check-prefix=F32
// RUN: not fp8-opt %s -split-input-file --octet-assign-precision=activations=fp16 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: octet-assign-precision: activations='fp16' is not bf16 or f32

// FP8 GEMMs feeding attention through views: the projections, the views and attention's Y are
// stored in BF16 (attention's log-sum-exp stays float32), each GEMM reads its bias through a cast
// to BF16, and the cast of Y reads BF16. With activations=f32 nothing changes.
// CHECK-LABEL: func.func @projections_attention
// CHECK: %[[B:.+]] = onnx.Cast %arg4 {to = 16 : si64} : (tensor<64xf32>) -> tensor<64xbf16>
// CHECK-NEXT: %[[Q:.+]] = fp8.gemm %arg0, %arg1, %arg2, %arg3 bias %[[B]] {{.+}} -> tensor<32x64xbf16>
// CHECK: onnx.Reshape %[[Q]], %{{.+}} : (tensor<32x64xbf16>, tensor<3xi64>) -> tensor<2x16x64xbf16>
// CHECK: fp8.gemm %arg0, %arg1, %arg2, %arg3 {{.+}} -> tensor<32x64xbf16>
// CHECK: onnx.node "Attention"({{.+}}) {{.+}} -> (tensor<2x16x64xbf16>, tensor<2x4x16xf32>)
// CHECK: fp8.cast_amax %{{.+}}, %arg2 : tensor<32x64xbf16>, tensor<f32>
// F32-LABEL: func.func @projections_attention
// F32-NOT: bf16
func.func @projections_attention(%a: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %s: tensor<f32>, %t: tensor<f32>, %bias: tensor<64xf32>, %shape: tensor<3xi64>, %flat: tensor<2xi64>) -> (tensor<32x64xf8E4M3FN>, tensor<f32>) {
  %q = fp8.gemm %a, %w, %s, %t bias %bias {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<64xf32>) -> tensor<32x64xf32>
  %q3 = onnx.Reshape %q, %shape : (tensor<32x64xf32>, tensor<3xi64>) -> tensor<2x16x64xf32>
  %k = fp8.gemm %a, %w, %s, %t {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %k3 = onnx.Reshape %k, %shape : (tensor<32x64xf32>, tensor<3xi64>) -> tensor<2x16x64xf32>
  %y, %lse = onnx.node "Attention"(%q3, %k3, %k3) {attrs = {is_causal = 1 : si64, q_num_heads = 4 : si64, kv_num_heads = 4 : si64}, domain = "octet"} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x4x16xf32>)
  %y2 = onnx.Reshape %y, %flat : (tensor<2x16x64xf32>, tensor<2xi64>) -> tensor<32x64xf32>
  %c, %m = fp8.cast_amax %y2, %s : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E4M3FN>, tensor<f32>
  return %c, %m : tensor<32x64xf8E4M3FN>, tensor<f32>
}

// -----

// A weight gradient (its reader, the gradient norm's ReduceSumSquare, reads float32), a result of
// the function and a GEMM output that a float32-only op (Softmax) reads stay float32.
// CHECK-LABEL: func.func @float32_readers
// CHECK: fp8.gemm {{.+}} -> tensor<64x64xf32>
// CHECK: fp8.gemm {{.+}} -> tensor<32x64xf32>
// CHECK: fp8.gemm {{.+}} -> tensor<32x64xf32>
// CHECK-NOT: bf16
func.func @float32_readers(%a: tensor<64x32xf8E4M3FN>, %g: tensor<64x32xf8E5M2>, %x: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %s: tensor<f32>) -> (tensor<f32>, tensor<32x64xf32>, tensor<32x64xf32>) {
  %dw = fp8.gemm %a, %g, %s, %s {transpose_b = true} : (tensor<64x32xf8E4M3FN>, tensor<64x32xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<64x64xf32>
  %n = onnx.node "ReduceSumSquare"(%dw) {attrs = {keepdims = 0 : si64}} : (tensor<64x64xf32>) -> tensor<f32>
  %out = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %z = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %p = onnx.Softmax %z {axis = -1 : si64} : (tensor<32x64xf32>) -> tensor<32x64xf32>
  return %n, %out, %p : tensor<f32>, tensor<32x64xf32>, tensor<32x64xf32>
}

// -----

// ONNX's Add keeps one element type: a residual Add of a float32 stream and a GEMM output stays
// float32, and so does the GEMM output it reads. An Add of two BF16 GEMM outputs, read by a cast,
// is stored in BF16.
// CHECK-LABEL: func.func @typed_adds
// CHECK: %[[R:.+]] = fp8.gemm {{.+}} -> tensor<32x64xf32>
// CHECK-NEXT: onnx.Add %arg3, %[[R]] : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
// CHECK: %[[U:.+]] = fp8.gemm {{.+}} -> tensor<32x64xbf16>
// CHECK-NEXT: %[[V:.+]] = fp8.gemm {{.+}} -> tensor<32x64xbf16>
// CHECK-NEXT: onnx.Add %[[U]], %[[V]] : (tensor<32x64xbf16>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
func.func @typed_adds(%x: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %s: tensor<f32>, %stream: tensor<32x64xf32>) -> (tensor<32x64xf32>, tensor<32x64xf8E5M2>) {
  %r = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %sum = onnx.Add %stream, %r : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %u = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %v = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %uv = onnx.Add %u, %v : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %c = fp8.cast %uv, %s : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E5M2>
  return %sum, %c : tensor<32x64xf32>, tensor<32x64xf8E5M2>
}

// -----

// A Pointwise program (a GELU gradient: two GEMM outputs and a float32 scalar) is stored in BF16
// when its activation operands are, and reads its scalar as float32. One that also reads a
// float32 activation (%xin, an argument) stays float32, while reading a BF16 GEMM output: each
// operand of a program has its own type. A LayerNorm gradient reads a BF16 dY and writes a BF16
// dX where a cast reads it; its X, a float32 argument, stays so.
// CHECK-LABEL: func.func @pointwise_and_norm_gradient
// CHECK: %[[D:.+]] = fp8.gemm {{.+}} -> tensor<32x64xbf16>
// CHECK-NEXT: %[[DY:.+]] = fp8.gemm {{.+}} -> tensor<32x64xbf16>
// CHECK-NEXT: %[[P:.+]] = onnx.node "Pointwise"(%[[D]], %[[DY]], %arg2) {{.+}} : (tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<f32>) -> tensor<32x64xbf16>
// CHECK-NEXT: fp8.cast %[[P]], %arg2 : tensor<32x64xbf16>, tensor<f32>
// CHECK-NEXT: onnx.node "Pointwise"(%[[D]], %arg3) {{.+}} : (tensor<32x64xbf16>, tensor<32x64xf32>) -> tensor<32x64xf32>
// CHECK: %[[G:.+]] = fp8.gemm {{.+}} -> tensor<32x64xbf16>
// CHECK-NEXT: onnx.node "LayerNormalizationGrad"(%arg3, %arg4, %[[G]]) {{.+}} : (tensor<32x64xf32>, tensor<64xf32>, tensor<32x64xbf16>) -> (tensor<32x64xbf16>, tensor<64xf32>, tensor<64xf32>)
func.func @pointwise_and_norm_gradient(%x: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %s: tensor<f32>, %xin: tensor<32x64xf32>, %scale: tensor<64xf32>) -> (tensor<32x64xf8E5M2>, tensor<32x64xf8E5M2>, tensor<32x64xf8E5M2>, tensor<64xf32>, tensor<64xf32>) {
  %d = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %dy = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %p = onnx.node "Pointwise"(%d, %dy, %s) {attrs = {args = array<i64: 0, 2, -1, 3, 1, -1>, ops = ["Mul", "Mul"]}, domain = "octet"} : (tensor<32x64xf32>, tensor<32x64xf32>, tensor<f32>) -> tensor<32x64xf32>
  %c = fp8.cast %p, %s : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E5M2>
  %q = onnx.node "Pointwise"(%d, %xin) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Add"]}, domain = "octet"} : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %c3 = fp8.cast %q, %s : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E5M2>
  %g = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %dx, %ds, %db = onnx.node "LayerNormalizationGrad"(%xin, %scale, %g) {attrs = {axis = -1 : si64, epsilon = 9.99999974E-6 : f32}, domain = "octet"} : (tensor<32x64xf32>, tensor<64xf32>, tensor<32x64xf32>) -> (tensor<32x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %c2 = fp8.cast %dx, %s : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E5M2>
  return %c, %c3, %c2, %ds, %db : tensor<32x64xf8E5M2>, tensor<32x64xf8E5M2>, tensor<32x64xf8E5M2>, tensor<64xf32>, tensor<64xf32>
}

// -----

// The loss reads the output layer's BF16 logits (its softmax computes in float32) and its gradient
// writes BF16 dLogits for the E5M2 cast; the loss itself, a scalar result, stays float32.
// CHECK-LABEL: func.func @loss_on_gemm_logits
// CHECK: %[[Z:.+]] = fp8.gemm {{.+}} -> tensor<32x64xbf16>
// CHECK: onnx.SoftmaxCrossEntropyLoss %[[Z]], %arg3, %{{.+}} : (tensor<32x64xbf16>, tensor<32xi64>, none) -> (tensor<f32>, none)
// CHECK-NEXT: %[[G:.+]] = onnx.node "SoftmaxCrossEntropyLossGrad"(%[[Z]], %arg3, %arg2) {{.+}} : (tensor<32x64xbf16>, tensor<32xi64>, tensor<f32>) -> tensor<32x64xbf16>
// CHECK-NEXT: fp8.cast %[[G]], %arg2 : tensor<32x64xbf16>, tensor<f32>
func.func @loss_on_gemm_logits(%x: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %s: tensor<f32>, %labels: tensor<32xi64>) -> (tensor<f32>, tensor<32x64xf8E5M2>) {
  %z = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %n = onnx.none
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %z, %labels, %n {ignore_index = -100 : si64, reduction = "mean"} : (tensor<32x64xf32>, tensor<32xi64>, none) -> (tensor<f32>, none)
  %g = onnx.node "SoftmaxCrossEntropyLossGrad"(%z, %labels, %s) {attrs = {ignore_index = -100 : si64, reduction = "mean"}, domain = "octet"} : (tensor<32x64xf32>, tensor<32xi64>, tensor<f32>) -> tensor<32x64xf32>
  %c = fp8.cast %g, %s : tensor<32x64xf32>, tensor<f32> -> tensor<32x64xf8E5M2>
  return %l, %c : tensor<f32>, tensor<32x64xf8E5M2>
}

// -----

// A kept layer's BF16 GEMM (--kept-gemm-precision=bf16) widened back to float32 for the loss: the
// widening Cast is an origin, so the logits stay BF16 and the Cast goes (the loss reads BF16). The
// loss gradient is BF16 too, and its Cast to BF16 for the kept layer's backward GEMM goes.
// CHECK-LABEL: func.func @kept_layer_casts
// CHECK: %[[L:.+]] = onnx.Gemm %arg0, %arg1, %{{.+}} : (tensor<32x64xbf16>, tensor<64x128xbf16>, none) -> tensor<32x128xbf16>
// CHECK-NOT: onnx.Cast
// CHECK: onnx.SoftmaxCrossEntropyLoss %[[L]], %arg2
// CHECK: %[[G:.+]] = onnx.node "SoftmaxCrossEntropyLossGrad"(%[[L]], %arg2, %arg3) {{.+}} -> tensor<32x128xbf16>
// CHECK-NEXT: onnx.Gemm %[[G]], %arg1, %{{.+}} {{.+}} -> tensor<32x64xbf16>
// F32-LABEL: func.func @kept_layer_casts
// F32-COUNT-2: onnx.Cast
func.func @kept_layer_casts(%x: tensor<32x64xbf16>, %w: tensor<64x128xbf16>, %labels: tensor<32xi64>, %one: tensor<f32>) -> (tensor<f32>, tensor<32x64xbf16>) {
  %none = onnx.none
  %y = onnx.Gemm %x, %w, %none : (tensor<32x64xbf16>, tensor<64x128xbf16>, none) -> tensor<32x128xbf16>
  %yf = onnx.Cast %y {to = 1 : si64} : (tensor<32x128xbf16>) -> tensor<32x128xf32>
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %yf, %labels, %none {ignore_index = -100 : si64, reduction = "mean"} : (tensor<32x128xf32>, tensor<32xi64>, none) -> (tensor<f32>, none)
  %g = onnx.node "SoftmaxCrossEntropyLossGrad"(%yf, %labels, %one) {attrs = {ignore_index = -100 : si64, reduction = "mean"}, domain = "octet"} : (tensor<32x128xf32>, tensor<32xi64>, tensor<f32>) -> tensor<32x128xf32>
  %gb = onnx.Cast %g {to = 16 : si64} : (tensor<32x128xf32>) -> tensor<32x128xbf16>
  %dx = onnx.Gemm %gb, %w, %none {transB = 1 : si64} : (tensor<32x128xbf16>, tensor<64x128xbf16>, none) -> tensor<32x64xbf16>
  return %loss, %dx : tensor<f32>, tensor<32x64xbf16>
}

// -----

// A fused QKV projection (GPT-2's c_attn): one FP8 GEMM's result sliced into q, k and v for
// attention, and attention's three gradients concatenated back into the projection's dY for its
// cast: Slice and Concat copy, so with BF16 operands they store BF16, and the whole path does.
// CHECK-LABEL: func.func @split_qkv
// CHECK: %[[QKV:.+]] = fp8.gemm {{.+}} -> tensor<32x192xbf16>
// CHECK: onnx.Slice %[[QKV]], {{.+}} -> tensor<32x64xbf16>
// CHECK: onnx.Slice %[[QKV]], {{.+}} -> tensor<32x64xbf16>
// CHECK: onnx.node "AttentionGrad"({{.+}}) {{.+}} -> (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>, tensor<2x16x64xbf16>)
// CHECK: %[[DY:.+]] = onnx.Concat {{.+}} : (tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>) -> tensor<32x192xbf16>
// CHECK: fp8.cast_amax %[[DY]], %arg2 : tensor<32x192xbf16>, tensor<f32>
func.func @split_qkv(%a: tensor<32x64xf8E4M3FN>, %w: tensor<192x64xf8E4M3FN>, %s: tensor<f32>, %shape: tensor<3xi64>, %flat: tensor<2xi64>, %st: tensor<1xi64>, %mid: tensor<1xi64>, %end: tensor<1xi64>, %ax: tensor<1xi64>, %dy: tensor<2x16x64xbf16>) -> (tensor<32x192xf8E5M2>, tensor<f32>) {
  %none = onnx.none
  %qkv = fp8.gemm %a, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<192x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x192xf32>
  %q = onnx.Slice %qkv, %st, %mid, %ax, %none : (tensor<32x192xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<32x64xf32>
  %k = onnx.Slice %qkv, %mid, %end, %ax, %none : (tensor<32x192xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<32x64xf32>
  %q3 = onnx.Reshape %q, %shape : (tensor<32x64xf32>, tensor<3xi64>) -> tensor<2x16x64xf32>
  %k3 = onnx.Reshape %k, %shape : (tensor<32x64xf32>, tensor<3xi64>) -> tensor<2x16x64xf32>
  %y, %lse = onnx.node "Attention"(%q3, %k3, %k3) {attrs = {is_causal = 1 : si64, q_num_heads = 4 : si64, kv_num_heads = 4 : si64}, domain = "octet"} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x4x16xf32>)
  %dyf = onnx.Cast %dy {to = 1 : si64} : (tensor<2x16x64xbf16>) -> tensor<2x16x64xf32>
  %dq, %dk, %dv = onnx.node "AttentionGrad"(%q3, %k3, %k3, %y, %lse, %dyf) {attrs = {is_causal = 1 : si64, q_num_heads = 4 : si64, kv_num_heads = 4 : si64}, domain = "octet"} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x4x16xf32>, tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>)
  %dq2 = onnx.Reshape %dq, %flat : (tensor<2x16x64xf32>, tensor<2xi64>) -> tensor<32x64xf32>
  %dk2 = onnx.Reshape %dk, %flat : (tensor<2x16x64xf32>, tensor<2xi64>) -> tensor<32x64xf32>
  %dv2 = onnx.Reshape %dv, %flat : (tensor<2x16x64xf32>, tensor<2xi64>) -> tensor<32x64xf32>
  %d = onnx.Concat %dq2, %dk2, %dv2 {axis = 1 : si64} : (tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x192xf32>
  %c, %m = fp8.cast_amax %d, %s : tensor<32x192xf32>, tensor<f32> -> tensor<32x192xf8E5M2>, tensor<f32>
  return %c, %m : tensor<32x192xf8E5M2>, tensor<f32>
}

// -----

// A copy keeps one element type: a Concat of a BF16-able gradient and a float32 stream stays
// float32, and so does the gradient; a Slice whose result a float32-only op (Softmax) reads stays
// float32, and so does the GEMM result it slices.
// CHECK-LABEL: func.func @copies_follow_their_readers
// CHECK: fp8.gemm {{.+}} -> tensor<32x64xf32>
// CHECK: onnx.Concat {{.+}} : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x128xf32>
// CHECK: %[[G:.+]] = fp8.gemm {{.+}} -> tensor<32x128xf32>
// CHECK: onnx.Slice %[[G]], {{.+}} -> tensor<32x64xf32>
// CHECK-NOT: bf16
func.func @copies_follow_their_readers(%x: tensor<32x64xf8E4M3FN>, %w: tensor<64x64xf8E4M3FN>, %w2: tensor<128x64xf8E4M3FN>, %s: tensor<f32>, %stream: tensor<32x64xf32>, %st: tensor<1xi64>, %end: tensor<1xi64>, %ax: tensor<1xi64>) -> (tensor<32x128xf8E4M3FN>, tensor<f32>, tensor<32x64xf32>) {
  %r = fp8.gemm %x, %w, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x64xf32>
  %cat = onnx.Concat %r, %stream {axis = 1 : si64} : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x128xf32>
  %c, %m = fp8.cast_amax %cat, %s : tensor<32x128xf32>, tensor<f32> -> tensor<32x128xf8E4M3FN>, tensor<f32>
  %g = fp8.gemm %x, %w2, %s, %s {transpose_b = true} : (tensor<32x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x128xf32>
  %none = onnx.none
  %h = onnx.Slice %g, %st, %end, %ax, %none : (tensor<32x128xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<32x64xf32>
  %p = onnx.Softmax %h {axis = -1 : si64} : (tensor<32x64xf32>) -> tensor<32x64xf32>
  return %c, %m, %p : tensor<32x128xf8E4M3FN>, tensor<f32>, tensor<32x64xf32>
}
