// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te amax-history-len=16})' | FileCheck %s --check-prefix=TE
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te pad-inner-dim=true override-linear-precision=fprop,wgrad})' | FileCheck %s --check-prefix=PAD
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=ao pad-inner-dim=true})' | FileCheck %s --check-prefix=AO
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=ao ao-recipe=rowwise keep-first-last=false pad-inner-dim=true module-filter=^fc})' | FileCheck %s --check-prefix=FILTER
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=msamp opt-level=O3})' | FileCheck %s --check-prefix=MSAMP
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te eval=true})' | FileCheck %s --check-prefix=EVAL
// RUN: fp8-opt %S/Inputs/mlp.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{keep-output-layer=false recipe=te eval=true use-autocast-during-eval=true interval=4 fp8-format=E4M3 margin=2 amax-compute-algo=most_recent})' | FileCheck %s --check-prefix=AUTOCAST
// RUN: fp8-opt %s -split-input-file -verify-diagnostics -o /dev/null --pass-pipeline='builtin.module(octet-fp8-substitute{keep-output-layer=false recipe=tee})'
// RUN: not fp8-opt %S/Inputs/mlp.mlir -o /dev/null --pass-pipeline='builtin.module(octet-fp8-substitute{keep-output-layer=false recipe=ao ao-recipe=blockwise})' 2>&1 | FileCheck %s --check-prefix=BADAO
// RUN: fp8-opt %S/Inputs/mlp.mlir --octet-raise-layers --octet-fp8-substitute='keep-output-layer=false recipe=ao keep-first-last=false pad-inner-dim=true' | FileCheck %s --check-prefix=FLAG

// te: state initializers for the FP8 layer, dims not multiples of 16 kept (Accelerate's rule).
// TE-LABEL: func.func @main_graph
// TE-DAG: onnx.initializer "fc1.fp8.input.amax_history" = dense<0.000000e+00> : tensor<16xf32> {octet.fp8_state}
// TE-DAG: onnx.initializer "fc1.fp8.weight.scale_inv" = dense<1.000000e+00> : tensor<f32> {octet.fp8_state, octet.fp8_weight_scaling}
// TE: fp8.linear "fc1" %{{.+}}, %{{.+}} state(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) {grad_format = f8E5M2, input_format = f8E4M3FN, recipe = "te", scaling = #fp8.scaling<delayed>, weight_format = f8E4M3FN}
// TE: nn.linear "fc2"({{.*}}) {octet.fp8_kept = "dims"}
// TE: nn.linear "head"({{.*}}) {octet.fp8_kept = "dims", transpose_weight = true}

// PAD-LABEL: func.func @main_graph
// PAD: fp8.linear "fc1" {{.*}}fprop_high_precision = true{{.*}}wgrad_high_precision = true
// PAD: fp8.linear "fc2" {{.*}}octet.padded_from = array<i64: 128, 24>{{.*}} : (tensor<4x128xf32>, tensor<128x32xf32>
// PAD: fp8.linear "head" {{.*}}transpose_weight = true

// ao: the first and last Linear stay in high precision.
// AO-LABEL: func.func @main_graph
// AO-NOT: onnx.initializer "{{.*}}fp8
// AO: nn.linear "fc1"({{.*}}) {octet.fp8_kept = "first"}
// AO: fp8.linear "fc2" {{.*}}recipe = "ao:tensorwise", scaling = #fp8.scaling<dynamic>
// AO: nn.linear "head"({{.*}}) {octet.fp8_kept = "last", transpose_weight = true}

// FILTER-LABEL: func.func @main_graph
// FILTER: fp8.linear "fc1" {{.*}}grad_format = f8E4M3FN{{.*}}power_of_two = true, recipe = "ao:rowwise", rowwise = true
// FILTER: fp8.linear "fc2"
// FILTER: nn.linear "head"({{.*}}) {octet.fp8_kept = "filter"

// MSAMP-LABEL: func.func @main_graph
// MSAMP: fp8.linear "fc1" {{.*}}power_of_two = true, recipe = "msamp:O3", scaling = #fp8.scaling<dynamic>

// EVAL-LABEL: func.func @main_graph
// EVAL-NOT: fp8.linear
// EVAL: nn.linear "fc1"({{.*}}) {octet.fp8_kept = "eval"}

// AUTOCAST-LABEL: func.func @main_graph
// AUTOCAST: onnx.initializer "octet.fp8.step" = dense<0> : tensor<i64> {octet.fp8_state}
// AUTOCAST: fp8.linear "fc1" {{.*}} {algo = #fp8.amax_algo<most_recent>, grad_format = f8E4M3FN, input_format = f8E4M3FN, interval = 4 : si64, margin = 2 : si64

// expected-error @+1 {{octet-fp8-substitute: recipe='tee' is not valid; use one of: te, ao, msamp}}
module {
}
// BADAO: ao-recipe='blockwise' is not valid; use one of: tensorwise, rowwise, rowwise_with_gw_hp

// FLAG-LABEL: func.func @main_graph
// FLAG-COUNT-3: fp8.linear
