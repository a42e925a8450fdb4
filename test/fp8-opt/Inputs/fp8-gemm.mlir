func.func @main_graph(%x: tensor<4x4xf32>) -> tensor<f32> {
  %a = fp8.amax %x : tensor<4x4xf32> -> tensor<f32>
  return %a : tensor<f32>
}
