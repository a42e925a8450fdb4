// RUN: fp8-opt %s -split-input-file -verify-diagnostics

func.func @add_not_broadcastable(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{operand shapes are not broadcast-compatible}}
  %c = onnx.Add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %c : tensor<2x3xf32>
}

// -----

func.func @add_bad_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<3x3xf32> {
  // expected-error @+1 {{result shape does not match the broadcast of the operand shapes}}
  %c = onnx.Add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return %c : tensor<3x3xf32>
}

// -----

func.func @mul_mixed_types(%a: tensor<3xf32>, %b: tensor<3xf16>) -> tensor<3xf32> {
  // expected-error @+1 {{operands must have the same element type}}
  %c = onnx.Mul %a, %b : (tensor<3xf32>, tensor<3xf16>) -> tensor<3xf32>
  return %c : tensor<3xf32>
}

// -----

func.func @matmul_k(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{contraction dimensions differ: A has K=3, B has K=4}}
  %c = onnx.MatMul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %c : tensor<2x5xf32>
}

// -----

func.func @gemm_rank(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  %n = onnx.none
  // expected-error @+1 {{A and B must be 2-D}}
  %c = onnx.Gemm %a, %b, %n : (tensor<2x3x4xf32>, tensor<4x5xf32>, none) -> tensor<2x5xf32>
  return %c : tensor<2x5xf32>
}

// -----

func.func @gemm_k(%a: tensor<2x3xf32>, %b: tensor<5x4xf32>) -> tensor<2x5xf32> {
  %n = onnx.none
  // expected-error @+1 {{contraction dimensions differ: op(A) has K=3, op(B) has K=4}}
  %c = onnx.Gemm %a, %b, %n {transB = 1 : si64} : (tensor<2x3xf32>, tensor<5x4xf32>, none) -> tensor<2x5xf32>
  return %c : tensor<2x5xf32>
}

// -----

func.func @layernorm_axis(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %n = onnx.none
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y, %m, %i = onnx.LayerNormalization %x, %s, %n {axis = 2 : si64} : (tensor<2x8xf32>, tensor<8xf32>, none) -> (tensor<2x8xf32>, none, none)
  return %y : tensor<2x8xf32>
}

// -----

func.func @layernorm_scale(%x: tensor<2x8xf32>, %s: tensor<4xf32>) -> tensor<2x8xf32> {
  %n = onnx.none
  // expected-error @+1 {{Scale shape does not broadcast to the normalized shape}}
  %y, %m, %i = onnx.LayerNormalization %x, %s, %n : (tensor<2x8xf32>, tensor<4xf32>, none) -> (tensor<2x8xf32>, none, none)
  return %y : tensor<2x8xf32>
}

// -----

