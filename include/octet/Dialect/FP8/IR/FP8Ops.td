//===- FP8Ops.td - The fp8 dialect: casts, scaling and FP8 GEMMs ----------===//
//
// The vocabulary the recipes lower to and the runtime executes. Element
// types are MLIR's builtin f8E4M3FN (max 448) and f8E5M2 (max 57344).
// Scales follow TransformerEngine: `scale` maps amax near the format's max,
// `scale_inv = 1 / scale` is stored with the FP8 tensor. Quantizing divides
// by scale_inv and dequantizing multiplies by it, exactly as ONNX
// QuantizeLinear / DequantizeLinear do, so an exported QDQ graph computes
// bit-identical FP8 tensors.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_DIALECT_FP8_IR_FP8OPS_TD
#define OCTET_DIALECT_FP8_IR_FP8OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def FP8_Dialect : Dialect {
  let name = "fp8";
  let summary = "FP8 mixed-precision training: casts, amax, scaling, FP8 GEMM, FP8 all-reduce";
  let cppNamespace = "::octet::fp8";
  let useDefaultAttributePrinterParser = 1;
  let useFoldAPI = kEmitFoldAdaptorFolder;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def FP8_AmaxAlgo : I32EnumAttr<"AmaxComputeAlgo", "how an amax history becomes one amax", [
    I32EnumAttrCase<"max", 0>, I32EnumAttrCase<"most_recent", 1>]> {
  let cppNamespace = "::octet::fp8";
  let genSpecializedAttr = 0;
}
def FP8_AmaxAlgoAttr : EnumAttr<FP8_Dialect, FP8_AmaxAlgo, "amax_algo"> {
  let assemblyFormat = "`<` $value `>`";
}

def FP8_Accumulation : I32EnumAttr<"Accumulation", "GEMM accumulation mode", [
    I32EnumAttrCase<"fast", 0>, I32EnumAttrCase<"split", 1>]> {
  let cppNamespace = "::octet::fp8";
  let genSpecializedAttr = 0;
}
def FP8_AccumulationAttr : EnumAttr<FP8_Dialect, FP8_Accumulation, "accumulation"> {
  let assemblyFormat = "`<` $value `>`";
}

def FP8_Scaling : I32EnumAttr<"Scaling", "how an FP8 Linear's scales are chosen", [
    I32EnumAttrCase<"delayed", 0>, I32EnumAttrCase<"dynamic", 1>]> {
  let cppNamespace = "::octet::fp8";
  let genSpecializedAttr = 0;
}
def FP8_ScalingAttr : EnumAttr<FP8_Dialect, FP8_Scaling, "scaling"> {
  let assemblyFormat = "`<` $value `>`";
}

def FP8_Reduction : I32EnumAttr<"Reduction", "collective reduction", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>, I32EnumAttrCase<"avg", 2>]> {
  let cppNamespace = "::octet::fp8";
  let genSpecializedAttr = 0;
}
def FP8_ReductionAttr : EnumAttr<FP8_Dialect, FP8_Reduction, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def FP8_Element : AnyTypeOf<[F8E4M3FN, F8E5M2]>;
def FP8_Tensor : TensorOf<[F8E4M3FN, F8E5M2]>;
def FP8_HighTensor : TensorOf<[F32, F16, BF16]>;
def FP8_ScaleTensor : TensorOf<[F32]>;

class FP8_Op<string mnemonic, list<Trait> traits = []>
    : Op<FP8_Dialect, mnemonic, !listconcat([Pure], traits)>;

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

def FP8_CastOp : FP8_Op<"cast"> {
  let summary = "Quantize to FP8: q = saturate(round_to_nearest_even(x / scale_inv))";
  let description = [{
    The rule of ONNX QuantizeLinear (opset 19) with a float8 zero point.
    `scale_inv` is a 0-d tensor (per tensor) or a tensor with one value per row of
    `x` (shape `[..., 1]`, rowwise recipes). With `saturate` (the default)
    values beyond the format's largest finite value clamp to it; without,
    they become NaN (E4M3FN) or Inf (E5M2), as ONNX Cast with saturate=0.
    Example: `%q = fp8.cast %x, %s : tensor<16x64xbf16>, tensor<f32> -> tensor<16x64xf8E4M3FN>`
  }];
  let arguments = (ins FP8_HighTensor:$input, FP8_ScaleTensor:$scale_inv,
                   DefaultValuedAttr<BoolAttr, "true">:$saturate);
  let results = (outs FP8_Tensor:$output);
  let assemblyFormat = "$input `,` $scale_inv attr-dict `:` type($input) `,` type($scale_inv) `->` type($output)";
  let hasVerifier = 1;
}

