//===- PlanFlags.h - fp8-opt's plan optimization flags -----------*- C++ -*-===//
//
// The flags of the "Plan optimizations" group: one per plan pass (each has its lit test under
// test/fp8-opt, named after the flag), the activation and attention precision, the memory budget
// and activation checkpointing. Constructing the struct registers them with LLVM's command line in
// the given category; fp8-opt holds one (as it does RecipeFlags).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_TOOLS_PLANFLAGS_H
#define OCTET_TOOLS_PLANFLAGS_H

#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <string>

namespace octet {

struct PlanFlags {
  explicit PlanFlags(llvm::cl::OptionCategory &category) : cat(category) {}
  PlanFlags(const PlanFlags &) = delete;
  PlanFlags &operator=(const PlanFlags &) = delete;

  llvm::cl::OptionCategory &cat;
  llvm::cl::opt<bool> fusePointwise{
      "fuse-pointwise",
      llvm::cl::desc(
          "Plans: fuse chains of float32 elementwise ops into octet Pointwise nodes (default on; "
          "--fuse-pointwise=false keeps one op per node)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fusePointwiseChains{
      "fuse-pointwise-chains",
      llvm::cl::desc("Plans: consecutive Pointwise programs over one shape (AdamW's, a GELU "
                     "gradient's) form one fusion "
                     "group that a backend runs as one kernel, results passed on in registers; the "
                     "plan's ops say so "
                     "(fusion, fusion_group) and --report counts them (default on; "
                     "--fuse-pointwise-chains=false runs "
                     "each program alone)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseRuns{"fuse-runs",
                               llvm::cl::desc("Plans: runs of small ops of one kind side by side "
                                              "(the step's delayed-scaling updates, the "
                                              "optimizer's per-parameter sums of squares) form "
                                              "fusion groups a backend runs as one launch "
                                              "(default on; --fuse-runs=false launches each)"),
                               llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<int64_t> attentionWorkspaceBytes{
      "attention-workspace-bytes",
      llvm::cl::desc(
          "Plans: the most scratch one fused attention op may take on a backend beyond the arena "
          "bytes free "
          "while it runs (default 512 MiB; 0: no bound); cuDNN's deterministic backward, whose "
          "workspace "
          "grows with the sequence squared, then runs over slices of the batch where neither holds "
          "it. Less "
          "memory, a little more time (the 1.3B GPT at 8 x 2048: 1 GiB less at no measured cost)"),
      llvm::cl::init(int64_t(512) << 20), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> chunkLoss{
      "chunk-loss",
      llvm::cl::desc(
          "Plans: the output layer's FP8 GEMM, the loss and their gradients run over chunks of "
          "tokens, so "
          "one chunk's logits live at a time (default on; --chunk-loss=false keeps them whole)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<int64_t> lossChunkBytes{
      "loss-chunk-bytes",
      llvm::cl::desc("Plans: the most bytes of logits one chunk of --chunk-loss takes (default "
                     "268435456; the fewest "
                     "chunks of a multiple of 16 tokens that fit)"),
      llvm::cl::init(int64_t(256) << 20), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> foldResidualAdds{
      "fold-residual-adds",
      llvm::cl::desc("Plans: a residual Add of a float32 FP8 GEMM result (x + Linear(h)) becomes "
                     "that GEMM with x as its "
                     "accumulate C, added in the GEMM's epilogue (default off: on the H100, "
                     "cuBLASLt's FP8 GEMM reading a "
                     "float32 C, with the GPT's float32 bias in a pass of its own, took longer "
                     "than the GEMM and the Add "
                     "apart, docs/BENCHMARKS.md; listed by --help-hidden)"),
      llvm::cl::init(false), llvm::cl::Hidden, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseProducerAmax{
      "fuse-producer-amax",
      llvm::cl::desc("Plans: a per-tensor amax (dynamic scaling: ao, msamp) and the GELU, "
                     "Pointwise program or "
                     "LayerNorm gradient right before it that stores its input form a fusion group "
                     "a backend computes in "
                     "the producer's pass (default on; --fuse-producer-amax=false reads the tensor "
                     "again for the amax)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseGeluRecompute{
      "fuse-gelu-recompute",
      llvm::cl::desc("Plans: a GELU recomputed for its transposed FP8 codes "
                     "(--rematerialize-fp8-sources=gelu) is cast in "
                     "the pass of the GELU gradient's cast, which reads the same input (default "
                     "on; listed by --help-hidden)"),
      llvm::cl::init(true), llvm::cl::cat(cat), llvm::cl::Hidden};
  llvm::cl::opt<bool> fuseCastSources{
      "fuse-cast-sources",
      llvm::cl::desc("Plans: FP8 casts of one tensor, and the LayerNorm, GELU or Pointwise program "
                     "that computes it, "
                     "form one cast pass a backend runs as one read (default on)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> foldGemmBias{
      "fold-gemm-bias",
      llvm::cl::desc(
          "Plans: a float32 FP8 GEMM's bias is added by the op that reads its result (attention, "
          "GELU, "
          "residual Add, head-split Transpose) instead of a pass of its own (default on; listed by "
          "--help-hidden)"),
      llvm::cl::init(true), llvm::cl::Hidden, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> foldWideningCasts{
      "fold-widening-casts",
      llvm::cl::desc("Plans: FP8 casts and amaxes of a float32 Cast of an FP16/BF16 tensor read "
                     "the narrow tensor "
                     "(exact; MS-AMP's FP16 weights) instead of a float32 copy (default on)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseResidualNorms{
      "fuse-residual-norms",
      llvm::cl::desc("Plans: a float32 LayerNorm and the residual Add right before it form a "
                     "fusion group a backend "
                     "runs as one pass over the Add's operands (default on; "
                     "--fuse-residual-norms=false: two passes)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseAmaxScale{
      "fuse-amax-scale",
      llvm::cl::desc(
          "Plans: dynamic scaling's fp8.dynamic_scale and the amax it reads form a fusion group a "
          "backend "
          "computes in one launch (default on; --fuse-amax-scale=false launches the scale alone)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseMsampAdam{
      "fuse-msamp-adam",
      llvm::cl::desc(
          "Plans, msamp O2/O3: each FP8 weight's Adam/AdamW update (FP8 first and FP16 second "
          "moment, FP16 "
          "weight) is one fp8.adam_step a backend runs in two reads of the state (default on; "
          "--fuse-msamp-adam=false keeps the float32 ops)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseCastColumnSums{
      "fuse-cast-column-sums",
      llvm::cl::desc(
          "Plans: a Linear's bias gradient (a column sum of dY) pairs with the FP8 cast of dY that "
          "writes its "
          "transposed copy, as a fusion group a backend computes in the cast's pass (default on; "
          "--fuse-cast-column-sums=false reads dY again for the sum; listed by --help-hidden)"),
      llvm::cl::init(true), llvm::cl::Hidden, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseCastAmax{
      "fuse-cast-amax",
      llvm::cl::desc("Plans: an FP8 cast and the amax of the same tensor become one fp8.cast_amax "
                     "(one read of the "
                     "tensor; default on; --fuse-cast-amax=false keeps two ops)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> castTranspose{
      "cast-transpose",
      llvm::cl::desc(
          "Plans: an fp8.cast_amax whose GEMM reads its codes transposed also writes that layout "
          "(TransformerEngine's cast-transpose; needs --fuse-cast-amax; default on; "
          "--cast-transpose=false "
          "leaves the transposes to the backend)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> shareInputScaling{
      "share-input-scaling",
      llvm::cl::desc("FP8 Linears that read one tensor (Q, K and V of a LayerNorm's output) share "
                     "its quantization: one "
                     "scaling state (the first layer's), one cast, one set of codes kept for the "
                     "backward, as a fused QKV "
                     "Linear would; the same bits as separate states (default on; "
                     "--share-input-scaling=false gives each "
                     "Linear its own)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> groupCasts{
      "group-casts",
      llvm::cl::desc(
          "Plans: the FP8 casts of one tensor (the Q, K and V projections' casts of a LayerNorm's "
          "output) "
          "run one after another, so a backend reads the tensor once for all of them and can "
          "compute it in "
          "the same pass (default on; --group-casts=false leaves each cast before its GEMM)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> rematerializeFp8Casts{
      "rematerialize-fp8-casts",
      llvm::cl::desc(
          "Plans: the backward's GEMMs read FP8 codes cast again just before them (a weight's, the "
          "transposed codes of the attention output, and of the GELU and LayerNorm outputs "
          "recomputed from "
          "their inputs: --rematerialize-fp8-sources says which) instead of "
          "codes kept from the forward: the same bits, less memory across the step (default on; "
          "--rematerialize-fp8-casts=false keeps them)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::list<std::string> rematerializeSources{
      "rematerialize-fp8-sources",
      llvm::cl::desc(
          "Plans: which copies --rematerialize-fp8-casts makes, by what they recompute: weight (a "
          "parameter's cast), activation (a cast of a tensor still live: the attention output's), "
          "gelu "
          "(the GELU runs again), layernorm (the LayerNorm or RMSNorm forward runs again). "
          "Default: activation (no "
          "time), plus gelu and weight where each lowers the arena's peak by 1% or more (--report "
          "says)"),
      llvm::cl::CommaSeparated, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> freeEarly{
      "free-early",
      llvm::cl::desc("Plans: a large value's readers move up to the op that makes it where that frees "
                     "it sooner (MS-AMP's weight gradients cast to FP8 as they are made, not at the "
                     "step's end; default on)"),
      llvm::cl::init(true), llvm::cl::Hidden, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> sinkScaleUpdates{
      "sink-scale-updates",
      llvm::cl::desc("Plans: the delayed-scaling updates of a step (fp8.delayed_scale) move, in "
                     "order, to its end, "
                     "where a backend runs them as one launch (default on; "
                     "--sink-scale-updates=false leaves each "
                     "after its amax)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<std::string> activationPrecision{
      "activation-precision",
      llvm::cl::desc(
          "Plans: storage of activations, bf16 (each op computes in float32 and rounds the BF16 "
          "values it "
          "writes; parameters, optimizer state and parameter gradients stay float32) or f32 "
          "(octet-assign-precision; default bf16 under an FP8 recipe or an Accelerate config's "
          "mixed_precision: "
          "bf16, else f32). With no recipe, bf16 is PyTorch's BF16 autocast: every Linear's GEMMs "
          "on BF16 "
          "operands"),
      llvm::cl::init("f32"), llvm::cl::cat(cat)};
  llvm::cl::opt<std::string> attentionPrecision{
      "attention-precision",
      llvm::cl::desc("Plans: the operand precision a GPU backend computes fused attention with "
                     "(float32 accumulation "
                     "and softmax either way): bf16 (as under autocast), tf32, or auto: bf16 where "
                     "attention reads "
                     "BF16 or the plan has an FP8 recipe, else tf32 (octet-attention-precision; "
                     "default auto)"),
      llvm::cl::init("auto"), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> inPlaceUpdates{
      "in-place-updates",
      llvm::cl::desc("Plans: write a state's new value (parameters, moments, FP8 scaling state) "
                     "over the state itself "
                     "where nothing reads the old value later: no arena buffer and no copy at the "
                     "end of the step "
                     "(default on; --in-place-updates=false keeps new values apart)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> geluOp{"gelu-op",
                             llvm::cl::desc("Training plans: a recognized GELU stays one Gelu op "
                                            "through autodiff, so the backward keeps only "
                                            "its input (default on; --gelu-op=false differentiates "
                                            "the GELU's ops; listed by --help-hidden)"),
                             llvm::cl::init(true), llvm::cl::Hidden, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> normOps{
      "norm-ops",
      llvm::cl::desc(
          "Training plans: a recognized float32 LayerNorm or RMSNorm, however the model "
          "spelled it, becomes "
          "one LayerNormalization or RMSNormalization op before autodiff, its gradient one "
          "node (default on; "
          "--norm-ops=false keeps a decomposed norm's ops; listed by --help-hidden)"),
      llvm::cl::init(true), llvm::cl::Hidden, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseAttention{
      "fuse-attention",
      llvm::cl::desc("Plans: fuse causal or unmasked scaled dot-product attention (MatMul, scale, "
                     "mask, Softmax, "
                     "MatMul) into octet Attention nodes, before autodiff (default on; "
                     "--fuse-attention=false keeps "
                     "the ops)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseRotary{
      "fuse-rotary",
      llvm::cl::desc("Plans: fuse the rotary position embedding (X cos + rotate_half(X) sin) into "
                     "octet RotaryEmbedding "
                     "nodes, before autodiff (default on; --fuse-rotary=false keeps the ops; "
                     "listed by --help-hidden)"),
      llvm::cl::init(true), llvm::cl::Hidden, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> foldHeadTransposes{
      "fold-head-transposes",
      llvm::cl::desc(
          "Plans: fused attention reads Q, K and V where the head split (Transpose [0, 2, 1, 3] of "
          "[B, S, H, d]) found them and writes Y in that layout, so the head split and merge "
          "copies "
          "go (default on; --fold-head-transposes=false keeps them)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> fuseGrads{
      "fuse-grads",
      llvm::cl::desc(
          "Training plans: the gradients of LayerNormalization and SoftmaxCrossEntropyLoss are one "
          "octet "
          "node each (LayerNormalizationGrad, SoftmaxCrossEntropyLossGrad) that reads its inputs "
          "once "
          "(default on; --fuse-grads=false spells them out in ONNX ops; listed by --help-hidden)"),
      llvm::cl::init(true), llvm::cl::Hidden, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> keepGradients{
      "keep-gradients",
      llvm::cl::desc("Training: keep each d(loss)/d(param) as a plan output, for fp8-run "
                     "--dump-gradients (default on; "
                     "--keep-gradients=false frees each gradient after its update: less memory)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<std::string> memoryBudget{
      "memory-budget",
      llvm::cl::desc("Plans: the device bytes the plan may need (parameters and state plus its "
                     "activations: 80GiB, "
                     "120GB, bytes; auto: this machine's GPU less 3 GiB); the compiler recomputes "
                     "FP8 codes, then whole "
                     "blocks, until its prediction fits, or refuses the plan"),
      llvm::cl::value_desc("BYTES|auto"), llvm::cl::cat(cat)};
  llvm::cl::opt<std::string> checkpointBlocks{
      "checkpoint-blocks",
      llvm::cl::desc("Plans: activation checkpointing of whole blocks (model.layers.N): the "
                     "backward runs the first N "
                     "blocks' forward again instead of keeping their activations; N or all "
                     "(default: none, or what "
                     "--memory-budget chooses)"),
      llvm::cl::value_desc("N|all"), llvm::cl::cat(cat)};
};

} // namespace octet

#endif // OCTET_TOOLS_PLANFLAGS_H
