// RUN: fp8-opt %s -split-input-file --octet-fuse-pointwise | FileCheck %s
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-pointwise{max-ops=2})' | FileCheck %s --check-prefix=SMALL
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-pointwise{duplicate-producers=false})' | FileCheck %s --check-prefix=NODUP
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-pointwise{recompute-programs=false})' | FileCheck %s --check-prefix=NOREC
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-fuse-pointwise{expand-gelus=false})' | FileCheck %s --check-prefix=NOGELU

// GELU (tanh): eight ops over one shape become one node; its inputs are the
// outside values in order of first use, args index inputs (0..3) then ops (4..).
// CHECK-LABEL: func.func @gelu
// CHECK: %[[F:.+]] = onnx.node "Pointwise"(%arg0, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) {attrs = {args = array<i64: 0, 0, -1, 5, 0, -1, 6, 1, -1, 0, 7, -1, 8, 2, -1, 9, -1, -1, 10, 3, -1, 0, 4, -1, 12, 11, -1>, ops = ["Mul", "Mul", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Mul"]}, domain = "octet"}
// CHECK-SAME: -> tensor<8x16xf32>
// CHECK-NOT: onnx.Mul
// CHECK: return %[[F]]
// SMALL-LABEL: func.func @gelu
// SMALL-COUNT-3: onnx.node "Pointwise"
// SMALL-NOT: onnx.node "Pointwise"
// SMALL: return
func.func @gelu(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %c0 = onnx.Constant {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %c1 = onnx.Constant {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
  %c2 = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %c3 = onnx.Constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %x2 = onnx.Mul %x, %x : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %x3 = onnx.Mul %x2, %x : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %a = onnx.Mul %x3, %c0 : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %b = onnx.Add %x, %a : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %i = onnx.Mul %b, %c1 : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %t = onnx.Tanh %i : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %u = onnx.Add %t, %c2 : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %h = onnx.Mul %x, %c3 : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %y = onnx.Mul %h, %u : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// %a has two readers. By default it is copied into each (its operands are arguments),
// so each reader's chain is one node; with duplicate-producers=false it stays a
// result of its own and neither reader absorbs it.
// CHECK-LABEL: func.func @shared
// CHECK: onnx.node "Pointwise"(%arg0, %arg1) {attrs = {args = array<i64: 0, 1, -1, 2, 1, -1>, ops = ["Mul", "Add"]}
// CHECK: onnx.node "Pointwise"(%arg0, %arg1) {attrs = {args = array<i64: 0, 1, -1, 2, 0, -1>, ops = ["Mul", "Sub"]}
// CHECK-NOT: onnx.Mul
// NODUP-LABEL: func.func @shared
// NODUP-NOT: Pointwise
// NODUP: onnx.Mul
// NODUP: onnx.Add
// NODUP: onnx.Sub
func.func @shared(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = onnx.Mul %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = onnx.Add %a, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = onnx.Sub %a, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b, %c : tensor<4xf32>, tensor<4xf32>
}

// -----

// A value several ops of one program read (the GELU gradient's tanh: by t * t and by the final
// sum) joins that program once all its readers have: one node, t never stored.
// CHECK-LABEL: func.func @read_twice_inside
// CHECK: onnx.node "Pointwise"(%arg0, %{{.+}}, %{{.+}}, %arg1) {attrs = {args = array<i64: 0, 1, -1, 4, -1, -1, 5, 5, -1, 2, 6, -1, 7, 3, -1, 8, 5, -1>, ops = ["Mul", "Tanh", "Mul", "Sub", "Mul", "Add"]}
// CHECK-NOT: onnx.node
// CHECK: return
func.func @read_twice_inside(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = onnx.Constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %one = onnx.Constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %a = onnx.Mul %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t = onnx.Tanh %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t2 = onnx.Mul %t, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = onnx.Sub %one, %t2 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = onnx.Mul %s, %dy : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = onnx.Add %g, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Broadcasting inputs join, but an op of another shape does not: the [4, 1]
// chain (Mul, Sqrt) and the [4, 8] chain (Sub, Div) are two nodes.
// CHECK-LABEL: func.func @shapes
// CHECK: %[[S:.+]] = onnx.node "Pointwise"(%arg1, %{{.+}}) {attrs = {args = array<i64: 0, 1, -1, 2, -1, -1>, ops = ["Mul", "Sqrt"]}, domain = "octet"} : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
// CHECK: onnx.node "Pointwise"(%arg0, %arg1, %[[S]]) {attrs = {args = array<i64: 0, 1, -1, 3, 2, -1>, ops = ["Sub", "Div"]}, domain = "octet"} : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
func.func @shapes(%x: tensor<4x8xf32>, %m: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %c = onnx.Constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %v = onnx.Mul %m, %c : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = onnx.Sqrt %v : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %d = onnx.Sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = onnx.Div %d, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Where joins with its boolean condition as an input; integer and float16 ops
// do not join (the program is float32).
// CHECK-LABEL: func.func @where_and_types
// CHECK: onnx.node "Pointwise"(%arg1, %{{.+}}, %arg0) {attrs = {args = array<i64: 0, 1, -1, 2, 3, 1>, ops = ["Mul", "Where"]}, domain = "octet"}
// CHECK: onnx.Add {{.*}} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
// CHECK: onnx.Mul {{.*}} : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
// CHECK: onnx.Neg {{.*}} : (tensor<4xf16>) -> tensor<4xf16>
func.func @where_and_types(%c: tensor<4x4xi1>, %x: tensor<4x4xf32>, %i: tensor<4xi64>, %h: tensor<4xf16>) -> (tensor<4x4xf32>, tensor<4xi64>, tensor<4xf16>) {
  %k = onnx.Constant {value = dense<-1.0e9> : tensor<f32>} : () -> tensor<f32>
  %s = onnx.Mul %x, %k : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %w = onnx.Where %c, %s, %k : (tensor<4x4xi1>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %j = onnx.Add %i, %i : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %m = onnx.Mul %h, %h : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  %n = onnx.Neg %m : (tensor<4xf16>) -> tensor<4xf16>
  return %w, %j, %n : tensor<4x4xf32>, tensor<4xi64>, tensor<4xf16>
}

// -----

// No copies where they would cost: %a's reader ReduceSum cannot join a program, and
// %c's operand %b is itself a chain member (a copy would split the Exp, Neg chain). %c's two
// readers are both in the Add, Sub program, so the Exp, Neg chain joins it: one node.
// CHECK-LABEL: func.func @no_copies
// CHECK: %[[A:.+]] = onnx.Mul %arg0, %arg1
// CHECK: onnx.ReduceSum %[[A]]
// CHECK: onnx.node "Pointwise"(%arg0, %[[A]]) {attrs = {args = array<i64: 0, -1, -1, 2, -1, -1, 1, 3, -1, 4, 3, -1>, ops = ["Exp", "Neg", "Add", "Sub"]}
// CHECK-NOT: onnx.Neg
// NODUP-LABEL: func.func @no_copies
func.func @no_copies(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
  %a = onnx.Mul %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n = onnx.none
  %s = onnx.ReduceSum %a, %n {keepdims = 0 : si64} : (tensor<4xf32>, none) -> tensor<f32>
  %b = onnx.Exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %c = onnx.Neg %b : (tensor<4xf32>) -> tensor<4xf32>
  %d = onnx.Add %a, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e = onnx.Sub %d, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s, %e : tensor<f32>, tensor<4xf32>
}

// -----

// SwiGLU: %silu = g * sigmoid(g) is read by the forward's product with %u and by the up
// projection's gradient %du = dy * %silu. The program (Sigmoid, Mul) is computed from %g alone,
// so each reader recomputes it: the forward's product is one program reading g and u, the
// gradient one reading g and dy, and the SiLU output is never stored. With
// recompute-programs=false the SiLU program stays a node of its own that both read.
// CHECK-LABEL: func.func @swiglu
// CHECK: onnx.node "Pointwise"(%arg0, %arg1) {attrs = {args = array<i64: 0, -1, -1, 0, 2, -1, 3, 1, -1>, ops = ["Sigmoid", "Mul", "Mul"]}
// CHECK: onnx.node "Pointwise"(%arg0, %arg2) {attrs = {args = array<i64: 0, -1, -1, 0, 2, -1, 1, 3, -1>, ops = ["Sigmoid", "Mul", "Mul"]}
// CHECK-NOT: onnx.node
// CHECK: return
// NOREC-LABEL: func.func @swiglu
// NOREC: %[[S:.+]] = onnx.node "Pointwise"(%arg0) {attrs = {args = array<i64: 0, -1, -1, 0, 1, -1>, ops = ["Sigmoid", "Mul"]}
// NOREC: onnx.Mul %[[S]], %arg1
// NOREC: onnx.Mul %arg2, %[[S]]
func.func @swiglu(%g: tensor<4x8xf32>, %u: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = onnx.Sigmoid %g : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %silu = onnx.Mul %g, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = onnx.Mul %silu, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %du = onnx.Mul %dy, %silu : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %h, %du : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Not copied: %p is computed from two tensors (recomputing it would read both in each reader),
// and %q's readers include a ReduceSum, which needs it stored anyway.
// CHECK-LABEL: func.func @no_recompute
// CHECK: %[[P:.+]] = onnx.node "Pointwise"(%arg0, %arg1) {attrs = {args = array<i64: 0, 1, -1, 2, -1, -1>, ops = ["Mul", "Exp"]}
// CHECK: onnx.Mul %[[P]], %arg2
// CHECK: onnx.Mul %arg3, %[[P]]
// CHECK: %[[Q:.+]] = onnx.node "Pointwise"(%arg0) {attrs = {args = array<i64: 0, -1, -1, 1, -1, -1>, ops = ["Neg", "Exp"]}
// CHECK: onnx.ReduceSum %[[Q]]
// CHECK: onnx.Mul %[[Q]], %arg2
func.func @no_recompute(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %d: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) {
  %m = onnx.Mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %p = onnx.Exp %m : (tensor<4xf32>) -> tensor<4xf32>
  %x = onnx.Mul %p, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = onnx.Mul %d, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n = onnx.Neg %a : (tensor<4xf32>) -> tensor<4xf32>
  %q = onnx.Exp %n : (tensor<4xf32>) -> tensor<4xf32>
  %none = onnx.none
  %r = onnx.ReduceSum %q, %none {keepdims = 0 : si64} : (tensor<4xf32>, none) -> tensor<f32>
  %z = onnx.Mul %q, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %x, %y, %r, %z : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>
}

// -----

// GeGLU: a Gelu (tanh) whose readers, the forward's product and the up projection's gradient, can
// both join programs is written as its formula's ops (the runtimes' order: 0.5 x (1 + tanh(k (x +
// ((0.044715 x) x) x)))), which each reader's program then recomputes from %g. An erf Gelu that an
// op outside any program reads (ReduceSum, as an FP8 cast would) stays one op. With
// expand-gelus=false the Gelu stays and both Muls read it.
// CHECK-LABEL: func.func @geglu
// CHECK: onnx.node "Pointwise"(%{{.+}}, %arg0, %{{.+}}, %{{.+}}, %{{.+}}, %arg1) {attrs = {{{.*}}ops = ["Mul", "Mul", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Mul", "Mul"]}
// CHECK: onnx.node "Pointwise"(%{{.+}}, %arg0, %{{.+}}, %{{.+}}, %{{.+}}, %arg2) {attrs = {{{.*}}ops = ["Mul", "Mul", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Mul", "Mul"]}
// CHECK: %[[E:.+]] = onnx.Gelu %arg1 {approximate = "none"}
// CHECK: onnx.ReduceSum %[[E]]
// NOGELU-LABEL: func.func @geglu
// NOGELU: %[[G:.+]] = onnx.Gelu %arg0 {approximate = "tanh"}
// NOGELU: onnx.Mul %[[G]], %arg1
// NOGELU: onnx.Mul %arg2, %[[G]]
func.func @geglu(%g: tensor<4x8xf32>, %u: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) {
  %a = onnx.Gelu %g {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = onnx.Mul %a, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %du = onnx.Mul %dy, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = onnx.Gelu %u {approximate = "none"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = onnx.none
  %r = onnx.ReduceSum %e, %n {keepdims = 0 : si64} : (tensor<4x8xf32>, none) -> tensor<f32>
  return %h, %du, %r : tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>
}
