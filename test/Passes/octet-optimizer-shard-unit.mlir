// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-optimizer)' | FileCheck %s
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-optimizer{shard-unit=parameter})' | FileCheck %s --check-prefix=PARAM
// RUN: not fp8-opt %s -o /dev/null --pass-pipeline='builtin.module(octet-optimizer{shard-unit=block})' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: octet-optimizer: shard-unit='block' is not valid; use layer or parameter

// A sharded optimizer (ZeRO-2) with shard-unit=layer (the default): the updated shards of one
// layer's parameters ("h.0", the first numbered part of their names) are gathered by one
// all-gather after the last of them is updated (the optimizer goes from the smallest), side by
// side (5 + 14 of each rank's 19); each weight is taken back out of every rank's slice and its
// padding cut off. "wte" goes alone.
// CHECK-LABEL: func.func @one_layer
// CHECK: fp8.all_gather %{{.+}} {world_size = 3 : i64} : tensor<6xf32> -> tensor<18xf32>
// CHECK: %[[P:.+]] = onnx.Concat %{{.+}}, %{{.+}} {axis = 0 : si64} : (tensor<5xf32>, tensor<14xf32>) -> tensor<19xf32>
// CHECK-NEXT: %[[G:.+]] = fp8.all_gather %[[P]] {world_size = 3 : i64} : tensor<19xf32> -> tensor<57xf32>
// CHECK-NEXT: %[[R:.+]] = onnx.Reshape %[[G]], %{{.+}} -> tensor<3x19xf32>
// CHECK-NEXT: onnx.Slice %[[R]], {{.+}} -> tensor<3x5xf32>
// CHECK-NEXT: onnx.Reshape {{.+}} -> tensor<15xf32>
// CHECK-NEXT: onnx.Slice %[[R]], {{.+}} -> tensor<3x14xf32>
// CHECK-NEXT: onnx.Reshape {{.+}} -> tensor<42xf32>
// CHECK-NOT: fp8.all_gather
// CHECK: return
// PARAM-LABEL: func.func @one_layer
// PARAM-COUNT-3: fp8.all_gather
// PARAM-NOT: -> tensor<3x19xf32>
func.func @one_layer(%l: tensor<f32>, %gw: tensor<14xf32>, %gv: tensor<5xf32>, %ge: tensor<6xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<14xf32> {octet.grad_of = "h.0.w", octet.grad_shards = 3 : i64, onnx.name = "h.0.w.grad"},
        tensor<5xf32> {octet.grad_of = "h.0.v", octet.grad_shards = 3 : i64, onnx.name = "h.0.v.grad"},
        tensor<6xf32> {octet.grad_of = "wte", octet.grad_shards = 3 : i64, onnx.name = "wte.grad"}) {
  %w = onnx.initializer "h.0.w" = dense<1.0> : tensor<8x5xf32>
  %v = onnx.initializer "h.0.v" = dense<1.0> : tensor<15xf32>
  %e = onnx.initializer "wte" = dense<1.0> : tensor<3x6xf32>
  return %l, %gw, %gv, %ge : tensor<f32>, tensor<14xf32>, tensor<5xf32>, tensor<6xf32>
}
