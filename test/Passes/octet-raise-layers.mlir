// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers)' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers{layers=silu})' | FileCheck %s --check-prefix=ONLY
// RUN: not fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers{layers=conv})' -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: octet-raise-layers: unknown layer kind 'conv' (layers=); known: linear, layer_norm, rms_norm, gelu, silu
// RUN: fp8-opt %S/Inputs/mlp.mlir --octet-raise-layers | FileCheck %s --check-prefix=FLAG

// A MatMul through a Transpose of the weight (Llama), no bias.
// CHECK-LABEL: func.func @matmul_transposed
// CHECK: %[[Y:.+]] = nn.linear "model.layers.0.mlp.up_proj"(%arg0, %[[W:.+]]) {transpose_weight = true}
// CHECK: onnx.Transpose
// CHECK: onnx.MatMul
// CHECK: nn.yield
// CHECK: return %[[Y]]
// ONLY-LABEL: func.func @matmul_transposed
// ONLY-NOT: nn.linear
func.func @matmul_transposed(%x: tensor<2x16x64xf32>) -> tensor<2x16x32xf32> {
  %w = onnx.initializer "model.layers.0.mlp.up_proj.weight" = dense<0.5> : tensor<32x64xf32>
  %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<32x64xf32>) -> tensor<64x32xf32>
  %y = onnx.MatMul %x, %t : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// MatMul + bias Add (BERT) and Gemm with a bias (GPT-2).
