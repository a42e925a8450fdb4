// Two scalar outputs: the loss is chosen with loss= (fp8-opt --loss).
// The loss named by loss=, parameters matching freeze= get no gradient.
func.func @choose(%x: tensor<4xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "other"}, tensor<f32> {onnx.name = "total"}) {
  %w = onnx.initializer "w" = dense<0.5> : tensor<4xf32>
  %b = onnx.initializer "bias" = dense<0.5> : tensor<4xf32>
  %y = onnx.Mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %z = onnx.Add %y, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n = onnx.none
  %l = onnx.ReduceSum %z, %n {keepdims = 0 : si64} : (tensor<4xf32>, none) -> tensor<f32>
  %o = onnx.ReduceMean %x, %n {keepdims = 0 : si64} : (tensor<4xf32>, none) -> tensor<f32>
  return %o, %l : tensor<f32>, tensor<f32>
}

