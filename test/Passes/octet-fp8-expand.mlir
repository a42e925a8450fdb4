// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te amax-history-len=16 pad-inner-dim=true interval=2 amax-compute-algo=most_recent},octet-fp8-expand)' | FileCheck %s --check-prefix=TE
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te pad-inner-dim=true},octet-fp8-expand{fuse-norms=false})' | FileCheck %s --check-prefix=NOFUSE
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=ao ao-recipe=rowwise keep-first-last=false pad-inner-dim=true},octet-fp8-expand)' | FileCheck %s --check-prefix=ROW
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=msamp pad-inner-dim=true override-linear-precision=fprop},octet-fp8-expand)' | FileCheck %s --check-prefix=HP
// RUN: fp8-opt %S/Inputs/mlp.mlir --octet-raise-layers --octet-fp8-substitute='keep-output-layer=false recipe=msamp pad-inner-dim=true' --octet-fp8-expand | FileCheck %s --check-prefix=FLAG

// te: the LayerNorm produces fc1's FP8 input itself; state updates become results.
// TE-LABEL: func.func @main_graph
// TE-SAME: {octet.state_update = "fc1.fp8.input.amax_history", onnx.name = "fc1.fp8.input.amax_history.next"}
// TE-SAME: {octet.state_update = "octet.fp8.step", onnx.name = "octet.fp8.step.next"}
// TE: %[[LN:.+]]:3 = nn.layer_norm "ln"
// TE: fp8.amax %Y
// TE: fp8.cast %Y, %{{.+}} {octet.result_names = ["fc1.input_fp8"]}
// TE: nn.yield %Y, %{{.+}}, %{{.+}} : tensor<4x64xf32>, tensor<4x64xf8E4M3FN>, tensor<f32>
// TE: fp8.delayed_scale %{{.+}}, %{{.+}}, %[[LN]]#2 step %{{.+}} : tensor<i64> {algo = #fp8.amax_algo<most_recent>, format = f8E4M3FN, interval = 2 : si64
// TE: fp8.gemm %[[LN]]#1, %{{.+}}, %{{.+}}, %{{.+}} : (tensor<4x64xf8E4M3FN>, tensor<64x128xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<4x128xf32>
// TE: fp8.gemm {{.*}} {transpose_b = true}
// TE: %[[STEP:.+]] = onnx.Add %{{.+}}, %{{.+}} : (tensor<i64>, tensor<i64>) -> tensor<i64>
// TE: return {{.*}}%[[STEP]]

// NOFUSE-LABEL: func.func @main_graph
// NOFUSE: nn.layer_norm "ln"{{.*}} -> tensor<4x64xf32>
// NOFUSE: fp8.cast

// ao rowwise: 2-D views, per-row power-of-2 scales, the weight as [N, K].
// ROW-LABEL: func.func @main_graph
// ROW: onnx.Transpose %{{.+}} {perm = array<i64: 1, 0>} : (tensor<64x128xf32>) -> tensor<128x64xf32>
// ROW: fp8.amax %{{.+}} {octet.result_names = ["fc1.input_amax"], rowwise = true} : tensor<4x64xf32> -> tensor<4x1xf32>
// ROW: fp8.dynamic_scale %{{.+}} {format = f8E4M3FN, octet.result_names = ["fc1.input_scale", "fc1.input_scale_inv"], power_of_two = true} : tensor<4x1xf32>
// ROW: fp8.gemm {{.*}} {transpose_b = true} : (tensor<4x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<4x1xf32>, tensor<128x1xf32>) -> tensor<4x128xf32>

// override-linear-precision=fprop: amax/scales still computed, the GEMM stays in high precision.
// HP-LABEL: func.func @main_graph
// HP: fp8.dynamic_scale
// HP-NOT: fp8.gemm
// HP: onnx.MatMul

// FLAG-LABEL: func.func @main_graph
// FLAG-NOT: fp8.linear
// FLAG: fp8.dynamic_scale {{.*}}power_of_two = true
