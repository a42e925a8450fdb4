// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{shard-world-size=2 bucket-bytes=64})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{shard-world-size=2 bucket-bytes=64 unit=parameter})' | FileCheck %s --check-prefix=PARAM
// RUN: not fp8-opt %s -o /dev/null --pass-pipeline='builtin.module(octet-data-parallel{shard-world-size=2 unit=block})' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: octet-data-parallel: unit 'block' is not known; use layer or parameter

// unit=layer (the default): the large gradients of one layer ("h.0.", its first numbered name
// part) share one reduce-scatter, after the last of them is complete. Each is flattened, padded to
// N rows (40 -> 2 x 20, 20 -> 2 x 10), the rows concatenated side by side, so that rank r's half of
// the whole is its shard of each; the shards are sliced back at the return. "wte" is in no layer
// and goes alone, right after it is complete.
// CHECK-LABEL: func.func @one_layer
// CHECK-SAME: tensor<20xf32> {octet.grad_of = "h.0.attn.w", octet.grad_shards = 2 : i64
// CHECK-SAME: tensor<10xf32> {octet.grad_of = "h.0.mlp.w", octet.grad_shards = 2 : i64
// CHECK-SAME: tensor<18xf32> {octet.grad_of = "wte", octet.grad_shards = 2 : i64
// CHECK: %[[E:.+]] = fp8.reduce_scatter %{{.+}} {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<36xf32> -> tensor<18xf32>
// CHECK: %[[A:.+]] = onnx.Reshape %{{.+}} : (tensor<40xf32>, tensor<2xi64>) -> tensor<2x20xf32>
// CHECK: %[[B:.+]] = onnx.Reshape %{{.+}} : (tensor<20xf32>, tensor<2xi64>) -> tensor<2x10xf32>
// CHECK: %[[C:.+]] = onnx.Concat %[[A]], %[[B]] {axis = 1 : si64} : (tensor<2x20xf32>, tensor<2x10xf32>) -> tensor<2x30xf32>
// CHECK: %[[F:.+]] = onnx.Reshape %[[C]], %{{.+}} -> tensor<60xf32>
// CHECK: %[[S:.+]] = fp8.reduce_scatter %[[F]] {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<60xf32> -> tensor<30xf32>
// CHECK-NOT: fp8.reduce_scatter
// CHECK: %[[S1:.+]] = onnx.Slice %[[S]], {{.+}} -> tensor<20xf32>
// CHECK: %[[S2:.+]] = onnx.Slice %[[S]], {{.+}} -> tensor<10xf32>
// CHECK: return %{{.+}}, %[[S1]], %[[S2]], %[[E]]
// unit=parameter: one reduce-scatter each.
// PARAM-LABEL: func.func @one_layer
// PARAM-COUNT-3: fp8.reduce_scatter
// PARAM-NOT: onnx.Concat {{.+}} {axis = 1
func.func @one_layer(%l: tensor<f32>, %gw: tensor<8x5xf32>, %gm: tensor<4x5xf32>, %ge: tensor<6x6xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<8x5xf32> {octet.grad_of = "h.0.attn.w", onnx.name = "h.0.attn.w.grad"},
        tensor<4x5xf32> {octet.grad_of = "h.0.mlp.w", onnx.name = "h.0.mlp.w.grad"},
        tensor<6x6xf32> {octet.grad_of = "wte", onnx.name = "wte.grad"}) {
  %w = onnx.initializer "h.0.attn.w" = dense<1.0> : tensor<8x5xf32>
  %m = onnx.initializer "h.0.mlp.w" = dense<1.0> : tensor<4x5xf32>
  %e = onnx.initializer "wte" = dense<1.0> : tensor<6x6xf32>
  %ge2 = onnx.node "Neg"(%ge) : (tensor<6x6xf32>) -> tensor<6x6xf32>
  return %l, %gw, %gm, %ge2 : tensor<f32>, tensor<8x5xf32>, tensor<4x5xf32>, tensor<6x6xf32>
}