func.func @rmsnorm_scale(%x: tensor<2x8xf32>, %s: tensor<4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{Scale shape does not broadcast to the normalized shape}}
  %y = onnx.RMSNormalization %x, %s : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @rmsnorm_axis(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %y = onnx.RMSNormalization %x, %s {axis = -3 : si64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @rmsnorm_types(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xbf16> {
  // expected-error @+1 {{X and Y}}
  %y = onnx.RMSNormalization %x, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}

// -----

func.func @softmax_axis(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %y = onnx.Softmax %x {axis = -3 : si64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @gelu_mode(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{approximate must be 'none' or 'tanh', got 'erf'}}
  %y = onnx.Gelu %x {approximate = "erf"} : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @cast_to(%x: tensor<8xf32>) -> tensor<8xf16> {
  // expected-error @+1 {{result element type 'f16' does not match 'to' = 1}}
  %y = onnx.Cast %x {to = 1 : si64} : (tensor<8xf32>) -> tensor<8xf16>
  return %y : tensor<8xf16>
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{perm must be a permutation of [0, rank)}}
  %y = onnx.Transpose %x {perm = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

func.func @transpose_rank(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{perm has 3 entries for an input of rank 2}}
  %y = onnx.Transpose %x {perm = array<i64: 0, 1, 2>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{inputs must have the same rank, got 2 and 1}}
  %c = onnx.Concat %a, %b {axis = 0 : si64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x6xf32>
  return %c : tensor<2x6xf32>
}

// -----

func.func @split_count(%x: tensor<4xf32>, %s: tensor<3xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{split has 3 sizes but the op has 2 results}}
  %a, %b = onnx.Split %x, %s : (tensor<4xf32>, tensor<3xi64>) -> (tensor<2xf32>, tensor<2xf32>)
  return %a : tensor<2xf32>
}

// -----

func.func @reshape_shape(%x: tensor<4xf32>, %s: tensor<2x2xi64>) -> tensor<2x2xf32> {
  // expected-error @+1 {{shape must be a 1-D tensor, got rank 2}}
  %y = onnx.Reshape %x, %s : (tensor<4xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

func.func @gather_elements_rank(%x: tensor<4x4xf32>, %i: tensor<4xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{data and indices must have the same rank, got 2 and 1}}
  %y = onnx.GatherElements %x, %i : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @sce_reduction(%s: tensor<4x10xf32>, %l: tensor<4xi64>) -> tensor<f32> {
  %n = onnx.none
  // expected-error @+1 {{reduction must be 'none', 'sum' or 'mean', got 'max'}}
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %s, %l, %n {reduction = "max"} : (tensor<4x10xf32>, tensor<4xi64>, none) -> (tensor<f32>, none)
  return %loss : tensor<f32>
}

// -----

func.func @sce_labels(%s: tensor<4x10xf32>, %l: tensor<4x2xi64>) -> tensor<f32> {
  %n = onnx.none
  // expected-error @+1 {{labels must have rank 1 for scores of rank 2, got 2}}
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %s, %l, %n : (tensor<4x10xf32>, tensor<4x2xi64>, none) -> (tensor<f32>, none)
  return %loss : tensor<f32>
}

// -----

func.func @constant_two_values() -> tensor<f32> {
  // expected-error @+1 {{needs exactly one value attribute, got 2}}
  %c = onnx.Constant {value = dense<1.0> : tensor<f32>, value_float = 1.0 : f32} : () -> tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @initializer_type() -> tensor<2xf32> {
  // expected-error @+1 {{failed to verify that result type matches the value's type}}
  %w = "onnx.initializer"() {name = "w", value = dense<1.0> : tensor<3xf32>} : () -> tensor<2xf32>
  return %w : tensor<2xf32>
}

// -----

func.func @quantize_zero_point(%x: tensor<4xf32>, %s: tensor<f32>, %z: tensor<f8E5M2>) -> tensor<4xf8E4M3FN> {
  // expected-error @+1 {{output element type 'f8E4M3FN' must match the zero point's element type 'f8E5M2'}}
  %q = onnx.QuantizeLinear %x, %s, %z : (tensor<4xf32>, tensor<f32>, tensor<f8E5M2>) -> tensor<4xf8E4M3FN>
  return %q : tensor<4xf8E4M3FN>
}

// -----

func.func @generic_regions(%c: tensor<i1>) -> tensor<f32> {
  // expected-error @+1 {{has 1 subgraph regions but 2 subgraph_attrs names}}
  %r = onnx.node "If"(%c) {subgraph_attrs = ["then_branch", "else_branch"]} subgraphs {
    %z = onnx.initializer "z" = dense<0.0> : tensor<f32>
    onnx.yield %z : tensor<f32>
  } : (tensor<i1>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

func.func @where_cond(%c: tensor<2xi1>, %x: tensor<2xf32>, %y: tensor<2xf16>) -> tensor<2xf32> {
  // expected-error @+1 {{X, Y and the result must have the same element type}}
  %r = onnx.Where %c, %x, %y : (tensor<2xi1>, tensor<2xf32>, tensor<2xf16>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @reshape_count(%x: tensor<4x8xf32>, %s: tensor<2xi64>) -> tensor<5x7xf32> {
  // expected-error @+1 {{reshapes 32 values ('tensor<4x8xf32>') to 35 ('tensor<5x7xf32>'); the target shape must keep the count}}
  %y = onnx.Reshape %x, %s : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<5x7xf32>
  return %y : tensor<5x7xf32>
}

// -----

func.func @concat_other_dims(%a: tensor<4x8xf32>, %b: tensor<3x5xf32>) -> tensor<7x8xf32> {
  // expected-error @+1 {{inputs 'tensor<4x8xf32>' and 'tensor<3x5xf32>' differ in dimension 1, not only along axis 0}}
  %c = onnx.Concat %a, %b {axis = 0 : si64} : (tensor<4x8xf32>, tensor<3x5xf32>) -> tensor<7x8xf32>
  return %c : tensor<7x8xf32>
}

// -----

func.func @split_cover(%x: tensor<4x8xf32>, %s: tensor<2xi64>) -> tensor<4x3xf32> {
  // expected-error @+1 {{parts of 6 along axis 1 do not cover the input's 8}}
  %a, %b = onnx.Split %x, %s {axis = 1 : si64} : (tensor<4x8xf32>, tensor<2xi64>) -> (tensor<4x3xf32>, tensor<4x3xf32>)
  return %a : tensor<4x3xf32>
}

// -----

func.func @range_delta_zero(%a: tensor<i64>, %b: tensor<i64>) -> tensor<?xi64> {
  %d = onnx.Constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  // expected-error @+1 {{delta is 0: the range never reaches its limit}}
  %r = onnx.Range %a, %b, %d : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return %r : tensor<?xi64>
}
