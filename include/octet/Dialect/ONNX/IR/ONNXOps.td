//===- ONNXOps.td - The onnx dialect: ONNX graphs as typed MLIR ops -------===//
//
// Typed ops for what transformer training graphs use (GPT-2, Llama, BERT
// exports) plus `onnx.node`, which carries any other ONNX node losslessly.
// An op's mnemonic is its ONNX op_type, operands and results are positional
// as in ONNX, and a missing optional input or output is a value of type
// `none` (see `onnx.none`). ONNX attributes keep their ONNX names with one
// canonical MLIR kind each: INT -> si64, FLOAT -> f32, STRING -> string,
// INTS -> array<i64>, FLOATS -> array<f32>, STRINGS -> [strings],
// TENSOR -> elements, TYPE_PROTO -> type; GRAPH(S) become regions.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_DIALECT_ONNX_IR_ONNXOPS_TD
#define OCTET_DIALECT_ONNX_IR_ONNXOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let summary = "ONNX graphs: typed transformer ops plus a lossless generic node";
  let description = [{
    The import target for `onnx::ModelProto` and the export source for it.
    A model is a `func.func` (by default `@main_graph`) whose arguments are the
    graph inputs and whose results are the graph outputs; initializers are
    `onnx.initializer` ops. Model-level data (ir_version, opset imports,
    producer) lives in `onnx.*` attributes of the module.
  }];
  let cppNamespace = "::octet::onnx_dialect";
  let useDefaultTypePrinterParser = 1;
  let useFoldAPI = kEmitFoldAdaptorFolder;
  let extraClassDeclaration = [{
    /// The ONNX op_type of a typed op, or "" for ops that are not ONNX nodes.
    static llvm::StringRef getOnnxOpType(mlir::Operation *op);
    void registerTypes();
  }];
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

class ONNX_Type<string name, string typeMnemonic> : TypeDef<ONNX_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def ONNX_StringType : ONNX_Type<"String", "string"> {
  let summary = "Element type of ONNX STRING tensors";
}

def ONNX_UnknownType : ONNX_Type<"Unknown", "unknown"> {
  let summary = "Element type of a value whose ONNX type the model does not give";
}

def ONNX_SeqType : ONNX_Type<"Seq", "seq"> {
  let summary = "ONNX sequence of tensors";
  let parameters = (ins "::mlir::Type":$elementType);
  let assemblyFormat = "`<` $elementType `>`";
}

