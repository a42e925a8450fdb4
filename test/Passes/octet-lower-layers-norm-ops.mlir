// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers{layers=layer_norm,rms_norm},octet-lower-layers{norm-ops=true})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers{layers=layer_norm,rms_norm},octet-lower-layers)' | FileCheck %s --check-prefix=OFF
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers{layers=layer_norm,rms_norm},octet-lower-layers{norm-ops=true})' -mlir-print-debuginfo | FileCheck %s --check-prefix=NAME

// Llama's RMSNorm as exported (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul): one
// RMSNormalization over the last axis, named after the layer, with its epsilon.
// CHECK-LABEL: func.func @rms_decomposed
// CHECK-NOT: onnx.Pow
// CHECK: %[[Y:.+]] = onnx.RMSNormalization %arg0, %{{.+}} {axis = -1 : si64, epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
// CHECK-NEXT: return %[[Y]]
// NAME-LABEL: func.func @rms_decomposed
// NAME: onnx.RMSNormalization {{.*}} loc(#[[L:loc[0-9]+]])
// NAME: #[[L]] = loc("layers.0.input_layernorm"
// OFF-LABEL: func.func @rms_decomposed
// OFF-NOT: RMSNormalization
// OFF: onnx.Pow
// OFF: onnx.Reciprocal
func.func @rms_decomposed(%x: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %g = onnx.initializer "layers.0.input_layernorm.weight" = dense<1.0> : tensor<64xf32>
  %axes = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %two = onnx.Constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %eps = onnx.Constant {value = dense<1.0e-6> : tensor<f32>} : () -> tensor<f32>
  %p = onnx.Pow %x, %two : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  %m = onnx.ReduceMean %p, %axes {keepdims = 1 : si64} : (tensor<2x16x64xf32>, tensor<1xi64>) -> tensor<2x16x1xf32>
  %a = onnx.Add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %s = onnx.Sqrt %a : (tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %r = onnx.Reciprocal %s : (tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %n = onnx.Mul %x, %r : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %y = onnx.Mul %g, %n : (tensor<64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// An older exporter's decomposed LayerNorm: one LayerNormalization with its scale and bias.
// CHECK-LABEL: func.func @layer_norm_decomposed
// CHECK-NOT: onnx.ReduceMean
// CHECK: %[[Y:.+]], %{{.+}}, %{{.+}} = onnx.LayerNormalization %arg0, %{{.+}}, %{{.+}} {axis = -1 : si64, epsilon = 9.99999996E-13 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, none, none)
// CHECK-NEXT: return %[[Y]]
// NAME-LABEL: func.func @layer_norm_decomposed
// NAME: onnx.LayerNormalization {{.*}} loc(#[[L:loc[0-9]+]])
// NAME: #[[L]] = loc("enc.ln"
// OFF-LABEL: func.func @layer_norm_decomposed
// OFF-NOT: onnx.LayerNormalization
// OFF: onnx.ReduceMean
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

// A BF16 RMSNorm keeps its ops (the runtimes' norm kernels take float32 rows).
// CHECK-LABEL: func.func @rms_bf16
// CHECK-NOT: onnx.RMSNormalization
// CHECK: onnx.Pow
// CHECK: onnx.Reciprocal
func.func @rms_bf16(%x: tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16> {
  %g = onnx.initializer "layers.0.post_attention_layernorm.weight" = dense<1.0> : tensor<64xbf16>
  %axes = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %two = onnx.Constant {value = dense<2.0> : tensor<bf16>} : () -> tensor<bf16>
  %eps = onnx.Constant {value = dense<1.0e-6> : tensor<bf16>} : () -> tensor<bf16>
  %p = onnx.Pow %x, %two : (tensor<2x16x64xbf16>, tensor<bf16>) -> tensor<2x16x64xbf16>
  %m = onnx.ReduceMean %p, %axes {keepdims = 1 : si64} : (tensor<2x16x64xbf16>, tensor<1xi64>) -> tensor<2x16x1xbf16>
  %a = onnx.Add %m, %eps : (tensor<2x16x1xbf16>, tensor<bf16>) -> tensor<2x16x1xbf16>
  %s = onnx.Sqrt %a : (tensor<2x16x1xbf16>) -> tensor<2x16x1xbf16>
  %r = onnx.Reciprocal %s : (tensor<2x16x1xbf16>) -> tensor<2x16x1xbf16>
  %n = onnx.Mul %x, %r : (tensor<2x16x64xbf16>, tensor<2x16x1xbf16>) -> tensor<2x16x64xbf16>
  %y = onnx.Mul %g, %n : (tensor<64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  return %y : tensor<2x16x64xbf16>
}

// -----

// A LayerNormalization op already (GPT-2 as exported) stays one, its name kept as the layer's.
// CHECK-LABEL: func.func @layer_norm_op
// CHECK: onnx.LayerNormalization %arg0, %{{.+}}, %{{.+}} {axis = -1 : si64, epsilon = 9.99999974E-6 : f32}
// CHECK-NEXT: return
func.func @layer_norm_op(%x: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %g = onnx.initializer "h.0.ln_1.weight" = dense<1.0> : tensor<64xf32>
  %b = onnx.initializer "h.0.ln_1.bias" = dense<0.0> : tensor<64xf32>
  %y, %m, %i = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64, epsilon = 1.0e-5 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, none, none)
  return %y : tensor<2x16x64xf32>
}
