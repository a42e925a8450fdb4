// keep-output-layer (octet-fp8-substitute, on by default; fp8-opt --keep-output-layer): every
// recipe keeps the output layers in high precision, a Linear whose result reaches no other Linear
// (a GPT's lm_head, a classifier's heads). Found from the uses, not the order: a head read only by
// the loss is one, a layer whose result reaches a later Linear through any chain of ops is not.
// The report says why (octet.fp8_kept = "output"). keep-output-layer=false converts it, as
// Accelerate's own rules do; ao's keep-first-last names the last Linear "last" first.
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=te})' | FileCheck %s --check-prefix=TE
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=msamp opt-level=O2})' | FileCheck %s --check-prefix=MSAMP
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=te keep-output-layer=false})' | FileCheck %s --check-prefix=OFF
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=ao})' | FileCheck %s --check-prefix=AO
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=te kept-gemm-precision=bf16})' | FileCheck %s --check-prefix=BF16
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=none kept-gemm-precision=bf16})' | FileCheck %s --check-prefix=AUTO
// RUN: fp8-opt %s -split-input-file --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=none})' | FileCheck %s --check-prefix=NONE
// RUN: not fp8-opt %s -split-input-file -o /dev/null --pass-pipeline='builtin.module(octet-fp8-substitute{recipe=fp4})' 2>&1 | FileCheck %s --check-prefix=BADRECIPE
// BADRECIPE: octet-fp8-substitute: recipe='fp4' is not valid; use one of: te, ao, msamp, none
// RUN: not fp8-opt %s -split-input-file -o /dev/null --pass-pipeline='builtin.module(octet-fp8-substitute{recipe=te keep-output-layer=maybe})' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: 'maybe' is invalid value for boolean argument
// RUN: not fp8-opt %s -split-input-file -o /dev/null --pass-pipeline='builtin.module(octet-fp8-substitute{recipe=te kept-gemm-precision=fp16})' 2>&1 | FileCheck %s --check-prefix=BADPREC
// BADPREC: octet-fp8-substitute: kept-gemm-precision='fp16' is not valid; use one of: f32, bf16
// kept-gemm-precision=bf16: a kept layer's MatMul reads BF16 casts of its operands and its result
// is cast back to float32 (as under autocast); FP8 layers are left alone.

