// octet-optimizer's msamp-weight-rounding: `stochastic` rounds each FP8 Linear's updated FP16
// weight with fp8.stochastic_round (the step counter before its increment, the parameter's index
// as salt) where `nearest` (the default, MS-AMP's) casts it; under fuse-msamp-adam the
// fp8.adam_step takes the step as a 12th operand and the salt as rounding_salt. Parameters kept
// in float32 (the LayerNorm's) are untouched. Another value is an error naming the option.
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O1 msamp-weight-rounding=stochastic},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=SR
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O1},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=NEAREST --implicit-check-not=fp8.stochastic_round
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O2 msamp-weight-rounding=stochastic fuse-msamp-adam=true},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=FUSED --implicit-check-not=fp8.stochastic_round
// RUN: not fp8-opt %S/Inputs/mlp-loss.mlir -o /dev/null --pass-pipeline='builtin.module(octet-autodiff,octet-optimizer{msamp-level=O2 msamp-weight-rounding=down})' 2>&1 | FileCheck %s --check-prefix=BAD

// SR-LABEL: func.func @main_graph
// SR: %[[STEP:.+]] = onnx.initializer "octet.train.step"
// SR: fp8.stochastic_round %{{.+}}, %[[STEP]] {salt = 3 : i64} : tensor<128x24xf32>, tensor<i64> -> tensor<128x24xf16>
// SR: fp8.stochastic_round %{{.+}}, %[[STEP]] {salt = 2 : i64} : tensor<64x128xf32>, tensor<i64> -> tensor<64x128xf16>
// SR-NOT: fp8.stochastic_round
// SR: return

// NEAREST-LABEL: func.func @main_graph
// NEAREST: onnx.Cast {{.*}}to = 10 : si64{{.*}} -> tensor<64x128xf16>

// FUSED-LABEL: func.func @main_graph
// FUSED: %[[STEP:.+]] = onnx.initializer "octet.train.step"
// FUSED: fp8.adam_step {{.+}}, %[[STEP]] {{{.*}}rounding_salt = {{[0-9]+}} : i64{{.*}}} : (tensor<64x128xf16>,

// BAD-LABEL: error: octet-optimizer: msamp-weight-rounding='down' is not valid; use nearest or stochastic
