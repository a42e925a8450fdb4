// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-optimizer{clip-grad-norm=1.0 weight-decay=0.1})' | FileCheck %s

// A gradient octet-data-parallel reduce-scattered (octet.grad_shards): this rank updates its shard
// of the flattened, padded weight (fp8.shard) with moments of the shard's size (role
// optimizer_shard: they differ by rank); the updated shards are all-gathered and the padding cut
// off, so the weight stays whole and equal on every rank. The clipping norm adds the shards'
// squares over the ranks (one all-reduce sum) to the replicated gradients'. The sharded gradient
// is no plan output (it is only a part). A replicated parameter is updated as before.
// CHECK-LABEL: func.func @sharded
// CHECK-NOT: w.grad
// CHECK-SAME: tensor<14xf32> {octet.state_update = "w.exp_avg", onnx.name = "w.exp_avg.next"}
// CHECK-SAME: tensor<8x5xf32> {octet.state_update = "w", onnx.name = "w.next"}
// CHECK-SAME: tensor<4xf32> {octet.state_update = "b", onnx.name = "b.next"}
// CHECK: onnx.initializer "b.exp_avg" = dense<0.000000e+00> : tensor<4xf32> {octet.fp8_state, octet.role = "optimizer"}
// CHECK: onnx.initializer "w.exp_avg" = dense<0.000000e+00> : tensor<14xf32> {octet.fp8_state, octet.role = "optimizer_shard"}
// CHECK: onnx.initializer "w.exp_avg_sq" = dense<0.000000e+00> : tensor<14xf32> {octet.fp8_state, octet.role = "optimizer_shard"}
// CHECK: %[[SQW:.+]] = onnx.node "ReduceSumSquare"(%arg1) {attrs = {keepdims = 0 : si64}} : (tensor<14xf32>) -> tensor<f32>
// CHECK-NEXT: %[[SQB:.+]] = onnx.node "ReduceSumSquare"(%arg2)
// CHECK-NEXT: %[[ALL:.+]] = fp8.all_reduce %[[SQW]] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: onnx.Add %[[SQB]], %[[ALL]]
// CHECK: %[[FLAT:.+]] = onnx.Reshape %0, %{{.+}} : (tensor<8x5xf32>, tensor<1xi64>) -> tensor<40xf32>
// CHECK: %[[PAD:.+]] = onnx.Concat %[[FLAT]], %{{.+}} {axis = 0 : si64} : (tensor<40xf32>, tensor<2xf32>) -> tensor<42xf32>
// CHECK-NEXT: %[[MINE:.+]] = fp8.shard %[[PAD]] {world_size = 3 : i64} : tensor<42xf32> -> tensor<14xf32>
// CHECK: %[[ALLW:.+]] = fp8.all_gather %{{.+}} {world_size = 3 : i64} : tensor<14xf32> -> tensor<42xf32>
// CHECK: %[[CUT:.+]] = onnx.Slice %[[ALLW]], {{.+}} -> tensor<40xf32>
// CHECK: %[[W:.+]] = onnx.Reshape %[[CUT]], %{{.+}} : (tensor<40xf32>, tensor<2xi64>) -> tensor<8x5xf32>
// CHECK: return {{.+}}, %[[W]],
func.func @sharded(%l: tensor<f32>, %gw: tensor<14xf32>, %gb: tensor<4xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<14xf32> {octet.grad_of = "w", octet.grad_shards = 3 : i64, onnx.name = "w.grad"},
        tensor<4xf32> {octet.grad_of = "b", onnx.name = "b.grad"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<8x5xf32>
  %b = onnx.initializer "b" = dense<0.0> : tensor<4xf32>
  return %l, %gw, %gb : tensor<f32>, tensor<14xf32>, tensor<4xf32>
}

// -----

// A 1-D weight whose length the world size divides: shards without padding, nothing cut off.
// CHECK-LABEL: func.func @no_padding
// CHECK: onnx.initializer "w.exp_avg" = dense<0.000000e+00> : tensor<2xf32> {octet.fp8_state, octet.role = "optimizer_shard"}
// CHECK: fp8.shard %{{.+}} {world_size = 2 : i64} : tensor<4xf32> -> tensor<2xf32>
// CHECK: fp8.all_gather %{{.+}} {world_size = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
// CHECK-NOT: onnx.Slice
func.func @no_padding(%l: tensor<f32>, %gw: tensor<2xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<2xf32> {octet.grad_of = "w", octet.grad_shards = 2 : i64, onnx.name = "w.grad"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<4xf32>
  return %l, %gw : tensor<f32>, tensor<2xf32>
}