// CHECK-LABEL: func.func @bias_forms
// CHECK: nn.linear "bert.query"(%arg0, %{{.+}}, %{{.+}}) :
// CHECK: onnx.MatMul
// CHECK: onnx.Add
// CHECK: nn.linear "h.0.attn.c_attn"(%arg1, %{{.+}}, %{{.+}}) :
// CHECK: onnx.Gemm
func.func @bias_forms(%x: tensor<2x16x64xf32>, %x2: tensor<32x64xf32>) -> (tensor<2x16x64xf32>, tensor<32x192xf32>) {
  %w = onnx.initializer "bert.query.weight" = dense<0.5> : tensor<64x64xf32>
  %b = onnx.initializer "bert.query.bias" = dense<0.1> : tensor<64xf32>
  %m = onnx.MatMul %x, %w : (tensor<2x16x64xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
  %y = onnx.Add %m, %b : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %w2 = onnx.initializer "h.0.attn.c_attn.weight" = dense<0.5> : tensor<64x192xf32>
  %b2 = onnx.initializer "h.0.attn.c_attn.bias" = dense<0.5> : tensor<192xf32>
  %g = onnx.Gemm %x2, %w2, %b2 {alpha = 1.0 : f32, beta = 1.0 : f32, transA = 0 : si64, transB = 0 : si64} : (tensor<32x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<32x192xf32>
  return %y, %g : tensor<2x16x64xf32>, tensor<32x192xf32>
}

// -----

// A MatMul whose right side is an activation (attention scores) is no Linear.
// CHECK-LABEL: func.func @not_linear
// CHECK-NOT: nn.linear
func.func @not_linear(%q: tensor<2x16x16xf32>, %k: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  %s = onnx.MatMul %q, %k : (tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  return %s : tensor<2x16x16xf32>
}

// -----

// CHECK-LABEL: func.func @layer_norm_op
// CHECK: nn.layer_norm "h.0.ln_1"(%arg0, %{{.+}}, %{{.+}}) {epsilon = 9.99999974E-6 : f32}
// CHECK: onnx.LayerNormalization
func.func @layer_norm_op(%x: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %g = onnx.initializer "h.0.ln_1.weight" = dense<1.0> : tensor<64xf32>
  %b = onnx.initializer "h.0.ln_1.bias" = dense<0.0> : tensor<64xf32>
  %y, %m, %i = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64, epsilon = 1.0e-5 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, none, none)
  return %y : tensor<2x16x64xf32>
}

// -----

// The decomposed LayerNorm older exporters write.
// CHECK-LABEL: func.func @layer_norm_decomposed
// CHECK: %[[N:.+]] = nn.layer_norm "enc.ln"(%arg0, %{{.+}}, %{{.+}}) {epsilon = 9.99999996E-13 : f32}
// CHECK-COUNT-2: onnx.ReduceMean
// CHECK: onnx.Div
// CHECK: return %[[N]]
func.func @layer_norm_decomposed(%x: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %g = onnx.initializer "enc.ln.weight" = dense<1.0> : tensor<64xf32>
  %b = onnx.initializer "enc.ln.bias" = dense<0.0> : tensor<64xf32>
  %axes = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %two = onnx.Constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %eps = onnx.Constant {value = dense<1.0e-12> : tensor<f32>} : () -> tensor<f32>
  %mu = onnx.ReduceMean %x, %axes {keepdims = 1 : si64} : (tensor<2x16x64xf32>, tensor<1xi64>) -> tensor<2x16x1xf32>
  %d = onnx.Sub %x, %mu : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %p = onnx.Pow %d, %two : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  %v = onnx.ReduceMean %p, %axes {keepdims = 1 : si64} : (tensor<2x16x64xf32>, tensor<1xi64>) -> tensor<2x16x1xf32>
  %ve = onnx.Add %v, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %s = onnx.Sqrt %ve : (tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %n = onnx.Div %d, %s : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %y = onnx.Mul %n, %g : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %z = onnx.Add %y, %b : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return %z : tensor<2x16x64xf32>
}

// -----

// Llama's RMSNorm, then SiLU.
// CHECK-LABEL: func.func @rms_norm_silu
// CHECK: nn.rms_norm "layers.0.input_layernorm"(%arg0, %{{.+}}) {epsilon = 9.99999997E-7 : f32}
// CHECK: onnx.Reciprocal
// CHECK: nn.silu "silu_{{[0-9]+}}"
// CHECK: onnx.Sigmoid
// ONLY-LABEL: func.func @rms_norm_silu
// ONLY-NOT: nn.rms_norm
// ONLY: nn.silu
func.func @rms_norm_silu(%x: tensor<2x16x64xf32>, %axes: tensor<1xi64>) -> tensor<2x16x64xf32> {
  %g = onnx.initializer "layers.0.input_layernorm.weight" = dense<1.0> : tensor<64xf32>
  %two = onnx.Constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %eps = onnx.Constant {value = dense<1.0e-6> : tensor<f32>} : () -> tensor<f32>
  %p = onnx.Pow %x, %two : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  %m = onnx.ReduceMean %p, %axes {keepdims = 1 : si64} : (tensor<2x16x64xf32>, tensor<1xi64>) -> tensor<2x16x1xf32>
  %a = onnx.Add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %s = onnx.Sqrt %a : (tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %r = onnx.Reciprocal %s : (tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %n = onnx.Mul %x, %r : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %y = onnx.Mul %g, %n : (tensor<64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %sg = onnx.Sigmoid %y : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %z = onnx.Mul %y, %sg : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %z : tensor<2x16x64xf32>
}

// -----

// The TorchScript exporter's RMSNorm: rsqrt as Div(1, Sqrt), and HF's `.to(input_dtype)` of a
// float32 model as a Cast to float32; both join the layer.
// CHECK-LABEL: func.func @rms_norm_torchscript
// CHECK: %[[N:.+]] = nn.rms_norm "layers.1.post_attention_layernorm"(%arg0, %{{.+}}) {epsilon = 9.99999997E-7 : f32}
// CHECK: onnx.Div
// CHECK: onnx.Cast
// CHECK: nn.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[N]]
func.func @rms_norm_torchscript(%x: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %g = onnx.initializer "layers.1.post_attention_layernorm.weight" = dense<1.0> : tensor<64xf32>
  %axes = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %two = onnx.Constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %eps = onnx.Constant {value = dense<1.0e-6> : tensor<f32>} : () -> tensor<f32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %p = onnx.Pow %x, %two : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  %m = onnx.ReduceMean %p, %axes {keepdims = 1 : si64} : (tensor<2x16x64xf32>, tensor<1xi64>) -> tensor<2x16x1xf32>
  %a = onnx.Add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %s = onnx.Sqrt %a : (tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %r = onnx.Div %one, %s : (tensor<f32>, tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %n = onnx.Mul %x, %r : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %c = onnx.Cast %n {to = 1 : si64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %y = onnx.Mul %g, %c : (tensor<64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Gemma's RMSNorm scales by (1 + w): the layer's scale input is that Add's result, which stays
// outside it; the layer is named after w. The copy after it (type_as) is no part of it.
// CHECK-LABEL: func.func @rms_norm_gemma
// CHECK: %[[SC:.+]] = onnx.Add %{{.+}}, %{{.+}} : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
// CHECK: %[[N:.+]] = nn.rms_norm "model.layers.0.input_layernorm"(%arg0, %[[SC]]) {epsilon = 9.99999997E-7 : f32}
// CHECK: nn.yield
// CHECK: onnx.Identity %[[N]]
func.func @rms_norm_gemma(%x: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %w = onnx.initializer "model.layers.0.input_layernorm.weight" = dense<0.0> : tensor<64xf32>
  %axes = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %two = onnx.Constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %eps = onnx.Constant {value = dense<1.0e-6> : tensor<f32>} : () -> tensor<f32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %p = onnx.Pow %x, %two : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  %m = onnx.ReduceMean %p, %axes {keepdims = 1 : si64} : (tensor<2x16x64xf32>, tensor<1xi64>) -> tensor<2x16x1xf32>
  %a = onnx.Add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %s = onnx.Sqrt %a : (tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %r = onnx.Reciprocal %s : (tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %n = onnx.Mul %x, %r : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %sc = onnx.Add %w, %one : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
  %y = onnx.Mul %n, %sc : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %c = onnx.Identity %y : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %c : tensor<2x16x64xf32>
}

// -----

// GPT-2's tanh GELU and BERT's erf GELU.
// CHECK-LABEL: func.func @gelus
// CHECK: nn.gelu "{{.+}}"(%arg0) {approximate = "tanh"}
// CHECK: onnx.Tanh
// CHECK: nn.gelu "{{.+}}"(%arg0) {approximate = "none"}
// CHECK: onnx.Erf
func.func @gelus(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %half = onnx.Constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %three = onnx.Constant {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %c = onnx.Constant {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %k = onnx.Constant {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %h = onnx.Mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %p = onnx.Pow %x, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %pc = onnx.Mul %p, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s = onnx.Add %x, %pc : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sk = onnx.Mul %s, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t = onnx.Tanh %sk : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t1 = onnx.Add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %g = onnx.Mul %h, %t1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sqrt2 = onnx.Constant {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %d = onnx.Div %x, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = onnx.Erf %d : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %e1 = onnx.Add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %xe = onnx.Mul %x, %e1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g2 = onnx.Mul %xe, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %g, %g2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// FLAG-LABEL: func.func @main_graph
// FLAG: nn.layer_norm "ln"
// FLAG: nn.linear "fc1"

// -----

// The cube written as x * x * x (the benchmark graphs, Megatron's bias_gelu) is the same GELU.
// CHECK-LABEL: func.func @gelu_cube_as_products
// CHECK: nn.gelu "{{.+}}"(%arg0) {approximate = "tanh"}
// CHECK-NOT: nn.gelu
func.func @gelu_cube_as_products(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = onnx.Constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %c = onnx.Constant {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %k = onnx.Constant {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %x2 = onnx.Mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %x3 = onnx.Mul %x2, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %pc = onnx.Mul %x3, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s = onnx.Add %x, %pc : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sk = onnx.Mul %s, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %h = onnx.Mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t = onnx.Tanh %sk : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t1 = onnx.Add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %g = onnx.Mul %h, %t1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// A dynamo export's node metadata names the module each node was traced in (onnx.name_scopes, from
// pkg.torch.onnx.name_scopes): the layer takes that module's path where the weight's name says
// nothing (optimize=True's val_N) or names another module (an lm_head tied to the embedding); a
// scope list without a module falls back to the weight's name.
// CHECK-LABEL: func.func @name_scopes
// CHECK: nn.linear "model.layers.0.mlp.up_proj"(%arg0, %{{.+}}) :
// CHECK: nn.linear "lm_head"(%arg0, %{{.+}}) :
// CHECK: nn.linear "model.proj"(%arg0, %{{.+}}) :
// ONLY-LABEL: func.func @name_scopes
func.func @name_scopes(%x: tensor<2x16x64xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) {
  %w = onnx.initializer "val_7" = dense<0.5> : tensor<64x32xf32>
  %y = onnx.MatMul %x, %w {onnx.name_scopes = "['', 'model', 'model.layers.0', 'model.layers.0.mlp', 'model.layers.0.mlp.up_proj', 'linear_3']"} : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x32xf32>
  %e = onnx.initializer "model.embed_tokens.weight" = dense<0.25> : tensor<64x32xf32>
  %z = onnx.MatMul %x, %e {onnx.name_scopes = "['', 'lm_head', 'linear_4']"} : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x32xf32>
  %p = onnx.initializer "model.proj.weight" = dense<0.25> : tensor<64x32xf32>
  %u = onnx.MatMul %x, %p {onnx.name_scopes = "['matmul']"} : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x32xf32>
  return %y, %z, %u : tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
}
