// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-optimizer{shard-parameters=true})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-optimizer{shard-parameters=true msamp-level=O1})' | FileCheck %s --check-prefix=O1
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-optimizer{shard-parameters=true msamp-level=O3})' | FileCheck %s --check-prefix=O3

// ZeRO-3: a parameter whose gradient arrives reduce-scattered (octet.grad_shards) is held as this
// rank's shard of the flattened, zero-padded weight (role weight_shard; the plan carries the whole
// weight in octet.shard_init, each rank slices its part at load). The step reads it through an
// all-gather marked for octet-gather-parameters, the padding cut off; the update reads and writes
// the shard, never gathered (the next step gathers it). A replicated parameter is as before.
// CHECK-LABEL: func.func @sharded
// CHECK-SAME: tensor<14xf32> {octet.state_update = "w.exp_avg", onnx.name = "w.exp_avg.next"}
// CHECK-SAME: tensor<14xf32> {octet.state_update = "w", onnx.name = "w.next"}
// CHECK-SAME: tensor<4xf32> {octet.state_update = "b", onnx.name = "b.next"}
// CHECK: %[[W:.+]] = onnx.initializer "w" = dense<0.000000e+00> : tensor<14xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.000000e+00> : tensor<8x5xf32>, octet.shards = 3 : i64}
// CHECK: onnx.initializer "b" = dense<0.000000e+00> : tensor<4xf32> {octet.fp8_state, octet.role = "weight"}
// CHECK: onnx.initializer "w.exp_avg" = dense<0.000000e+00> : tensor<14xf32> {octet.fp8_state, octet.role = "optimizer_shard"}
// CHECK: %[[G:.+]] = fp8.all_gather %[[W]] {octet.parameter_gather, world_size = 3 : i64} : tensor<14xf32> -> tensor<42xf32>
// CHECK: %[[CUT:.+]] = onnx.Slice %[[G]], {{.+}} -> tensor<40xf32>
// CHECK: %[[WHOLE:.+]] = onnx.Reshape %[[CUT]], %{{.+}} -> tensor<8x5xf32>
// CHECK-NEXT: %[[Y:.+]] = onnx.node "MatMul"(%[[WHOLE]], %arg3)
// CHECK-NOT: fp8.all_gather
// CHECK-NOT: fp8.shard
// CHECK: return %arg0, %arg2, %[[Y]],
func.func @sharded(%l: tensor<f32>, %gw: tensor<14xf32>, %gb: tensor<4xf32>, %x: tensor<5xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<14xf32> {octet.grad_of = "w", octet.grad_shards = 3 : i64, onnx.name = "w.grad"},
        tensor<4xf32> {octet.grad_of = "b", onnx.name = "b.grad"}, tensor<8xf32>) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<8x5xf32>
  %b = onnx.initializer "b" = dense<0.0> : tensor<4xf32>
  %y = onnx.node "MatMul"(%w, %x) : (tensor<8x5xf32>, tensor<5xf32>) -> tensor<8xf32>
  return %l, %gw, %gb, %y : tensor<f32>, tensor<14xf32>, tensor<4xf32>, tensor<8xf32>
}

// -----

// An FP8 Linear's weight. Float32 weights: sharded as float32. MS-AMP O1 with FP16 weights: the
// shard is FP16 (the whole converted in octet.shard_init), gathered as FP16 (half float32's
// bytes) and widened for the layer; the update widens the shard and rounds the new one to FP16.
// Under MS-AMP O3 the master is the shard, gathered as FP8 codes (the sharded optimizer's O3 path), the
// gather marked too.
// CHECK-LABEL: func.func @fp8_weight
// CHECK: onnx.initializer "fc.weight" = dense<0.000000e+00> : tensor<18xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<5.000000e-01> : tensor<5x7xf32>, octet.shards = 2 : i64}
// O1-LABEL: func.func @fp8_weight
// O1-SAME: tensor<18xf16> {octet.state_update = "fc.weight", onnx.name = "fc.weight.next"}
// O1: %[[W:.+]] = onnx.initializer "fc.weight" = dense<0.000000e+00> : tensor<18xf16> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<5.000000e-01> : tensor<5x7xf16>, octet.shards = 2 : i64}
// O1: %[[G:.+]] = fp8.all_gather %[[W]] {octet.parameter_gather, world_size = 2 : i64} : tensor<18xf16> -> tensor<36xf16>
// O1: %[[R:.+]] = onnx.Reshape %{{.+}} -> tensor<5x7xf16>
// O1-NEXT: %[[UP:.+]] = onnx.Cast %[[R]] {to = 1 : si64} : (tensor<5x7xf16>) -> tensor<5x7xf32>
// O1: fp8.linear "fc" %arg0, %[[UP]]
// O1-NOT: fp8.all_gather
// O1: %[[NEXT:.+]] = onnx.Cast %{{.+}} {to = 10 : si64} : (tensor<18xf32>) -> tensor<18xf16>
// O1-NEXT: return {{.+}}, %[[NEXT]] :
// O3-LABEL: func.func @fp8_weight
// O3: onnx.initializer "fc.weight" = dense<0.000000e+00> : tensor<18xf16> {octet.fp8_state, octet.role = "master_shard", octet.shard_init = dense<5.000000e-01> : tensor<5x7xf16>, octet.shards = 2 : i64}
// O3: fp8.all_gather %{{.+}} {octet.parameter_gather, world_size = 2 : i64} : tensor<18xf8E4M3FN> -> tensor<36xf8E4M3FN>
func.func @fp8_weight(%x: tensor<4x5xf32>, %l: tensor<f32>, %gw: tensor<18xf32>)
    -> (tensor<4x7xf32> {onnx.name = "y"}, tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<18xf32> {octet.grad_of = "fc.weight", octet.grad_shards = 2 : i64, onnx.name = "fc.weight.grad"}) {
  %w = onnx.initializer "fc.weight" = dense<0.5> : tensor<5x7xf32>
  %y = fp8.linear "fc" %x, %w {recipe = "msamp", scaling = #fp8.scaling<dynamic>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<4x5xf32>, tensor<5x7xf32>) -> tensor<4x7xf32>
  return %y, %l, %gw : tensor<4x7xf32>, tensor<f32>, tensor<18xf32>
}