def FP8_DequantizeOp : FP8_Op<"dequantize"> {
  let summary = "Dequantize from FP8: x = q * scale_inv";
  let arguments = (ins FP8_Tensor:$input, FP8_ScaleTensor:$scale_inv);
  let results = (outs FP8_HighTensor:$output);
  let assemblyFormat = "$input `,` $scale_inv attr-dict `:` type($input) `,` type($scale_inv) `->` type($output)";
  let hasVerifier = 1;
}

def FP8_AmaxOp : FP8_Op<"amax"> {
  let summary = "max(|x|) over the whole tensor, or per row (`rowwise`)";
  let description = [{
    NaN propagates (an amax of NaN marks the step's scale as unusable).
    Example: `%a = fp8.amax %x : tensor<16x64xf32> -> tensor<f32>`
  }];
  let arguments = (ins FP8_HighTensor:$input, DefaultValuedAttr<BoolAttr, "false">:$rowwise);
  let results = (outs FP8_ScaleTensor:$amax);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($amax)";
  let hasVerifier = 1;
}

def FP8_CastAmaxOp : FP8_Op<"cast_amax"> {
  let summary = "fp8.cast and the per-tensor fp8.amax of the same input, in one pass over it";
  let description = [{
    `output` is `fp8.cast %input, %scale_inv` and `amax` is `fp8.amax %input`
    (per tensor, NaN propagates). Written by octet-fuse-cast-amax, which pairs
    the cast that delayed scaling makes with the amax it records, so a
    backend reads the input once. The optional third result `transposed` is
    `output` transposed as 2-D: [rows, cols] (the input's leading dims
    flattened, cols its last) becomes [cols, rows]. octet-cast-transpose adds
    it where an fp8.gemm needs the other layout of an operand (cuBLASLt's FP8
    GEMMs take both operands K-contiguous), so the cast writes both layouts
    from one read, as TransformerEngine's cast-transpose does.
    Example: `%q, %a = fp8.cast_amax %x, %s : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>`
    `%q, %a, %t = fp8.cast_amax %x, %s : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>`
  }];
  let arguments = (ins FP8_HighTensor:$input, FP8_ScaleTensor:$scale_inv,
                   DefaultValuedAttr<BoolAttr, "true">:$saturate);
  let results = (outs FP8_Tensor:$output, FP8_ScaleTensor:$amax, Optional<FP8_Tensor>:$transposed);
  let assemblyFormat = [{
    $input `,` $scale_inv attr-dict `:` type($input) `,` type($scale_inv) `->` type($output) `,` type($amax)
    (`,` type($transposed)^)?
  }];
  let hasVerifier = 1;
}

def FP8_DelayedScaleOp : FP8_Op<"delayed_scale", [AllTypesMatch<["history", "new_history"]>,
    AllTypesMatch<["prev_scale", "scale", "scale_inv"]>]> {
  let summary = "TransformerEngine delayed scaling: new scale from an amax history";
  let description = [{
    amax = max(history) or history[0] (`most_recent`);
    scale = (fp8_max(format) / amax) / 2^margin, or its power of two
    2^(floor(log2(fp8_max / amax)) - margin) with `power_of_two` (MS-AMP).
    First the history rolls: slot 0 takes `new_amax` (this step's amax), the
    rest shift by one; the amax is taken over the rolled history, so the
    scale a step uses comes from the amaxes of the steps before it.
    A zero or non-finite amax keeps `prev_scale`; an infinite scale becomes
    FLT_MAX. With `interval` N > 1 and a `step` counter, the scale is only
    recomputed when step % N == 0 (the history still rolls every step).
    Results: the new history, scale and scale_inv.
    Example:
    `%h2, %s, %si = fp8.delayed_scale %h, %s0, %a {format = f8E4M3FN, margin = 0 : si64, algo = #fp8.amax_algo<max>} : tensor<1024xf32>, tensor<f32>, tensor<f32>`
  }];
  let arguments = (ins FP8_ScaleTensor:$history, FP8_ScaleTensor:$prev_scale, FP8_ScaleTensor:$new_amax,
                   Optional<TensorOf<[I64]>>:$step,
                   TypeAttrOf<FP8_Element>:$format, DefaultValuedAttr<SI64Attr, "0">:$margin,
                   DefaultValuedAttr<FP8_AmaxAlgoAttr, "::octet::fp8::AmaxComputeAlgo::max">:$algo,
                   DefaultValuedAttr<BoolAttr, "false">:$power_of_two,
                   DefaultValuedAttr<SI64Attr, "1">:$interval);
  let results = (outs FP8_ScaleTensor:$new_history, FP8_ScaleTensor:$scale, FP8_ScaleTensor:$scale_inv);
  let assemblyFormat = [{
    $history `,` $prev_scale `,` $new_amax (`step` $step^ `:` type($step))? attr-dict
    `:` type($history) `,` type($prev_scale) `,` type($new_amax)
  }];
  let hasVerifier = 1;
}

def FP8_DynamicScaleOp : FP8_Op<"dynamic_scale", [AllTypesMatch<["amax", "scale", "scale_inv"]>]> {
  let summary = "Dynamic (current) scaling: scale from this tensor's amax (torchao)";
  let description = [{
    scale = fp8_max(format) / max(amax, eps), rounded down to a power of two
    with `power_of_two`. Per tensor (0-d amax) or per row.
    Example: `%s, %si = fp8.dynamic_scale %a {format = f8E4M3FN} : tensor<f32>`
  }];
  let arguments = (ins FP8_ScaleTensor:$amax, TypeAttrOf<FP8_Element>:$format,
                   DefaultValuedAttr<BoolAttr, "false">:$power_of_two,
                   DefaultValuedAttr<F32Attr, "1.0e-12">:$eps);
  let results = (outs FP8_ScaleTensor:$scale, FP8_ScaleTensor:$scale_inv);
  let assemblyFormat = "$amax attr-dict `:` type($amax)";
  let hasVerifier = 1;
}

def FP8_GemmOp : FP8_Op<"gemm", [AttrSizedOperandSegments]> {
  let summary = "FP8 GEMM: D = (op(A) * a_scale_inv) x (op(B) * b_scale_inv) [+ bias], FP32 accumulation";
  let description = [{
    A is [M, K] (or [K, M] with `transpose_a`), B is [K, N] (or [N, K] with
    `transpose_b`); leading batch dims of A are flattened. Scales are per
    tensor (0-d) or, for rowwise recipes, one per row of a 2-D A ([M, 1])
    and one per row of B stored as [N, K] ([N, 1], with `transpose_b`). At most one
    operand may be E5M2 (Hopper's FP8 tensor cores take E4M3 x E4M3,
    E4M3 x E5M2 and E5M2 x E4M3). The output is BF16/F16/F32, or FP8 with a
    `d_scale`; `with_amax` adds the amax of D (before any output scaling)
    as a second result. `accumulation` is `fast` (fprop) or `split`
    (dgrad/wgrad: periodic promotion to FP32). With `accumulate` C (float32,
    D's type), D = C + (the scaled product + bias), summed in float32
    (cuBLASLt's beta = 1): a weight gradient added up over chunks of tokens
    (octet-chunk-loss) writes over its previous partial sum, and a residual
    Add takes the GEMM's result (octet-fold-residual-adds).
    Example:
    `%d = fp8.gemm %a, %b, %sa, %sb {accumulation = #fp8.accumulation<fast>} : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>`
  }];
  let arguments = (ins FP8_Tensor:$a, FP8_Tensor:$b, FP8_ScaleTensor:$a_scale_inv,
                   FP8_ScaleTensor:$b_scale_inv, Optional<FP8_HighTensor>:$bias,
                   Optional<FP8_ScaleTensor>:$d_scale, Optional<FP8_HighTensor>:$accumulate,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_b,
                   DefaultValuedAttr<FP8_AccumulationAttr, "::octet::fp8::Accumulation::fast">:$accumulation,
                   DefaultValuedAttr<BoolAttr, "false">:$with_amax);
  let results = (outs AnyTypeOf<[FP8_HighTensor, FP8_Tensor]>:$d, Variadic<FP8_ScaleTensor>:$d_amax);
  let assemblyFormat = [{
    $a `,` $b `,` $a_scale_inv `,` $b_scale_inv (`bias` $bias^)? (`d_scale` $d_scale^)?
    (`accumulate` $accumulate^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FP8_LinearOp : FP8_Op<"linear", [AttrSizedOperandSegments]> {
  let summary = "A Linear layer a recipe runs in FP8 (before expansion into casts and GEMMs)";
  let description = [{
    y = x W (+ bias), W stored [K, N] or, with `transpose_weight`, [N, K] (the
    PyTorch layout). The recipe's choices are attributes: `scaling` (delayed:
    TransformerEngine, dynamic: torchao / MS-AMP), `rowwise` scales,
    `power_of_two` scales, the formats of inputs and weights (forward) and of
    gradients (backward), margin, amax algorithm and interval, and which of
    the three GEMMs an `override_linear_precision` keeps in high precision.
    Delayed scaling takes its state as operands: the input's amax history,
    scale and scale_inv, then the weight's, then optionally a step counter
    (`interval` > 1). `octet-fp8-expand` rewrites it into fp8.amax,
    fp8.delayed_scale / fp8.dynamic_scale, fp8.cast and fp8.gemm.
    Example:
    `%y = fp8.linear "model.h.0.mlp.c_fc" %x, %w {scaling = #fp8.scaling<dynamic>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2, recipe = "ao"} : (tensor<32x64xf32>, tensor<64x256xf32>) -> tensor<32x256xf32>`
  }];
  let arguments = (ins FP8_HighTensor:$input, FP8_HighTensor:$weight, Optional<FP8_HighTensor>:$bias,
                   Variadic<AnyTensor>:$state,
                   StrAttr:$layer, StrAttr:$recipe,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_weight,
                   FP8_ScalingAttr:$scaling,
                   DefaultValuedAttr<BoolAttr, "false">:$rowwise,
                   DefaultValuedAttr<BoolAttr, "false">:$power_of_two,
                   TypeAttrOf<FP8_Element>:$input_format, TypeAttrOf<FP8_Element>:$weight_format,
                   TypeAttrOf<FP8_Element>:$grad_format,
                   DefaultValuedAttr<SI64Attr, "0">:$margin,
                   DefaultValuedAttr<FP8_AmaxAlgoAttr, "::octet::fp8::AmaxComputeAlgo::max">:$algo,
                   DefaultValuedAttr<SI64Attr, "1">:$interval,
                   DefaultValuedAttr<BoolAttr, "false">:$fprop_high_precision,
                   DefaultValuedAttr<BoolAttr, "false">:$dgrad_high_precision,
                   DefaultValuedAttr<BoolAttr, "false">:$wgrad_high_precision);
  let results = (outs FP8_HighTensor:$output);
  let assemblyFormat = [{
    $layer $input `,` $weight (`bias` $bias^)? (`state` `(` $state^ `)`)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FP8_AllReduceOp : FP8_Op<"all_reduce"> {
  let summary = "All-reduce of a tensor across data-parallel ranks (FP8 payloads MS-AMP style)";
  let description = [{
    Every rank gets the elementwise `sum`, `max` or `avg` (sum / world size)
    of `input` over all ranks of the run; with one rank it is the identity
    (but for `max`, where NaN counts as +Inf, MS-AMP's rule for amaxes: a
    non-finite amax keeps a scale from being used either way, and every rank
    gets the same result whichever engine reduces).
    The world size is a runtime value (fp8-run's ranks), not part of the op.
    An FP8 input travels as its codes and is summed in FP8 by the collective
    (NCCL's float8 reduction, or its Gloo equivalent: decode, add, round to
    nearest even, saturate); it needs `scale_inv`, the per-tensor scale every
    rank cast with (agreed by an all-reduce(max) of the amaxes first, and
    pre-divided by the world size so the sum cannot overflow), which
    dequantizes the result. High-precision inputs take no scale.
    Example: `%r = fp8.all_reduce %q, %si {reduction = #fp8.reduction<sum>} : tensor<64xf8E5M2>, tensor<f32> -> tensor<64xf8E5M2>`
    and `%g = fp8.all_reduce %x {reduction = #fp8.reduction<avg>} : tensor<64xf32> -> tensor<64xf32>`
  }];
  let arguments = (ins TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$input, Optional<FP8_ScaleTensor>:$scale_inv,
                   DefaultValuedAttr<FP8_ReductionAttr, "::octet::fp8::Reduction::sum">:$reduction);
  let results = (outs TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$output);
  let assemblyFormat = "$input (`,` $scale_inv^)? attr-dict `:` type($input) (`,` type($scale_inv)^)? `->` type($output)";
  let hasVerifier = 1;
}

def FP8_AllReduceStartOp : FP8_Op<"all_reduce_start"> {
  let summary = "Starts an fp8.all_reduce that runs beside the ops up to its fp8.all_reduce_done";
  let description = [{
    The same reduction as `fp8.all_reduce` (operands, attributes, rules), split
    in two so that the collective overlaps the computation between the two
    ops (octet-overlap-collectives places them). The result is the tensor in
    flight: only `fp8.all_reduce_done` may read it, and its buffer is the
    reduced tensor's (the plan keeps it live until the done's readers).
    Example: `%f = fp8.all_reduce_start %g {reduction = #fp8.reduction<avg>} : tensor<64xf32> -> tensor<64xf32>`
  }];
  let arguments = (ins TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$input, Optional<FP8_ScaleTensor>:$scale_inv,
                   DefaultValuedAttr<FP8_ReductionAttr, "::octet::fp8::Reduction::sum">:$reduction);
  let results = (outs TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$output);
  let assemblyFormat = "$input (`,` $scale_inv^)? attr-dict `:` type($input) (`,` type($scale_inv)^)? `->` type($output)";
  let hasVerifier = 1;
}

def FP8_AllReduceDoneOp : FP8_Op<"all_reduce_done"> {
  let summary = "Waits for an fp8.all_reduce_start (or reduce_scatter_start, all_gather_start): its result is the tensor";
  let description = [{
    Example: `%r = fp8.all_reduce_done %f : tensor<64xf32> -> tensor<64xf32>`
  }];
  let arguments = (ins TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$input);
  let results = (outs TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

def FP8_ReduceScatterOp : FP8_Op<"reduce_scatter"> {
  let summary = "Reduce a flat tensor across the ranks; each keeps its slice (a sharded optimizer's gradients)";
  let description = [{
    `input` is 1-D, `world_size` times the result's length s; rank r gets
    elements [r s, r s + s) of the elementwise `sum`, `max` or `avg` over all
    ranks (types, rounding and FP8 rules as `fp8.all_reduce`: FP8 codes are
    summed by the collective and need the `scale_inv` every rank cast with).
    Unlike an all-reduce, the world size is fixed in the plan (the shards'
    shapes depend on it): a runtime with another number of ranks refuses the
    plan. Example:
    `%g = fp8.reduce_scatter %x {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<64xf32> -> tensor<32xf32>`
  }];
  let arguments = (ins TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$input, Optional<FP8_ScaleTensor>:$scale_inv,
                   DefaultValuedAttr<FP8_ReductionAttr, "::octet::fp8::Reduction::sum">:$reduction,
                   I64Attr:$world_size);
  let results = (outs TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$output);
  let assemblyFormat = "$input (`,` $scale_inv^)? attr-dict `:` type($input) (`,` type($scale_inv)^)? `->` type($output)";
  let hasVerifier = 1;
}

def FP8_ReduceScatterStartOp : FP8_Op<"reduce_scatter_start"> {
  let summary = "Starts an fp8.reduce_scatter that runs beside the ops up to its fp8.all_reduce_done";
  let description = [{
    The reduction of `fp8.reduce_scatter` (operands, attributes, rules) in
    flight over the whole 1-D tensor: the result is the input's buffer, in
    which this rank's slice [r s, r s + s) becomes the reduction (the other
    slices are unspecified: NCCL's in-place reduce-scatter). Only
    `fp8.all_reduce_done` may read it; an `fp8.shard` of the done takes the
    rank's slice (octet-overlap-collectives writes the three). Example:
    `%f = fp8.reduce_scatter_start %g {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<64xf32> -> tensor<64xf32>`
  }];
  let arguments = (ins TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$input, Optional<FP8_ScaleTensor>:$scale_inv,
                   DefaultValuedAttr<FP8_ReductionAttr, "::octet::fp8::Reduction::sum">:$reduction,
                   I64Attr:$world_size);
  let results = (outs TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$output);
  let assemblyFormat = "$input (`,` $scale_inv^)? attr-dict `:` type($input) (`,` type($scale_inv)^)? `->` type($output)";
  let hasVerifier = 1;
}

def FP8_AllGatherOp : FP8_Op<"all_gather"> {
  let summary = "Every rank's 1-D shard, concatenated in rank order (sharded weights gathered back whole)";
  let description = [{
    The result is `world_size` times the input's length, rank r's input at
    r s. The bytes travel as they are (FP8 codes as codes). The world size is
    fixed in the plan, as for `fp8.reduce_scatter`. Example:
    `%w = fp8.all_gather %s {world_size = 2 : i64} : tensor<32xf8E4M3FN> -> tensor<64xf8E4M3FN>`
  }];
  let arguments = (ins TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$input, I64Attr:$world_size);
  let results = (outs TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

def FP8_AllGatherStartOp : FP8_Op<"all_gather_start"> {
  let summary = "Starts an fp8.all_gather that runs beside the ops up to its fp8.all_reduce_done";
  let description = [{
    The gather of `fp8.all_gather`, in flight: the result is the whole
    buffer, into whose slice r this rank's shard is copied at the start and
    the other ranks' arrive. Only `fp8.all_reduce_done` may read it
    (octet-overlap-collectives writes the pair). Example:
    `%f = fp8.all_gather_start %s {world_size = 2 : i64} : tensor<32xf32> -> tensor<64xf32>`
  }];
  let arguments = (ins TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$input, I64Attr:$world_size);
  let results = (outs TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

def FP8_ShardOp : FP8_Op<"shard"> {
  let summary = "This rank's slice of a 1-D tensor every rank holds whole";
  let description = [{
    Rank r's result is elements [r s, r s + s) of `input` (`world_size` times
    s long): the part of a replicated weight a sharded optimizer updates on
    this rank. No communication. Example:
    `%p = fp8.shard %w {world_size = 2 : i64} : tensor<64xf32> -> tensor<32xf32>`
  }];
  let arguments = (ins TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$input, I64Attr:$world_size);
  let results = (outs TensorOf<[F8E4M3FN, F8E5M2, F32, F16, BF16]>:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

def FP8_AdamStepOp : FP8_Op<"adam_step"> {
  let summary = "One Adam/AdamW update of a weight whose moments are stored as MS-AMP O2 keeps them";
  let description = [{
    The update octet-optimizer writes for an FP8 Linear's weight under MS-AMP
    O2/O3 (FP16 weight or master weight, FP8 E4M3 first moment and FP16
    second moment, each with a per-tensor power-of-two scale), as one op so a
    backend reads the state twice (once for the new moments' amaxes, once
    for the update) instead of materializing every float32 temporary. In
    float32, with every operation rounded as written (no fused multiply-add):
      g  = (grad * grad_scale_inv) * grad_scale   (FP8 codes decoded; the clipping coefficient)
      w0 = weight * decay                         (AdamW: 1 - lr * weight_decay)
      m  = dequantize(exp_avg, exp_avg_scale_inv)
      v  = exp_avg_sq * exp_avg_sq_scale_inv
      m2 = m * beta1 + g * one_minus_beta1
      v2 = v * beta2 + (g * g) * one_minus_beta2
      w2 = w0 - (m2 / (sqrt(v2) / bias_correction2_sqrt + eps)) * step_size
    Results: w2 in the weight's type; m2 as E4M3 codes with the scale_inv of
    `fp8.dynamic_scale` (E4M3, power of two) of amax(m2); v2 / s as FP16 with
    s = 2^(floor(log2(amax(v2))) - 13) (the largest element in [2^13, 2^14)),
    1 for an amax of 0 or NaN, +Inf for +Inf. `grad` is float32 (with a
    grad_scale_inv of 1) or the FP8 codes an MS-AMP weight gradient is held
    in, read as fp8.dequantize reads them. The coefficients are
    attributes holding the float32 values the update multiplies by. With
    `rounding_step` (an FP16 weight only), w2 is rounded to FP16 as
    `fp8.stochastic_round` with that step and `rounding_salt` rounds it.
    Example: `%w2, %m2, %ms2, %v2, %vs2 = fp8.adam_step %w, %g, %gs, %m, %ms, %v, %vs, %c, %d, %lr, %bc2 {beta1 = 0.9 : f32, one_minus_beta1 = 0.1 : f32, beta2 = 0.999 : f32, one_minus_beta2 = 1.0e-3 : f32, eps = 1.0e-8 : f32} : (tensor<64x32xf16>, tensor<64x32xf8E5M2>, tensor<f32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<64x32xf16>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)`
  }];
  let arguments = (ins TensorOf<[F16, F32]>:$weight, TensorOf<[F32, F8E4M3FN, F8E5M2]>:$grad,
                   0DTensorOf<[F32]>:$grad_scale_inv, TensorOf<[F8E4M3FN]>:$exp_avg,
                   0DTensorOf<[F32]>:$exp_avg_scale_inv, TensorOf<[F16]>:$exp_avg_sq,
                   0DTensorOf<[F32]>:$exp_avg_sq_scale_inv, 0DTensorOf<[F32]>:$grad_scale,
                   0DTensorOf<[F32]>:$decay, 0DTensorOf<[F32]>:$step_size,
                   0DTensorOf<[F32]>:$bias_correction2_sqrt, Optional<0DTensorOf<[I64]>>:$rounding_step,
                   F32Attr:$beta1, F32Attr:$one_minus_beta1, F32Attr:$beta2, F32Attr:$one_minus_beta2,
                   F32Attr:$eps, OptionalAttr<I64Attr>:$rounding_salt);
  let results = (outs TensorOf<[F16, F32]>:$new_weight, TensorOf<[F8E4M3FN]>:$new_exp_avg,
                  0DTensorOf<[F32]>:$new_exp_avg_scale_inv, TensorOf<[F16]>:$new_exp_avg_sq,
                  0DTensorOf<[F32]>:$new_exp_avg_sq_scale_inv);
  let assemblyFormat = [{
    $weight `,` $grad `,` $grad_scale_inv `,` $exp_avg `,` $exp_avg_scale_inv `,` $exp_avg_sq `,` $exp_avg_sq_scale_inv `,`
    $grad_scale `,` $decay `,` $step_size `,` $bias_correction2_sqrt (`,` $rounding_step^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FP8_StochasticRoundOp : FP8_Op<"stochastic_round"> {
  let summary = "Round float32 to float16 up or down at random, in proportion to the distance (unbiased)";
  let description = [{
    Each element x between two float16 neighbours lo < |x| < hi becomes hi
    with probability (|x| - lo) / (hi - lo), else lo (sign kept), so its
    expected value is x: an FP16 weight takes updates smaller than half its
    step on average, where rounding to nearest drops them. NaN, infinities and
    values beyond 65504 round to nearest. The random bits are a hash of
    (`salt`, `step`, element index), runtime/include/octet/runtime/StochasticRound.h:
    deterministic, the same on every backend and rank. Under a sharded optimizer
    the index is the shard's own: ranks draw the same bits at the same offset of
    their shards (for different elements).
    Example: `%w16 = fp8.stochastic_round %w, %step {salt = 3 : i64} : tensor<64x32xf32>, tensor<i64> -> tensor<64x32xf16>`
  }];
  let arguments = (ins TensorOf<[F32]>:$input, 0DTensorOf<[I64]>:$step, I64Attr:$salt);
  let results = (outs TensorOf<[F16]>:$output);
  let assemblyFormat = "$input `,` $step attr-dict `:` type($input) `,` type($step) `->` type($output)";
  let hasVerifier = 1;
}

def FP8_WorldSizeOp : FP8_Op<"world_size"> {
  let summary = "The number of data-parallel ranks of the run, as a float32 scalar";
  let description = [{
    1 in a single process. What a data-parallel plan divides by where the
    collective itself cannot (FP8 gradients are pre-divided before their cast).
    Example: `%n = fp8.world_size : tensor<f32>`
  }];
  let results = (outs 0DTensorOf<[F32]>:$size);
  let assemblyFormat = "attr-dict `:` type($size)";
}

#endif // OCTET_DIALECT_FP8_IR_FP8OPS_TD
