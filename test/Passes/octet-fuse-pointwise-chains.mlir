// RUN: fp8-opt %s -split-input-file --octet-fuse-pointwise-chains | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-pointwise-chains{max-ops=2 small-elements=16})' | FileCheck %s --check-prefix=TWO

// AdamW's three programs over one shape, one after another: one group (the third reads the first
// two's results element for element). With max-ops=2 (and nothing small) the first two form a
// group and the third stays alone.
// CHECK-LABEL: func.func @adamw
// CHECK: onnx.node "Pointwise"{{.*}}octet.fusion = "pointwise_chain", octet.fusion_group = 0 : i64
// CHECK: onnx.node "Pointwise"{{.*}}octet.fusion = "pointwise_chain", octet.fusion_group = 0 : i64
// CHECK: onnx.node "Pointwise"{{.*}}octet.fusion = "pointwise_chain", octet.fusion_group = 0 : i64
// TWO-LABEL: func.func @adamw
// TWO: onnx.node "Pointwise"{{.*}}octet.fusion_group = 0 : i64
// TWO: onnx.node "Pointwise"{{.*}}octet.fusion_group = 0 : i64
// TWO-NOT: octet.fusion
// TWO: return
func.func @adamw(%m: tensor<256x512xf32>, %v: tensor<256x512xf32>, %g: tensor<256x512xf32>, %w: tensor<256x512xf32>, %c: tensor<f32>) -> (tensor<256x512xf32>, tensor<256x512xf32>, tensor<256x512xf32>) {
  %m2 = onnx.node "Pointwise"(%m, %c, %g) {attrs = {args = array<i64: 0, 1, -1, 2, 1, -1, 3, 4, -1>, ops = ["Mul", "Mul", "Add"]}, domain = "octet"} : (tensor<256x512xf32>, tensor<f32>, tensor<256x512xf32>) -> tensor<256x512xf32>
  %v2 = onnx.node "Pointwise"(%v, %c, %g) {attrs = {args = array<i64: 0, 1, -1, 2, 2, -1, 3, 4, -1>, ops = ["Mul", "Mul", "Add"]}, domain = "octet"} : (tensor<256x512xf32>, tensor<f32>, tensor<256x512xf32>) -> tensor<256x512xf32>
  %w2 = onnx.node "Pointwise"(%w, %m2, %v2) {attrs = {args = array<i64: 2, -1, -1, 1, 3, -1, 0, 4, -1>, ops = ["Sqrt", "Div", "Sub"]}, domain = "octet"} : (tensor<256x512xf32>, tensor<256x512xf32>, tensor<256x512xf32>) -> tensor<256x512xf32>
  return %m2, %v2, %w2 : tensor<256x512xf32>, tensor<256x512xf32>, tensor<256x512xf32>
}

// -----

// Programs of two shapes, and an op that is no program (a MatMul) between two of one shape, end
// groups; a one-instruction ONNX op (Tanh) is a program and joins, an Add (the broadcasting
// kernel's, where a GEMM bias may fold) does not; constants between members do not count.
// CHECK-LABEL: func.func @boundaries
// CHECK: onnx.Tanh {{.*}}octet.fusion_group = 0 : i64
// CHECK: onnx.node "Pointwise"{{.*}}octet.fusion_group = 0 : i64
// CHECK: onnx.node "Pointwise"(%{{.+}}) {{.*}} -> tensor<8xf32>
// CHECK-NOT: octet.fusion
// CHECK: onnx.MatMul
// CHECK: onnx.node "Pointwise"
// CHECK-NOT: octet.fusion
// CHECK: onnx.Add
// CHECK-NOT: octet.fusion
// CHECK: return
func.func @boundaries(%x: tensor<64x8xf32>, %y: tensor<8xf32>, %w: tensor<8x8xf32>) -> (tensor<64x8xf32>, tensor<8xf32>, tensor<64x8xf32>, tensor<64x8xf32>) {
  %t = onnx.Tanh %x : (tensor<64x8xf32>) -> tensor<64x8xf32>
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %a = onnx.node "Pointwise"(%t, %c) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet"} : (tensor<64x8xf32>, tensor<f32>) -> tensor<64x8xf32>
  %b = onnx.node "Pointwise"(%y) {attrs = {args = array<i64: 0, -1, -1>, ops = ["Neg"]}, domain = "octet"} : (tensor<8xf32>) -> tensor<8xf32>
  %m = onnx.MatMul %a, %w : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
  %d = onnx.node "Pointwise"(%m) {attrs = {args = array<i64: 0, -1, -1>, ops = ["Abs"]}, domain = "octet"} : (tensor<64x8xf32>) -> tensor<64x8xf32>
  %e = onnx.Add %d, %x : (tensor<64x8xf32>, tensor<64x8xf32>) -> tensor<64x8xf32>
  return %a, %b, %d, %e : tensor<64x8xf32>, tensor<8xf32>, tensor<64x8xf32>, tensor<64x8xf32>
}

// -----

// A program that reads an earlier one's result broadcast (a [4, 1] result against [4, 8]) would
// read another thread's element: the result's shape differs, so the groups part there. Small
// results (at most small-elements) take up to max-small-ops programs: with small-elements=16 the
// two [4, 8] programs (32 elements) are not small and max-ops=2 still groups them.
// CHECK-LABEL: func.func @broadcast_read
// CHECK: onnx.node "Pointwise"(%arg0) {{.*}} -> tensor<4x1xf32>
// CHECK-NOT: octet.fusion
// CHECK: onnx.node "Pointwise"{{.*}}octet.fusion_group = 0 : i64
// CHECK: onnx.node "Pointwise"{{.*}}octet.fusion_group = 0 : i64
// TWO-LABEL: func.func @broadcast_read
// TWO-COUNT-2: octet.fusion_group = 0 : i64
func.func @broadcast_read(%r: tensor<4x1xf32>, %x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = onnx.node "Pointwise"(%r) {attrs = {args = array<i64: 0, -1, -1>, ops = ["Sqrt"]}, domain = "octet"} : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %a = onnx.node "Pointwise"(%x, %s) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Mul"]}, domain = "octet"} : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %b = onnx.node "Pointwise"(%a, %x) {attrs = {args = array<i64: 0, 1, -1>, ops = ["Sub"]}, domain = "octet"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}
