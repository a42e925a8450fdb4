// RUN: fp8-opt %s -split-input-file --octet-fuse-rotary | FileCheck %s

// HF's apply_rotary_pos_emb as exported: X cos + rotate_half(X) sin, cos and sin [1, 1, S, d]
// broadcast over batch and heads. One node; the Slices, Neg, Concat, Muls and Add go.
// CHECK-LABEL: func.func @hf_rotary
// CHECK-NEXT: %[[Y:.+]] = onnx.node "RotaryEmbedding"(%arg0, %arg1, %arg2) {domain = "octet"} : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @hf_rotary(%x: tensor<1x2x8x16xf32>, %cos: tensor<1x1x8x16xf32>, %sin: tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %h = onnx.Constant {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %x1 = onnx.Slice %x, %zero, %h, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %x2 = onnx.Slice %x, %h, %end, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %n = onnx.Neg %x2 : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %r = onnx.Concat %n, %x1 {axis = -1 : si64} : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %a = onnx.Mul %x, %cos : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %b = onnx.Mul %r, %sin : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %y = onnx.Add %a, %b : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}

// -----

// Any operand order of the Add and the Muls, a copy of X on the plain product, cos of lower rank.
// CHECK-LABEL: func.func @operand_orders
// CHECK: onnx.node "RotaryEmbedding"(%arg0, %arg1, %arg2)
// CHECK-NOT: onnx.Concat
func.func @operand_orders(%x: tensor<1x2x8x16xf32>, %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>) -> tensor<1x2x8x16xf32> {
  %h = onnx.Constant {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %x1 = onnx.Slice %x, %zero, %h, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %x2 = onnx.Slice %x, %h, %end, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %n = onnx.Neg %x2 : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %r = onnx.Concat %n, %x1 {axis = -1 : si64} : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %xc = onnx.Identity %x : (tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %a = onnx.Mul %cos, %xc : (tensor<8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %b = onnx.Mul %sin, %r : (tensor<8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %y = onnx.Add %b, %a : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}

// -----

// Concat(first half, -second half) is not rotate_half: nothing fuses.
// CHECK-LABEL: func.func @swapped_halves
// CHECK-NOT: RotaryEmbedding
// CHECK: onnx.Concat
func.func @swapped_halves(%x: tensor<1x2x8x16xf32>, %cos: tensor<1x1x8x16xf32>, %sin: tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %h = onnx.Constant {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %x1 = onnx.Slice %x, %zero, %h, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %x2 = onnx.Slice %x, %h, %end, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %n = onnx.Neg %x2 : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %r = onnx.Concat %x1, %n {axis = -1 : si64} : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %a = onnx.Mul %x, %cos : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %b = onnx.Mul %r, %sin : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %y = onnx.Add %a, %b : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}

// -----

// The plain product reads another tensor than the rotated one: nothing fuses.
// CHECK-LABEL: func.func @other_x
// CHECK-NOT: RotaryEmbedding
// CHECK: onnx.Add
func.func @other_x(%x: tensor<1x2x8x16xf32>, %cos: tensor<1x1x8x16xf32>, %sin: tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %h = onnx.Constant {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %x1 = onnx.Slice %x, %zero, %h, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %x2 = onnx.Slice %x, %h, %end, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %n = onnx.Neg %x2 : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %r = onnx.Concat %n, %x1 {axis = -1 : si64} : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %x3 = onnx.Neg %x : (tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %a = onnx.Mul %x3, %cos : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %b = onnx.Mul %r, %sin : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %y = onnx.Add %a, %b : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}

// -----

// cos and sin of width 1 (broadcast along the rotated axis) are not position tables of X's width:
// nothing fuses.
// CHECK-LABEL: func.func @narrow_tables
// CHECK-NOT: RotaryEmbedding
func.func @narrow_tables(%x: tensor<1x2x8x16xf32>, %cos: tensor<1x1x8x1xf32>, %sin: tensor<1x1x8x1xf32>) -> tensor<1x2x8x16xf32> {
  %h = onnx.Constant {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %x1 = onnx.Slice %x, %zero, %h, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %x2 = onnx.Slice %x, %h, %end, %ax, %one : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %n = onnx.Neg %x2 : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %r = onnx.Concat %n, %x1 {axis = -1 : si64} : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %a = onnx.Mul %x, %cos : (tensor<1x2x8x16xf32>, tensor<1x1x8x1xf32>) -> tensor<1x2x8x16xf32>
  %b = onnx.Mul %r, %sin : (tensor<1x2x8x16xf32>, tensor<1x1x8x1xf32>) -> tensor<1x2x8x16xf32>
  %y = onnx.Add %a, %b : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}

// -----

// X a head split of [B, S, H, d] with tables the same for every head: the node rotates the
// [B, S, H, d] tensor with its tables reshaped to [1, S, 1, d], and the head split follows it
// (so fused attention can read the heads in place).
// CHECK-LABEL: func.func @head_split
// CHECK-DAG: %[[C:.+]] = onnx.Reshape %arg1, %{{.+}} : (tensor<1x1x8x16xf32>, tensor<4xi64>) -> tensor<1x8x1x16xf32>
// CHECK-DAG: %[[S:.+]] = onnx.Reshape %arg2, %{{.+}} : (tensor<1x1x8x16xf32>, tensor<4xi64>) -> tensor<1x8x1x16xf32>
// CHECK: %[[R:.+]] = onnx.node "RotaryEmbedding"(%arg0, %[[C]], %[[S]]) {domain = "octet"} : (tensor<1x8x2x16xf32>, tensor<1x8x1x16xf32>, tensor<1x8x1x16xf32>) -> tensor<1x8x2x16xf32>
// CHECK: %[[Y:.+]] = onnx.Transpose %[[R]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x16xf32>) -> tensor<1x2x8x16xf32>
// CHECK: return %[[Y]]
func.func @head_split(%x0: tensor<1x8x2x16xf32>, %cos: tensor<1x1x8x16xf32>, %sin: tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %h = onnx.Constant {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant {value = dense<16> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %n0 = onnx.none
  %x = onnx.Transpose %x0 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x16xf32>) -> tensor<1x2x8x16xf32>
  %x1 = onnx.Slice %x, %zero, %h, %ax, %n0 : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<1x2x8x8xf32>
  %x2 = onnx.Slice %x, %h, %end, %ax, %n0 : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<1x2x8x8xf32>
  %n = onnx.Neg %x2 : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %r = onnx.Concat %n, %x1 {axis = 3 : si64} : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %a = onnx.Mul %x, %cos : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %b = onnx.Mul %r, %sin : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %y = onnx.Add %a, %b : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}

// -----

// Tables that differ per head ([1, H, S, d]) cannot follow the heads to the last-but-one axis:
// the node rotates the head split itself.
// CHECK-LABEL: func.func @per_head_tables
// CHECK: %[[X:.+]] = onnx.Transpose %arg0
// CHECK: onnx.node "RotaryEmbedding"(%[[X]], %arg1, %arg2)
func.func @per_head_tables(%x0: tensor<1x8x2x16xf32>, %cos: tensor<1x2x8x16xf32>, %sin: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %h = onnx.Constant {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant {value = dense<16> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %n0 = onnx.none
  %x = onnx.Transpose %x0 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x16xf32>) -> tensor<1x2x8x16xf32>
  %x1 = onnx.Slice %x, %zero, %h, %ax, %n0 : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<1x2x8x8xf32>
  %x2 = onnx.Slice %x, %h, %end, %ax, %n0 : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<1x2x8x8xf32>
  %n = onnx.Neg %x2 : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %r = onnx.Concat %n, %x1 {axis = 3 : si64} : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %a = onnx.Mul %x, %cos : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %b = onnx.Mul %r, %sin : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %y = onnx.Add %a, %b : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}
