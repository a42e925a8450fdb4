// RUN: fp8-opt %s -split-input-file --octet-attention-precision | FileCheck %s --check-prefix=AUTO
// RUN: fp8-opt %s -split-input-file --octet-attention-precision=precision=bf16 | FileCheck %s --check-prefix=BF16
// RUN: fp8-opt %s -split-input-file --octet-attention-precision='precision=tf32' | FileCheck %s --check-prefix=TF32

// No FP8 recipe, float32 operands: auto gives TF32 to the forward and the gradient alike, and
// keeps the other attributes; the option overrides.
// AUTO-LABEL: func.func @plain
// AUTO: onnx.node "Attention"(%{{.*}}) {attrs = {is_causal = 1 : si64, precision = "tf32", scale = 5.000000e-01 : f32}, domain = "octet"}
// AUTO: onnx.node "AttentionGrad"(%{{.*}}) {attrs = {is_causal = 1 : si64, precision = "tf32", scale = 5.000000e-01 : f32}, domain = "octet"}
// BF16-LABEL: func.func @plain
// BF16: onnx.node "Attention"(%{{.*}}) {attrs = {is_causal = 1 : si64, precision = "bf16", scale = 5.000000e-01 : f32}
// BF16: onnx.node "AttentionGrad"(%{{.*}}) {attrs = {is_causal = 1 : si64, precision = "bf16", scale = 5.000000e-01 : f32}
// TF32-LABEL: func.func @plain
// TF32: precision = "tf32"
// TF32: precision = "tf32"
func.func @plain(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>, %dy: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %y, %lse = onnx.node "Attention"(%q, %k, %v) {attrs = {is_causal = 1 : si64, scale = 5.000000e-01 : f32}, domain = "octet"} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4xf32>)
  %dq, %dk, %dv = onnx.node "AttentionGrad"(%q, %k, %v, %y, %lse, %dy) {attrs = {is_causal = 1 : si64, scale = 5.000000e-01 : f32}, domain = "octet"} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %dq : tensor<1x4x8xf32>
}

// -----

// Under an FP8 recipe, auto gives BF16 (autocast's precision for attention).
// AUTO-LABEL: func.func @recipe
// AUTO: onnx.node "Attention"(%{{.*}}) {attrs = {is_causal = 0 : si64, precision = "bf16", scale = 2.500000e-01 : f32}
// BF16-LABEL: func.func @recipe
// BF16: precision = "bf16"
// TF32-LABEL: func.func @recipe
// TF32: precision = "tf32"
module attributes {octet.recipe = "te"} {
  func.func @recipe(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
    %y, %lse = onnx.node "Attention"(%q, %k, %v) {attrs = {is_causal = 0 : si64, scale = 2.500000e-01 : f32}, domain = "octet"} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4xf32>)
    return %y : tensor<1x4x8xf32>
  }
}

// -----

// The recipe "none" is no FP8 recipe; other nodes are left alone.
// AUTO-LABEL: func.func @none_recipe
// AUTO: onnx.node "Attention"(%{{.*}}) {attrs = {is_causal = 0 : si64, precision = "tf32", scale = 2.500000e-01 : f32}
// AUTO: onnx.node "Gelu"(%{{.*}}) {domain = "octet"}
// BF16-LABEL: func.func @none_recipe
// TF32-LABEL: func.func @none_recipe
module attributes {octet.recipe = "none"} {
  func.func @none_recipe(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
    %y, %lse = onnx.node "Attention"(%q, %k, %v) {attrs = {is_causal = 0 : si64, scale = 2.500000e-01 : f32}, domain = "octet"} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4xf32>)
    %g = onnx.node "Gelu"(%y) {domain = "octet"} : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    return %g : tensor<1x4x8xf32>
  }
}