def ONNX_OptType : ONNX_Type<"Opt", "opt"> {
  let summary = "ONNX optional value";
  let parameters = (ins "::mlir::Type":$elementType);
  let assemblyFormat = "`<` $elementType `>`";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def ONNX_AnyValue : AnyTypeOf<[AnyTensor, ONNX_SeqType, ONNX_OptType]>;
def ONNX_TensorOrNone : AnyTypeOf<[AnyTensor, NoneType]>;
def ONNX_FloatTensor : TensorOf<[AnyFloat]>;
def ONNX_IntTensor : TensorOf<[AnySignlessInteger]>;
def ONNX_I64Tensor : TensorOf<[I64]>;
def ONNX_IntTensorOrNone : AnyTypeOf<[TensorOf<[AnySignlessInteger]>, NoneType]>;
def ONNX_BoolTensor : TensorOf<[I1]>;

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

class ONNX_Op<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic, traits>;

// A typed ONNX node: side-effect free, printed in functional form.
class ONNX_NodeBase<string mnemonic, list<Trait> traits = []>
    : ONNX_Op<mnemonic, !listconcat([Pure], traits)> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

class ONNX_Unary<string mnemonic, Type ty, string desc>
    : ONNX_NodeBase<mnemonic, [SameOperandsAndResultType]> {
  let summary = "ONNX " # mnemonic # ": " # desc;
  let arguments = (ins ty:$X);
  let results = (outs ty:$Y);
}

// Multidirectional (numpy-style) broadcasting of two inputs.
class ONNX_Binary<string mnemonic, Type operandTy, Type resultTy, string desc,
                  list<Trait> traits = []>
    : ONNX_NodeBase<mnemonic, traits> {
  let summary = "ONNX " # mnemonic # ": " # desc # " with broadcasting";
  let arguments = (ins operandTy:$A, operandTy:$B);
  let results = (outs resultTy:$C);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Structural ops
//===----------------------------------------------------------------------===//

def ONNX_InitializerOp : ONNX_Op<"initializer", [Pure,
    TypesMatchWith<"result type matches the value's type", "value", "output",
                   "$_self">]> {
  let summary = "A graph initializer: a named tensor (trainable weights live here)";
  let description = [{
    Example: `%w = onnx.initializer "h.0.attn.c_attn.weight" = dense<...> : tensor<64x192xf32>`
  }];
  let arguments = (ins StrAttr:$name, ElementsAttr:$value);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = "$name `=` $value attr-dict";
  let hasVerifier = 1;
}

def ONNX_NoneOp : ONNX_Op<"none", [Pure]> {
  let summary = "The absent value of an optional input (an empty name in ONNX)";
  let results = (outs NoneType:$none);
  let assemblyFormat = "attr-dict";
}

def ONNX_YieldOp : ONNX_Op<"yield", [Pure, Terminator, ReturnLike]> {
  let summary = "Returns the outputs of an ONNX subgraph (If/Loop/Scan bodies)";
  let arguments = (ins Variadic<AnyType>:$outputs);
  let assemblyFormat = "attr-dict ($outputs^ `:` type($outputs))?";
}

def ONNX_GenericNodeOp : ONNX_Op<"node", [RecursiveMemoryEffects]> {
  let summary = "Any ONNX node, carried losslessly";
  let description = [{
    Holds an ONNX node that has no typed op here, or whose opset version is
    older than the typed op's: `op_type`, `domain`, its attributes in
    `attrs` (in the canonical kinds listed in the dialect description) and
    its GRAPH/GRAPHS attributes as regions, named in `subgraph_attrs`
    (a GRAPHS attribute `g` with n graphs is n consecutive entries `g[]`).
    Example:
    `%y = onnx.node "FusedMatMul"(%a, %b) {attrs = {alpha = 1.0 : f32}, domain = "com.microsoft"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>`
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, StrAttr:$op_type,
                   DefaultValuedStrAttr<StrAttr, "">:$domain,
                   DefaultValuedAttr<DictionaryAttr, "{}">:$attrs,
                   DefaultValuedAttr<StrArrayAttr, "{}">:$subgraph_attrs);
  let results = (outs Variadic<AnyType>:$outputs);
  let regions = (region VariadicRegion<SizedRegion<1>>:$subgraphs);
  let assemblyFormat = [{
    $op_type `(` $inputs `)` attr-dict (`subgraphs` $subgraphs^)? `:` functional-type($inputs, $outputs)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def ONNX_NegOp : ONNX_Unary<"Neg", AnyTensor, "-x">;
def ONNX_AbsOp : ONNX_Unary<"Abs", AnyTensor, "|x|">;
def ONNX_SqrtOp : ONNX_Unary<"Sqrt", ONNX_FloatTensor, "square root">;
def ONNX_ReciprocalOp : ONNX_Unary<"Reciprocal", ONNX_FloatTensor, "1/x">;
def ONNX_TanhOp : ONNX_Unary<"Tanh", ONNX_FloatTensor, "hyperbolic tangent">;
def ONNX_SigmoidOp : ONNX_Unary<"Sigmoid", ONNX_FloatTensor, "logistic sigmoid">;
def ONNX_ErfOp : ONNX_Unary<"Erf", ONNX_FloatTensor, "error function">;
def ONNX_ExpOp : ONNX_Unary<"Exp", ONNX_FloatTensor, "e^x">;
def ONNX_LogOp : ONNX_Unary<"Log", ONNX_FloatTensor, "natural logarithm">;
def ONNX_SinOp : ONNX_Unary<"Sin", ONNX_FloatTensor, "sine">;
def ONNX_CosOp : ONNX_Unary<"Cos", ONNX_FloatTensor, "cosine">;
def ONNX_ReluOp : ONNX_Unary<"Relu", AnyTensor, "max(x, 0)">;
def ONNX_IdentityOp : ONNX_Unary<"Identity", ONNX_AnyValue, "copy">;
def ONNX_NotOp : ONNX_Unary<"Not", ONNX_BoolTensor, "logical not">;

def ONNX_GeluOp : ONNX_NodeBase<"Gelu", [SameOperandsAndResultType]> {
  let summary = "ONNX Gelu (opset 20): exact (erf) or tanh-approximated GELU";
  let arguments = (ins ONNX_FloatTensor:$X, OptionalAttr<StrAttr>:$approximate);
  let results = (outs ONNX_FloatTensor:$Y);
  let hasVerifier = 1;
}

def ONNX_AddOp : ONNX_Binary<"Add", AnyTensor, AnyTensor, "A + B">;
def ONNX_SubOp : ONNX_Binary<"Sub", AnyTensor, AnyTensor, "A - B">;
def ONNX_MulOp : ONNX_Binary<"Mul", AnyTensor, AnyTensor, "A * B">;
def ONNX_DivOp : ONNX_Binary<"Div", AnyTensor, AnyTensor, "A / B">;
def ONNX_PowOp : ONNX_Binary<"Pow", AnyTensor, AnyTensor, "A ^ B">;
def ONNX_EqualOp : ONNX_Binary<"Equal", AnyTensor, ONNX_BoolTensor, "A == B">;
def ONNX_LessOp : ONNX_Binary<"Less", AnyTensor, ONNX_BoolTensor, "A < B">;
def ONNX_LessOrEqualOp : ONNX_Binary<"LessOrEqual", AnyTensor, ONNX_BoolTensor, "A <= B">;
def ONNX_GreaterOp : ONNX_Binary<"Greater", AnyTensor, ONNX_BoolTensor, "A > B">;
def ONNX_GreaterOrEqualOp : ONNX_Binary<"GreaterOrEqual", AnyTensor, ONNX_BoolTensor, "A >= B">;
def ONNX_AndOp : ONNX_Binary<"And", ONNX_BoolTensor, ONNX_BoolTensor, "A and B">;
def ONNX_OrOp : ONNX_Binary<"Or", ONNX_BoolTensor, ONNX_BoolTensor, "A or B">;

def ONNX_MaxOp : ONNX_NodeBase<"Max"> {
  let summary = "ONNX Max: elementwise maximum of its inputs, with broadcasting";
  let arguments = (ins Variadic<AnyTensor>:$data_0);
  let results = (outs AnyTensor:$max);
  let hasVerifier = 1;
}

def ONNX_MinOp : ONNX_NodeBase<"Min"> {
  let summary = "ONNX Min: elementwise minimum of its inputs, with broadcasting";
  let arguments = (ins Variadic<AnyTensor>:$data_0);
  let results = (outs AnyTensor:$min);
  let hasVerifier = 1;
}

def ONNX_WhereOp : ONNX_NodeBase<"Where"> {
  let summary = "ONNX Where: condition ? X : Y, with broadcasting";
  let arguments = (ins ONNX_BoolTensor:$condition, AnyTensor:$X, AnyTensor:$Y);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_ClipOp : ONNX_NodeBase<"Clip"> {
  let summary = "ONNX Clip (opset 11+): clamp to [min, max]";
  let arguments = (ins AnyTensor:$input, ONNX_TensorOrNone:$min, ONNX_TensorOrNone:$max);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_CastOp : ONNX_NodeBase<"Cast"> {
  let summary = "ONNX Cast: element type conversion (float8 with `saturate`, opset 19)";
  let arguments = (ins AnyTensor:$input, SI64Attr:$to, OptionalAttr<SI64Attr>:$saturate);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalization
//===----------------------------------------------------------------------===//

def ONNX_MatMulOp : ONNX_NodeBase<"MatMul"> {
  let summary = "ONNX MatMul: numpy matmul (batched, broadcasting batch dims)";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$Y);
  let hasVerifier = 1;
}

def ONNX_GemmOp : ONNX_NodeBase<"Gemm"> {
  let summary = "ONNX Gemm: alpha * op(A) * op(B) + beta * C";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B, ONNX_TensorOrNone:$C,
                   OptionalAttr<F32Attr>:$alpha, OptionalAttr<F32Attr>:$beta,
                   OptionalAttr<SI64Attr>:$transA, OptionalAttr<SI64Attr>:$transB);
  let results = (outs AnyTensor:$Y);
  let hasVerifier = 1;
}

def ONNX_LayerNormalizationOp : ONNX_NodeBase<"LayerNormalization"> {
  let summary = "ONNX LayerNormalization (opset 17): normalize over axes [axis, rank)";
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$Scale, ONNX_TensorOrNone:$B,
                   OptionalAttr<SI64Attr>:$axis, OptionalAttr<F32Attr>:$epsilon,
                   OptionalAttr<SI64Attr>:$stash_type);
  let results = (outs ONNX_FloatTensor:$Y, ONNX_TensorOrNone:$Mean, ONNX_TensorOrNone:$InvStdDev);
  let hasVerifier = 1;
}

def ONNX_RMSNormalizationOp : ONNX_NodeBase<"RMSNormalization"> {
  let summary = "ONNX RMSNormalization (opset 23): X / sqrt(mean(X^2) + epsilon) * Scale over axes [axis, rank)";
  let arguments = (ins ONNX_FloatTensor:$X, ONNX_FloatTensor:$scale,
                   OptionalAttr<SI64Attr>:$axis, OptionalAttr<F32Attr>:$epsilon,
                   OptionalAttr<SI64Attr>:$stash_type);
  let results = (outs ONNX_FloatTensor:$Y);
  let hasVerifier = 1;
}

def ONNX_SoftmaxOp : ONNX_NodeBase<"Softmax"> {
  let summary = "ONNX Softmax (opset 13): softmax along one axis";
  let arguments = (ins ONNX_FloatTensor:$input, OptionalAttr<SI64Attr>:$axis);
  let results = (outs ONNX_FloatTensor:$output);
  let hasVerifier = 1;
}

def ONNX_LogSoftmaxOp : ONNX_NodeBase<"LogSoftmax"> {
  let summary = "ONNX LogSoftmax (opset 13): log of softmax along one axis";
  let arguments = (ins ONNX_FloatTensor:$input, OptionalAttr<SI64Attr>:$axis);
  let results = (outs ONNX_FloatTensor:$output);
  let hasVerifier = 1;
}

def ONNX_SoftmaxCrossEntropyLossOp : ONNX_NodeBase<"SoftmaxCrossEntropyLoss"> {
  let summary = "ONNX SoftmaxCrossEntropyLoss (opset 13): the loss of a classifier";
  let arguments = (ins ONNX_FloatTensor:$scores, ONNX_IntTensor:$labels, ONNX_TensorOrNone:$weights,
                   OptionalAttr<SI64Attr>:$ignore_index, OptionalAttr<StrAttr>:$reduction);
  let results = (outs ONNX_FloatTensor:$output, ONNX_TensorOrNone:$log_prob);
  let hasVerifier = 1;
}

def ONNX_ReduceMeanOp : ONNX_NodeBase<"ReduceMean"> {
  let summary = "ONNX ReduceMean (opset 18: axes as an input)";
  let arguments = (ins AnyTensor:$data, ONNX_IntTensorOrNone:$axes,
                   OptionalAttr<SI64Attr>:$keepdims, OptionalAttr<SI64Attr>:$noop_with_empty_axes);
  let results = (outs AnyTensor:$reduced);
  let hasVerifier = 1;
}

def ONNX_ReduceSumOp : ONNX_NodeBase<"ReduceSum"> {
  let summary = "ONNX ReduceSum (opset 13: axes as an input)";
  let arguments = (ins AnyTensor:$data, ONNX_IntTensorOrNone:$axes,
                   OptionalAttr<SI64Attr>:$keepdims, OptionalAttr<SI64Attr>:$noop_with_empty_axes);
  let results = (outs AnyTensor:$reduced);
  let hasVerifier = 1;
}

def ONNX_ReduceMaxOp : ONNX_NodeBase<"ReduceMax"> {
  let summary = "ONNX ReduceMax (opset 18: axes as an input)";
  let arguments = (ins AnyTensor:$data, ONNX_IntTensorOrNone:$axes,
                   OptionalAttr<SI64Attr>:$keepdims, OptionalAttr<SI64Attr>:$noop_with_empty_axes);
  let results = (outs AnyTensor:$reduced);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

def ONNX_ReshapeOp : ONNX_NodeBase<"Reshape"> {
  let summary = "ONNX Reshape (opset 14)";
  let arguments = (ins AnyTensor:$data, ONNX_I64Tensor:$shape, OptionalAttr<SI64Attr>:$allowzero);
  let results = (outs AnyTensor:$reshaped);
  let hasVerifier = 1;
}

def ONNX_TransposeOp : ONNX_NodeBase<"Transpose"> {
  let summary = "ONNX Transpose: permute dimensions (reverse them without `perm`)";
  let arguments = (ins AnyTensor:$data, OptionalAttr<DenseI64ArrayAttr>:$perm);
  let results = (outs AnyTensor:$transposed);
  let hasVerifier = 1;
}

def ONNX_ConcatOp : ONNX_NodeBase<"Concat"> {
  let summary = "ONNX Concat along `axis`";
  let arguments = (ins Variadic<AnyTensor>:$inputs, SI64Attr:$axis);
  let results = (outs AnyTensor:$concat_result);
  let hasVerifier = 1;
}

def ONNX_SplitOp : ONNX_NodeBase<"Split"> {
  let summary = "ONNX Split (opset 13+: sizes as an input; 18: num_outputs)";
  let arguments = (ins AnyTensor:$input, ONNX_IntTensorOrNone:$split,
                   OptionalAttr<SI64Attr>:$axis, OptionalAttr<SI64Attr>:$num_outputs);
  let results = (outs Variadic<AnyTensor>:$outputs);
  let hasVerifier = 1;
}

def ONNX_SliceOp : ONNX_NodeBase<"Slice"> {
  let summary = "ONNX Slice (opset 10+: starts/ends/axes/steps as inputs)";
  let arguments = (ins AnyTensor:$data, ONNX_IntTensor:$starts, ONNX_IntTensor:$ends,
                   ONNX_IntTensorOrNone:$axes, ONNX_IntTensorOrNone:$steps);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_GatherOp : ONNX_NodeBase<"Gather"> {
  let summary = "ONNX Gather: take slices along `axis` (embedding lookup)";
  let arguments = (ins AnyTensor:$data, ONNX_IntTensor:$indices, OptionalAttr<SI64Attr>:$axis);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_GatherElementsOp : ONNX_NodeBase<"GatherElements"> {
  let summary = "ONNX GatherElements: elementwise gather along `axis`";
  let arguments = (ins AnyTensor:$data, ONNX_IntTensor:$indices, OptionalAttr<SI64Attr>:$axis);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_UnsqueezeOp : ONNX_NodeBase<"Unsqueeze"> {
  let summary = "ONNX Unsqueeze (opset 13: axes as an input)";
  let arguments = (ins AnyTensor:$data, ONNX_I64Tensor:$axes);
  let results = (outs AnyTensor:$expanded);
  let hasVerifier = 1;
}

def ONNX_SqueezeOp : ONNX_NodeBase<"Squeeze"> {
  let summary = "ONNX Squeeze (opset 13: axes as an input)";
  let arguments = (ins AnyTensor:$data, AnyTypeOf<[ONNX_I64Tensor, NoneType]>:$axes);
  let results = (outs AnyTensor:$squeezed);
  let hasVerifier = 1;
}

def ONNX_ExpandOp : ONNX_NodeBase<"Expand"> {
  let summary = "ONNX Expand: broadcast to a shape";
  let arguments = (ins AnyTensor:$input, ONNX_I64Tensor:$shape);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_ShapeOp : ONNX_NodeBase<"Shape"> {
  let summary = "ONNX Shape: the shape of a tensor as a 1-D int64 tensor";
  let arguments = (ins AnyTensor:$data, OptionalAttr<SI64Attr>:$start, OptionalAttr<SI64Attr>:$end);
  let results = (outs ONNX_I64Tensor:$shape);
  let hasVerifier = 1;
}

def ONNX_ConstantOp : ONNX_NodeBase<"Constant"> {
  let summary = "ONNX Constant node";
  let arguments = (ins OptionalAttr<ElementsAttr>:$value, OptionalAttr<F32Attr>:$value_float,
                   OptionalAttr<DenseF32ArrayAttr>:$value_floats, OptionalAttr<SI64Attr>:$value_int,
                   OptionalAttr<DenseI64ArrayAttr>:$value_ints, OptionalAttr<StrAttr>:$value_string,
                   OptionalAttr<StrArrayAttr>:$value_strings);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_ConstantOfShapeOp : ONNX_NodeBase<"ConstantOfShape"> {
  let summary = "ONNX ConstantOfShape: a tensor of the given shape filled with `value`";
  let arguments = (ins ONNX_I64Tensor:$input, OptionalAttr<ElementsAttr>:$value);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_RangeOp : ONNX_NodeBase<"Range"> {
  let summary = "ONNX Range: [start, limit) by delta";
  let arguments = (ins AnyTensor:$start, AnyTensor:$limit, AnyTensor:$delta);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_TriluOp : ONNX_NodeBase<"Trilu"> {
  let summary = "ONNX Trilu: upper or lower triangle of the last two dims";
  let arguments = (ins AnyTensor:$input, AnyTypeOf<[ONNX_I64Tensor, NoneType]>:$k,
                   OptionalAttr<SI64Attr>:$upper);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def ONNX_DropoutOp : ONNX_NodeBase<"Dropout"> {
  let summary = "ONNX Dropout (opset 12+: ratio and training_mode as inputs)";
  let arguments = (ins ONNX_FloatTensor:$data, ONNX_TensorOrNone:$ratio,
                   AnyTypeOf<[ONNX_BoolTensor, NoneType]>:$training_mode,
                   OptionalAttr<SI64Attr>:$seed);
  let results = (outs ONNX_FloatTensor:$output, AnyTypeOf<[ONNX_BoolTensor, NoneType]>:$mask);
}

//===----------------------------------------------------------------------===//
// Quantization (opset 19+: float8 with `saturate`)
//===----------------------------------------------------------------------===//

def ONNX_QuantizeLinearOp : ONNX_NodeBase<"QuantizeLinear"> {
  let summary = "ONNX QuantizeLinear: y = saturate(round(x / y_scale) + y_zero_point)";
  let description = [{
    The output element type is the zero point's (f8E4M3FN, f8E5M2, i8, ui8, ...).
    With float8 outputs, `saturate` (default 1) clamps to the largest finite value.
  }];
  let arguments = (ins AnyTensor:$x, ONNX_FloatTensor:$y_scale, ONNX_TensorOrNone:$y_zero_point,
                   OptionalAttr<SI64Attr>:$axis, OptionalAttr<SI64Attr>:$saturate,
                   OptionalAttr<SI64Attr>:$block_size, OptionalAttr<SI64Attr>:$output_dtype);
  let results = (outs AnyTensor:$y);
  let hasVerifier = 1;
}

def ONNX_DequantizeLinearOp : ONNX_NodeBase<"DequantizeLinear"> {
  let summary = "ONNX DequantizeLinear: y = (x - x_zero_point) * x_scale";
  let arguments = (ins AnyTensor:$x, ONNX_FloatTensor:$x_scale, ONNX_TensorOrNone:$x_zero_point,
                   OptionalAttr<SI64Attr>:$axis, OptionalAttr<SI64Attr>:$block_size);
  let results = (outs ONNX_FloatTensor:$y);
  let hasVerifier = 1;
}

#endif // OCTET_DIALECT_ONNX_IR_ONNXOPS_TD
