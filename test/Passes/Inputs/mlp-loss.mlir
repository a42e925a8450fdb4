// Inputs/mlp.mlir with a scalar loss (mean of y^2): the training passes' test model.
func.func @main_graph(%x: tensor<4x64xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %g = onnx.initializer "ln.weight" = dense<1.0> : tensor<64xf32>
  %b = onnx.initializer "ln.bias" = dense<0.0> : tensor<64xf32>
  %w1 = onnx.initializer "fc1.weight" = dense<0.25> : tensor<64x128xf32>
  %w2 = onnx.initializer "fc2.weight" = dense<0.125> : tensor<128x24xf32>
  %w3 = onnx.initializer "head.weight" = dense<0.5> : tensor<64x24xf32>
  %n, %m, %i = onnx.LayerNormalization %x, %g, %b {axis = -1 : si64, epsilon = 1.0e-5 : f32} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<4x64xf32>, none, none)
  %h = onnx.MatMul %n, %w1 : (tensor<4x64xf32>, tensor<64x128xf32>) -> tensor<4x128xf32>
  %r = onnx.Relu %h : (tensor<4x128xf32>) -> tensor<4x128xf32>
  %o = onnx.MatMul %r, %w2 : (tensor<4x128xf32>, tensor<128x24xf32>) -> tensor<4x24xf32>
  %t = onnx.Transpose %w3 {perm = array<i64: 1, 0>} : (tensor<64x24xf32>) -> tensor<24x64xf32>
  %y = onnx.MatMul %o, %t : (tensor<4x24xf32>, tensor<24x64xf32>) -> tensor<4x64xf32>
  %sq = onnx.Mul %y, %y : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %none = onnx.none
  %l = onnx.ReduceMean %sq, %none {keepdims = 0 : si64} : (tensor<4x64xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}
