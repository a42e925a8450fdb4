// RUN: fp8-opt %s -split-input-file --octet-free-early | FileCheck %s
// RUN: fp8-opt %s -split-input-file --octet-free-early="min-bytes=1000000" | FileCheck %s --check-prefix=LARGE

// MS-AMP's weight gradient: its amax, scale and FP8 cast ran at the step's end. They move up to
// the MatMul that makes it (the scale, made only from the amax, moves with them), so the float32
// gradient is freed there. The dequantize stays (the codes are read at the end anyway). Each sum of
// squares, the last reader of what it sums, moves up to the op that makes that. Past min-bytes,
// nothing moves.
// CHECK: module attributes {octet.freed_early = 2 : i64}
// CHECK-LABEL: func.func @gradient_cast_at_the_end
// CHECK: %[[G:.+]] = onnx.node "MatMul"(%arg0, %arg1)
// CHECK-NEXT: %[[A:.+]] = fp8.amax %[[G]]
// CHECK-NEXT: %{{.+}}, %[[SI:.+]] = fp8.dynamic_scale %[[A]]
// CHECK-NEXT: %[[Q:.+]] = fp8.cast %[[G]], %[[SI]]
// CHECK-NEXT: onnx.node "MatMul"(%arg2, %arg1)
// CHECK-NEXT: %[[R:.+]] = onnx.node "Relu"
// CHECK-NEXT: onnx.node "ReduceSumSquare"(%[[R]])
// CHECK-NEXT: %[[D:.+]] = fp8.dequantize %[[Q]], %[[SI]]
// CHECK-NEXT: onnx.node "ReduceSumSquare"(%[[D]])
// CHECK-NEXT: return
// LARGE-NOT: octet.freed_early
// LARGE-LABEL: func.func @gradient_cast_at_the_end
// LARGE: onnx.node "MatMul"(%arg0, %arg1)
// LARGE-NEXT: onnx.node "MatMul"(%arg2, %arg1)
// LARGE-NEXT: onnx.node "Relu"
// LARGE-NEXT: fp8.amax
func.func @gradient_cast_at_the_end(%x: tensor<64x128xf32>, %w: tensor<128x128xf32>, %y: tensor<64x128xf32>) -> (tensor<64x128xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %g = onnx.node "MatMul"(%x, %w) : (tensor<64x128xf32>, tensor<128x128xf32>) -> tensor<64x128xf32>
  %h = onnx.node "MatMul"(%y, %w) : (tensor<64x128xf32>, tensor<128x128xf32>) -> tensor<64x128xf32>
  %r = onnx.node "Relu"(%h) : (tensor<64x128xf32>) -> tensor<64x128xf32>
  %a = fp8.amax %g : tensor<64x128xf32> -> tensor<f32>
  %s, %si = fp8.dynamic_scale %a {format = f8E4M3FN} : tensor<f32>
  %q = fp8.cast %g, %si : tensor<64x128xf32>, tensor<f32> -> tensor<64x128xf8E4M3FN>
  %d = fp8.dequantize %q, %si : tensor<64x128xf8E4M3FN>, tensor<f32> -> tensor<64x128xf32>
  %n1 = onnx.node "ReduceSumSquare"(%r) {attrs = {keepdims = 0 : si64}} : (tensor<64x128xf32>) -> tensor<f32>
  %n2 = onnx.node "ReduceSumSquare"(%d) {attrs = {keepdims = 0 : si64}} : (tensor<64x128xf32>) -> tensor<f32>
  return %q, %s, %n1, %n2 : tensor<64x128xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// A reader that makes more bytes than the value frees (a widening Concat) stays, and so does the
// value's other reader: a value is freed early only when all its readers move.
// CHECK-LABEL: func.func @readers_make_more
// CHECK: onnx.node "MatMul"(%arg0, %arg1)
// CHECK-NEXT: onnx.node "MatMul"(%arg2, %arg1)
// CHECK-NEXT: onnx.node "Relu"
// CHECK-NEXT: fp8.amax
// CHECK-NEXT: onnx.node "Concat"
func.func @readers_make_more(%x: tensor<64x128xf32>, %w: tensor<128x128xf32>, %y: tensor<64x128xf32>) -> (tensor<f32>, tensor<128x128xf32>, tensor<64x128xf32>) {
  %g = onnx.node "MatMul"(%x, %w) : (tensor<64x128xf32>, tensor<128x128xf32>) -> tensor<64x128xf32>
  %h = onnx.node "MatMul"(%y, %w) : (tensor<64x128xf32>, tensor<128x128xf32>) -> tensor<64x128xf32>
  %r = onnx.node "Relu"(%h) : (tensor<64x128xf32>) -> tensor<64x128xf32>
  %a = fp8.amax %g : tensor<64x128xf32> -> tensor<f32>
  %c = onnx.node "Concat"(%g, %g) {attrs = {axis = 0 : si64}} : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<128x128xf32>
  return %a, %c, %r : tensor<f32>, tensor<128x128xf32>, tensor<64x128xf32>
}

// -----

// Readers that cannot move: one needs a large value made later (not a scalar that could move with
// it), one draws random numbers, and one value is returned (alive to the end anyway).
// CHECK-LABEL: func.func @readers_that_stay
// CHECK: onnx.node "MatMul"(%arg0, %arg1)
// CHECK-NEXT: onnx.node "MatMul"(%arg2, %arg1)
// CHECK-NEXT: onnx.node "Relu"
// CHECK-NEXT: onnx.node "Mul"
// CHECK-NEXT: onnx.node "Dropout"
// CHECK-NEXT: onnx.node "ReduceSumSquare"
func.func @readers_that_stay(%x: tensor<64x128xf32>, %w: tensor<128x128xf32>, %y: tensor<64x128xf32>) -> (tensor<64x128xf32>, tensor<64x128xf32>, tensor<f32>, tensor<64x128xf32>) {
  %g = onnx.node "MatMul"(%x, %w) : (tensor<64x128xf32>, tensor<128x128xf32>) -> tensor<64x128xf32>
  %h = onnx.node "MatMul"(%y, %w) : (tensor<64x128xf32>, tensor<128x128xf32>) -> tensor<64x128xf32>
  %r = onnx.node "Relu"(%h) : (tensor<64x128xf32>) -> tensor<64x128xf32>
  %m = onnx.node "Mul"(%g, %r) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  %dr = onnx.node "Dropout"(%h) : (tensor<64x128xf32>) -> tensor<64x128xf32>
  %n = onnx.node "ReduceSumSquare"(%g) {attrs = {keepdims = 0 : si64}} : (tensor<64x128xf32>) -> tensor<f32>
  return %m, %dr, %n, %g : tensor<64x128xf32>, tensor<64x128xf32>, tensor<f32>, tensor<64x128xf32>
}
