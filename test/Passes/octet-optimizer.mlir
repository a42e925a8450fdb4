// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --octet-autodiff --octet-optimizer | FileCheck %s
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-autodiff,octet-optimizer{optimizer=sgd lr=0.1 momentum=0.9 clip-grad-norm=1.0 schedule=cosine warmup-steps=10 total-steps=100 min-lr=0.001})' | FileCheck %s --check-prefix=SGD
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O2},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=LEVEL2 --implicit-check-not=64x128xf8E5M2
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O3},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=LEVEL3
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O1 msamp-grad-format=e5m2},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=GRADE5M2
// RUN: not fp8-opt %S/Inputs/mlp-loss.mlir -o /dev/null --pass-pipeline='builtin.module(octet-autodiff,octet-optimizer{optimizer=lamb})' 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: not fp8-opt %S/Inputs/mlp-loss.mlir -o /dev/null --pass-pipeline='builtin.module(octet-autodiff,octet-optimizer{msamp-level=O2 msamp-grad-format=e3m4})' 2>&1 | FileCheck %s --check-prefix=BADGRADFMT
// RUN: not fp8-opt %S/Inputs/mlp-loss.mlir -o /dev/null --pass-pipeline='builtin.module(octet-autodiff,octet-optimizer{schedule=cosine total-steps=0})' 2>&1 | FileCheck %s --check-prefix=BADSCHED
// RUN: not fp8-opt %S/Inputs/mlp-loss.mlir -o /dev/null --octet-optimizer 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-autodiff,octet-optimizer{keep-gradients=false})' | FileCheck %s --check-prefix=NOKEEP

// AdamW (default): parameters, moments and the step counter become state
// updated by the step; the learning rate and gradient norm are outputs.
// CHECK-LABEL: func.func @main_graph
// CHECK-SAME: {onnx.name = "octet.lr"}, tensor<f32> {onnx.name = "octet.grad_norm"}
// CHECK-SAME: {octet.state_update = "octet.train.step", onnx.name = "octet.train.step.next"}
// CHECK-SAME: {octet.state_update = "fc1.weight.exp_avg", onnx.name = "fc1.weight.exp_avg.next"}
// CHECK-SAME: {octet.state_update = "fc1.weight", onnx.name = "fc1.weight.next"}
// CHECK: onnx.initializer "fc1.weight" = dense<2.500000e-01> : tensor<64x128xf32> {octet.fp8_state, octet.role = "weight"}
// CHECK: onnx.initializer "octet.train.step" = dense<0> : tensor<i64> {octet.fp8_state, octet.role = "step"}
// CHECK: onnx.initializer "fc1.weight.exp_avg_sq" = dense<0.000000e+00> : tensor<64x128xf32> {octet.fp8_state, octet.role = "optimizer"}
// The global gradient norm reads each gradient once: one ReduceSumSquare per parameter, all of
// them before their sum (side by side, for one launch).
// CHECK: onnx.node "ReduceSumSquare"(%{{.*}}) {attrs = {keepdims = 0 : si64}} : (tensor<64x128xf32>) -> tensor<f32>
// CHECK-NEXT: onnx.node "ReduceSumSquare"
// CHECK-NOT: onnx.Add
// CHECK: onnx.node "ReduceSumSquare"
// CHECK-NEXT: onnx.Add
// CHECK: onnx.Sqrt %{{.*}} : (tensor<f32>) -> tensor<f32>

// SGD with momentum, clipping and warmup + cosine.
// SGD-LABEL: func.func @main_graph
// SGD-SAME: {octet.state_update = "fc1.weight.momentum_buffer", onnx.name = "fc1.weight.momentum_buffer.next"}
// SGD: onnx.Cos
// SGD: onnx.Where
// SGD: onnx.Min

// MS-AMP level 2: FP8 Linear weights in FP16, their gradients in FP8 (E4M3, as MS-AMP holds
// them), the first moment in FP8 with a scale, the second in FP16 with a scale.
// LEVEL2-LABEL: func.func @main_graph
// LEVEL2-SAME: {octet.grad_of = "fc1.weight", octet.grad_storage = f8E4M3FN, onnx.name = "fc1.weight.grad"}
// LEVEL2: onnx.initializer "ln.weight" = dense<1.000000e+00> : tensor<64xf32> {octet.fp8_state, octet.role = "weight"}
// LEVEL2: onnx.initializer "fc1.weight" = dense<2.500000e-01> : tensor<64x128xf16> {octet.fp8_state, octet.role = "weight"}
// LEVEL2: onnx.initializer "fc1.weight.exp_avg" = dense<0.000000e+00> : tensor<64x128xf8E4M3FN> {octet.fp8_state, octet.role = "optimizer"}
// LEVEL2: onnx.initializer "fc1.weight.exp_avg_sq" = dense<0.000000e+00> : tensor<64x128xf16> {octet.fp8_state, octet.role = "optimizer"}
// LEVEL2: fp8.dequantize {{.*}} : tensor<64x128xf8E4M3FN>, tensor<f32> -> tensor<64x128xf32>

// MS-AMP level 3: an FP16 master weight; the forward pass uses its FP8 copy.
// LEVEL3-LABEL: func.func @main_graph
// LEVEL3: onnx.initializer "fc1.weight" = dense<2.500000e-01> : tensor<64x128xf16> {octet.fp8_state, octet.role = "master_weight"}
// LEVEL3: fp8.cast {{.*}} -> tensor<64x128xf8E4M3FN>
// LEVEL3: fp8.dequantize

// BADOPT: error: octet-optimizer: optimizer='lamb' is not valid; use sgd, adam or adamw
// BADGRADFMT: error: octet-optimizer: msamp-grad-format='e3m4' is not valid; use e4m3 or e5m2
// BADSCHED: error: octet-optimizer: total-steps='0' is not valid; use an integer > warmup-steps with schedule=cosine
// NOGRAD: error: octet-optimizer: the function has no gradients; run octet-autodiff first

// keep-gradients=false: the gradients are no longer results (each dies in its update).
// NOKEEP-LABEL: func.func @main_graph
// NOKEEP-NOT: octet.grad_of
// NOKEEP-SAME: {onnx.name = "octet.lr"}
// NOKEEP-SAME: {octet.state_update = "fc1.weight", onnx.name = "fc1.weight.next"}

// msamp-grad-format=e5m2: the weight gradients held in E5M2 instead (fp8-opt
// --fp8-all-reduce-format=e5m2), here under O1 (FP16 weights, float32 moments).
// GRADE5M2-LABEL: func.func @main_graph
// GRADE5M2-SAME: {octet.grad_of = "fc1.weight", octet.grad_storage = f8E5M2, onnx.name = "fc1.weight.grad"}
// GRADE5M2: onnx.initializer "fc1.weight" = dense<2.500000e-01> : tensor<64x128xf16>
// GRADE5M2: onnx.initializer "fc1.weight.exp_avg" = dense<0.000000e+00> : tensor<64x128xf32>
// GRADE5M2: fp8.cast {{.*}} -> tensor<64x128xf8E5M2>
