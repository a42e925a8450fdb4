// share-input-scaling (octet-fp8-substitute, on by default; fp8-opt --share-input-scaling): FP8
// Linears that read one tensor quantize it once. Under te the first one's input state serves
// them all and the others carry octet.fp8_input_shared_with; octet-fp8-expand then emits one
// amax, one cast (inside the LayerNorm) and one state update for the tensor, and every GEMM
// reads the same codes. Off, each Linear has its own state and cast. ao rowwise shares too: the
// input's scales are per row of the input alone, so its rowwise amax, scale and cast are the same
// ops for every Linear that reads it, named after the first, and CSE keeps one.
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te amax-history-len=16})' | FileCheck %s --check-prefix=TE
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te amax-history-len=16},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=EXPAND
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te amax-history-len=16 share-input-scaling=false},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=OFF
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=ao keep-first-last=false},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=AO
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=ao ao-recipe=rowwise keep-first-last=false})' | FileCheck %s --check-prefix=ROW
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=ao ao-recipe=rowwise keep-first-last=false},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=ROWX
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=ao ao-recipe=rowwise keep-first-last=false share-input-scaling=false},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=ROWOFF
// RUN: not fp8-opt %s -split-input-file -o /dev/null --pass-pipeline='builtin.module(octet-fp8-substitute{keep-output-layer=false recipe=te share-input-scaling=maybe})' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: 'maybe' is invalid value for boolean argument

// TE-LABEL: func.func @qk
// TE-NOT: onnx.initializer "k.fp8.input
// TE: %[[H:.+]] = onnx.initializer "q.fp8.input.amax_history"
// TE: %[[S:.+]] = onnx.initializer "q.fp8.input.scale"
// TE: %[[SI:.+]] = onnx.initializer "q.fp8.input.scale_inv"
// TE-NOT: onnx.initializer "k.fp8.input
// TE: %[[N:.+]] = nn.layer_norm "ln"
// TE: fp8.linear "q" %[[N]], %{{.+}} state(%[[H]], %[[S]], %[[SI]],
// TE-NOT: octet.fp8_input_shared_with
// TE-SAME: recipe = "te"
// TE: fp8.linear "k" %[[N]], %{{.+}} state(%[[H]], %[[S]], %[[SI]], {{.*}}octet.fp8_input_shared_with = "q"

// EXPAND-LABEL: func.func @qk
// EXPAND-NOT: k.fp8.input
// EXPAND: nn.layer_norm "ln"{{.*}} -> (tensor<4x64xf32>, tensor<4x64xf8E4M3FN>, tensor<f32>)
// EXPAND: fp8.cast %Y, %{{.+}} {octet.result_names = ["q.input_fp8"]}
// EXPAND-NOT: fp8.cast %Y
// EXPAND: nn.yield
// EXPAND-COUNT-1: fp8.delayed_scale {{.*}}"q.input_amax_history.next"
// EXPAND-NOT: k.input_amax_history.next
// EXPAND: fp8.gemm %[[Q:.+]]#1, %{{.+}}, %[[QS:[^,]+]], %{{.+}} :
// EXPAND: fp8.gemm %[[Q]]#1, %{{.+}}, %[[QS]], %{{.+}} :

// OFF-LABEL: func.func @qk
// OFF: onnx.initializer "k.fp8.input.scale_inv"
// OFF: nn.layer_norm "ln"{{.*}} -> (tensor<4x64xf32>, tensor<4x64xf8E4M3FN>, tensor<f32>, tensor<4x64xf8E4M3FN>, tensor<f32>)
// OFF: fp8.delayed_scale {{.*}}"q.input_amax_history.next"
// OFF: fp8.delayed_scale {{.*}}"k.input_amax_history.next"

