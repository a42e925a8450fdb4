// RUN: fp8-opt %s -split-input-file --octet-gather-parameters | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-gather-parameters{prefetch=0})' | FileCheck %s --check-prefix=P0
// RUN: not fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-gather-parameters{prefetch=-1})' 2>&1 | FileCheck %s --check-prefix=BAD

// Two sharded layers. Each gather moves to its first reader; w1's backward reader comes after
// w2 is read, so w1 is gathered again for it (the forward's copy dies after the first MatMul);
// w2's backward reader follows the loss with no other weight read in between, so its one gather
// serves both. With the default prefetch of 1 each all-gather is issued one gather early (the
// first two at the top, w1's second before w2's readers); the reshapes stay with the readers.
// CHECK-LABEL: func.func @two_layers
// CHECK: %[[S1:.+]] = onnx.initializer "w1"
// CHECK: %[[S2:.+]] = onnx.initializer "w2"
// CHECK: %[[G2:.+]] = fp8.all_gather %[[S2]] {octet.parameter_gather, world_size = 2 : i64}
// CHECK-NEXT: %[[G1:.+]] = fp8.all_gather %[[S1]] {octet.parameter_gather, world_size = 2 : i64}
// CHECK-NEXT: %[[W1:.+]] = onnx.Reshape %[[G1]]
// CHECK-NEXT: %[[H:.+]] = onnx.node "MatMul"(%arg0, %[[W1]])
// CHECK-NEXT: %[[G1B:.+]] = fp8.all_gather %[[S1]] {octet.parameter_gather, world_size = 2 : i64}
// CHECK-NEXT: %[[W2:.+]] = onnx.Reshape %[[G2]]
// CHECK-NEXT: %[[Y:.+]] = onnx.node "MatMul"(%[[H]], %[[W2]])
// CHECK-NEXT: onnx.node "ReduceSum"(%[[Y]])
// CHECK-NEXT: %[[DH:.+]] = onnx.node "MatMul"(%[[Y]], %[[W2]])
// CHECK-NEXT: %[[W1B:.+]] = onnx.Reshape %[[G1B]]
// CHECK-NEXT: onnx.node "MatMul"(%[[DH]], %[[W1B]])
// CHECK-NOT: fp8.all_gather
// P0-LABEL: func.func @two_layers
// P0: %[[G1:.+]] = fp8.all_gather %{{.+}} {octet.parameter_gather
// P0-NEXT: onnx.Reshape %[[G1]]
// P0-NEXT: %[[H:.+]] = onnx.node "MatMul"
// P0-NEXT: %[[G2:.+]] = fp8.all_gather %{{.+}} {octet.parameter_gather
// P0-NEXT: onnx.Reshape %[[G2]]
// P0-NEXT: onnx.node "MatMul"(%[[H]],
// P0-NEXT: onnx.node "ReduceSum"
// P0-NEXT: onnx.node "MatMul"
// P0-NEXT: %[[G1B:.+]] = fp8.all_gather %{{.+}} {octet.parameter_gather
// P0-NEXT: onnx.Reshape %[[G1B]]
// P0-NEXT: onnx.node "MatMul"
func.func @two_layers(%x: tensor<4x4xf32>) -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4x4xf32>, tensor<4x4xf32>) {
  %s1 = onnx.initializer "w1" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %s2 = onnx.initializer "w2" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<2.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %c = onnx.Constant {value = dense<[4, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %g1 = fp8.all_gather %s1 {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %w1 = onnx.Reshape %g1, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %g2 = fp8.all_gather %s2 {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %w2 = onnx.Reshape %g2, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %h = onnx.node "MatMul"(%x, %w1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = onnx.node "MatMul"(%h, %w2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = onnx.node "ReduceSum"(%y) {attrs = {keepdims = 0 : si64}} : (tensor<4x4xf32>) -> tensor<f32>
  %dh = onnx.node "MatMul"(%y, %w2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %dx = onnx.node "MatMul"(%dh, %w1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %l, %dh, %dx : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// An FP16 shard (MS-AMP's weights): the reshape and the widening cast move with the gather, and
// the backward's copy repeats both (w2, read in between, has no forward reader: one gather). An
// all-gather without the mark (a sharded optimizer's gather of updated weights) stays where it is.
// CHECK-LABEL: func.func @fp16_chain
// CHECK: %[[OTHER:.+]] = fp8.all_gather %arg1 {world_size = 2 : i64}
// CHECK-NEXT: %[[G2:.+]] = fp8.all_gather %{{.+}} {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32>
// CHECK-NEXT: %[[G:.+]] = fp8.all_gather %{{.+}} {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf16>
// CHECK-NEXT: %[[R:.+]] = onnx.Reshape %[[G]]
// CHECK-NEXT: %[[W:.+]] = onnx.Cast %[[R]] {to = 1 : si64} : (tensor<4x4xf16>) -> tensor<4x4xf32>
// CHECK-NEXT: onnx.node "MatMul"(%arg0, %[[W]])
// CHECK-NEXT: onnx.node "ReduceSum"
// CHECK-NEXT: %[[GB:.+]] = fp8.all_gather %{{.+}} {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf16>
// CHECK-NEXT: %[[W2:.+]] = onnx.Reshape %[[G2]]
// CHECK-NEXT: %[[O:.+]] = onnx.node "MatMul"(%arg0, %[[W2]])
// CHECK-NEXT: %[[RB:.+]] = onnx.Reshape %[[GB]]
// CHECK-NEXT: %[[WB:.+]] = onnx.Cast %[[RB]]
// CHECK-NEXT: onnx.node "MatMul"(%[[O]], %[[WB]])
// CHECK-NEXT: onnx.node "MatMul"(%arg0, %[[OTHER]])
func.func @fp16_chain(%x: tensor<4x4xf32>, %u: tensor<8xf32>) -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4x4xf32>, tensor<4x4xf32>) {
  %s = onnx.initializer "w" = dense<0.0> : tensor<8xf16> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf16>, octet.shards = 2 : i64}
  %s2 = onnx.initializer "w2" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %c = onnx.Constant {value = dense<[4, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %other = fp8.all_gather %u {world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %g = fp8.all_gather %s {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf16> -> tensor<16xf16>
  %r = onnx.Reshape %g, %c : (tensor<16xf16>, tensor<2xi64>) -> tensor<4x4xf16>
  %w = onnx.Cast %r {to = 1 : si64} : (tensor<4x4xf16>) -> tensor<4x4xf32>
  %g2 = fp8.all_gather %s2 {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %w2 = onnx.Reshape %g2, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %h = onnx.node "MatMul"(%x, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = onnx.node "ReduceSum"(%h) {attrs = {keepdims = 0 : si64}} : (tensor<4x4xf32>) -> tensor<f32>
  %o = onnx.node "MatMul"(%x, %w2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %d = onnx.node "MatMul"(%o, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e = onnx.node "MatMul"(%x, %other) : (tensor<4x4xf32>, tensor<16xf32>) -> tensor<4x4xf32>
  return %l, %d, %e : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// BAD: octet-gather-parameters: prefetch must be 0 or more, not -1
