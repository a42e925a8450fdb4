// RUN: fp8-opt %s -split-input-file --octet-pad-loss-classes | FileCheck %s

// GPT-2's lm_head as pad-kept-gemms leaves it (N 10 padded to 16): the logits' slice goes, the
// padding becomes -inf (an Add of ten zeros and six -infs), the Cast and the Reshape widen, and
// the loss reads [M, 16] scores.
// CHECK-LABEL: func.func @lm_head
// CHECK-NOT: onnx.Slice
// CHECK: %[[ROW:.+]] = onnx.Constant {value = dense<[0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0xFF80, 0xFF80, 0xFF80, 0xFF80, 0xFF80, 0xFF80]> : tensor<16xbf16>}
// CHECK: %[[M:.+]] = onnx.Add %[[Y:.+]], %[[ROW]] : (tensor<2x4x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
// CHECK: %[[F:.+]] = onnx.Cast %[[M]] {to = 1 : si64} : (tensor<2x4x16xbf16>) -> tensor<2x4x16xf32>
// CHECK: %[[S:.+]] = onnx.Constant {value = dense<[-1, 16]> : tensor<2xi64>}
// CHECK: %[[R:.+]] = onnx.Reshape %[[F]], %[[S]] : (tensor<2x4x16xf32>, tensor<2xi64>) -> tensor<8x16xf32>
// CHECK: onnx.SoftmaxCrossEntropyLoss %[[R]], %arg2, %{{.+}} {ignore_index = -100 : si64, reduction = "mean"} : (tensor<8x16xf32>, tensor<8xi64>, none)
func.func @lm_head(%x: tensor<2x4x8xbf16>, %w: tensor<8x16xbf16>, %labels: tensor<8xi64>) -> tensor<f32> {
  %y = onnx.MatMul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %s0 = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s1 = onnx.Constant {value = dense<[10]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s2 = onnx.Constant {value = dense<[2]> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %z = onnx.Slice %y, %s0, %s1, %s2, %none {octet.pad_slice} : (tensor<2x4x16xbf16>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x4x10xbf16>
  %f = onnx.Cast %z {to = 1 : si64} : (tensor<2x4x10xbf16>) -> tensor<2x4x10xf32>
  %shape = onnx.Constant {value = dense<[-1, 10]> : tensor<2xi64>} : () -> tensor<2xi64>
  %r = onnx.Reshape %f, %shape : (tensor<2x4x10xf32>, tensor<2xi64>) -> tensor<8x10xf32>
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %r, %labels, %none {ignore_index = -100 : si64, reduction = "mean"} : (tensor<8x10xf32>, tensor<8xi64>, none) -> (tensor<f32>, none)
  return %l : tensor<f32>
}

// -----

// A Reshape whose shape leaves the class axis to -1 keeps its shape; a float32 result, no Cast.
// CHECK-LABEL: func.func @rows_given
// CHECK-NOT: onnx.Slice
// CHECK: onnx.Add %{{.+}}, %{{.+}} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK: %[[S:.+]] = onnx.Constant {value = dense<[8, -1]> : tensor<2xi64>}
// CHECK: onnx.Reshape %{{.+}}, %[[S]] : (tensor<8x16xf32>, tensor<2xi64>) -> tensor<8x16xf32>
// CHECK: onnx.SoftmaxCrossEntropyLoss {{.+}} : (tensor<8x16xf32>, tensor<8xi64>, none)
func.func @rows_given(%y: tensor<8x16xf32>, %labels: tensor<8xi64>) -> tensor<f32> {
  %s0 = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s1 = onnx.Constant {value = dense<[10]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s2 = onnx.Constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %z = onnx.Slice %y, %s0, %s1, %s2, %none {octet.pad_slice} : (tensor<8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<8x10xf32>
  %shape = onnx.Constant {value = dense<[8, -1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %r = onnx.Reshape %z, %shape : (tensor<8x10xf32>, tensor<2xi64>) -> tensor<8x10xf32>
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %r, %labels, %none {reduction = "mean"} : (tensor<8x10xf32>, tensor<8xi64>, none) -> (tensor<f32>, none)
  return %l : tensor<f32>
}

// -----

// A Slice the compiler did not put there (no octet.pad_slice): its padding may hold anything.
// CHECK-LABEL: func.func @unmarked
// CHECK: onnx.Slice
// CHECK-NOT: 0xFF800000
// CHECK: onnx.SoftmaxCrossEntropyLoss {{.+}} : (tensor<8x10xf32>, tensor<8xi64>, none)
func.func @unmarked(%y: tensor<8x16xf32>, %labels: tensor<8xi64>) -> tensor<f32> {
  %s0 = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s1 = onnx.Constant {value = dense<[10]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s2 = onnx.Constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %z = onnx.Slice %y, %s0, %s1, %s2, %none : (tensor<8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<8x10xf32>
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %z, %labels, %none {reduction = "mean"} : (tensor<8x10xf32>, tensor<8xi64>, none) -> (tensor<f32>, none)
  return %l : tensor<f32>
}

// -----

// The logits are also a result of the function (a model returning loss and logits): the Slice
// stays, and so do the loss's 10 classes.
// CHECK-LABEL: func.func @logits_returned
// CHECK: onnx.Slice
// CHECK-NOT: 0xFF800000
// CHECK: onnx.SoftmaxCrossEntropyLoss {{.+}} : (tensor<8x10xf32>, tensor<8xi64>, none)
func.func @logits_returned(%y: tensor<8x16xf32>, %labels: tensor<8xi64>) -> (tensor<f32>, tensor<8x10xf32>) {
  %s0 = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s1 = onnx.Constant {value = dense<[10]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s2 = onnx.Constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %z = onnx.Slice %y, %s0, %s1, %s2, %none {octet.pad_slice} : (tensor<8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<8x10xf32>
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %z, %labels, %none {reduction = "mean"} : (tensor<8x10xf32>, tensor<8xi64>, none) -> (tensor<f32>, none)
  return %l, %z : tensor<f32>, tensor<8x10xf32>
}

// -----

// Class weights (one per class: the padding would need its own) and a log_prob in use keep it.
// CHECK-LABEL: func.func @weights_and_log_prob
// CHECK-COUNT-2: onnx.Slice
// CHECK-NOT: 0xFF800000
func.func @weights_and_log_prob(%y: tensor<8x16xf32>, %labels: tensor<8xi64>, %cw: tensor<10xf32>) -> (tensor<f32>, tensor<8x10xf32>) {
  %s0 = onnx.Constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s1 = onnx.Constant {value = dense<[10]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s2 = onnx.Constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %z = onnx.Slice %y, %s0, %s1, %s2, %none {octet.pad_slice} : (tensor<8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<8x10xf32>
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %z, %labels, %cw {reduction = "mean"} : (tensor<8x10xf32>, tensor<8xi64>, tensor<10xf32>) -> (tensor<f32>, none)
  %z2 = onnx.Slice %y, %s0, %s1, %s2, %none {octet.pad_slice} : (tensor<8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<8x10xf32>
  %l2, %lp2 = onnx.SoftmaxCrossEntropyLoss %z2, %labels, %none {reduction = "mean"} : (tensor<8x10xf32>, tensor<8xi64>, none) -> (tensor<f32>, tensor<8x10xf32>)
  %sum = onnx.Add %l, %l2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %sum, %lp2 : tensor<f32>, tensor<8x10xf32>
}
