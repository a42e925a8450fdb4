// RUN: fp8-opt %s -split-input-file --octet-autodiff | FileCheck %s

// A parameter read in slices that do not overlap (what tensor.split exports: the q, k and v of
// one projection): the slices' gradients, each zero-padded to the whole tensor (Slice's rule), are
// joined by one Concat, with zeros for the part no slice reads, instead of whole-size Adds.
// CHECK-LABEL: func.func @split
// CHECK-NOT: "Pad"
// CHECK-NOT: onnx.Add {{.*}} -> tensor<2x6xf32>
// CHECK: %[[Z:.+]] = onnx.Constant {value = dense<0.000000e+00> : tensor<2x1xf32>}
// CHECK: %[[G:.+]] = onnx.Concat %{{.+}}, %{{.+}}, %[[Z]] {axis = 1 : si64} : (tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x6xf32>
// CHECK: return %{{.+}}, %[[G]]
func.func @split() -> (tensor<f32> {onnx.name = "loss"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<2x6xf32>
  %s0 = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %e0 = onnx.Constant {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %e1 = onnx.Constant {value = dense<5> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %a = onnx.Slice %w, %s0, %e0, %ax, %none : (tensor<2x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x2xf32>
  %b = onnx.Slice %w, %e0, %e1, %ax, %none : (tensor<2x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x3xf32>
  %a2 = onnx.Mul %a, %a : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %sa = onnx.ReduceSum %a2, %none {keepdims = 0 : si64} : (tensor<2x2xf32>, none) -> tensor<f32>
  %sb = onnx.ReduceSum %b, %none {keepdims = 0 : si64} : (tensor<2x3xf32>, none) -> tensor<f32>
  %l = onnx.Add %sa, %sb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Slices that overlap: the padded gradients are added.
// CHECK-LABEL: func.func @overlap
// CHECK: onnx.node "Pad"
// CHECK: onnx.node "Pad"
// CHECK: onnx.Add %{{.+}}, %{{.+}} : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
// CHECK-NOT: onnx.Concat
func.func @overlap() -> (tensor<f32> {onnx.name = "loss"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<2x6xf32>
  %s0 = onnx.Constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %e0 = onnx.Constant {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %s1 = onnx.Constant {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %e1 = onnx.Constant {value = dense<6> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %a = onnx.Slice %w, %s0, %e0, %ax, %none : (tensor<2x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x4xf32>
  %b = onnx.Slice %w, %s1, %e1, %ax, %none : (tensor<2x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x4xf32>
  %sa = onnx.ReduceSum %a, %none {keepdims = 0 : si64} : (tensor<2x4xf32>, none) -> tensor<f32>
  %sb = onnx.ReduceSum %b, %none {keepdims = 0 : si64} : (tensor<2x4xf32>, none) -> tensor<f32>
  %l = onnx.Add %sa, %sb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
