// octet-optimizer{fuse-msamp-adam=true} (fp8-opt --fuse-msamp-adam, on by default for plans): under
// MS-AMP O2 and O3 each FP8 Linear's weight is updated by one fp8.adam_step, which takes the
// FP16 weight, the unclipped gradient with the clipping coefficient, the FP8 and FP16 moments with
// their scale_invs, AdamW's decay, the step size and sqrt(1 - beta2^t); the float32 moments,
// their amaxes and casts are gone. Weights kept in high precision (head) keep the float32 ops;
// Adam's L2 term (in the gradient, from the float32 weight) keeps them too; off, no fp8.adam_step.
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O2 fuse-msamp-adam=true clip-grad-norm=1.0 weight-decay=0.1},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=O2
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O3 fuse-msamp-adam=true},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=O3
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O2 fuse-msamp-adam=true optimizer=adam weight-decay=0.1},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=L2
// RUN: fp8-opt %S/Inputs/mlp-loss.mlir -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp pad-inner-dim=true},octet-lower-layers,octet-autodiff,octet-optimizer{msamp-level=O2},octet-fp8-expand,cse)' | FileCheck %s --check-prefix=OFF

// O2-LABEL: func.func @main_graph
// O2: %[[W1:.*]] = onnx.initializer "fc1.weight" = {{.*}} : tensor<64x128xf16>
// O2: %[[W2:.*]] = onnx.initializer "fc2.weight" = {{.*}} : tensor<128x24xf16>
// O2: %[[M2:.*]] = onnx.initializer "fc2.weight.exp_avg" = {{.*}} : tensor<128x24xf8E4M3FN>
// O2: %[[MS2:.*]] = onnx.initializer "fc2.weight.exp_avg.scale_inv"
// O2: %[[V2:.*]] = onnx.initializer "fc2.weight.exp_avg_sq" = {{.*}} : tensor<128x24xf16>
// O2: %[[VS2:.*]] = onnx.initializer "fc2.weight.exp_avg_sq.scale_inv"
// The clipping coefficient goes in as an operand, not as a Mul of the gradient.
// The weight gradient goes in as its E4M3 codes (MS-AMP's format) and scale_inv (what fp8.dequantize reads for the
// gradient norm).
// O2: %[[G2:.*]] = fp8.cast %{{.*}}, %[[GS2:.*]] : tensor<128x24xf32>, tensor<f32> -> tensor<128x24xf8E4M3FN>
// O2: fp8.dequantize %[[G2]], %[[GS2]]
// O2: %[[COEF:.*]] = onnx.Min
// O2-NOT: onnx.Mul %{{.*}}, %[[COEF]] : (tensor<128x24xf32>
// O2: fp8.adam_step %[[W2]], %[[G2]], %[[GS2]], %[[M2]], %[[MS2]], %[[V2]], %[[VS2]], %[[COEF]], %{{.*}}, %{{.*}}, %{{.*}} {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, eps = 9.99999993E-9 : f32, one_minus_beta1 = 1.000000e-01 : f32, one_minus_beta2 = 1.000000e-03 : f32} : (tensor<128x24xf16>, tensor<128x24xf8E4M3FN>, tensor<f32>, tensor<128x24xf8E4M3FN>, tensor<f32>, tensor<128x24xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<128x24xf16>, tensor<128x24xf8E4M3FN>, tensor<f32>, tensor<128x24xf16>, tensor<f32>)
// O2-NEXT: fp8.adam_step %[[W1]], {{.*}} -> (tensor<64x128xf16>, tensor<64x128xf8E4M3FN>, tensor<f32>, tensor<64x128xf16>, tensor<f32>)
// No float32 moment of an FP8 weight is quantized by ops of its own.
// O2-NOT: fp8.amax %{{.*}} : tensor<128x24xf32>
// O2-NOT: onnx.Cast %{{.*}} -> tensor<128x24xf16>
// O2: return

// Level O3 takes the FP16 master weight as the operand (the forward pass reads its FP8 round trip).
// O3-LABEL: func.func @main_graph
// O3: %[[W2:.*]] = onnx.initializer "fc2.weight" = {{.*}} : tensor<128x24xf16> {octet.fp8_state, octet.role = "master_weight"}
// O3: fp8.adam_step %[[W2]], {{.*}}(tensor<128x24xf16>, tensor<128x24xf8E4M3FN>, tensor<f32>

// L2-LABEL: func.func @main_graph
// L2-NOT: fp8.adam_step
// L2: fp8.amax %{{.*}} : tensor<128x24xf32>
// L2: return

// OFF-LABEL: func.func @main_graph
// OFF-NOT: fp8.adam_step
// OFF: fp8.amax %{{.*}} : tensor<128x24xf32>
// OFF: return
