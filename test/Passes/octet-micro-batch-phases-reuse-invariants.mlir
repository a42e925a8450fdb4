// RUN: fp8-opt %s -split-input-file --octet-micro-batch-phases="reuse-invariants=true" | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-micro-batch-phases | FileCheck %s --check-prefix=OFF

// What stays the same through an optimizer step runs in its first micro-batch only
// (octet.first_micro_batch): the weight's FP8 cast with its delayed scale (both states the last
// micro-batch updates) and the transpose of its codes. The cast made again for the backward (a rematerialized
// copy, named .recomputed) is the same computation: its readers take the first one's codes. The
// activation's cast reads the input, the GEMMs read it: every micro-batch. The weight's amax feeds
// its history alone: the last micro-batch.
// CHECK-LABEL: func.func @weight_cast
// CHECK: %[[C:.+]] = fp8.cast %{{.+}}, %{{.+}} {octet.first_micro_batch} : tensor<8x4xf32>, tensor<f32> -> tensor<8x4xf8E4M3FN>
// CHECK-NEXT: %[[X:.+]] = fp8.cast %arg0, %{{.+}} : tensor<2x4xf32>
// CHECK-NEXT: fp8.gemm %[[X]], %[[C]],
// CHECK-NOT: fp8.cast %{{.+}} : tensor<8x4xf32>
// CHECK: %[[T:.+]] = onnx.Transpose %[[C]] {octet.first_micro_batch,
// CHECK: fp8.gemm %{{.+}}, %[[T]],
// CHECK: fp8.amax %{{.+}} {octet.last_micro_batch}
// CHECK: return
// OFF-LABEL: func.func @weight_cast
// OFF-NOT: octet.first_micro_batch
// OFF: return
module attributes {octet.training = {grad_accum_steps = "4"}} {
func.func @weight_cast(%x: tensor<2x4xf32>, %dy: tensor<2x8xf32>, %first: tensor<i1>)
    -> (tensor<2x8xf32> {onnx.name = "y"},
        tensor<2x4xf32> {onnx.name = "dx"},
        tensor<8x4xf32> {octet.state_update = "w", onnx.name = "w.next"},
        tensor<f32> {octet.state_update = "w.amax", onnx.name = "w.amax.next"},
        tensor<f32> {octet.state_update = "x.amax", onnx.name = "x.amax.next"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<8x4xf32> {octet.fp8_state, octet.role = "weight"}
  %ws = onnx.initializer "w.scale" = dense<1.0> : tensor<f32> {octet.fp8_state, octet.fp8_weight_scaling}
  %wa = onnx.initializer "w.amax" = dense<0.0> : tensor<f32> {octet.fp8_state, octet.fp8_weight_scaling}
  %xa = onnx.initializer "x.amax" = dense<0.0> : tensor<f32> {octet.fp8_state}
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %wc = fp8.cast %w, %ws : tensor<8x4xf32>, tensor<f32> -> tensor<8x4xf8E4M3FN>
  %xc = fp8.cast %x, %xa : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf8E4M3FN>
  %y = fp8.gemm %xc, %wc, %one, %ws {transpose_b = true} : (tensor<2x4xf8E4M3FN>, tensor<8x4xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<2x8xf32>
  %wc2 = fp8.cast %w, %ws {octet.result_names = ["w.codes.recomputed"]} : tensor<8x4xf32>, tensor<f32> -> tensor<8x4xf8E4M3FN>
  %wt2 = onnx.Transpose %wc2 {perm = array<i64: 1, 0>} : (tensor<8x4xf8E4M3FN>) -> tensor<4x8xf8E4M3FN>
  %dyc = fp8.cast %dy, %xa : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf8E4M3FN>
  %dx = fp8.gemm %dyc, %wt2, %one, %ws {transpose_b = true} : (tensor<2x8xf8E4M3FN>, tensor<4x8xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<2x4xf32>
  %am = fp8.amax %w : tensor<8x4xf32> -> tensor<f32>
  %xm = fp8.amax %x : tensor<2x4xf32> -> tensor<f32>
  %w2 = onnx.Sub %w, %w : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y, %dx, %w2, %am, %xm : tensor<2x8xf32>, tensor<2x4xf32>, tensor<8x4xf32>, tensor<f32>, tensor<f32>
}
}

// -----

// Not made once: a state that every micro-batch updates (the activation's amax, read by its own
// next value), randomness (Dropout), and a result that is the function's own (an output).
// CHECK-LABEL: func.func @changing
// CHECK-NOT: octet.first_micro_batch
// CHECK: return
module attributes {octet.training = {grad_accum_steps = "2"}} {
func.func @changing(%x: tensor<4xf32>)
    -> (tensor<4xf32> {onnx.name = "y"},
        tensor<f32> {octet.state_update = "a", onnx.name = "a.next"},
        tensor<4xf32> {onnx.name = "w2"},
        tensor<4xf32> {octet.state_update = "w", onnx.name = "w.next"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<4xf32> {octet.fp8_state, octet.role = "weight"}
  %a = onnx.initializer "a" = dense<1.0> : tensor<f32> {octet.fp8_state}
  %s = onnx.Mul %a, %a : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %d = onnx.node "Dropout"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %m = onnx.Mul %x, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = onnx.Mul %m, %s : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %ww = onnx.Mul %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %w2 = onnx.Sub %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %s, %ww, %w2 : tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>
}
}

// -----

// A run of side-by-side casts (octet-fuse-runs) with members of both phases is split: the first
// micro-batch's part goes after the every-micro-batch part, each its own group.
// CHECK-LABEL: func.func @run
// CHECK: fp8.cast %arg0, {{.+}}octet.fusion = "cast_list", octet.fusion_group = 0 : i64
// CHECK-NEXT: fp8.cast %arg1, {{.+}}octet.fusion = "cast_list", octet.fusion_group = 0 : i64
// CHECK-NEXT: fp8.cast %{{.+}}, %{{.+}} {octet.first_micro_batch, octet.fusion = "cast_list", octet.fusion_group = [[G:[0-9]+]] : i64}
// CHECK-NEXT: fp8.cast %{{.+}}, %{{.+}} {octet.first_micro_batch, octet.fusion = "cast_list", octet.fusion_group = [[G]] : i64}
// CHECK: return
module attributes {octet.training = {grad_accum_steps = "2"}} {
func.func @run(%x: tensor<4xf32>, %z: tensor<4xf32>)
    -> (tensor<4xf32> {onnx.name = "y"},
        tensor<4xf32> {octet.state_update = "w", onnx.name = "w.next"},
        tensor<4xf32> {octet.state_update = "v", onnx.name = "v.next"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<4xf32> {octet.fp8_state, octet.role = "weight"}
  %v = onnx.initializer "v" = dense<1.0> : tensor<4xf32> {octet.fp8_state, octet.role = "weight"}
  %s = onnx.initializer "s" = dense<1.0> : tensor<f32> {octet.fp8_state, octet.fp8_weight_scaling}
  %xc = fp8.cast %x, %s {octet.fusion = "cast_list", octet.fusion_group = 0 : i64} : tensor<4xf32>, tensor<f32> -> tensor<4xf8E4M3FN>
  %wc = fp8.cast %w, %s {octet.fusion = "cast_list", octet.fusion_group = 0 : i64} : tensor<4xf32>, tensor<f32> -> tensor<4xf8E4M3FN>
  %zc = fp8.cast %z, %s {octet.fusion = "cast_list", octet.fusion_group = 0 : i64} : tensor<4xf32>, tensor<f32> -> tensor<4xf8E4M3FN>
  %vc = fp8.cast %v, %s {octet.fusion = "cast_list", octet.fusion_group = 0 : i64} : tensor<4xf32>, tensor<f32> -> tensor<4xf8E4M3FN>
  %a = onnx.Cast %xc {to = 1 : si64} : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
  %b = onnx.Cast %wc {to = 1 : si64} : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
  %c = onnx.Cast %zc {to = 1 : si64} : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
  %d = onnx.Cast %vc {to = 1 : si64} : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
  %ab = onnx.Mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %cd = onnx.Mul %c, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = onnx.Add %ab, %cd : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %w2 = onnx.Sub %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %v2 = onnx.Sub %v, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %w2, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
}
