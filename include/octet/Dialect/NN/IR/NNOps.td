//===- NNOps.td - The nn dialect: recognized layers ------------------------===//
//
// Layers found in an imported ONNX graph (octet-raise-layers), named after
// the user's modules (`model.layers.0.mlp.up_proj`). Each op keeps the exact
// ops it was recognized from in its body, so a layer a recipe leaves alone
// lowers back to what it was (octet-lower-layers), bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_DIALECT_NN_IR_NNOPS_TD
#define OCTET_DIALECT_NN_IR_NNOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let summary = "Recognized layers: Linear, LayerNorm, RMSNorm, GELU, SiLU";
  let cppNamespace = "::octet::nn";
}

class NN_LayerOp<string mnemonic, string sum, string desc, dag extraAttrs = (ins)>
    : Op<NN_Dialect, mnemonic, [SingleBlock, Pure]> {
  let summary = sum;
  let description = desc # [{

    The body's block arguments are the inputs; `nn.yield` returns the
    layer's output first, then any FP8 casts a recipe asked the layer to
    produce itself (LayerNorm/RMSNorm feeding FP8 Linears).
  }];
  let arguments = !con((ins StrAttr:$layer, Variadic<AnyType>:$inputs), extraAttrs);
  let results = (outs Variadic<AnyType>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$layer `(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    mlir::Value getOutput() { return getOutputs().front(); }
    mlir::Value getX() { return getInputs().front(); }
  }];
}

def NN_LinearOp : NN_LayerOp<"linear", "A Linear layer: y = x W (+ b)", [{
    Inputs: x [..., K], the weight (a trainable initializer) stored [K, N],
    or [N, K] with `transpose_weight` (PyTorch's layout, reached through a
    Transpose or Gemm's transB), and an optional bias [N].
    Example:
    `%y = nn.linear "model.h.0.mlp.c_fc"(%x, %w, %b) : (tensor<32x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<32x256xf32> { ... nn.yield %r : tensor<32x256xf32> }`
  }], (ins DefaultValuedAttr<BoolAttr, "false">:$transpose_weight)> {
  let extraClassDeclaration = [{
    mlir::Value getOutput() { return getOutputs().front(); }
    mlir::Value getX() { return getInputs()[0]; }
    mlir::Value getWeight() { return getInputs()[1]; }
    mlir::Value getBias() { return getInputs().size() > 2 ? getInputs()[2] : mlir::Value(); }
    /// [K, N] of the weight as the GEMM sees it (dynamic dims as -1).
    std::pair<int64_t, int64_t> getKN();
  }];
}

def NN_LayerNormOp : NN_LayerOp<"layer_norm", "LayerNorm over the last dimension", [{
    Inputs: x, scale (gamma), optional bias (beta). From the
    LayerNormalization op or the decomposed
    ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div(/Mul/Add) form.
  }], (ins F32Attr:$epsilon)>;

def NN_RMSNormOp : NN_LayerOp<"rms_norm", "RMSNorm over the last dimension", [{
    Inputs: x, scale. From the Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul/Mul
    form Llama exports write.
  }], (ins F32Attr:$epsilon)>;

def NN_GeluOp : NN_LayerOp<"gelu", "GELU activation", [{
    Input: x. From the Gelu op, the erf form or the tanh form
    (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))).
  }], (ins StrAttr:$approximate)>;

def NN_SiluOp : NN_LayerOp<"silu", "SiLU activation: x * sigmoid(x)", [{
    Input: x.
  }]>;

def NN_YieldOp : Op<NN_Dialect, "yield", [Pure, Terminator, HasParent<"LinearOp, LayerNormOp, RMSNormOp, GeluOp, SiluOp">]> {
  let summary = "Returns a layer body's results";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif
