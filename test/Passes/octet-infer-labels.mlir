// RUN: fp8-opt %s -split-input-file --octet-infer-labels | FileCheck %s

// Hugging Face's causal LMs shift their labels themselves (labels -> Pad -> Slice from 1 on the
// sequence axis -> Reshape -> the loss): fed equal to the tokens.
// CHECK: octet.training = {labels = "same", labels_reason = "the graph shifts its labels 'labels' itself ('shift', a Slice from 1 on the sequence axis, before 'loss'): the labels are fed equal to the tokens"}
// CHECK-LABEL: func.func @hf_shift
func.func @hf_shift(%x: tensor<2x8xi64> {onnx.name = "input_ids"}, %y: tensor<2x8xi64> {onnx.name = "labels"}, %z: tensor<16x16xf32>) -> tensor<f32> {
  %pads = onnx.Constant {value = dense<[0, 0, 0, 1]> : tensor<4xi64>} : () -> tensor<4xi64>
  %p = onnx.node "Pad"(%y, %pads) : (tensor<2x8xi64>, tensor<4xi64>) -> tensor<2x9xi64> loc("pad")
  %s = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = onnx.Constant {value = dense<9> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = onnx.Constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.none
  %sl = onnx.Slice %p, %s, %e, %a, %none : (tensor<2x9xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x8xi64> loc("shift")
  %shape = onnx.Constant {value = dense<[16]> : tensor<1xi64>} : () -> tensor<1xi64>
  %r = onnx.Reshape %sl, %shape : (tensor<2x8xi64>, tensor<1xi64>) -> tensor<16xi64>
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %z, %r, %none {ignore_index = -100 : si64, reduction = "mean"} : (tensor<16x16xf32>, tensor<16xi64>, none) -> (tensor<f32>, none) loc("loss")
  return %l : tensor<f32>
}

// -----

// Labels handed to the loss unchanged in a causal model: fed as the next tokens.
// CHECK: octet.training = {labels = "shifted", labels_reason = "the labels 'labels' reach 'loss' unshifted in a causal model (a causal attention at 'attn'): the labels are fed as the next tokens"}
// CHECK-LABEL: func.func @causal_unshifted
func.func @causal_unshifted(%x: tensor<2x16xi64> {onnx.name = "input_ids"}, %y: tensor<2x16xi64> {onnx.name = "labels"}, %q: tensor<2x16x64xf32>, %z: tensor<32x16xf32>) -> (tensor<f32>, tensor<2x16x64xf32>) {
  %o, %lse = onnx.node "Attention"(%q, %q, %q) {attrs = {is_causal = 1 : si64, q_num_heads = 4 : si64, kv_num_heads = 4 : si64}, domain = "octet"} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x4x16xf32>) loc("attn")
  %shape = onnx.Constant {value = dense<[32]> : tensor<1xi64>} : () -> tensor<1xi64>
  %r = onnx.Reshape %y, %shape : (tensor<2x16xi64>, tensor<1xi64>) -> tensor<32xi64>
  %none = onnx.none
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %z, %r, %none {reduction = "mean"} : (tensor<32x16xf32>, tensor<32xi64>, none) -> (tensor<f32>, none) loc("loss")
  return %l, %o : tensor<f32>, tensor<2x16x64xf32>
}

// -----

// The same without a causal attention (a masked language model's labels, say): unknown, and
// fp8-run asks for --labels.
// CHECK: octet.training = {labels = "unknown", labels_reason = "the labels 'labels' reach 'loss' unshifted and no causal attention was found (a masked language model's labels?)"}
// CHECK-LABEL: func.func @not_causal
func.func @not_causal(%x: tensor<2x16xi64> {onnx.name = "input_ids"}, %y: tensor<2x16xi64> {onnx.name = "labels"}, %z: tensor<32x16xf32>) -> tensor<f32> {
  %shape = onnx.Constant {value = dense<[32]> : tensor<1xi64>} : () -> tensor<1xi64>
  %r = onnx.Reshape %y, %shape : (tensor<2x16xi64>, tensor<1xi64>) -> tensor<32xi64>
  %none = onnx.none
  %l, %lp = onnx.SoftmaxCrossEntropyLoss %z, %r, %none {reduction = "mean"} : (tensor<32x16xf32>, tensor<32xi64>, none) -> (tensor<f32>, none) loc("loss")
  return %l : tensor<f32>
}

// -----

// Labels that never reach a loss through ops that only move them: unknown.
// CHECK: octet.training = {labels = "unknown", labels_reason = "the labels 'labels' reach no SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss through ops that only move them"}
// CHECK-LABEL: func.func @no_loss
func.func @no_loss(%x: tensor<2x16xi64> {onnx.name = "input_ids"}, %y: tensor<2x16xi64> {onnx.name = "labels"}) -> tensor<2x16xi64> {
  %s = onnx.node "Add"(%x, %y) : (tensor<2x16xi64>, tensor<2x16xi64>) -> tensor<2x16xi64>
  return %s : tensor<2x16xi64>
}

// -----

// One token input: nothing to decide, no entry.
// CHECK-NOT: labels =
// CHECK-LABEL: func.func @tokens_only
func.func @tokens_only(%x: tensor<2x16xi64> {onnx.name = "input_ids"}) -> tensor<2x16xi64> {
  return %x : tensor<2x16xi64>
}
