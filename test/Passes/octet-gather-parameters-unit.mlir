// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-gather-parameters{prefetch=0})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-gather-parameters{prefetch=0 unit=parameter})' | FileCheck %s --check-prefix=PARAM
// RUN: not fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-gather-parameters{unit=block})' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: octet-gather-parameters: unit 'block' is not known; use layer or parameter

// unit=layer (the default): the sharded parameters of one layer ("h.0", the first numbered part of
// their names) are gathered by one all-gather of their shards side by side, before the first
// reader of any of them; each weight is taken back out of every rank's slice (rows of 8 + 2, the
// first 8 of each row h.0.a's, the last 2 h.0.b's). "wte", in no layer, is gathered alone.
// CHECK-LABEL: func.func @one_layer
// CHECK: %[[A:.+]] = onnx.initializer "h.0.a"
// CHECK: %[[B:.+]] = onnx.initializer "h.0.b"
// CHECK: %[[E:.+]] = onnx.initializer "wte"
// CHECK: %[[GE:.+]] = fp8.all_gather %[[E]] {octet.parameter_gather, world_size = 2 : i64}
// CHECK: %[[P:.+]] = onnx.Concat %[[A]], %[[B]] {axis = 0 : si64} : (tensor<8xf32>, tensor<2xf32>) -> tensor<10xf32>
// CHECK-NEXT: %[[G:.+]] = fp8.all_gather %[[P]] {octet.parameter_gather, world_size = 2 : i64} : tensor<10xf32> -> tensor<20xf32>
// CHECK-NEXT: %[[R:.+]] = onnx.Reshape %[[G]], %{{.+}} -> tensor<2x10xf32>
// CHECK-NEXT: %[[SA:.+]] = onnx.Slice %[[R]], {{.+}} -> tensor<2x8xf32>
// CHECK-NEXT: %[[FA:.+]] = onnx.Reshape %[[SA]], %{{.+}} -> tensor<16xf32>
// CHECK-NEXT: %[[SB:.+]] = onnx.Slice %[[R]], {{.+}} -> tensor<2x2xf32>
// CHECK-NEXT: %[[FB:.+]] = onnx.Reshape %[[SB]], %{{.+}} -> tensor<4xf32>
// CHECK-NEXT: %[[WA:.+]] = onnx.Reshape %[[FA]], %{{.+}} -> tensor<4x4xf32>
// CHECK-NEXT: %[[WB:.+]] = onnx.Reshape %[[FB]], %{{.+}} -> tensor<4xf32>
// CHECK-NEXT: onnx.node "MatMul"(%{{.+}}, %[[WA]])
// CHECK-NOT: fp8.all_gather
// unit=parameter: each its own gather.
// PARAM-LABEL: func.func @one_layer
// PARAM-COUNT-3: fp8.all_gather
// PARAM-NOT: onnx.Concat
func.func @one_layer(%x: tensor<4x4xf32>, %ids: tensor<4xi64>) -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4x4xf32>) {
  %a = onnx.initializer "h.0.a" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %b = onnx.initializer "h.0.b" = dense<0.0> : tensor<2xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4xf32>, octet.shards = 2 : i64}
  %e = onnx.initializer "wte" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %c = onnx.Constant {value = dense<[4, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %c4 = onnx.Constant {value = dense<[4]> : tensor<1xi64>} : () -> tensor<1xi64>
  %ge = fp8.all_gather %e {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %we = onnx.Reshape %ge, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %ga = fp8.all_gather %a {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %wa = onnx.Reshape %ga, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %gb = fp8.all_gather %b {octet.parameter_gather, world_size = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
  %wb = onnx.Reshape %gb, %c4 : (tensor<4xf32>, tensor<1xi64>) -> tensor<4xf32>
  %h0 = onnx.node "Gather"(%we, %ids) : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
  %h = onnx.node "MatMul"(%h0, %wa) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = onnx.node "Add"(%h, %wb) : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %l = onnx.node "ReduceSum"(%y) {attrs = {keepdims = 0 : si64}} : (tensor<4x4xf32>) -> tensor<f32>
  return %l, %y : tensor<f32>, tensor<4x4xf32>
}

// -----

// MS-AMP O3: each shard is cast to FP8 codes (with its own scale) just before its own gather, and
// the second after the first is read. The layer's gather needs both: the second's cast and
// scale move up with it, and each weight is dequantized with its own scale.
// CHECK-LABEL: func.func @codes
// CHECK: %[[QA:.+]] = fp8.cast %{{.+}}, %arg1
// CHECK: %[[QB:.+]] = fp8.cast %{{.+}}, %[[SCB:[^ ]+]] :
// CHECK: onnx.Concat %[[QA]], %[[QB]] {axis = 0 : si64} : (tensor<8xf8E4M3FN>, tensor<8xf8E4M3FN>) -> tensor<16xf8E4M3FN>
// CHECK: fp8.all_gather
// CHECK: fp8.dequantize %{{.+}}, %arg1
// CHECK: fp8.dequantize %{{.+}}, %[[SCB]]
// CHECK: onnx.node "MatMul"
// CHECK: onnx.node "MatMul"
// CHECK-NOT: fp8.all_gather
func.func @codes(%x: tensor<4x4xf32>, %s1: tensor<f32>, %s2: tensor<f32>) -> (tensor<f32> {octet.loss, onnx.name = "loss"}) {
  %a = onnx.initializer "h.1.a" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "master_shard"}
  %b = onnx.initializer "h.1.b" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "master_shard"}
  %c = onnx.Constant {value = dense<[4, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %qa = fp8.cast %a, %s1 {saturate = true} : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>
  %ga = fp8.all_gather %qa {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf8E4M3FN> -> tensor<16xf8E4M3FN>
  %ra = onnx.Reshape %ga, %c : (tensor<16xf8E4M3FN>, tensor<2xi64>) -> tensor<4x4xf8E4M3FN>
  %wa = fp8.dequantize %ra, %s1 : tensor<4x4xf8E4M3FN>, tensor<f32> -> tensor<4x4xf32>
  %h = onnx.node "MatMul"(%x, %wa) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %sb = onnx.node "Mul"(%s2, %s2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %qb = fp8.cast %b, %sb {saturate = true} : tensor<8xf32>, tensor<f32> -> tensor<8xf8E4M3FN>
  %gb = fp8.all_gather %qb {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf8E4M3FN> -> tensor<16xf8E4M3FN>
  %rb = onnx.Reshape %gb, %c : (tensor<16xf8E4M3FN>, tensor<2xi64>) -> tensor<4x4xf8E4M3FN>
  %wb = fp8.dequantize %rb, %sb : tensor<4x4xf8E4M3FN>, tensor<f32> -> tensor<4x4xf32>
  %y = onnx.node "MatMul"(%h, %wb) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = onnx.node "ReduceSum"(%y) {attrs = {keepdims = 0 : si64}} : (tensor<4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A layer read again after the loss, with another layer between: the backward's gather holds only
// the members the backward reads (here the norm weight "h.0.ln.w", as te's backward reads its
// forward FP8 copy of the matrix and not the matrix), taken out of its own gather.
// CHECK-LABEL: func.func @backward_part
// CHECK: onnx.Concat %{{.+}}, %{{.+}} {axis = 0 : si64} : (tensor<8xf32>, tensor<2xf32>) -> tensor<10xf32>
// CHECK: fp8.all_gather %{{.+}} {octet.parameter_gather, world_size = 2 : i64} : tensor<10xf32> -> tensor<20xf32>
// CHECK: onnx.node "ReduceSum"
// CHECK: %[[GB:.+]] = fp8.all_gather %[[LN:.+]] {octet.parameter_gather, world_size = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[WB:.+]] = onnx.Reshape %[[GB]]
// CHECK-NEXT: onnx.node "Mul"(%{{.+}}, %[[WB]])
// CHECK-NOT: fp8.all_gather
func.func @backward_part(%x: tensor<4x4xf32>) -> (tensor<f32> {octet.loss, onnx.name = "loss"}, tensor<4x4xf32>) {
  %a = onnx.initializer "h.0.attn.w" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %n = onnx.initializer "h.0.ln.w" = dense<0.0> : tensor<2xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4xf32>, octet.shards = 2 : i64}
  %o = onnx.initializer "h.1.attn.w" = dense<0.0> : tensor<8xf32> {octet.fp8_state, octet.role = "weight_shard", octet.shard_init = dense<1.0> : tensor<4x4xf32>, octet.shards = 2 : i64}
  %c = onnx.Constant {value = dense<[4, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %c4 = onnx.Constant {value = dense<[4]> : tensor<1xi64>} : () -> tensor<1xi64>
  %ga = fp8.all_gather %a {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %wa = onnx.Reshape %ga, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %gn = fp8.all_gather %n {octet.parameter_gather, world_size = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
  %wn = onnx.Reshape %gn, %c4 : (tensor<4xf32>, tensor<1xi64>) -> tensor<4xf32>
  %go = fp8.all_gather %o {octet.parameter_gather, world_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
  %wo = onnx.Reshape %go, %c : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  %h0 = onnx.node "Mul"(%x, %wn) : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %h = onnx.node "MatMul"(%h0, %wa) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = onnx.node "MatMul"(%h, %wo) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = onnx.node "ReduceSum"(%y) {attrs = {keepdims = 0 : si64}} : (tensor<4x4xf32>) -> tensor<f32>
  %dy = onnx.node "MatMul"(%y, %wo) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %dx = onnx.node "Mul"(%dy, %wn) : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return %l, %dx : tensor<f32>, tensor<4x4xf32>
}
