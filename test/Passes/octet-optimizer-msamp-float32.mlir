// octet-optimizer's msamp-float32: `weights` keeps each FP8 Linear's weight a float32 state
// (no FP16 initializer, no Cast to float16 of the updated weight), `gradients` keeps its weight
// gradient float32 (no FP8 round trip: no octet.grad_storage on the gradient result); under
// fuse-msamp-adam the fp8.adam_step then reads and writes a float32 weight. Parameters outside FP8
// Linears and MS-AMP's moments are untouched. Under O3 `weights` keeps the float32 master (role
// master_weight) and the forward pass reads its FP8 copy (a power-of-2 cast and its dequantize).
// Errors name the option: an unknown part, no msamp-level.
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O1 msamp-float32=weights})' | FileCheck %s --check-prefix=W --implicit-check-not='tensor<64x128xf16>'
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O1 msamp-float32=gradients})' | FileCheck %s --check-prefix=G --implicit-check-not=octet.grad_storage
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O1})' | FileCheck %s --check-prefix=MSAMP
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O2 msamp-float32=weights,gradients fuse-msamp-adam=true})' | FileCheck %s --check-prefix=FUSED
// RUN: not fp8-opt %S/Inputs/mlp-loss.mlir -o /dev/null --pass-pipeline='builtin.module(octet-autodiff,octet-optimizer{msamp-level=O2 msamp-float32=moments})' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fp8-opt %S/Inputs/mlp-loss.mlir -o /dev/null --pass-pipeline='builtin.module(octet-autodiff,octet-optimizer{msamp-float32=weights})' 2>&1 | FileCheck %s --check-prefix=NOLEVEL
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O3 msamp-float32=weights})' | FileCheck %s --check-prefix=O3

// W-LABEL: func.func @main_graph
// W-SAME: tensor<64x128xf32> {octet.grad_of = "fc1.weight", octet.grad_storage = f8E4M3FN
// W: onnx.initializer "fc1.weight" = {{.*}} : tensor<64x128xf32> {octet.fp8_state, octet.role = "weight"}
// W-NOT: onnx.Cast {{.*}}to = 10
// W: return

// G-LABEL: func.func @main_graph
// G: onnx.initializer "fc1.weight" = {{.*}} : tensor<64x128xf16> {octet.fp8_state, octet.role = "weight"}
// G: onnx.Cast {{.*}}to = 10 : si64{{.*}} -> tensor<64x128xf16>

// MSAMP-LABEL: func.func @main_graph
// MSAMP-SAME: tensor<64x128xf32> {octet.grad_of = "fc1.weight", octet.grad_storage = f8E4M3FN
// MSAMP: onnx.initializer "fc1.weight" = {{.*}} : tensor<64x128xf16>

// FUSED-LABEL: func.func @main_graph
// FUSED: fp8.adam_step {{.+}} : (tensor<64x128xf32>, tensor<64x128xf32>, tensor<f32>, tensor<64x128xf8E4M3FN>,
// FUSED-SAME: -> (tensor<64x128xf32>, tensor<64x128xf8E4M3FN>, tensor<f32>, tensor<64x128xf16>, tensor<f32>)

// BAD-LABEL: error: octet-optimizer: msamp-float32='moments' is not valid; use weights and/or gradients
// NOLEVEL-LABEL: error: octet-optimizer: msamp-float32 needs an msamp-level

// O3-LABEL: func.func @main_graph
// O3-SAME: tensor<64x128xf32> {octet.state_update = "fc1.weight", onnx.name = "fc1.weight.next"}
// O3: %[[MASTER:.+]] = onnx.initializer "fc1.weight" = {{.*}} : tensor<64x128xf32> {octet.fp8_state, octet.role = "master_weight"}
// O3: fp8.amax %[[MASTER]] :
// O3: %[[CODES:.+]] = fp8.cast %[[MASTER]], %{{.+}} -> tensor<64x128xf8E4M3FN>
// O3: %[[COPY:.+]] = fp8.dequantize %[[CODES]],
// O3: fp8.linear "fc1" %{{.+}}, %[[COPY]] {
// O3: onnx.Sub %[[MASTER]], {{.*}} -> tensor<64x128xf32>
// O3: return
