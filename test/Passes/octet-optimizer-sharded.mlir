// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-optimizer{clip-grad-norm=1.0 weight-decay=0.1})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-optimizer{msamp-level=O3})' | FileCheck %s --check-prefix=O3

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

// -----

// MS-AMP O3 (msamp-level=O3) with a reduce-scattered FP8 weight gradient: the rank's state is its
// shard of the flattened, zero-padded FP16 master (role master_shard; the whole weight rides along
// as octet.shard_init, which a rank slices at load), so no rank holds the whole master. The step
// starts by gathering the forward weight as FP8 codes: the shards' amaxes all-reduced (max) into
// the power-of-2 scale the whole master gives, each shard cast, the codes all-gathered, the padding
// cut off, dequantized. The update writes the shard back; nothing is gathered at the step's end.
// Without O3 (the default RUN line) the FP8 weight is an ordinary sharded parameter.
// O3-LABEL: func.func @o3_sharded
// O3-SAME: tensor<18xf16> {octet.state_update = "fc.weight", onnx.name = "fc.weight.next"}
// O3: onnx.initializer "fc.weight" = dense<0.000000e+00> : tensor<18xf16> {octet.fp8_state, octet.role = "master_shard", octet.shard_init = dense<5.000000e-01> : tensor<5x7xf16>, octet.shards = 2 : i64}
// O3: %[[UP:.+]] = onnx.Cast %{{.+}} {to = 1 : si64} : (tensor<18xf16>) -> tensor<18xf32>
// O3-NEXT: %[[A:.+]] = fp8.amax %[[UP]] : tensor<18xf32> -> tensor<f32>
// O3-NEXT: %[[ALL:.+]] = fp8.all_reduce %[[A]] {reduction = #fp8.reduction<max>} : tensor<f32> -> tensor<f32>
// O3-NEXT: %{{.+}}, %[[SI:.+]] = fp8.dynamic_scale %[[ALL]] {format = f8E4M3FN, power_of_two = true}
// O3-NEXT: %[[Q:.+]] = fp8.cast %[[UP]], %[[SI]] : tensor<18xf32>, tensor<f32> -> tensor<18xf8E4M3FN>
// O3-NEXT: %[[G:.+]] = fp8.all_gather %[[Q]] {world_size = 2 : i64} : tensor<18xf8E4M3FN> -> tensor<36xf8E4M3FN>
// O3: %[[CUT:.+]] = onnx.Slice %[[G]], {{.+}} -> tensor<35xf8E4M3FN>
// O3: %[[W8:.+]] = onnx.Reshape %[[CUT]], %{{.+}} -> tensor<5x7xf8E4M3FN>
// O3-NEXT: %[[W:.+]] = fp8.dequantize %[[W8]], %[[SI]] : tensor<5x7xf8E4M3FN>, tensor<f32> -> tensor<5x7xf32>
// O3-NEXT: fp8.linear "fc" %arg0, %[[W]]
// O3-NOT: fp8.all_gather
// O3: %[[V:.+]] = onnx.Cast %{{.+}} {to = 10 : si64} : (tensor<18xf32>) -> tensor<18xf16>
// O3-NEXT: %[[NEXT:.+]] = onnx.Cast %{{.+}} {to = 10 : si64} : (tensor<18xf32>) -> tensor<18xf16>
// O3-NEXT: return {{.+}}, %[[V]], %[[NEXT]] :
// CHECK-LABEL: func.func @o3_sharded
// CHECK: onnx.initializer "fc.weight" = dense<5.000000e-01> : tensor<5x7xf32> {octet.fp8_state, octet.role = "weight"}
// CHECK: fp8.all_gather %{{.+}} {world_size = 2 : i64} : tensor<18xf32> -> tensor<36xf32>
func.func @o3_sharded(%x: tensor<4x5xf32>, %l: tensor<f32>, %gw: tensor<18xf32>)
    -> (tensor<4x7xf32> {onnx.name = "y"}, tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<18xf32> {octet.grad_of = "fc.weight", octet.grad_shards = 2 : i64, onnx.name = "fc.weight.grad"}) {
  %w = onnx.initializer "fc.weight" = dense<0.5> : tensor<5x7xf32>
  %y = fp8.linear "fc" %x, %w {recipe = "msamp", scaling = #fp8.scaling<dynamic>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<4x5xf32>, tensor<5x7xf32>) -> tensor<4x7xf32>
  return %y, %l, %gw : tensor<4x7xf32>, tensor<f32>, tensor<18xf32>
}
