// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=te amax-history-len=4 pad-inner-dim=true},octet-fp8-expand,octet-lower-layers,octet-fp8-to-qdq)' | FileCheck %s
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=ao ao-recipe=rowwise keep-first-last=false pad-inner-dim=true},octet-fp8-expand,octet-lower-layers,octet-fp8-to-qdq)' | FileCheck %s --check-prefix=ROW
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-fp8-expand,octet-lower-layers,octet-fp8-to-qdq{gemm=gemm-float8})' | FileCheck %s --check-prefix=GF8
// RUN: not fp8-opt %S/Inputs/mlp.mlir -o /dev/null --pass-pipeline='builtin.module(octet-fp8-to-qdq{gemm=cublas})' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: fp8-opt %S/Inputs/mlp.mlir --octet-raise-layers --octet-fp8-substitute='recipe=te pad-inner-dim=true' --octet-fp8-expand --octet-lower-layers --octet-fp8-to-qdq | FileCheck %s --check-prefix=FLAG
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=te amax-history-len=4 pad-inner-dim=true},octet-fp8-expand,octet-lower-layers,octet-fuse-cast-amax,octet-fp8-to-qdq)' | FileCheck %s --check-prefix=FUSED

// State becomes graph inputs with defaults; casts QuantizeLinear; GEMMs DQ + MatMul.
// CHECK-LABEL: module attributes {octet.recipe = "te", onnx.opset_import = {ai.onnx = 19 : i64}}
// CHECK: func.func @main_graph({{.*}}%arg1: tensor<4xf32> {onnx.default = dense<0.000000e+00> : tensor<4xf32>, onnx.name = "fc1.fp8.input.amax_history"}
// CHECK-NOT: = fp8.
// CHECK: onnx.QuantizeLinear %{{.+}}, %{{.+}}, %{{.+}} {octet.result_names = ["fc1.input_fp8"], saturate = 1 : si64} : (tensor<4x64xf32>, tensor<f32>, tensor<f8E4M3FN>) -> tensor<4x64xf8E4M3FN>
// CHECK: onnx.Concat
// CHECK: onnx.Where
// CHECK: onnx.Reciprocal
// CHECK: onnx.DequantizeLinear
// CHECK: onnx.MatMul

// ROW-LABEL: func.func @main_graph
// ROW: onnx.QuantizeLinear {{.*}} {axis = 0 : si64, octet.result_names = ["fc1.input_fp8"], saturate = 1 : si64} : (tensor<4x64xf32>, tensor<4xf32>, tensor<4xf8E4M3FN>)
// ROW: onnx.node "Floor"

// GF8-LABEL: module attributes {octet.recipe = "msamp:O2", onnx.opset_import = {ai.onnx = 19 : i64, com.microsoft = 1 : i64}}
// GF8: onnx.node "GemmFloat8"({{.*}}) {attrs = {alpha = 1.000000e+00 : f32, dtype = 1 : si64, transA = 0 : si64, transB = 0 : si64}, domain = "com.microsoft"}

// BAD: octet-fp8-to-qdq: gemm='cublas' is not valid; use one of: matmul, gemm-float8

// FLAG-LABEL: func.func @main_graph
// FLAG: onnx.QuantizeLinear

// fp8.cast_amax (octet-fuse-cast-amax) exports as the QuantizeLinear and the Abs + ReduceMax
// it fused, each keeping its plan name.
// FUSED-LABEL: func.func @main_graph
// FUSED-NOT: = fp8.
// FUSED: %[[Q:.+]] = onnx.QuantizeLinear %[[X:.+]], %arg3, %{{.+}} {octet.result_names = ["fc1.input_fp8"], saturate = 1 : si64}
// FUSED-NEXT: %[[A:.+]] = onnx.Abs %[[X]] : (tensor<4x64xf32>) -> tensor<4x64xf32>
// FUSED: onnx.ReduceMax %[[A]], %{{.+}} {keepdims = 0 : si64, octet.result_names = ["fc1.input_amax"]}
