//===- Passes.td - Octet's pass library -----------------------------------===//
#ifndef OCTET_PASSES_TD
#define OCTET_PASSES_TD

include "mlir/Pass/PassBase.td"

def ModelSummary : Pass<"octet-model-summary", "mlir::ModuleOp"> {
  let summary = "Print what a model holds: op counts, parameters, Linear and LayerNorm candidates";
  let description = [{
    An analysis that leaves the IR unchanged and prints, for every function:
    the count of each ONNX op type, the number of initializers and their
    float parameters, and the layers the FP8 recipes will look at: Linear
    candidates (MatMul/Gemm whose weight is an initializer, possibly through
    a Transpose) with their [K, N] shape, and LayerNorm/RMSNorm candidates.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "Output format: text or json">,
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the summary ('-' is stdout)">,
  ];
}

def RaiseLayers : Pass<"octet-raise-layers", "mlir::ModuleOp"> {
  let summary = "Recognize Linear, LayerNorm, RMSNorm, GELU and SiLU and raise them to named nn ops";
  let description = [{
    Finds, in an imported ONNX graph:
    - Linear: MatMul or Gemm whose weight is a float initializer (directly,
      through a Transpose, or Gemm's transB), with an optional bias Add;
    - LayerNorm: the LayerNormalization op, or the decomposed
      ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add form;
    - RMSNorm: Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul/Mul (or Div);
    - GELU: the Gelu op, the erf form and the tanh form;
    - SiLU: x * Sigmoid(x);
    and replaces each by an nn op that carries the user's layer name (the
    weight's initializer name without `.weight`, else the node name) and keeps
    the matched ops in its body.
  }];
  let options = [
    ListOption<"layers", "layers", "std::string",
               "Kinds to raise: linear, layer_norm, rms_norm, gelu, silu (default: all)">,
  ];
  let dependentDialects = ["octet::nn::NNDialect"];
}

def LowerLayers : Pass<"octet-lower-layers", "mlir::ModuleOp"> {
  let summary = "Replace nn layer ops by the ops of their bodies";
  let description = [{
    The inverse of octet-raise-layers: layers no recipe converted go back to
    exactly the ONNX ops they were recognized from. Runs before a plan or an
    ONNX model is written. With gelu-op, a GELU becomes one onnx.Gelu (opset
    20) instead: fp8-opt does so for training plans before autodiff, so that
    the backward reads only the GELU's input instead of keeping its
    intermediates alive across the step. With norm-ops, a float32 LayerNorm
    or RMSNorm becomes one onnx.LayerNormalization (opset 17) or
    onnx.RMSNormalization (opset 23) over the last axis, however the model
    spelled it: fp8-opt does so for training plans, so that the norm runs as
    one kernel and its gradient as one octet LayerNormalizationGrad or
    RMSNormalizationGrad node that reads X, Scale and dY once (the
    decomposed form's Pow, ReduceMean, Sqrt, Reciprocal and Muls, and their
    gradients, each read and write the whole activation).
  }];
  let options = [
    Option<"geluOp", "gelu-op", "bool", "false", "Lower nn.gelu to one onnx.Gelu op instead of its body">,
    Option<"normOps", "norm-ops", "bool", "false",
           "Lower float32 nn.layer_norm and nn.rms_norm to one onnx.LayerNormalization or onnx.RMSNormalization">,
  ];
}

def Fp8Substitute : Pass<"octet-fp8-substitute", "mlir::ModuleOp"> {
  let summary = "Apply an FP8 recipe: turn the Linear layers its policy selects into fp8.linear";
  let description = [{
    Works on nn.linear ops (octet-raise-layers). Every knob of Accelerate's
    recipes is an option, spelled like its `accelerate launch --fp8_*` key.
    - te (TransformerEngine, delayed scaling): every Linear whose dims are
      multiples of 16 becomes FP8; each FP8 tensor gets its state as
      initializers (`<layer>.fp8.{input,weight}.{amax_history,scale,scale_inv}`).
    - ao (torchao, dynamic scaling): tensorwise, rowwise (power-of-2 scales)
      or rowwise_with_gw_hp; tensorwise scales are rounded down to powers of 2
      unless round-scales-to-power-of-2=false (torchao's tensorwise; why the
      default rounds: docs/BENCHMARKS.md, convergence); the first and last
      Linear stay in high precision unless keep-first-last=false; module-filter (a regex on the
      layer name) selects layers; dims not multiples of 16 stay unless
      pad-inner-dim.
    - msamp (MS-AMP): forward as O1, dynamic power-of-2 scales; opt-level is
      recorded for training.
    Every recipe keeps the output layer(s) in high precision (a Linear whose
    result reaches no other Linear: a GPT's lm_head, a classifier's head)
    unless keep-output-layer=false, which gives Accelerate's own rules (te
    and msamp convert every Linear); issue 26's convergence benchmark
    measured what FP8 there costs in loss.
    Layers left alone get `octet.fp8_kept = "<reason>"`. With eval=true the
    graph gets no FP8 unless use-autocast-during-eval. recipe=none converts
    nothing: every Linear is kept ("autocast"), with BF16 GEMMs under
    kept-gemm-precision=bf16, as PyTorch's BF16 autocast computes them.
  }];
  let options = [
    Option<"recipe", "recipe", "std::string", "\"te\"", "te, ao, msamp or none">,
    Option<"fp8Format", "fp8-format", "std::string", "\"HYBRID\"",
           "E4M3 (everywhere) or HYBRID (E4M3 forward, E5M2 gradients)">,
    Option<"amaxHistoryLen", "amax-history-len", "int64_t", "1024", "te: amax history length">,
    Option<"amaxComputeAlgo", "amax-compute-algo", "std::string", "\"max\"",
           "te: max (TransformerEngine's default) or most_recent (Accelerate's)">,
    Option<"margin", "margin", "int64_t", "0", "te: scale = fp8_max / amax / 2^margin">,
    Option<"interval", "interval", "int64_t", "1", "te: recompute scales every N steps">,
    ListOption<"overrideLinearPrecision", "override-linear-precision", "std::string",
               "GEMMs kept in high precision: any of fprop, dgrad, wgrad (or three booleans)">,
    Option<"useAutocastDuringEval", "use-autocast-during-eval", "bool", "false",
           "Use FP8 in eval graphs too">,
    Option<"optLevel", "opt-level", "std::string", "\"O2\"", "msamp: O1, O2 or O3">,
    Option<"aoRecipe", "ao-recipe", "std::string", "\"tensorwise\"",
           "ao: tensorwise, rowwise or rowwise_with_gw_hp">,
    Option<"moduleFilter", "module-filter", "std::string", "\"\"",
           "Only layers whose name matches this regex become FP8">,
    Option<"keepFirstLast", "keep-first-last", "bool", "true",
           "ao: keep the first and last Linear in high precision">,
    Option<"roundScalesToPowerOf2", "round-scales-to-power-of-2", "bool", "true",
           "ao tensorwise: round each scale down to a power of 2 (torchao's "
           "round_scales_to_power_of_2, off in its tensorwise recipe; the rowwise recipes "
           "always round)">,
    Option<"padInnerDim", "pad-inner-dim", "bool", "false",
           "Convert layers whose dims are not multiples of 16 (padded by the backend)">,
    Option<"keepOutputLayer", "keep-output-layer", "bool", "true",
           "Every recipe: a Linear whose result reaches no other Linear (the output layer, "
           "a GPT's lm_head) stays in high precision">,
    Option<"keptGemmPrecision", "kept-gemm-precision", "std::string", "\"f32\"",
           "The GEMMs of the layers a recipe keeps in high precision: f32, or bf16 (BF16 operands, "
           "float32 accumulation, as under PyTorch's autocast; the result is cast back to float32)">,
    Option<"padKeptGemms", "pad-kept-gemms", "bool", "true",
           "With kept-gemm-precision=bf16: a kept GEMM whose N is no multiple of 8 computes N rounded up "
           "(zero weight columns, the result sliced back)">,
    Option<"evalGraph", "eval", "bool", "false", "The graph is an eval graph">,
    Option<"shareInputScaling", "share-input-scaling", "bool", "true",
           "Linears reading one tensor share its input quantization (state, cast and codes)">,
  ];
  let dependentDialects = ["octet::fp8::FP8Dialect", "octet::nn::NNDialect",
                           "octet::onnx_dialect::ONNXDialect"];
}

def Fp8Expand : Pass<"octet-fp8-expand", "mlir::ModuleOp"> {
  let summary = "Expand fp8.linear into amax, scaling, cast and FP8 GEMM ops";
  let description = [{
    Delayed scaling: fp8.amax, fp8.cast with the state's scale_inv, fp8.gemm,
    and fp8.delayed_scale whose results become new function results marked
    `octet.state_update`. Dynamic scaling: fp8.amax, fp8.dynamic_scale,
    fp8.cast, fp8.gemm (rowwise: per-row scales on a 2-D view, the weight as
    [N, K]). A per-tensor cast of a LayerNorm/RMSNorm output (directly or
    through a Reshape) moves into the norm's body: the norm produces its FP8
    output itself.
  }];
  let options = [
    Option<"fuseNorms", "fuse-norms", "bool", "true",
           "Let LayerNorm/RMSNorm produce the FP8 cast of their output">,
  ];
  let dependentDialects = ["octet::fp8::FP8Dialect", "octet::onnx_dialect::ONNXDialect"];
}

def Fp8Report : Pass<"octet-fp8-report", "mlir::ModuleOp"> {
  let summary = "Per-layer FP8 report: what became FP8, what was kept and why, FLOPs and weight bytes";
  let options = [
    Option<"format", "format", "std::string", "\"text\"", "text or json">,
    Option<"outputFile", "output", "std::string", "\"-\"", "Where to write ('-' is stdout)">,
  ];
}

def Fp8ToQdq : Pass<"octet-fp8-to-qdq", "mlir::ModuleOp"> {
  let summary = "Rewrite fp8 ops into standard ONNX ops (QuantizeLinear/DequantizeLinear, opset 19+)";
  let description = [{
    So onnxruntime runs the FP8 forward graph and Netron shows it: casts
    become QuantizeLinear with a float8 zero point and `saturate`, FP8 GEMMs
    DequantizeLinear + MatMul (or com.microsoft.GemmFloat8 with
    gemm=gemm-float8), amax and scale updates plain arithmetic. FP8 state
    initializers become graph inputs with defaults, so callers can feed
    the state.
  }];
  let options = [
    Option<"gemm", "gemm", "std::string", "\"matmul\"",
           "matmul (DequantizeLinear + MatMul) or gemm-float8 (com.microsoft.GemmFloat8, CUDA only)">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect"];
}

def Autodiff : Pass<"octet-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff: add d(loss)/d(param) for every trainable parameter";
  let description = [{
    Differentiates the scalar loss of each function with respect to its
    trainable parameters (float initializers that are not runtime state,
    minus those matching `freeze` and torch.export's lifted constants, named
    `lifted_tensor_N`, `c_lifted_tensor_N` or `_tensor_constantN`; a
    TrainingInfoProto's Gradient node names the parameters instead). Each op on the path from a parameter to
    the loss contributes through its GradientOpInterface rule; an op without
    one is an error naming the op and node. nn layers are inlined first and
    SequenceAt(SplitToSequence) with constant positions becomes Slice. The
    gradients become results named "<param>.grad" with `octet.grad_of`.
    With `fused-grads`, a LayerNormalization whose Scale and B cover its
    normalized dims gets `onnx.node "LayerNormalizationGrad"` (domain "octet";
    operands X, Scale, dY; attributes axis, epsilon; results dX, dScale, dB),
    which recomputes the row statistics from X: one read of X and dY where the
    ONNX spelling reads and writes the row a dozen times; and a
    SoftmaxCrossEntropyLoss without class weights gets `onnx.node
    "SoftmaxCrossEntropyLossGrad"` (operands scores, labels, dY; the loss's
    reduction and ignore_index) in place of Softmax, a one-hot Equal and Cast
    and the arithmetic.
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"\"",
           "The loss output's name (default: the only scalar float output)">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "Parameters whose names match this regular expression are not trained">,
    Option<"fusedGradsOpt", "fused-grads", "bool", "false",
           "LayerNormalization's and SoftmaxCrossEntropyLoss's gradients as one octet node each "
           "(LayerNormalizationGrad, SoftmaxCrossEntropyLossGrad) instead of ONNX ops; fp8-opt sets it for "
           "plans (--fuse-grads)">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect", "octet::fp8::FP8Dialect"];
}

def Optimizer : Pass<"octet-optimizer", "mlir::ModuleOp"> {
  let summary = "Optimizer step after autodiff: parameters and moments become state updated in the step";
  let description = [{
    Turns the gradients octet-autodiff added into one optimizer step inside
    the function: global-norm clipping, the learning-rate schedule (from a
    step counter in the state), and SGD with momentum, Adam or AdamW
    (PyTorch's update rules) on FP32 master weights. Parameters, moments and
    the step counter become runtime state with state updates. `msamp-level`
    changes the storage of FP8 Linear weights as MS-AMP does: O1 FP16
    weights and FP8 weight gradients; O2 also an FP8 first and FP16 second
    moment (upcast, compute in FP32, re-quantize with power-of-2 scales); O3
    FP8 weights with FP16 master weights.

    With `shard-parameters` (ZeRO-3 / FSDP's full sharding) each parameter
    whose gradient arrives as a shard (`octet.grad_shards`) is itself held
    sharded: its state is this rank's 1/N of the flattened, zero-padded
    weight (MS-AMP O1/O2 FP8 weights: FP16), the forward and backward read it
    through an `fp8.all_gather` (MS-AMP O3: of its FP8 codes, as with a
    sharded optimizer), and the update writes the shard back.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"", "sgd, adam or adamw">,
    Option<"lr", "lr", "double", "3e-4", "Peak learning rate">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"eps", "eps", "double", "1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "Weight decay (AdamW: decoupled; SGD and Adam: added to the gradient)">,
    Option<"momentum", "momentum", "double", "0.0", "SGD momentum">,
    Option<"clipGradNorm", "clip-grad-norm", "double", "0.0", "Clip the global gradient norm to this (0: off)">,
    Option<"schedule", "schedule", "std::string", "\"constant\"", "constant or cosine (linear warmup + cosine)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0", "Linear warmup steps">,
    Option<"totalSteps", "total-steps", "int64_t", "0", "cosine: steps until the learning rate reaches min-lr">,
    Option<"minLr", "min-lr", "double", "0.0", "cosine: the final learning rate">,
    Option<"keepGradients", "keep-gradients", "bool", "true",
           "Keep d(loss)/d(param) as results (fp8-run --dump-gradients); false frees each after its update">,
    Option<"msampLevel", "msamp-level", "std::string", "\"\"",
           "MS-AMP storage for FP8 Linear weights: O1, O2, O3 (empty: FP32)">,
    Option<"msampGradFormat", "msamp-grad-format", "std::string", "\"e4m3\"",
           "O1+: the FP8 format FP8 Linear weight gradients are held in: e4m3 (MS-AMP's) or e5m2">,
    Option<"msampWeightRounding", "msamp-weight-rounding", "std::string", "\"nearest\"",
           "O1+: the updated FP16 weight (O3: master) rounded to nearest (MS-AMP's) or stochastically (fp8.stochastic_round "
           "with the step counter: unbiased, so updates below half an FP16 step land on average)">,
    ListOption<"msampFloat32", "msamp-float32", "std::string",
               "O1+: parts of MS-AMP's storage kept in float32 instead: weights (O3: masters; FP16 otherwise) and gradients "
               "(FP8 Linear weight gradients, FP8 otherwise); the moments follow the level">,
    Option<"fuseMsampAdam", "fuse-msamp-adam", "bool", "false",
           "O2/O3: each FP8 weight's Adam/AdamW update (FP8 and FP16 moments, FP16 weight) as one fp8.adam_step "
           "instead of its float32 ops">,
    Option<"shardUnit", "shard-unit", "std::string", "\"layer\"",
           "Sharded optimizer (ZeRO-2): layer gathers the updated shards of one repeated block's "
           "parameters in one collective (octet::layerOf), parameter each alone">,
    Option<"shardParameters", "shard-parameters", "bool", "false",
           "ZeRO-3: a parameter whose gradient octet-data-parallel reduce-scattered is held as this rank's shard "
           "(role weight_shard; MS-AMP O3: its master, master_shard) and all-gathered at the step's start, the "
           "gather marked octet.parameter_gather for octet-gather-parameters to place; the updated shard is "
           "kept, not gathered">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect", "octet::fp8::FP8Dialect"];
}

def AccumulateGradients : Pass<"octet-accumulate-gradients", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: a step of the plan is one micro-batch of `steps`";
  let description = [{
    Runs between octet-autodiff and octet-data-parallel / octet-optimizer. The
    function gets a bool scalar argument `octet.first_micro_batch`, and every
    gradient result g of a parameter p becomes the running mean of the
    optimizer step's micro-batches, kept in a state `<p>.grad_accum` (zeros,
    role `grad_accum`): `first ? g / steps : acc + g / steps` (Accelerate's
    `loss / gradient_accumulation_steps`). The state's update is that value, so
    what the optimizer and the gradient all-reduce read in the last micro-batch
    is the mean over all of them; a fresh step's first micro-batch overwrites
    it. The module's training section gets `grad_accum_steps`.
    octet-micro-batch-phases then marks what runs in the last micro-batch only.
  }];
  let options = [
    Option<"steps", "steps", "int64_t", "1", "Micro-batches per optimizer step (1: off)">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect"];
}

def MicroBatchPhases : Pass<"octet-micro-batch-phases", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: mark the ops that run in an optimizer step's last micro-batch only";
  let description = [{
    In a module with `grad_accum_steps` > 1 (octet-accumulate-gradients), the
    function's results run in one of two phases. Every micro-batch: the loss,
    other model outputs, the accumulators' updates and the delayed-scaling
    state of activations and gradients (each micro-batch's amax enters the
    history, as TransformerEngine records it). The last micro-batch only: the
    parameters', moments' and step counter's updates, the gradients, the
    learning rate and gradient norm, and the delayed-scaling state of weights
    (a weight's scale changes once per optimizer step, so every micro-batch
    casts it with the same scale: TransformerEngine's `is_first_microbatch`
    codes). Every op that only results of the last phase need is marked
    `octet.last_micro_batch` (the plan's `last_micro_batch`): the gradient
    all-reduces, the optimizer, the weight scale updates. A fusion group with
    members in both phases is split (runs of delayed-scale updates reordered
    so that each phase's stay side by side) or dissolved.

    With `reuse-invariants`, the ops of every micro-batch whose results stay
    the same through an optimizer step run in its first micro-batch only
    (`octet.first_micro_batch`, the plan's `first_micro_batch`): those that
    read only parameters and state updated in the last micro-batch,
    constants, and each other's results, with no randomness. These are a
    weight's FP8 cast with its delayed scale, its transposed codes, a kept
    layer's BF16 weight copy (TransformerEngine's `is_first_microbatch`
    weight caches). The results that other ops read are kept across the
    step's runs (the memory plan gives them bytes for the whole run); the
    same computation twice (a cast rematerialized for the backward) is made
    once.
  }];
  let options = [
    Option<"reuseInvariants", "reuse-invariants", "bool", "false",
           "Compute what stays the same through an optimizer step (weights' casts) in its first "
           "micro-batch only, and keep it for the others">,
  ];
}

def DataParallel : Pass<"octet-data-parallel", "mlir::ModuleOp"> {
  let summary = "Average the gradients (and the loss) across data-parallel ranks before the optimizer";
  let description = [{
    Runs between octet-autodiff and octet-optimizer. Every gradient result
    becomes its average over the run's ranks (`fp8.all_reduce` avg), so
    clipping and the update see the global gradient and every rank takes the
    same step (gradients below `bucket-bytes` share all-reduces: flattened,
    concatenated, reduced and sliced back); the loss result (marked `octet.loss` by octet-autodiff)
    becomes the mean over ranks, the loss of the combined batch. With
    `fp8-gradients` (MS-AMP O1/O2) the gradient of an FP8 Linear's weight
    travels in FP8 (`fp8-format`): its amax is all-reduced (max) first (NaN
    counting as Inf, MS-AMP's rule), every rank casts
    with the power-of-2 scale of that global amax after dividing by
    `fp8.world_size` (so the FP8 sum cannot overflow), the codes are summed
    by the collective and dequantized; the result is marked
    `octet.grad_storage` so the optimizer does not quantize it again. The
    world size is a runtime value: the plan runs on any number of ranks,
    one included. The module gets `octet.data_parallel`.

    With `shard-world-size` N > 1 a gradient that would go alone is instead
    flattened, zero-padded to a multiple of N and reduce-scattered
    (`fp8.reduce_scatter`; FP8 codes for MS-AMP's FP8 gradients, summed): the
    result is this rank's 1-D shard, marked `octet.grad_shards` = N, which
    octet-optimizer updates and all-gathers. With `unit` layer (the default)
    the float32 gradients of one layer's parameters share one
    reduce-scatter after the last of them: each as N rows of its shard, the
    rows concatenated, rank r's slice of the whole its shard of each; a
    layer's small gradients (biases, norm weights) are among them, so its
    whole state is sharded, as FSDP's flat parameter. The plan then fixes its world
    size (`shard_world_size` in the plan's training section).
  }];
  let options = [
    Option<"fp8Gradients", "fp8-gradients", "bool", "false",
           "FP8 Linear weight gradients travel as FP8 codes (MS-AMP O1/O2)">,
    Option<"fp8Format", "fp8-format", "std::string", "\"e4m3\"",
           "The FP8 format of those gradients on the wire: e4m3 or e5m2">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", "4194304",
           "Float32 gradients smaller than this share all-reduces, in buckets of up to this many bytes "
           "(one collective costs tens of microseconds whatever its size); 0: each its own">,
    Option<"numProcesses", "num-processes", "int64_t", "0",
           "The number of processes the plan is meant for (an Accelerate config's num_processes), written "
           "to the plan as fp8-run's default --nproc-per-node; 0: none">,
    Option<"numMachines", "num-machines", "int64_t", "0",
           "The machines those processes run on (an Accelerate config's num_machines), written to the plan as "
           "fp8-run's default --nnodes (each machine then gives its --node-rank); 0 or 1: one">,
    Option<"mainProcessIp", "main-process-ip", "std::string", "\"\"",
           "The host of the machine whose first process serves the rendezvous (main_process_ip), written to the "
           "plan as fp8-run's default --master-addr; empty: none">,
    Option<"mainProcessPort", "main-process-port", "int64_t", "0",
           "Its port (main_process_port), fp8-run's default --master-port; 0: none">,
    Option<"shardWorldSize", "shard-world-size", "int64_t", "0",
           "Shard the optimizer over this many ranks (ZeRO-2, MS-AMP O3's sharding): each gradient that goes "
           "alone (at least bucket-bytes, float32, or FP8) is reduce-scattered, so each rank holds and "
           "updates 1/N of it (octet-optimizer gathers the updated weights); the plan then runs on exactly "
           "this many ranks. 0 or 1: gradients all-reduced, state replicated">,
    Option<"unit", "unit", "std::string", "\"layer\"",
           "What one reduce-scatter of float32 gradients moves: layer (the parameters of one repeated "
           "block, FSDP's wrapped module) or parameter (each alone)">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect", "octet::fp8::FP8Dialect"];
}

def ReduceAmaxes : Pass<"octet-reduce-amaxes", "mlir::ModuleOp"> {
  let summary = "All-reduce (max) the amaxes delayed scaling records, in one collective per step";
  let description = [{
    TransformerEngine's amax reduction for data parallelism: the amax an
    fp8.delayed_scale records is first replaced by its maximum over the run's
    ranks, so every rank computes the same scales and the replicated FP8
    state stays replicated. The delayed-scaling updates that sit together
    before the return (octet-sink-scale-updates) share one all-reduce of
    their amaxes, concatenated; any other update gets its own. A non-finite
    amax stays non-finite (the reduction propagates NaN). fp8-opt runs it
    for plans written with `--data-parallel`.
  }];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect", "octet::fp8::FP8Dialect"];
}

def OverlapCollectives : Pass<"octet-overlap-collectives", "mlir::ModuleOp"> {
  let summary = "Split each fp8.all_reduce into a start after its operands and a done before its first reader";
  let description = [{
    Data-parallel plans: a gradient's all-reduce starts as soon as the
    gradient is complete and is waited for only where the optimizer reads it,
    so the collective runs beside the rest of the backward pass (a backend
    puts it on its own stream; DDP's overlap, decided by the compiler). The
    start goes right after the last definition among its operands, the done
    right before the first reader of the result; an fp8.dequantize reading
    only the done moves down to its own first reader first. An all-reduce
    with nothing between the two points stays as it is. A sharded
    optimizer's `fp8.reduce_scatter` likewise becomes an
    `fp8.reduce_scatter_start` over the whole gradient, in place, a done
    before the shard's first reader, or before the next reduce-scatter's
    start if that comes first (so a layer's whole gradient is freed a
    layer later, not at the optimizer), and the `fp8.shard` of the done. fp8-opt
    runs it for plans written with `--data-parallel` (`--overlap-collectives`).
  }];
  let dependentDialects = ["octet::fp8::FP8Dialect"];
}

def Fp8AllGather : Pass<"octet-fp8-all-gather", "mlir::ModuleOp"> {
  let summary = "All-gather sharded weights as the FP8 codes their Linears read (torchao's enable_fsdp_float8_all_gather)";
  let description = [{
    Plans of fully sharded parameters (octet-optimizer `shard-parameters`):
    a weight whose every reader is a per-tensor FP8 cast (fp8.cast,
    fp8.cast_amax) or the amax its dynamic scale is computed from
    (fp8.amax) is cast on its shard instead, and its codes are gathered:
    one byte an element instead of four. The cast is elementwise with one
    scale all ranks agree on, so the gathered codes are the bits the cast
    of the gathered weight gave: under delayed scaling (te) the scale is
    last step's state, and the shard's amax goes to fp8.delayed_scale,
    whose amaxes octet-reduce-amaxes all-reduces (max); under current
    scaling (ao tensorwise, MS-AMP) each weight's amax is the maximum of
    its shards' amaxes, all of them in one all-reduce (max) at the step's
    start, where the scales and the shards' casts then go (torchao's
    precompute_float8_dynamic_scale_for_fsdp). A transposed copy the
    backward reads (octet-cast-transpose) becomes an onnx.Transpose of the
    gathered codes. Weights read otherwise (embeddings, norms, a layer kept
    in high precision, rowwise scales) are gathered as they are; the module
    gets `octet.fp8_weight_gathers` (weights gathered as FP8) and, where a
    weight an FP8 cast reads stays in high precision, `octet.fp8_gather_kept`
    (its name and why). fp8-opt runs it for `--shard-parameters` with
    `--fp8-all-gather` (the default), before octet-gather-parameters.
  }];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect", "octet::fp8::FP8Dialect"];
}

def GatherParameters : Pass<"octet-gather-parameters", "mlir::ModuleOp"> {
  let summary = "Gather each sharded parameter just before its readers, once for the forward and again for the backward";
  let description = [{
    Plans of fully sharded parameters (octet-optimizer `shard-parameters`):
    the all-gathers marked `octet.parameter_gather` sit at the step's start,
    so every gathered weight would be alive for the whole step. Each moves,
    with the ops that cut its padding off and convert it (Slice, Reshape,
    Cast, fp8.dequantize), to just before its first reader; the readers
    after the loss (the backward pass, recomputed blocks included) read a
    second gather of their own, placed before the first of them. A gathered
    weight is then freed after its last forward reader and gathered again
    for the backward (FSDP's reshard after forward). With `prefetch` P > 0,
    each all-gather itself is issued before the first reader of the P-th
    gather ahead of it in the step, so that octet-overlap-collectives can run
    it beside that layer's compute (FSDP's forward and backward prefetch);
    at most P + 1 layers' weights are then gathered at once. A parameter whose
    backward readers come before any other parameter is read again (the
    last layers before the loss) keeps its one gather. With `unit` layer
    (the default) the gathers of one layer's parameters (octet::layerOf:
    the name up to its first numbered part, FSDP's wrapped block) become
    one before any of them moves: their shards concatenated, one
    all-gather, each weight a Slice of every rank's row (what the ones it
    reads need, as MS-AMP O3's codes and scales, moves up with it); the
    layer is then placed and prefetched as one, and gathered again for
    the backward as one of the members the backward reads. The module gets
    `octet.parameter_gathers` (per step), `octet.parameter_regathers` (the
    backward's) and `octet.gather_prefetch`. fp8-opt runs it for
    `--shard-parameters`, before octet-overlap-collectives.
  }];
  let options = [
    Option<"prefetch", "prefetch", "int64_t", "1",
           "Issue each gather this many gathers ahead of its readers (0: right before them)">,
    Option<"unit", "unit", "std::string", "\"layer\"",
           "What one all-gather moves: layer (the parameters of one repeated block, FSDP's wrapped "
           "module) or parameter (each alone)">,
  ];
  let dependentDialects = ["octet::fp8::FP8Dialect", "octet::onnx_dialect::ONNXDialect"];
}

def DelayWeightGradients : Pass<"octet-delay-weight-gradients", "mlir::ModuleOp"> {
  let summary = "Start the backward's last all-reduce before the weight gradients it does not need";
  let description = [{
    Data-parallel plans, after octet-overlap-collectives: the backward pass
    ends with the gradient of the first layer (a GPT's token embedding,
    hundreds of megabytes), whose all-reduce nothing is left to hide. The
    ops just before its `fp8.all_reduce_start` that it does not depend on
    (the last layers' weight-gradient GEMMs, their casts and their own
    all-reduce starts) move, in order, to right after it, so they run beside
    it; walking back from the start, ops move until their estimated time
    covers the all-reduce's (bytes over `link-gbps`; GEMMs' FLOPs over
    `gemm-tflops`, other ops' bytes over `hbm-gbps`). The same ops compute
    the same values: only the order changes (Megatron's delayed weight
    gradients, decided by the compiler). fp8-opt runs it for data-parallel
    plans with `--delay-weight-gradients` (off by default: on 2 x H200 the
    1.3B GPT's scaling did not change measurably, docs/SCALING.md).
  }];
  let options = [
    Option<"linkGBps", "link-gbps", "double", "300", "Assumed all-reduce bandwidth between ranks, GB/s">,
    Option<"gemmTflops", "gemm-tflops", "double", "1000", "Assumed GEMM throughput, TFLOP/s">,
    Option<"hbmGBps", "hbm-gbps", "double", "3000", "Assumed memory bandwidth of other ops, GB/s">,
  ];
  let dependentDialects = ["octet::fp8::FP8Dialect"];
}

def FusePointwise : Pass<"octet-fuse-pointwise", "mlir::ModuleOp"> {
  let summary = "Fuse chains of float32 elementwise ops into one octet Pointwise node";
  let description = [{
    Groups float32 elementwise onnx ops (Add, Sub, Mul, Div, Pow, Max, Min,
    Neg, Abs, Sqrt, Reciprocal, Tanh, Sigmoid, Erf, Exp, Log, Relu, Where)
    whose results share one static shape and are read only inside the group
    into `onnx.node "Pointwise"` (domain "octet"); a result several members
    read (the GELU gradient's tanh) stays in the program too. Its operands are the
    group's outside inputs (broadcasting to the result); `ops` lists the op
    types in program order and `args` three operand slots per op (k below the
    input count: input k; above: the result of op k - #inputs; -1: none).
    fp8-opt runs it when writing a plan (docs/PLAN.md); runtimes evaluate the
    program per element with each op's own arithmetic.

    With `duplicate-producers`, an op whose several readers are all ops of
    its shape that could join it, and whose own operands come from outside
    any chain it could join (unfusible producers, arguments, constants, ops
    of another shape), is first copied
    for each reader: recomputing it in each program costs no memory traffic
    beyond reading its operands, where keeping it costs a write and a read
    per reader (the clipped gradient that AdamW's two moments both read).

    With `recompute-programs`, a program of two ops or more that several
    other programs read, computed from one tensor (scalars aside), is copied
    into each of them, and the ops are grouped again: SiLU's x * sigmoid(x),
    which SwiGLU's product reads in the forward and the up projection's
    gradient in the backward, is recomputed from x (which the SiLU gradient
    reads anyway), so the forward's product absorbs it and the SiLU output
    is never stored. With `expand-gelus`, a Gelu whose readers could all join
    a program with it is first written as its formula's ops (the runtimes'
    order of operations): GeGLU's gelu(gate) x up then works the same way.

    With `broadcast-expands`, a float32 Expand whose readers are all ops that
    could join a program, of the Expand's result type and still of that
    shape when they read the Expand's input instead, goes first: they read
    its input and broadcast it, so the expanded tensor is never written (a
    ReduceMean's gradient, [B, S, 1] expanded to [B, S, d] for one product).
  }];
  let options = [
    Option<"maxOps", "max-ops", "int64_t", "32", "At most this many ops in one Pointwise node">,
    Option<"maxInputs", "max-inputs", "int64_t", "8", "At most this many distinct inputs to one Pointwise node">,
    Option<"duplicateProducers", "duplicate-producers", "bool", "true",
           "Copy a multi-reader op with outside operands into each of its fusible readers">,
    Option<"expandGelus_", "expand-gelus", "bool", "true",
           "Write a Gelu whose readers could all join a program as its formula's ops">,
    Option<"recomputePrograms", "recompute-programs", "bool", "true",
           "Copy a program that several programs read, computed from one tensor, into each of them">,
    Option<"broadcastExpands", "broadcast-expands", "bool", "true",
           "Drop a float32 Expand whose readers are all fusible ops of its shape (they broadcast its input)">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect"];
}

def FuseAttention : Pass<"octet-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Fuse scaled dot-product attention into one octet Attention node";
  let description = [{
    Matches MatMul(Q, Kt), scalar scaling (Mul/Div by a positive constant), an
    optional causal mask (Where with a boolean lower triangle and a constant
    <= -1e4, or Add of a 0/-inf-style constant mask), Softmax over the last
    axis and MatMul(P, V), when the intermediates have no other readers, and
    replaces them by `onnx.node "Attention"` (domain "octet", operands Q, K, V;
    attributes `scale`, `is_causal`; results Y and the rows' log-sum-exp LSE).
    Its gradient is octet::AttentionGrad(Q, K, V, Y, LSE, dY) -> (dQ, dK, dV).
    ONNX's own Attention (opset 23) becomes the same node where its attn_mask
    is causal or masks nothing, and the operator's ops for other masks; past
    K/V, softcap and the QK output are refused naming the node.
    Where Q, K and V are head splits (Transpose [0, 2, 1, 3] of [B, S, H, d]), the
    node takes ONNX Attention's 3-D form instead: [B, S, H * d] operands and Y,
    attributes q_num_heads = kv_num_heads = H, and the head merge of Y becomes a
    Reshape (fold-head-transposes). Grouped-query attention (K and V each a
    [B, G, T, d] tensor with every head repeated H / G times, HF's repeat_kv) reads
    the unrepeated tensors: K and V [B, G, T, d], or kv_num_heads = G.
    fp8-opt runs it before autodiff when writing a plan (--fuse-attention).
  }];
  let options = [
    Option<"maxHeadDim", "max-head-dim", "int64_t", "128",
           "Heads wider than this stay unfused (the CUDA kernels hold a head row in registers)">,
    Option<"foldHeadTransposes", "fold-head-transposes", "bool", "true",
           "When Q, K and V are split from [B, S, H, d] tensors by Transpose [0, 2, 1, 3], read them "
           "in place as [B, S, H * d] (q_num_heads, kv_num_heads) and write Y so, dropping the "
           "head split and merge (--fold-head-transposes)">,
    Option<"maxWorkspaceBytes", "max-workspace-bytes", "int64_t", "0",
           "Above 0: the node and its gradient carry max_workspace_bytes, the most scratch a backend "
           "may take for them (the CUDA runtime runs cuDNN's deterministic backward, whose workspace "
           "is quadratic in the sequence, over slices of the batch that fit; the same bits) "
           "(--attention-workspace-bytes)">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect"];
}

def FuseRotary : Pass<"octet-fuse-rotary", "mlir::ModuleOp"> {
  let summary = "Fuse the rotary position embedding into one octet RotaryEmbedding node";
  let description = [{
    Matches Y = Add(Mul(X, cos), Mul(rotate_half(X), sin)) with rotate_half(X) =
    Concat(Neg(second half of X's last axis), first half) (HF's
    apply_rotary_pos_emb as exported; any operand order, copies looked through),
    cos and sin broadcasting to X with its width, and replaces it by
    `onnx.node "RotaryEmbedding"` (domain "octet", operands X, cos, sin; the same
    values bit for bit). Its gradient is the node with attribute inverse = 1:
    dX = dY cos + rotate_half^T(dY sin). fp8-opt runs it before autodiff when
    writing a plan (--fuse-rotary).
  }];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect"];
}

def RematerializeCasts : Pass<"octet-rematerialize-casts", "mlir::ModuleOp"> {
  let summary = "Recompute casts of parameters and state where far-apart readers need them";
  let description = [{
    An onnx.Cast of an initializer is moved before its first reader; readers
    more than `distance` ops after the previous reader get their own copy of
    the Cast, so no converted copy of a weight stays alive across the step
    (MS-AMP O2: FP16 weights cast to FP32 for the forward and the optimizer).
    fp8-opt runs it when writing a plan.
  }];
  let options = [
    Option<"distance", "distance", "int64_t", "64", "Readers further apart than this many ops get their own Cast">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect"];
}

def CheckpointBlocks : Pass<"octet-checkpoint-blocks", "mlir::ModuleOp"> {
  let summary = "Activation checkpointing of whole blocks: the backward runs a block's forward again";
  let description = [{
    A training step keeps every block's activations from its forward to its
    backward; at the step's peak all of them are live. This pass keeps only
    what enters each checkpointed block (the residual stream, which the
    previous block's backward reads anyway) and gives the block's backward a
    copy of the block's forward, placed before the first backward op that
    reads one of its values (PyTorch's `torch.utils.checkpoint` of a
    transformer layer, as HF's `gradient_checkpointing_enable()` does).

    Blocks are found from the parameter and state names: `<prefix>.<N>.` (a
    Llama's `model.layers.3.mlp.up_proj.weight`, a GPT-2's `h.3.attn...`). In
    the forward (the ops the loss depends on), block N starts at the first op
    that reads an activation and a tensor of block N, and ends where block
    N + 1 starts; the last block ends with the forward (its backward comes
    first, so it is never checkpointed). Ops that read parameters and
    constants only (a weight's FP8 cast) are not copied: their values are
    used as they are (octet-rematerialize-fp8-casts decides about those).
    A block value that a later block's forward reads stays: that is the
    checkpoint. The copies read the same inputs with the same scales, so the
    backward sees the same bits. A block with a random op (Dropout) or a
    subgraph is left as it is.

    `blocks` checkpoints the first N blocks (-1: every block but the last).
    The module gets `octet.checkpointed_blocks = {blocks, of, prefix}`: how
    many were checkpointed, how many could be, and their name prefix; the
    copies are marked `octet.recompute_block`. fp8-opt runs it when writing a
    plan (`--checkpoint-blocks`, or chosen by `--memory-budget`), first among
    the plan passes, after CSE (which would merge the copies back).
  }];
  let options = [
    Option<"blocks", "blocks", "int64_t", "-1", "How many blocks to checkpoint, from the first (-1: all but the last)">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect"];
}

def FreeEarly : Pass<"octet-free-early", "mlir::ModuleOp"> {
  let summary = "Move a large value's readers up to the op that makes it, where that frees it sooner";
  let description = [{
    A value is alive from the op that makes it to its last reader. When every
    reader of a value of at least `min-bytes` can run right after the op that
    makes it (their other operands are made earlier, or by ops that make only
    scalars, which move with them), and the readers' results take no more
    bytes than the value, they move there, in their order: the value is freed
    at once. MS-AMP's weight gradients are the case: each float32 gradient's
    amax, scale and FP8 cast ran at the step's end, with the optimizer, so
    every float32 gradient was alive at once there (4 bytes a parameter);
    moved, only their FP8 codes are (1 byte).

    Only ops that compute their results from their operands alone move: not
    random ops, subgraphs, collectives, state updates, the copies of
    octet-checkpoint-blocks or the recomputed casts of
    octet-rematerialize-casts. The order of ops with no effect on each other
    changes, not what they compute. The module gets `octet.freed_early = N`,
    the values freed sooner. fp8-opt runs it when writing a plan, after
    octet-checkpoint-blocks (`--free-early`).
  }];
  let options = [
    Option<"minBytes", "min-bytes", "int64_t", "4096", "Values smaller than this stay as they are">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect", "octet::fp8::FP8Dialect"];
}

def RematerializeFp8Casts : Pass<"octet-rematerialize-fp8-casts", "mlir::ModuleOp"> {
  let summary = "Recompute FP8 codes for the backward instead of keeping them from the forward";
  let description = [{
    An FP8 cast in the forward writes codes that a backward GEMM reads again
    much later: a weight's codes (the dgrad reads the other layout than the
    forward), and the transposed codes of an activation (the wgrad). Kept, they
    are live across the step's peak. Where a reader comes more than `distance`
    ops after the previous reader of the codes, and the cast's input can be had
    there without keeping anything more alive (a parameter or state; a value
    still read at or after that point, such as the attention output that the
    attention gradient reads; or a Reshape, Cast, Gelu or LayerNormalization of
    such a value, as the GELU output recomputed from the FC1 output its
    gradient keeps, or a LayerNorm's output from the residual its gradient
    keeps: the LayerNorm forward runs again; or MS-AMP O3's weight, its master
    cast to FP8 and dequantized, made again from the master; scales, being
    scalars, are kept rather than recomputed), the
    readers from there on get a copy of the cast placed before the first of
    them: an fp8.cast where they read the codes as cast, an fp8.cast_amax with
    its `transposed` result where they read that. The copy reads the same input
    bits with the same scale, so the codes are the same bits. fp8-opt runs it
    when writing a plan (`--rematerialize-fp8-casts`), after octet-group-casts.
  }];
  let options = [
    Option<"distance", "distance", "int64_t", "16", "Readers further than this many ops after the previous reader get a recomputed copy">,
    ListOption<"sources", "sources", "std::string",
               "Which copies to make, by what they recompute: weight (a parameter's or state's cast), activation (a cast of a tensor still live), gelu (the GELU runs again), layernorm (the LayerNorm or RMSNorm forward runs again); default all four">,
  ];
  let dependentDialects = ["octet::fp8::FP8Dialect", "octet::onnx_dialect::ONNXDialect"];
}

def FuseCastAmax : Pass<"octet-fuse-cast-amax", "mlir::ModuleOp"> {
  let summary = "Pair each fp8.cast with the per-tensor fp8.amax of the same input";
  let description = [{
    Delayed scaling casts a tensor with the scale of earlier steps and records
    its amax for the next: two ops that each read the whole tensor. Where an
    fp8.cast and a per-tensor fp8.amax read the same value, they become one
    fp8.cast_amax (one read), placed where the later of the two was when every
    reader of the earlier one's result comes after it, else where the earlier
    one was when the later one's operands are defined there. fp8-opt runs it
    when writing a plan (`--fuse-cast-amax`).
  }];
  let dependentDialects = ["octet::fp8::FP8Dialect"];
}

def CastTranspose : Pass<"octet-cast-transpose", "mlir::ModuleOp"> {
  let summary = "FP8 casts also write the transposed layout their GEMMs read";
  let description = [{
    cuBLASLt's FP8 GEMMs take both operands K-contiguous. Where an fp8.gemm
    reads an operand in the other layout (A with `transpose_a`, B without
    `transpose_b`) and the operand is the output of a per-tensor-scaled 2-D
    fp8.cast_amax, the cast gains its `transposed` result and the GEMM reads
    it with the flag flipped, so the backend runs no separate transpose
    (TransformerEngine's cast-transpose: the wgrad GEMM's copies of the input
    and the output gradient, the dgrad GEMM's copy of the weight). Runs after
    octet-fuse-cast-amax; fp8-opt runs it when writing a plan
    (`--cast-transpose`).
  }];
  let dependentDialects = ["octet::fp8::FP8Dialect"];
}

def GroupCasts : Pass<"octet-group-casts", "mlir::ModuleOp"> {
  let summary = "Run the FP8 casts of one tensor one after another";
  let description = [{
    Linears that read one tensor (the Q, K and V projections of a LayerNorm's
    output) each cast it to FP8 with a scale of their own, just before their
    GEMM. Every fp8.cast_amax of a value moves up to just after the first one,
    in order, where its operands are defined there (the scales are state), so
    a backend can read the tensor once for all of them, and compute it in the
    same pass (a LayerNorm's or a GELU's output). Only the order changes.
    A cast more than `distance` ops after the previous one of its group stays
    (a backward cast of a forward tensor: moving it would keep its codes alive
    across the step). fp8-opt runs it when writing a plan (`--group-casts`),
    after octet-cast-transpose.
  }];
  let options = [
    Option<"distance", "distance", "int64_t", "64", "Casts further than this many ops after the previous cast of the tensor stay">,
  ];
  let dependentDialects = ["octet::fp8::FP8Dialect"];
}

def FusePointwiseChains : Pass<"octet-fuse-pointwise-chains", "mlir::ModuleOp"> {
  let summary = "Run consecutive Pointwise programs over one shape as one kernel";
  let description = [{
    Consecutive octet Pointwise nodes whose results have one static shape
    (AdamW's first moment, second moment and parameter; a GELU gradient's
    two programs) become one fusion group: each member gets
    `octet.fusion = "pointwise_chain"` and `octet.fusion_group = N`, which the
    plan keeps as the ops' `fusion` and `fusion_group` attributes. A backend
    runs a group as one kernel that evaluates the programs in order per
    element, passing a result that later members read on in registers; the
    CPU runs the members one by one, so the arithmetic is the same. A member
    reads an earlier member's result only with that result's shape (element
    for element); any other op between two programs ends the group (constants
    aside). A group holds at most `max-ops` programs, or `max-small-ops` where
    its results have at most `small-elements` elements (there a launch costs
    more than the bytes). fp8-opt runs it last when writing a plan
    (`--fuse-pointwise-chains`).
  }];
  let options = [
    Option<"maxOps", "max-ops", "int64_t", "4", "Programs a group holds">,
    Option<"maxSmallOps", "max-small-ops", "int64_t", "12", "Programs a group of small results holds">,
    Option<"smallElements", "small-elements", "int64_t", "65536", "Results this small or smaller are small">,
  ];
}

def FuseRuns : Pass<"octet-fuse-runs", "mlir::ModuleOp"> {
  let summary = "Run consecutive small ops of one kind and setting as one launch";
  let description = [{
    A step ends with many tiny ops of one kind side by side: the delayed
    scaling updates that octet-sink-scale-updates gathers (fp8.delayed_scale
    with one history length, margin, algorithm and power-of-two setting, no
    interval) and the optimizer's per-parameter sums of squares for the
    gradient norm (whole-tensor float32 onnx.ReduceSumSquare). Each run of
    two or more becomes one fusion group (`octet.fusion` =
    "delayed_scale_list" or "sum_squares_list", `octet.fusion_group`), which
    the plan keeps as the ops' `fusion` and `fusion_group` attributes and a
    backend runs as one launch (a launch costs more than such an op's bytes).
    A member that reads another member's result ends the run. fp8-opt runs it
    when writing a plan (`--fuse-runs`).
  }];
}

def ChunkLoss : Pass<"octet-chunk-loss", "mlir::ModuleOp"> {
  let summary = "Run the output layer, its loss and their gradients over chunks of tokens";
  let description = [{
    The output layer's scores (logits [tokens, classes]) and their gradient
    are the largest activations of a language model's step, and in a training
    plan they live at once with the FP8 codes of that gradient. This pass runs
    the region over K chunks of token rows, one after the other: the FP8 GEMM
    that writes the scores (its input's codes sliced by rows), the
    SoftmaxCrossEntropyLoss (reduction `sum` per chunk; a mean divides the sum
    by the count of labels not ignored), its octet::SoftmaxCrossEntropyLossGrad
    (dY divided by that count), the FP8 cast of the gradient (codes by rows,
    the transposed copy by columns, the amax the Max over chunks) and the FP8
    GEMMs reading those codes: the dgrad's rows concatenated, the wgrad (a
    contraction over tokens) added up in float32. K is the fewest chunks of a
    whole multiple of 16 rows whose scores take at most `max-chunk-bytes`.
    The same arithmetic per element, only the float32 sums of the loss and
    the weight gradient in another order; delayed scaling (scales known before
    the step) is required: a scale computed from the whole gradient, a
    high-precision output GEMM, or any other reader of a chunked value leaves
    the loss whole (`verbose` says why). fp8-opt runs it when writing a plan
    (`--chunk-loss`, `--loss-chunk-bytes`).
  }];
  let options = [
    Option<"maxChunkBytes", "max-chunk-bytes", "int64_t", "268435456",
           "Scores one chunk may take, in bytes">,
    Option<"verbose", "verbose", "bool", "false", "A remark per loss: chunked, or why not">,
  ];
  let dependentDialects = ["octet::fp8::FP8Dialect"];
}

def FuseCastColumnSums : Pass<"octet-fuse-cast-column-sums", "mlir::ModuleOp"> {
  let summary = "Take a Linear's bias gradient in the pass that casts its output gradient";
  let description = [{
    A Linear's output gradient dY is cast to FP8 with its transposed copy
    (fp8.cast_amax with a `transposed` result, for the dgrad and wgrad
    GEMMs), and later summed over its rows for the bias gradient (an
    onnx.ReduceSum of the same value over every axis but the last, with a
    float32 result of the last axis's length). The pair becomes a fusion group
    of kind "cast_column_sum" (`octet.fusion`, `octet.fusion_group`; the plan
    keeps them as the ops' `fusion` and `fusion_group`): a backend takes the
    column sums in the cast's pass (per-tile partials) and the sum only adds
    those up, instead of reading dY again. Each cast pairs with the first such
    sum after it that reads the same value. fp8-opt runs it when writing a plan
    (`--fuse-cast-column-sums`).
  }];
  let dependentDialects = ["octet::fp8::FP8Dialect"];
}

def PadLossClasses : Pass<"octet-pad-loss-classes", "mlir::ModuleOp"> {
  let summary = "A cross-entropy loss reads a padded kept GEMM's logits, the padding as -inf";
  let description = [{
    A Slice that pad-kept-gemms (octet-fp8-substitute) put after a kept BF16
    GEMM (marked `octet.pad_slice`), whose result reaches the scores of a
    SoftmaxCrossEntropyLoss of [M, N] scores through Casts and Reshapes that
    keep the class axis last, each value read once (no class weights, no
    log_prob in use), goes: the padded result plus a row of N zeros and
    -infs flows on, the Casts and Reshapes widen to N rounded up, and the loss
    reads the padded rows. exp(-inf - max) is 0: the loss and the real
    columns' gradient are the same numbers, the padding's gradient is 0, and
    no slice or pad of the logits runs. fp8-opt runs it before autodiff on
    training plans when `--pad-kept-gemms` is on.
  }];
}

def FoldWideningCasts : Pass<"octet-fold-widening-casts", "mlir::ModuleOp"> {
  let summary = "FP8 casts and amaxes read the FP16/BF16 value an exact widening Cast to float32 reads";
  let description = [{
    An fp8.amax, fp8.cast or fp8.cast_amax of an onnx.Cast from FP16 or BF16
    to float32 takes the Cast's operand instead (the same values: the
    widening is exact, and the FP8 ops convert to float themselves); a Cast
    left without readers is erased. MS-AMP O2/O3's FP16 weights are cast to
    FP8 from their FP16 storage, not through a float32 copy. fp8-opt runs it
    when writing a plan (`--fold-widening-casts`).
  }];
}

def FuseAmaxScale : Pass<"octet-fuse-amax-scale", "mlir::ModuleOp"> {
  let summary = "Compute dynamic scaling's scale where its amax finishes";
  let description = [{
    An fp8.amax over the whole tensor that only the fp8.dynamic_scale right
    after it reads becomes a fusion group with it (kind "amax_scale",
    `octet.fusion` and `octet.fusion_group`, the plan's `fusion` and
    `fusion_group`): a backend computes scale and scale_inv in the amax's
    launch instead of a one-value launch of their own. Ops already in a
    group (a GELU's amax) are left alone. fp8-opt runs it when writing a
    plan, after octet-fuse-gelu-amax (`--fuse-amax-scale`).
  }];
}

def FuseGeluRecompute : Pass<"octet-fuse-gelu-recompute", "mlir::ModuleOp"> {
  let summary = "Cast a GELU recomputed in the backward in the GELU gradient's cast pass";
  let description = [{
    An onnx.Gelu whose one reader is an fp8.cast_amax whose codes nothing
    reads (only the transposed copy: the MLP's second Linear's input cast
    again for its weight gradient by octet-rematerialize-fp8-casts
    `sources=gelu`), where a Pointwise program or chain that reads the same
    input h follows within 16 ops and an FP8 cast-transpose of the same
    shape reads its result (the GELU's gradient, the first Linear's dY):
    the GELU and its cast move to just before that program, the ops that
    read the cast's results (the weight-gradient GEMM) to just after the
    gradient's cast, and the GELU and its cast become a fusion group (kind
    "gelu_recompute_cast", the plan's `fusion` and `fusion_group`). A
    backend computes GELU(h) and its codes in the gradient's cast pass,
    which reads h anyway. Not where those readers feed the gradient. fp8-opt
    runs it when writing a plan, after octet-fuse-cast-column-sums
    (`--fuse-gelu-recompute`).
  }];
}

def FuseCastSources : Pass<"octet-fuse-cast-sources", "mlir::ModuleOp"> {
  let summary = "FP8 cast-transposes of one tensor in one pass that computes the tensor";
  let description = [{
    FP8 cast-transposes (fp8.cast_amax with a transposed copy) of one tensor
    that run one after another (at most 3; views between them move nothing),
    and the op right before them that computes that tensor where nothing
    else reads it: a float32 LayerNormalization over the last axis, a Gelu,
    or an octet Pointwise program or pointwise_chain group (whose tensor a
    cast's cast_column_sum partner may read too). Under dynamic scaling the
    per-tensor fp8.amax of a LayerNorm's output, with its fp8.dynamic_scale
    between it and the casts, joins the LayerNorm's pass: the amax computes
    the rows' statistics and max |y| in one read, the casts apply them in
    another. They get one `octet.cast_pass` number (the plan's `cast_pass`, docs/PLAN.md): a
    backend may run them as one pass that reads the tensor's inputs once and
    never stores the tensor. A single cast with no such producer gets none.
    The CPU runs the ops one by one. fp8-opt runs it when writing a plan,
    after octet-fuse-gelu-recompute (`--fuse-cast-sources`).
  }];
  let dependentDialects = ["octet::fp8::FP8Dialect"];
}

def FuseResidualNorms : Pass<"octet-fuse-residual-norms", "mlir::ModuleOp"> {
  let summary = "A LayerNorm takes the residual Add right before it in the same pass";
  let description = [{
    A float32 onnx.Add of two operands of its own shape (no broadcast) that is
    the op right before (views aside) a float32 LayerNormalization over the
    last axis reading its result (a pre-LN transformer's residual stream and
    the next block's norm) becomes a fusion group with it (kind
    "residual_norm", `octet.fusion` and `octet.fusion_group`, the plan's
    `fusion` and `fusion_group`): a backend computes the sum and the norm's
    row statistics (or the whole norm) in one pass over the operands, writing
    the sum for its other readers, instead of reading the sum back. The CPU
    runs both ops as they are. Ops already in a fusion group are left alone.
    fp8-opt runs it when writing a plan, after octet-fuse-amax-scale
    (`--fuse-residual-norms`).
  }];
}

def FoldGemmBias : Pass<"octet-fold-gemm-bias", "mlir::ModuleOp"> {
  let summary = "A float32 FP8 GEMM's bias added by the op that reads its result";
  let description = [{
    An fp8.gemm with a float32 bias and result (per-tensor or rowwise scales,
    B transposed, no accumulate) costs a pass over its result to add the bias.
    Where its reader can add it as it reads, the GEMM gets `octet.bias_fold`
    (the plan's `bias_fold`, docs/PLAN.md) naming that reader: "attention"
    (BF16-precision attention alone reads the result through views, forward
    and gradient), "gelu" (the first reader is a float32 Gelu, which adds it
    in place and writes the sum back), "add" (the one reader, through at most
    one view, is a float32 Add of a tensor of the result's shape) or "copy"
    (the one reader is a float32 Transpose). The arithmetic is the same; the
    CPU runs the ops as they are. fp8-opt runs it when writing a plan, after
    octet-attention-precision (`--fold-gemm-bias`).
  }];
}

def FuseProducerAmax : Pass<"octet-fuse-producer-amax", "mlir::ModuleOp"> {
  let summary = "Take a per-tensor amax in the pass of the op that stores its input";
  let description = [{
    An fp8.amax over the whole tensor (dynamic scaling: `ao`, MS-AMP) whose
    input (through views) is the result of the op right before it (views
    aside), when that op is an onnx.Gelu (the MLP's second Linear's input),
    an octet Pointwise program in no other group (the GELU's gradient) or an
    octet::LayerNormalizationGrad's dX (the output projections' dY), becomes
    a fusion group with it (kind "producer_amax", `octet.fusion` and
    `octet.fusion_group`, which the plan keeps as the ops' `fusion` and
    `fusion_group`): a backend takes max |y| of the values the producer
    stores as it stores them, instead of reading them again. One amax per
    producer; ops already in a group are left alone. fp8-opt runs it when
    writing a plan (`--fuse-producer-amax`).
  }];
}

def FoldResidualAdds : Pass<"octet-fold-residual-adds", "mlir::ModuleOp"> {
  let summary = "Fold a residual Add into the FP8 GEMM that computes its other term";
  let description = [{
    An onnx.Add of float32 x and the float32 result of an fp8.gemm (through
    one Reshape at most; the Add its only reader, x of the Add's type, the
    GEMM's scales per tensor, no amax or FP8 output) becomes the GEMM with
    `accumulate` x: D = x + (the scaled product + bias), the sum cuBLASLt's
    epilogue forms with beta = 1, reshaped back to the Add's shape. The Add's
    read of both tensors and its write go; the CPU reference computes the same
    bits. The folded GEMM carries `octet.residual_add` (fp8-opt --report counts
    them). fp8-opt runs it when writing a plan with `--fold-residual-adds` (off
    by default: slower on the H100 for the GPT's biased, float32 residual).
  }];
  let dependentDialects = ["octet::fp8::FP8Dialect", "octet::onnx_dialect::ONNXDialect"];
}

def AssignPrecision : Pass<"octet-assign-precision", "mlir::ModuleOp"> {
  let summary = "Store activations in BF16 where every reader can take it (the compiler's autocast)";
  let description = [{
    With `activations=bf16`, a float32 value of rank >= 2 is stored in bfloat16
    when its producer computes in float32 and rounds what it writes (FP8 GEMMs,
    fused attention and its gradient, the LayerNorm gradient), or is an
    elementwise op or GELU whose operands are BF16 (ONNX's typed ops keep one
    element type, so a residual Add with a float32 operand stays float32, as
    under PyTorch's autocast), and every reader (through Reshape views) reads
    BF16 at that operand: FP8 casts, the LayerNorm gradient, attention, GELU,
    elementwise ops, ReduceSum. These are the ops both backends run on BF16
    natively; the others (LayerNorm, Pointwise programs, the loss) keep float32
    operands. Function results, parameters, optimizer state, scales and
    parameter gradients stay float32. An FP8 GEMM writing BF16 takes its bias
    through an onnx.Cast to BF16. Every op computes in float32 and rounds its
    BF16 results to nearest even.
    fp8-opt runs it last when writing a plan (`--activation-precision`).
  }];
  let options = [
    Option<"activations", "activations", "std::string", "\"bf16\"", "Storage of activations: bf16 or f32 (no change)">,
  ];
  let dependentDialects = ["octet::fp8::FP8Dialect", "octet::onnx_dialect::ONNXDialect"];
}

def AttentionPrecision : Pass<"octet-attention-precision", "mlir::ModuleOp"> {
  let summary = "Choose the tensor-core operand precision of each fused attention op";
  let description = [{
    Every fused attention op (`onnx.node "Attention"` and `"AttentionGrad"`,
    domain octet) gets `precision` in its attributes: the precision a GPU
    backend rounds Q, K, V (and Y, dY) to for its tensor-core products, with
    float32 accumulation and softmax either way. `bf16` is what PyTorch's
    autocast gives attention; `tf32` keeps float32 operands close (10-bit
    significands). With `precision=auto` (the default): `bf16` where an operand
    is stored in BF16 or the module has an FP8 recipe (`octet.recipe`, not
    "none"), else `tf32`. An op with BF16 operands cannot compute on TF32
    operands: `precision=tf32` there is an error naming the op. The CPU
    reference computes attention in float32 whatever the attribute says.
    fp8-opt runs it when writing a plan (`--attention-precision`).
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"auto\"", "auto, bf16 or tf32">,
  ];
  let dependentDialects = ["octet::onnx_dialect::ONNXDialect"];
}

def SinkScaleUpdates : Pass<"octet-sink-scale-updates", "mlir::ModuleOp"> {
  let summary = "Move a step's delayed-scaling updates, in order, to its end";
  let description = [{
    Every fp8.delayed_scale whose results only the function returns (the next
    step's amax history, scale and scale_inv) moves before the return, in its
    order: a backend updates all scales of a step in one launch, and this
    step's scale_inv states are no longer read after their update, so the plan
    writer can update them in place. fp8-opt runs it when writing a plan
    (`--sink-scale-updates`).
  }];
  let dependentDialects = ["octet::fp8::FP8Dialect"];
}

def UnmergeParameters : Pass<"octet-unmerge-parameters", "mlir::ModuleOp"> {
  let summary = "Give each parameter the TorchScript exporter merged its own initializer again";
  let description = [{
    `torch.onnx.export(..., dynamo=False)` merges parameters of equal value
    (a fresh model's LayerNorm weights, its zero biases) into one initializer
    and hands it to every other layer through an Identity node whose output
    carries that layer's parameter name. Trained as it is, the merged
    parameters would receive the sum of their gradients and stay equal. This
    pass makes each such Identity's output an initializer of its own, named
    as PyTorch names the parameter, with the same value, so that each trains
    with its own gradient, as in PyTorch. An Identity whose output has no
    parameter's name (`onnx::...`), or a name another initializer holds, is
    left alone; `octet-autodiff` refuses what is still merged. fp8-opt runs it
    first for `--train`.
  }];
}

def InferLabels : Pass<"octet-infer-labels", "mlir::ModuleOp"> {
  let summary = "Find how a training graph's labels relate to its tokens, for fp8-run --labels auto";
  let description = [{
    A causal language model is trained on labels that are its input tokens
    shifted by one, and exporters differ in who shifts them: Hugging Face's
    `...ForCausalLM` shifts inside the model (labels -> Pad -> Slice from 1 ->
    the loss), so its labels are fed equal to the tokens; a model that hands its
    labels to the loss unchanged needs them fed shifted. Fed the wrong way, a
    model trains on the token after next, or on the token itself, without an
    error. This pass follows the function's second integer argument (the
    labels; the first is the tokens) through the ops that only move or reshape
    it (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Cast, Pad, Slice) to
    the SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss that reads them,
    and writes into the module's `octet.training`:
      labels = same     a Slice on the sequence axis starting at 1 on every path
      labels = shifted  no such Slice, and a causal attention (octet Attention
                        or ONNX Attention with is_causal = 1) in the graph
      labels = unknown  anything else (a mixed or missing path, no causal
                        attention: a masked language model's labels, say)
    and `labels_reason`, a sentence naming the nodes it went by. fp8-run's
    `--labels auto` (its default) feeds the data that way, or refuses an
    unknown one, asking for --labels. A function with fewer than two integer
    arguments gets no entry. fp8-opt runs it on training plans after
    octet-fuse-attention.
  }];
}

#endif // OCTET_PASSES_TD
