// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{shard-world-size=3 bucket-bytes=64})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{shard-world-size=2 fp8-gradients=true})' | FileCheck %s --check-prefix=FP8
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{shard-world-size=1 bucket-bytes=64})' | FileCheck %s --check-prefix=ONE
// RUN: not fp8-opt %s -o /dev/null --pass-pipeline='builtin.module(octet-data-parallel{shard-world-size=-2})' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: octet-data-parallel: shard-world-size=-2 is not valid; use 0 (none) or the number of ranks

// A gradient that would go alone (at least bucket-bytes of float32) is flattened, zero-padded to a
// multiple of the world size (40 -> 42) and reduce-scattered: the result is this rank's 14
// elements, marked with the number of shards, and the function's result type follows. A small one
// is all-reduced whole as before (its state stays replicated). The plan records the world size.
// CHECK-LABEL: module attributes {octet.data_parallel, octet.training = {data_parallel = "true", shard_world_size = "3"}}
// CHECK-LABEL: func.func @sharded
// CHECK-SAME: tensor<14xf32> {octet.grad_of = "w", octet.grad_shards = 3 : i64, onnx.name = "w.grad"}
// CHECK-SAME: tensor<4xf32> {octet.grad_of = "b", onnx.name = "b.grad"}
// CHECK: %[[F:.+]] = onnx.Reshape %arg1, %{{.+}} : (tensor<8x5xf32>, tensor<1xi64>) -> tensor<40xf32>
// CHECK: %[[Z:.+]] = onnx.Constant {value = dense<0.000000e+00> : tensor<2xf32>}
// CHECK: %[[P:.+]] = onnx.Concat %[[F]], %[[Z]] {axis = 0 : si64} : (tensor<40xf32>, tensor<2xf32>) -> tensor<42xf32>
// CHECK: %[[S:.+]] = fp8.reduce_scatter %[[P]] {reduction = #fp8.reduction<avg>, world_size = 3 : i64} : tensor<42xf32> -> tensor<14xf32>
// CHECK: %[[B:.+]] = fp8.all_reduce %arg2 {reduction = #fp8.reduction<avg>} : tensor<4xf32> -> tensor<4xf32>
// CHECK: return %{{.+}}, %[[S]], %[[B]]
// shard-world-size=1 shards nothing.
// ONE-LABEL: func.func @sharded
// ONE-NOT: reduce_scatter
// ONE: fp8.all_reduce %arg1 {reduction = #fp8.reduction<avg>} : tensor<8x5xf32>
module {
func.func @sharded(%l: tensor<f32>, %gw: tensor<8x5xf32>, %gb: tensor<4xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<8x5xf32> {octet.grad_of = "w", onnx.name = "w.grad"},
        tensor<4xf32> {octet.grad_of = "b", onnx.name = "b.grad"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<8x5xf32>
  %b = onnx.initializer "b" = dense<0.0> : tensor<4xf32>
  return %l, %gw, %gb : tensor<f32>, tensor<8x5xf32>, tensor<4xf32>
}
}

// -----

// MS-AMP's FP8 gradient, sharded: the ranks agree on the scale of the whole gradient as before,
// cast the flattened gradient and reduce-scatter the codes (summed, with the scale); the shard is
// dequantized.
// FP8-LABEL: func.func @fp8_weight
// FP8-SAME: tensor<64xf32> {octet.grad_of = "fc.weight", octet.grad_shards = 2 : i64, octet.grad_storage = f8E4M3FN
// FP8: %[[A:.+]] = fp8.amax %arg1 : tensor<16x8xf32> -> tensor<f32>
// FP8-NEXT: %[[GA:.+]] = fp8.all_reduce %[[A]] {reduction = #fp8.reduction<max>}
// FP8-NEXT: %{{.+}}, %[[SI:.+]] = fp8.dynamic_scale %[[GA]]
// FP8-NEXT: %[[N:.+]] = fp8.world_size : tensor<f32>
// FP8: %[[F:.+]] = onnx.Reshape %arg1, %{{.+}} : (tensor<16x8xf32>, tensor<1xi64>) -> tensor<128xf32>
// FP8: %[[Q:.+]] = fp8.cast %[[F]], %{{.+}} : tensor<128xf32>, tensor<f32> -> tensor<128xf8E4M3FN>
// FP8-NEXT: %[[S:.+]] = fp8.reduce_scatter %[[Q]], %[[SI]] {world_size = 2 : i64} : tensor<128xf8E4M3FN>, tensor<f32> -> tensor<64xf8E4M3FN>
// FP8-NEXT: %[[D:.+]] = fp8.dequantize %[[S]], %[[SI]] : tensor<64xf8E4M3FN>, tensor<f32> -> tensor<64xf32>
// FP8-NEXT: return %{{.+}}, %[[D]]
func.func @fp8_weight(%x: tensor<4x16xf32>, %gw: tensor<16x8xf32>)
    -> (tensor<4x8xf32> {onnx.name = "y"}, tensor<16x8xf32> {octet.grad_of = "fc.weight", onnx.name = "fc.weight.grad"}) {
  %w = onnx.initializer "fc.weight" = dense<0.5> : tensor<16x8xf32>
  %y = fp8.linear "fc" %x, %w {recipe = "msamp", scaling = #fp8.scaling<dynamic>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y, %gw : tensor<4x8xf32>, tensor<16x8xf32>
}
