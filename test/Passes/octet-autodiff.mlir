// RUN: fp8-opt %s -split-input-file --octet-autodiff -verify-diagnostics | FileCheck %s
// RUN: fp8-opt %S/Inputs/autodiff-two-outputs.mlir --pass-pipeline='builtin.module(octet-autodiff{loss=total freeze=bias})' | FileCheck %s --check-prefix=OPT
// RUN: not fp8-opt %S/Inputs/autodiff-two-outputs.mlir --octet-autodiff 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te amax-history-len=4 pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-fp8-expand,cse)' | FileCheck %s --check-prefix=TE
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=ao ao-recipe=rowwise keep-first-last=false pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-fp8-expand,cse)' | FileCheck %s --check-prefix=ROW
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te pad-inner-dim=true override-linear-precision=dgrad,wgrad},octet-lower-layers,octet-autodiff,octet-fp8-expand,cse)' | FileCheck %s --check-prefix=HP

// Broadcasting: the bias gradient sums over the broadcast rows; the weight
// gradient is X^T dY; parameters get results named "<param>.grad".
// CHECK-LABEL: func.func @linear
// CHECK-SAME: {octet.grad_of = "w", onnx.name = "w.grad"}
// CHECK-SAME: {octet.grad_of = "bias", onnx.name = "bias.grad"}
// CHECK: onnx.ReduceSum {{.*}} {keepdims = 1 : si64} : (tensor<4x3xf32>, tensor<1xi64>) -> tensor<1x3xf32>
// CHECK: onnx.Reshape {{.*}} -> tensor<3xf32>
// CHECK: onnx.Transpose %arg0 {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK: onnx.MatMul {{.*}} : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
func.func @linear(%x: tensor<4x8xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "total"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<8x3xf32>
  %b = onnx.initializer "bias" = dense<0.1> : tensor<3xf32>
  %h = onnx.MatMul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %y = onnx.Add %h, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %n = onnx.none
  %l = onnx.ReduceSum %y, %n {keepdims = 0 : si64} : (tensor<4x3xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// torch.export's lifted constants (a mask's 0.0 from `torch.tensor(0.0)`) are not parameters:
// no gradient for them, whichever of the three spellings; a parameter of a similar name is one.
// CHECK-LABEL: func.func @lifted
// CHECK-SAME: -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<f32> {octet.grad_of = "m.lifted_tensor_scale", onnx.name = "m.lifted_tensor_scale.grad"}) {
func.func @lifted(%x: tensor<4xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %c0 = onnx.initializer "m.lifted_tensor_0" = dense<0.0> : tensor<f32>
  %c1 = onnx.initializer "c_lifted_tensor_1" = dense<1.0> : tensor<f32>
  %c2 = onnx.initializer "m._tensor_constant2" = dense<2.0> : tensor<f32>
  %w = onnx.initializer "m.lifted_tensor_scale" = dense<0.5> : tensor<f32>
  %a = onnx.Add %x, %c0 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b = onnx.Mul %a, %c1 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c = onnx.Mul %b, %c2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %d = onnx.Mul %c, %w : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %n = onnx.none
  %l = onnx.ReduceSum %d, %n {keepdims = 0 : si64} : (tensor<4xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A parameter used twice (tied weights) accumulates both gradients; the
// gradient of Gather scatters rows back (ScatterND with reduction=add).
// CHECK-LABEL: func.func @tied
// CHECK: onnx.node "ScatterND"({{.*}}) {attrs = {reduction = "add"}}
// CHECK: onnx.Add {{.*}} : (tensor<10x4xf32>, tensor<10x4xf32>) -> tensor<10x4xf32>
func.func @tied(%ids: tensor<2x3xi64> {onnx.name = "ids"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %e = onnx.initializer "emb" = dense<0.5> : tensor<10x4xf32>
  %h = onnx.Gather %e, %ids {axis = 0 : si64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %t = onnx.Transpose %e {perm = array<i64: 1, 0>} : (tensor<10x4xf32>) -> tensor<4x10xf32>
  %o = onnx.MatMul %h, %t : (tensor<2x3x4xf32>, tensor<4x10xf32>) -> tensor<2x3x10xf32>
  %n = onnx.none
  %l = onnx.ReduceMean %o, %n {keepdims = 0 : si64} : (tensor<2x3x10xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An op without a gradient rule on the path from a parameter to the loss.
func.func @norule(%x: tensor<4xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "total"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<4xf32>
  %y = onnx.Mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{octet-autodiff: no gradient rule for Softplus node on the path from the parameters to the loss}}
  %s = onnx.node "Softplus"(%y) : (tensor<4xf32>) -> tensor<4xf32>
  %n = onnx.none
  %l = onnx.ReduceSum %s, %n {keepdims = 0 : si64} : (tensor<4xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The loss does not depend on a parameter.
// expected-error @+1 {{octet-autodiff: the loss does not depend on any trainable parameter}}
func.func @noparam(%x: tensor<4xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<4xf32>
  %n = onnx.none
  %l = onnx.ReduceSum %x, %n {keepdims = 0 : si64} : (tensor<4xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// Options (Inputs/autodiff-two-outputs.mlir): the loss named by loss=;
// parameters matching freeze= get no gradient; without loss= two scalar
// outputs are an error that says what to do.
// OPT-LABEL: func.func @choose
// OPT-SAME: onnx.name = "w.grad"
// OPT-NOT: bias.grad
// TWO: error: octet-autodiff: 2 scalar float outputs (other, total); name the loss with --loss NAME

// te: dgrad and wgrad are FP8 GEMMs with split accumulation; dY is E5M2 with
// its own delayed-scaling state, updated inside the step.
// TE-LABEL: func.func @main_graph
// TE-SAME: onnx.name = "fc1.weight.grad"
// TE-SAME: {octet.state_update = "head.fp8.grad_output.amax_history", onnx.name = "head.fp8.grad_output.amax_history.next"}
// TE: onnx.initializer "head.fp8.grad_output.amax_history" = dense<0.000000e+00> : tensor<4xf32> {octet.fp8_state}
// TE: fp8.cast {{.*}} -> tensor<4x64xf8E5M2>
// TE: fp8.gemm {{.*}} {accumulation = #fp8.accumulation<split>} : (tensor<4x64xf8E5M2>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<4x32xf32>
// TE: fp8.gemm {{.*}} {accumulation = #fp8.accumulation<split>, transpose_a = true} : (tensor<4x64xf8E5M2>, tensor<4x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<64x32xf32>
// TE: onnx.Slice {{.*}} -> tensor<64x24xf32>

// ao rowwise: per-row scales on transposed copies for wgrad.
// ROW-LABEL: func.func @main_graph
// ROW: fp8.gemm {{.*}} {accumulation = #fp8.accumulation<split>, transpose_b = true} : (tensor<128x4xf8E4M3FN>, tensor<32x4xf8E4M3FN>, tensor<128x1xf32>, tensor<32x1xf32>) -> tensor<128x32xf32>

// override-linear-precision=dgrad,wgrad: the backward GEMMs stay FP32.
// HP-LABEL: func.func @main_graph
// HP-NOT: accumulation<split>
// HP: return

// -----

// octet::Attention (octet-fuse-attention's node): the gradient is one octet::AttentionGrad that
// reads Q, K, V, the output and its log-sum-exp, with the forward's attributes.
// CHECK-LABEL: func.func @attention
// CHECK: %[[A:.+]]:2 = onnx.node "Attention"(%[[Q:.+]], %[[K:.+]], %[[V:.+]]) {attrs = {is_causal = 1 : si64, scale = 5.000000e-01 : f32}, domain = "octet"}
// CHECK: onnx.node "AttentionGrad"(%[[Q]], %[[K]], %[[V]], %[[A]]#0, %[[A]]#1, %{{.+}}) {attrs = {is_causal = 1 : si64, scale = 5.000000e-01 : f32}, domain = "octet"} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
func.func @attention(%x: tensor<1x4x8xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "total"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<1x4x8xf32>
  %q = onnx.Mul %x, %w : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %k = onnx.Add %x, %w : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %v = onnx.Sub %x, %w : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %y, %lse = onnx.node "Attention"(%q, %k, %v) {attrs = {is_causal = 1 : si64, scale = 5.000000e-01 : f32}, domain = "octet"} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4xf32>)
  %n = onnx.none
  %l = onnx.ReduceSum %y, %n {keepdims = 0 : si64} : (tensor<1x4x8xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Other nodes of the octet domain have no gradient rule.
func.func @octet_node_without_rule(%x: tensor<4xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "total"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<4xf32>
  %y = onnx.Mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{octet-autodiff: no gradient rule for Pointwise node on the path from the parameters to the loss}}
  %s = onnx.node "Pointwise"(%y) {attrs = {args = array<i64: 0, -1, -1>, ops = ["Exp"]}, domain = "octet"} : (tensor<4xf32>) -> tensor<4xf32>
  %n = onnx.none
  %l = onnx.ReduceSum %s, %n {keepdims = 0 : si64} : (tensor<4xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The tanh GELU's gradient computes u = k (x + ((0.044715 x) x) x) in the GELU's own order of
// operations (the runtimes' GELU), so a backend that recomputes the GELU beside its gradient
// computes u and tanh u once.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: %[[H:.*]] = onnx.Mul %arg0
// CHECK: %[[C:.*]] = onnx.Constant {value = dense<4.471500e-02> : tensor<f32>}
// CHECK: %[[CX:.*]] = onnx.Mul %[[C]], %[[H]]
// CHECK: %[[CXX:.*]] = onnx.Mul %[[CX]], %[[H]]
// CHECK: %[[CUBE:.*]] = onnx.Mul %[[CXX]], %[[H]]
// CHECK: %[[S:.*]] = onnx.Add %[[H]], %[[CUBE]]
// CHECK: %[[K:.*]] = onnx.Constant {value = dense<0.797884583> : tensor<f32>}
// CHECK: %[[U:.*]] = onnx.Mul %[[K]], %[[S]]
// CHECK: onnx.Tanh %[[U]]
func.func @gelu_tanh(%x: tensor<4x8xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<4x8xf32>
  %h = onnx.Mul %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = onnx.Gelu %h {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = onnx.none
  %l = onnx.ReduceSum %g, %n {keepdims = 0 : si64} : (tensor<4x8xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}