// ao tensorwise: one dynamic amax, scale and cast of the LayerNorm output for both GEMMs.
// AO-LABEL: func.func @qk
// AO: nn.layer_norm "ln"{{.*}} -> (tensor<4x64xf32>, tensor<4x64xf8E4M3FN>, tensor<f32>, tensor<f32>)
// AO-COUNT-1: fp8.dynamic_scale {{.*}}"q.input_scale"
// AO-NOT: k.input_scale
// AO: fp8.gemm %[[Q:.+]]#1, %{{.+}}, %[[Q]]#3,
// AO: fp8.gemm %[[Q]]#1, %{{.+}}, %[[Q]]#3,

// ROW-LABEL: func.func @qk
// ROW: fp8.linear "q"
// ROW-NOT: octet.fp8_input_shared_with
// ROW-SAME: rowwise = true
// ROW: fp8.linear "k" {{.*}}octet.fp8_input_shared_with = "q"{{.*}}rowwise = true

// ao rowwise: one rowwise amax, scale and cast of the LayerNorm output, read by both GEMMs (the
// weights keep their own).
// ROWX-LABEL: func.func @qk
// ROWX: fp8.amax %[[N:.+]] {octet.result_names = ["q.input_amax"], rowwise = true}
// ROWX: %{{.+}}, %[[SI:.+]] = fp8.dynamic_scale {{.*}}"q.input_scale_inv"
// ROWX: %[[C:.+]] = fp8.cast %[[N]], %[[SI]] {octet.result_names = ["q.input_fp8"]}
// ROWX-NOT: k.input
// ROWX: fp8.gemm %[[C]], %{{.+}}, %[[SI]], %{{.+}} {transpose_b = true}
// ROWX: "k.weight_amax"
// ROWX: fp8.gemm %[[C]], %{{.+}}, %[[SI]], %{{.+}} {transpose_b = true}
// ROWOFF-LABEL: func.func @qk
// ROWOFF: "q.input_amax"
// ROWOFF: "k.input_amax"
func.func @qk(%x: tensor<4x64xf32> {onnx.name = "x"}) -> (tensor<4x64xf32> {onnx.name = "y"}) {
  %g = onnx.initializer "ln.weight" = dense<1.0> : tensor<64xf32>
  %b = onnx.initializer "ln.bias" = dense<0.0> : tensor<64xf32>
  %wq = onnx.initializer "q.weight" = dense<0.25> : tensor<64x64xf32>
  %wk = onnx.initializer "k.weight" = dense<0.5> : tensor<64x64xf32>
  %n, %m, %i = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64, epsilon = 1.0e-5 : f32} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<4x64xf32>, none, none)
  %q = onnx.MatMul %n, %wq : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %k = onnx.MatMul %n, %wk : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %y = onnx.Add %q, %k : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Linears reading different tensors keep their own input states.
// TE-LABEL: func.func @apart
// TE: onnx.initializer "a.fp8.input.scale_inv"
// TE: onnx.initializer "b.fp8.input.scale_inv"
// TE-NOT: octet.fp8_input_shared_with
// EXPAND-LABEL: func.func @apart
// EXPAND: "a.input_amax_history.next"
// EXPAND: "b.input_amax_history.next"
// OFF-LABEL: func.func @apart
// AO-LABEL: func.func @apart
// AO: "a.input_scale"
// AO: "b.input_scale"
// ROW-LABEL: func.func @apart
// ROW-NOT: octet.fp8_input_shared_with
// ROW: return
// ROWX-LABEL: func.func @apart
// ROWX: "a.input_amax"
// ROWX: "b.input_amax"
// ROWOFF-LABEL: func.func @apart
func.func @apart(%x: tensor<4x64xf32> {onnx.name = "x"}, %z: tensor<4x64xf32> {onnx.name = "z"}) -> (tensor<4x64xf32> {onnx.name = "y"}) {
  %wa = onnx.initializer "a.weight" = dense<0.25> : tensor<64x64xf32>
  %wb = onnx.initializer "b.weight" = dense<0.5> : tensor<64x64xf32>
  %a = onnx.MatMul %x, %wa : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %c = onnx.MatMul %z, %wb : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %y = onnx.Add %a, %c : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}