// A chain: the head's logits go to a softmax and the loss's sum; fc1 reaches the head through GELU.
// TE-LABEL: func.func @chain
// TE: fp8.linear "fc1"
// TE: nn.linear "head"{{.*}}octet.fp8_kept = "output"
// MSAMP-LABEL: func.func @chain
// MSAMP: fp8.linear "fc1"{{.*}}recipe = "msamp:O2"
// MSAMP: nn.linear "head"{{.*}}octet.fp8_kept = "output"
// OFF-LABEL: func.func @chain
// OFF: fp8.linear "fc1"
// OFF: fp8.linear "head"
// OFF-NOT: octet.fp8_kept
// BF16-LABEL: func.func @chain
// BF16: fp8.linear "fc1"
// BF16: nn.linear "head"{{.*}}octet.fp8_kept = "output", octet.gemm_precision = "bf16"
// BF16: %[[A:.+]] = onnx.Cast %{{.+}} {to = 16 : si64} : (tensor<4x64xf32>) -> tensor<4x64xbf16>
// BF16: %[[B:.+]] = onnx.Cast %{{.+}} {to = 16 : si64} : (tensor<64x64xf32>) -> tensor<64x64xbf16>
// BF16: %[[M:.+]] = onnx.MatMul %[[A]], %[[B]] : (tensor<4x64xbf16>, tensor<64x64xbf16>) -> tensor<4x64xbf16>
// BF16: onnx.Cast %[[M]] {to = 1 : si64} : (tensor<4x64xbf16>) -> tensor<4x64xf32>
// recipe=none (PyTorch's BF16 autocast with kept-gemm-precision=bf16): no layer converts, every
// Linear is kept as "autocast" with its MatMul on BF16 operands; without it the model is unchanged.
// AUTO-LABEL: func.func @chain
// AUTO-NOT: fp8.linear
// AUTO: nn.linear "fc1"{{.*}}octet.fp8_kept = "autocast", octet.gemm_precision = "bf16"
// AUTO: onnx.MatMul %{{.+}}, %{{.+}} : (tensor<4x64xbf16>, tensor<64x64xbf16>) -> tensor<4x64xbf16>
// AUTO: nn.linear "head"{{.*}}octet.fp8_kept = "autocast", octet.gemm_precision = "bf16"
// AUTO: onnx.MatMul %{{.+}}, %{{.+}} : (tensor<4x64xbf16>, tensor<64x64xbf16>) -> tensor<4x64xbf16>
// NONE-LABEL: func.func @chain
// NONE-NOT: fp8.linear
// NONE: nn.linear "fc1"{{.*}}octet.fp8_kept = "autocast"
// NONE-NOT: bf16
// NONE: return
// AO-LABEL: func.func @chain
// AO: nn.linear "fc1"{{.*}}octet.fp8_kept = "first"
// AO: nn.linear "head"{{.*}}octet.fp8_kept = "last"
func.func @chain(%x: tensor<4x64xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}) {
  %w1 = onnx.initializer "fc1.weight" = dense<0.25> : tensor<64x64xf32>
  %w2 = onnx.initializer "head.weight" = dense<0.5> : tensor<64x64xf32>
  %h = onnx.MatMul %x, %w1 : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %g = onnx.Gelu %h : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = onnx.MatMul %g, %w2 : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %none = onnx.none
  %p = onnx.Softmax %y {axis = -1 : si64} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %l = onnx.ReduceSum %p, %none {keepdims = 0 : si64} : (tensor<4x64xf32>, none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Two heads on one trunk: both are output layers; the trunk reaches both, so it is not. ao names
// the last Linear by its order and keeps the other head as an output layer.
// TE-LABEL: func.func @two_heads
// TE: fp8.linear "trunk"
// TE-DAG: nn.linear "cls"{{.*}}octet.fp8_kept = "output"
// TE-DAG: nn.linear "reg"{{.*}}octet.fp8_kept = "output"
// OFF-LABEL: func.func @two_heads
// OFF-NOT: octet.fp8_kept
// AO-LABEL: func.func @two_heads
// AO: nn.linear "trunk"{{.*}}octet.fp8_kept = "first"
// AO: nn.linear "cls"{{.*}}octet.fp8_kept = "output"
// AO: nn.linear "reg"{{.*}}octet.fp8_kept = "last"
func.func @two_heads(%x: tensor<4x64xf32> {onnx.name = "x"}) -> (tensor<4x32xf32> {onnx.name = "a"}, tensor<4x16xf32> {onnx.name = "b"}) {
  %w0 = onnx.initializer "trunk.weight" = dense<0.25> : tensor<64x64xf32>
  %w1 = onnx.initializer "cls.weight" = dense<0.5> : tensor<64x32xf32>
  %w2 = onnx.initializer "reg.weight" = dense<0.5> : tensor<64x16xf32>
  %h = onnx.MatMul %x, %w0 : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %r = onnx.Relu %h : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %a = onnx.MatMul %r, %w1 : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  %b = onnx.MatMul %r, %w2 : (tensor<4x64xf32>, tensor<64x16xf32>) -> tensor<4x16xf32>
  return %a, %b : tensor<4x32xf32>, tensor<4x16xf32>
}

// -----

// A residual: the block's output is both a graph output and the input of the next Linear, so the
// first Linear reaches another one and stays FP8, although its result is also returned.
// TE-LABEL: func.func @residual
// TE: fp8.linear "block"
// TE: nn.linear "out"{{.*}}octet.fp8_kept = "output"
// TE-NOT: octet.fp8_kept
func.func @residual(%x: tensor<4x64xf32> {onnx.name = "x"}) -> (tensor<4x64xf32> {onnx.name = "h"}, tensor<4x64xf32> {onnx.name = "y"}) {
  %w0 = onnx.initializer "block.weight" = dense<0.25> : tensor<64x64xf32>
  %w1 = onnx.initializer "out.weight" = dense<0.5> : tensor<64x64xf32>
  %h = onnx.MatMul %x, %w0 : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %s = onnx.Add %h, %x : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = onnx.MatMul %s, %w1 : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  return %s, %y : tensor<4x64xf32>, tensor<4x64xf32>
}
