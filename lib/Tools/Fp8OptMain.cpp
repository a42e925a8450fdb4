//===- Fp8OptMain.cpp - The fp8-opt driver --------------------------------===//
#include "octet/Tools/Fp8OptMain.h"

#include "octet/Conversion/ONNXExport.h"
#include "octet/Conversion/ONNXImport.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/InitAll.h"
#include "octet/Passes/Passes.h"
#include "octet/Support/ProtoIO.h"
#include "octet/Support/RecipeConfig.h"
#include "octet/Tools/ImportChecks.h"
#include "octet/Tools/OutputFiles.h"
#include "octet/Tools/PlanPipeline.h"
#include "octet/Tools/MemoryBudget.h"
#include "octet/Tools/PlanReport.h"
#include "octet/Tools/RecipeFlags.h"
#include "octet/Tools/TrainingPipeline.h"
#include "octet/runtime/OneLine.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>
#include <map>
#include <set>

using namespace mlir;
namespace cl = llvm::cl;

#ifndef OCTET_VERSION
#define OCTET_VERSION "0.0.0"
#endif

namespace {

enum class Emit { Auto, MLIR, ONNX, Plan };
enum class InputFormat { Auto, MLIR, ONNX };

} // namespace

int octet::fp8OptMain(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  registerAllPasses();
  DialectRegistry registry;
  registerAllDialects(registry);

  // Octet's options in groups (LLVM prints the groups in name order); LLVM's and MLIR's own
  // options are hidden: --help-hidden lists them.
  static cl::OptionCategory basicCat("Basics");
  static cl::OptionCategory importCat("Import and testing");
  static cl::OptionCategory optCat("Plan optimizations (each a pass; on unless noted)");
  static cl::OptionCategory dpCat("Data parallelism");
  static cl::opt<std::string> inputFilename(cl::Positional, cl::desc("<model.onnx | input.mlir>"),
                                            cl::init("-"), cl::cat(basicCat));
  static cl::opt<std::string> outputFilename("o", cl::desc("Output file ('-' is stdout)"),
                                             cl::value_desc("file"), cl::init("-"), cl::cat(basicCat));
  static cl::opt<Emit> emit(
      "emit", cl::desc("Output format (default: from the -o extension, else mlir)"),
      cl::values(clEnumValN(Emit::MLIR, "mlir", "MLIR text"),
                 clEnumValN(Emit::ONNX, "onnx", "ONNX ModelProto (binary protobuf)"),
                 clEnumValN(Emit::Plan, "plan", "runtime plan for fp8-run (docs/PLAN.md)")),
      cl::init(Emit::Auto), cl::cat(basicCat));
  static cl::opt<std::string> inputFormat(
      "input-format", cl::desc("Input format: mlir (MLIR text) or onnx (ModelProto); default: from the extension, "
                               "else sniffed"),
      cl::cat(importCat));
  static cl::opt<std::string> recipe("recipe", cl::desc("FP8 recipe pipeline to run (see --list-recipes)"),
                                     cl::value_desc("name"), cl::cat(basicCat));
  static cl::opt<bool> listRecipes("list-recipes", cl::desc("List the recipes and exit"),
                                   cl::cat(basicCat));
  static cl::opt<bool> splitInputFile("split-input-file",
                                      cl::desc("Split MLIR input at '// -----' and process each chunk"),
                                      cl::cat(importCat));
  static cl::opt<bool> verifyDiagnostics(
      "verify-diagnostics", cl::desc("Check diagnostics against expected-* comments in MLIR input"),
      cl::cat(importCat));
  static cl::opt<bool> noShapeInference("no-shape-inference",
                                        cl::desc("Do not run ONNX shape inference on import (for debugging the "
                                                 "importer; listed by --help-hidden)"),
                                        cl::Hidden, cl::cat(importCat));
  static cl::opt<bool> foldShapes("fold-shapes",
                                  cl::desc("Import: shape computations over static shapes (Shape, Gather, Slice, "
                                           "Concat, ... of constants) become constants (default on; off only to debug the import)"),
                                  cl::init(true), cl::Hidden, cl::cat(importCat));
  static cl::opt<bool> allowCustomOps(
      "allow-custom-ops",
      cl::desc("Compile ONNX nodes Octet's runtime does not run (other domains, unknown op types) for "
               "pass pipelines that lower them; without it such a node is an error in a plan or with --train"),
      cl::init(false), cl::cat(importCat));
  static cl::opt<bool> genericOnly(
      "import-generic",
      cl::desc("Import every ONNX node as the generic onnx.node (for debugging the importer; listed by --help-hidden)"),
      cl::Hidden, cl::cat(importCat));
  static cl::list<std::string> inputShape(
      "input-shape",
      cl::desc("Static shapes for inputs with symbolic dimensions (an export with dynamic axes): "
               "NAME=AxB[,NAME=AxB...], e.g. input_ids=8x2048,labels=8x2048"),
      cl::value_desc("NAME=AxB"), cl::CommaSeparated, cl::cat(importCat));
  static cl::opt<std::string> absentWeights(
      "absent-weights",
      cl::desc("'zeros': initializers whose external data file is missing import as zeros (compile a graph from "
               "its shapes; fp8-run --init-params creates the weights). Default 'error'"),
      cl::init("error"), cl::cat(importCat));

  static cl::OptionCategory recipeCat("FP8 recipe options (Accelerate's fp8_config keys)");
  static cl::opt<std::string> configFile("config", cl::desc("Accelerate config YAML (mixed_precision: fp8, fp8_config:)"),
                                         cl::value_desc("file.yaml"), cl::cat(basicCat));
  static RecipeFlags recipeFlags(recipeCat); // te, msamp and ao knobs, the output layer
  static cl::opt<std::string> msampWeightRounding(
      "msamp-weight-rounding",
      cl::desc("msamp: how the updated FP16 weight (O3: master) is rounded: nearest (MS-AMP's; updates below half an "
               "FP16 step are lost) or stochastic (unbiased; fp8.stochastic_round)"),
      cl::init("nearest"), cl::cat(recipeCat));
  static cl::list<std::string> msampFloat32(
      "msamp-float32",
      cl::desc("msamp: parts of MS-AMP's storage kept float32: weights (O3: masters; the default: FP16 ones cost loss, "
               "docs/BENCHMARKS.md), gradients (FP8 otherwise; all-reduced in float32), or none (MS-AMP's own)"),
      cl::CommaSeparated, cl::cat(recipeCat));
  static cl::opt<std::string> keptGemmPrecision(
      "kept-gemm-precision",
      cl::desc("The GEMMs of the Linears a recipe keeps in high precision (the output layer, ao's first and last): "
               "bf16 (BF16 operands, float32 accumulation, as under PyTorch's autocast; the default for plans) or "
               "f32 (the default for ONNX and MLIR output, which keep the model's types)"),
      cl::value_desc("bf16|f32"), cl::cat(recipeCat));
  static cl::opt<bool> padKeptGemms(
      "pad-kept-gemms",
      cl::desc("Plans: a kept layer's BF16 GEMM whose N is no multiple of 8 (GPT-2's 50257-word lm_head) computes "
               "N rounded up to one, zero weight columns and the result sliced back (default on)"),
      cl::init(true), cl::Hidden, cl::cat(recipeCat));
  static cl::opt<bool> evalGraph("eval", cl::desc("The graph is an eval graph (no FP8 without autocast)"),
                                 cl::cat(basicCat));
  static cl::opt<bool> report("report", cl::desc("Print the per-layer FP8 report (stderr with -o -, else stdout)"),
                              cl::cat(basicCat));
  static cl::opt<std::string> reportFormat("report-format", cl::desc("text or json"), cl::init("text"),
                                           cl::cat(optCat));
  static cl::opt<std::string> qdqGemm("qdq-gemm",
                                      cl::desc("FP8 GEMMs in exported ONNX: matmul (QDQ) or gemm-float8 "
                                               "(com.microsoft.GemmFloat8)"),
                                      cl::init("matmul"), cl::cat(optCat));

  static cl::opt<bool> fusePointwise(
      "fuse-pointwise",
      cl::desc("Plans: fuse chains of float32 elementwise ops into octet Pointwise nodes (default on; "
               "--fuse-pointwise=false keeps one op per node)"),
      cl::init(true), cl::cat(optCat));

  static cl::opt<bool> fusePointwiseChains(
      "fuse-pointwise-chains",
      cl::desc("Plans: consecutive Pointwise programs over one shape (AdamW's, a GELU gradient's) form one fusion "
               "group that a backend runs as one kernel, results passed on in registers; the plan's ops say so "
               "(fusion, fusion_group) and --report counts them (default on; --fuse-pointwise-chains=false runs "
               "each program alone)"),
      cl::init(true), cl::cat(optCat));

  static cl::opt<bool> fuseRuns(
      "fuse-runs",
      cl::desc("Plans: runs of small ops of one kind side by side (the step's delayed-scaling updates, the "
               "optimizer's per-parameter sums of squares) form fusion groups a backend runs as one launch "
               "(default on; --fuse-runs=false launches each)"),
      cl::init(true), cl::cat(optCat));

  static cl::opt<int64_t> attentionWorkspaceBytes(
      "attention-workspace-bytes",
      cl::desc("Plans: the most scratch one fused attention op may take on a backend beyond the arena bytes free "
               "while it runs (default 512 MiB; 0: no bound); cuDNN's deterministic backward, whose workspace "
               "grows with the sequence squared, then runs over slices of the batch where neither holds it. Less "
               "memory, a little more time (the 1.3B GPT at 8 x 2048: 1 GiB less at no measured cost)"),
      cl::init(int64_t(512) << 20), cl::cat(optCat));
  static cl::opt<bool> chunkLoss(
      "chunk-loss",
      cl::desc("Plans: the output layer's FP8 GEMM, the loss and their gradients run over chunks of tokens, so "
               "one chunk's logits live at a time (default on; --chunk-loss=false keeps them whole)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<int64_t> lossChunkBytes(
      "loss-chunk-bytes",
      cl::desc("Plans: the most bytes of logits one chunk of --chunk-loss takes (default 268435456; the fewest "
               "chunks of a multiple of 16 tokens that fit)"),
      cl::init(int64_t(256) << 20), cl::cat(optCat));
  static cl::opt<bool> foldResidualAdds(
      "fold-residual-adds",
      cl::desc("Plans: a residual Add of a float32 FP8 GEMM result (x + Linear(h)) becomes that GEMM with x as its "
               "accumulate C, added in the GEMM's epilogue (default off: on the H100, cuBLASLt's FP8 GEMM reading a "
               "float32 C, with the GPT's float32 bias in a pass of its own, took longer than the GEMM and the Add "
               "apart, docs/BENCHMARKS.md; listed by --help-hidden)"),
      cl::init(false), cl::Hidden, cl::cat(optCat));
  static cl::opt<bool> fuseProducerAmax(
      "fuse-producer-amax",
      cl::desc("Plans: a per-tensor amax (dynamic scaling: ao, msamp) and the GELU, Pointwise program or "
               "LayerNorm gradient right before it that stores its input form a fusion group a backend computes in "
               "the producer's pass (default on; --fuse-producer-amax=false reads the tensor again for the amax)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> fuseGeluRecompute(
      "fuse-gelu-recompute",
      cl::desc("Plans: a GELU recomputed for its transposed FP8 codes (--rematerialize-fp8-sources=gelu) is cast in "
               "the pass of the GELU gradient's cast, which reads the same input (default on; listed by --help-hidden)"),
      cl::init(true), cl::cat(optCat), cl::Hidden);
  static cl::opt<bool> fuseCastSources(
      "fuse-cast-sources",
      cl::desc("Plans: FP8 casts of one tensor, and the LayerNorm, GELU or Pointwise program that computes it, "
               "form one cast pass a backend runs as one read (default on)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> foldGemmBias(
      "fold-gemm-bias",
      cl::desc("Plans: a float32 FP8 GEMM's bias is added by the op that reads its result (attention, GELU, "
               "residual Add, head-split Transpose) instead of a pass of its own (default on; listed by "
               "--help-hidden)"),
      cl::init(true), cl::Hidden, cl::cat(optCat));
  static cl::opt<bool> foldWideningCasts(
      "fold-widening-casts",
      cl::desc("Plans: FP8 casts and amaxes of a float32 Cast of an FP16/BF16 tensor read the narrow tensor "
               "(exact; MS-AMP's FP16 weights) instead of a float32 copy (default on)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> fuseResidualNorms(
      "fuse-residual-norms",
      cl::desc("Plans: a float32 LayerNorm and the residual Add right before it form a fusion group a backend "
               "runs as one pass over the Add's operands (default on; --fuse-residual-norms=false: two passes)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> fuseAmaxScale(
      "fuse-amax-scale",
      cl::desc("Plans: dynamic scaling's fp8.dynamic_scale and the amax it reads form a fusion group a backend "
               "computes in one launch (default on; --fuse-amax-scale=false launches the scale alone)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> fuseMsampAdam(
      "fuse-msamp-adam",
      cl::desc("Plans, msamp O2/O3: each FP8 weight's Adam/AdamW update (FP8 first and FP16 second moment, FP16 "
               "weight) is one fp8.adam_step a backend runs in two reads of the state (default on; "
               "--fuse-msamp-adam=false keeps the float32 ops)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> fuseCastColumnSums(
      "fuse-cast-column-sums",
      cl::desc("Plans: a Linear's bias gradient (a column sum of dY) pairs with the FP8 cast of dY that writes its "
               "transposed copy, as a fusion group a backend computes in the cast's pass (default on; "
               "--fuse-cast-column-sums=false reads dY again for the sum)"),
      cl::init(true), cl::cat(optCat));

  static cl::opt<bool> fuseCastAmax(
      "fuse-cast-amax",
      cl::desc("Plans: an FP8 cast and the amax of the same tensor become one fp8.cast_amax (one read of the "
               "tensor; default on; --fuse-cast-amax=false keeps two ops)"),
      cl::init(true), cl::cat(optCat));

  static cl::opt<bool> castTranspose(
      "cast-transpose",
      cl::desc("Plans: an fp8.cast_amax whose GEMM reads its codes transposed also writes that layout "
               "(TransformerEngine's cast-transpose; needs --fuse-cast-amax; default on; --cast-transpose=false "
               "leaves the transposes to the backend)"),
      cl::init(true), cl::cat(optCat));

  static cl::opt<bool> shareInputScaling(
      "share-input-scaling",
      cl::desc("FP8 Linears that read one tensor (Q, K and V of a LayerNorm's output) share its quantization: one "
               "scaling state (the first layer's), one cast, one set of codes kept for the backward, as a fused QKV "
               "Linear would; the same bits as separate states (default on; --share-input-scaling=false gives each "
               "Linear its own)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> groupCasts(
      "group-casts",
      cl::desc("Plans: the FP8 casts of one tensor (the Q, K and V projections' casts of a LayerNorm's output) "
               "run one after another, so a backend reads the tensor once for all of them and can compute it in "
               "the same pass (default on; --group-casts=false leaves each cast before its GEMM)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> rematerializeFp8Casts(
      "rematerialize-fp8-casts",
      cl::desc("Plans: the backward's GEMMs read FP8 codes cast again just before them (a weight's, the "
               "transposed codes of the attention output, and of the GELU and LayerNorm outputs recomputed from "
               "their inputs: --rematerialize-fp8-sources says which) instead of "
               "codes kept from the forward: the same bits, less memory across the step (default on; "
               "--rematerialize-fp8-casts=false keeps them)"),
      cl::init(true), cl::cat(optCat));
  static cl::list<std::string> rematerializeSources(
      "rematerialize-fp8-sources",
      cl::desc(
          "Plans: which copies --rematerialize-fp8-casts makes, by what they recompute: weight (a "
          "parameter's cast), activation (a cast of a tensor still live: the attention output's), "
          "gelu "
          "(the GELU runs again), layernorm (the LayerNorm or RMSNorm forward runs again). "
          "Default: activation (no "
          "time), plus gelu and weight where each lowers the arena's peak by 1% or more (--report "
          "says)"),
      cl::CommaSeparated, cl::cat(optCat));

  static cl::opt<bool> sinkScaleUpdates(
      "sink-scale-updates",
      cl::desc("Plans: the delayed-scaling updates of a step (fp8.delayed_scale) move, in order, to its end, "
               "where a backend runs them as one launch (default on; --sink-scale-updates=false leaves each "
               "after its amax)"),
      cl::init(true), cl::cat(optCat));

  static cl::opt<std::string> activationPrecision(
      "activation-precision",
      cl::desc("Plans: storage of activations, bf16 (each op computes in float32 and rounds the BF16 values it "
               "writes; parameters, optimizer state and parameter gradients stay float32) or f32 "
               "(octet-assign-precision; default bf16 under an FP8 recipe or an Accelerate config's mixed_precision: "
               "bf16, else f32). With no recipe, bf16 is PyTorch's BF16 autocast: every Linear's GEMMs on BF16 "
               "operands"),
      cl::init("f32"), cl::cat(optCat));

  static cl::opt<std::string> attentionPrecision(
      "attention-precision",
      cl::desc("Plans: the operand precision a GPU backend computes fused attention with (float32 accumulation "
               "and softmax either way): bf16 (as under autocast), tf32, or auto: bf16 where attention reads "
               "BF16 or the plan has an FP8 recipe, else tf32 (octet-attention-precision; default auto)"),
      cl::init("auto"), cl::cat(optCat));

  static cl::opt<bool> inPlaceUpdates(
      "in-place-updates",
      cl::desc("Plans: write a state's new value (parameters, moments, FP8 scaling state) over the state itself "
               "where nothing reads the old value later: no arena buffer and no copy at the end of the step "
               "(default on; --in-place-updates=false keeps new values apart)"),
      cl::init(true), cl::cat(optCat));

  static cl::opt<bool> geluOp(
      "gelu-op",
      cl::desc("Training plans: a recognized GELU stays one Gelu op through autodiff, so the backward keeps only "
               "its input (default on; --gelu-op=false differentiates the GELU's ops; listed by --help-hidden)"),
      cl::init(true), cl::Hidden, cl::cat(optCat));
  static cl::opt<bool> normOps(
      "norm-ops",
      cl::desc("Training plans: a recognized float32 LayerNorm or RMSNorm, however the model "
               "spelled it, becomes "
               "one LayerNormalization or RMSNormalization op before autodiff, its gradient one "
               "node (default on; "
               "--norm-ops=false keeps a decomposed norm's ops; listed by --help-hidden)"),
      cl::init(true), cl::Hidden, cl::cat(optCat));
  static cl::opt<bool> fuseAttention(
      "fuse-attention",
      cl::desc("Plans: fuse causal or unmasked scaled dot-product attention (MatMul, scale, mask, Softmax, "
               "MatMul) into octet Attention nodes, before autodiff (default on; --fuse-attention=false keeps "
               "the ops)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> fuseRotary(
      "fuse-rotary",
      cl::desc("Plans: fuse the rotary position embedding (X cos + rotate_half(X) sin) into octet RotaryEmbedding "
               "nodes, before autodiff (default on; --fuse-rotary=false keeps the ops; listed by --help-hidden)"),
      cl::init(true), cl::Hidden, cl::cat(optCat));
  static cl::opt<bool> foldHeadTransposes(
      "fold-head-transposes",
      cl::desc("Plans: fused attention reads Q, K and V where the head split (Transpose [0, 2, 1, 3] of "
               "[B, S, H, d]) found them and writes Y in that layout, so the head split and merge copies "
               "go (default on; --fold-head-transposes=false keeps them)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> fuseGrads(
      "fuse-grads",
      cl::desc("Training plans: the gradients of LayerNormalization and SoftmaxCrossEntropyLoss are one octet "
               "node each (LayerNormalizationGrad, SoftmaxCrossEntropyLossGrad) that reads its inputs once "
               "(default on; --fuse-grads=false spells them out in ONNX ops; listed by --help-hidden)"),
      cl::init(true), cl::Hidden, cl::cat(optCat));
  static cl::OptionCategory trainCat("Training (autodiff and optimizer)");
  static cl::opt<bool> keepGradients(
      "keep-gradients",
      cl::desc("Training: keep each d(loss)/d(param) as a plan output, for fp8-run --dump-gradients (default on; "
               "--keep-gradients=false frees each gradient after its update: less memory)"),
      cl::init(true), cl::cat(optCat));
  static cl::opt<bool> train("train", cl::desc("Make one training step: gradients (octet-autodiff) and the optimizer"),
                             cl::cat(basicCat));
  static cl::opt<bool> dataParallel(
      "data-parallel",
      cl::desc("Training plans: train on several ranks (fp8-run --nproc-per-node N, or torchrun): gradients "
               "averaged across ranks before the optimizer (MS-AMP O1/O2: as FP8 codes), the loss the mean over "
               "ranks, delayed-scaling amaxes reduced with max; the world size is chosen when the plan runs. "
               "An Accelerate config with distributed_type MULTI_GPU or MULTI_CPU turns it on"),
      cl::cat(dpCat));
  static cl::opt<bool> fp8AllReduce(
      "fp8-all-reduce",
      cl::desc("Data-parallel MS-AMP plans: FP8 Linear weight gradients travel as FP8 codes "
               "(--fp8-all-reduce-format) with a scale all ranks share (default on; --fp8-all-reduce=false all-reduces them in float32)"),
      cl::init(true), cl::cat(dpCat));
  static cl::opt<std::string> fp8AllReduceFormat(
      "fp8-all-reduce-format",
      cl::desc("MS-AMP plans: the FP8 format FP8 Linear weight gradients are held in and --fp8-all-reduce sends: "
               "e4m3 (default, MS-AMP's: 3 mantissa bits) or e5m2 (range)"),
      cl::init("e4m3"), cl::cat(dpCat));
  static cl::opt<bool> overlapCollectives(
      "overlap-collectives",
      cl::desc("Data-parallel plans: each gradient's all-reduce starts when the gradient is complete and is "
               "waited for where the optimizer reads it, running beside the rest of the backward pass "
               "(octet-overlap-collectives; default on)"),
      cl::init(true), cl::cat(dpCat));
  static cl::opt<bool> delayWeightGradients(
      "delay-weight-gradients",
      cl::desc("Data-parallel plans: the backward's last all-reduce (the first layer's gradient) starts before "
               "the weight-gradient GEMMs of the layers after it that it does not need, which run beside it "
               "(octet-delay-weight-gradients; off by default: no gain measured on 2 x H200, docs/SCALING.md; "
               "listed by --help-hidden)"),
      cl::init(false), cl::Hidden, cl::cat(dpCat));
  static cl::opt<int64_t> shardOptimizer(
      "shard-optimizer",
      cl::desc("Data-parallel plans: shard the optimizer over N ranks (ZeRO-2): each large gradient is "
               "reduce-scattered (MS-AMP: as FP8 codes), each rank keeps the moments of and updates 1/N "
               "of the weight, and the updated shards are all-gathered (MS-AMP O3: the masters stay "
               "sharded, the weights gathered as FP8 at the step's start); the plan then runs on exactly N ranks "
               "(default 0: gradients all-reduced, state replicated)"),
      cl::value_desc("N"), cl::init(0), cl::cat(dpCat));
  static cl::opt<int64_t> gradientBucketBytes(
      "gradient-bucket-bytes",
      cl::desc("Data-parallel plans: float32 gradients smaller than this share all-reduces, in buckets of up "
               "to this many bytes (default 4 MiB; 0: each gradient its own all-reduce)"),
      cl::init(4 << 20), cl::cat(dpCat));
  static cl::opt<int64_t> gradAccumSteps(
      "grad-accum-steps",
      cl::desc("Training: N micro-batches per optimizer step (Accelerate's gradient_accumulation_steps), the "
               "gradients their mean, reduced and applied after the last (default 1)"),
      cl::value_desc("N"), cl::init(1), cl::cat(trainCat));
  static cl::opt<std::string> memoryBudget(
      "memory-budget",
      cl::desc("Plans: the device bytes the plan may need (parameters and state plus its activations: 80GiB, "
               "120GB, bytes); the compiler recomputes FP8 codes until its prediction fits, or refuses the plan"),
      cl::value_desc("BYTES"), cl::cat(optCat));
  static cl::opt<bool> gradOnly("gradients-only",
                                cl::desc("With --train: gradients as outputs, no optimizer (for checking; listed by "
                                         "--help-hidden)"),
                                cl::Hidden, cl::cat(trainCat));
  static cl::opt<std::string> lossName("loss", cl::desc("The loss output (default: the only scalar output)"),
                                       cl::value_desc("NAME"), cl::cat(trainCat));
  static cl::opt<std::string> freeze("freeze", cl::desc("Do not train parameters matching REGEX"),
                                     cl::value_desc("REGEX"), cl::cat(trainCat));
  static cl::opt<std::string> optimizerName("optimizer", cl::desc("sgd, adam or adamw (default adamw)"),
                                            cl::init("adamw"), cl::cat(trainCat));
  static cl::opt<double> lr("lr", cl::desc("Peak learning rate (default 3e-4)"), cl::init(3e-4), cl::cat(trainCat));
  static cl::opt<double> beta1("beta1", cl::desc("Adam beta1 (default 0.9)"), cl::init(0.9), cl::cat(trainCat));
  static cl::opt<double> beta2("beta2", cl::desc("Adam beta2 (default 0.999)"), cl::init(0.999), cl::cat(trainCat));
  static cl::opt<double> adamEps("adam-eps", cl::desc("Adam epsilon (default 1e-8)"), cl::init(1e-8),
                                 cl::cat(trainCat));
  static cl::opt<double> weightDecay("weight-decay", cl::desc("Weight decay (default 0)"), cl::init(0.0),
                                     cl::cat(trainCat));
  static cl::opt<double> momentum("momentum", cl::desc("SGD momentum (default 0)"), cl::init(0.0), cl::cat(trainCat));
  static cl::opt<double> clipGradNorm("clip-grad-norm", cl::desc("Clip the global gradient norm (0: off)"),
                                      cl::init(0.0), cl::cat(trainCat));
  static cl::opt<std::string> lrSchedule("lr-schedule", cl::desc("constant or cosine (linear warmup + cosine)"),
                                         cl::init("constant"), cl::cat(trainCat));
  static cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("Linear warmup steps"), cl::init(0), cl::cat(trainCat));
  static cl::opt<int64_t> totalSteps("total-steps", cl::desc("cosine: steps to reach --min-lr"), cl::init(0),
                                     cl::cat(trainCat));
  static cl::opt<double> minLr("min-lr", cl::desc("cosine: final learning rate"), cl::init(0.0), cl::cat(trainCat));

  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  PassPipelineCLParser passPipeline("", "Compiler passes to run", "p");

  // Hidden, not ReallyHidden (what cl::HideUnrelatedOptions sets): --help-hidden still lists them.
  for (auto &[name, option] : cl::getRegisteredOptions()) {
    bool ours = false;
    for (const cl::OptionCategory *c : option->Categories)
      ours |= c == &basicCat || c == &importCat || c == &optCat || c == &dpCat || c == &recipeCat || c == &trainCat;
    if (!ours && name != "help" && name != "help-list" && name != "version" && option->getOptionHiddenFlag() == cl::NotHidden)
      option->setHiddenFlag(cl::Hidden);
  }
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "Octet fp8-opt " << OCTET_VERSION << " (MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "fp8-opt: rewrites ONNX training graphs for FP8 mixed-precision training\n\n"
      "  fp8-opt model.onnx --recipe te --train -o model.plan   a training step for fp8-run\n"
      "  fp8-opt model.onnx --config accelerate.yaml --train -o model.plan   the recipe of an Accelerate config\n"
      "  fp8-opt model.onnx --recipe te -o out.onnx     FP8 as ONNX QDQ (onnxruntime)\n"
      "  fp8-opt model.onnx -o model.mlir               import to MLIR\n"
      "  fp8-opt in.mlir --pass-pipeline='builtin.module(cse)'   run passes on MLIR\n"
      "  (--help-hidden also lists LLVM's and MLIR's options and every pass)\n");

  auto error = [](const llvm::Twine &msg) {
    llvm::WithColor::error(llvm::errs(), "fp8-opt") << octet::oneLine(msg.str()) << "\n";
    return 1;
  };

  if (listRecipes) {
    for (const RecipeInfo &r : getRecipes())
      llvm::outs() << r.name << "\t" << r.description << "\n";
    return 0;
  }
  // Recipe configuration: the config file, then flags on top.
  RecipeConfig rc;
  if (!configFile.empty()) {
    std::string err;
    if (!loadAccelerateConfig(configFile, rc, err))
      return error(err);
  }
  std::string storageLevel; // MS-AMP's storage level (a combined recipe's, or msamp's own)
  if (!recipe.empty()) {
    std::string err;
    if (!applyRecipeName(recipe, rc, storageLevel, err))
      return error(err);
  }
  if (std::string err = recipeFlags.apply(rc, configFile); !err.empty())
    return error(err);
  for (std::string err : {chooseFlag(reportFormat, reportFormat.getValue(), {"text", "json"}),
                          chooseFlag(qdqGemm, qdqGemm.getValue(), {"matmul", "gemm-float8"}),
                          chooseFlag(activationPrecision, activationPrecision.getValue(), {"bf16", "f32"}),
                          chooseFlag(attentionPrecision, attentionPrecision.getValue(), {"auto", "bf16", "tf32"}),
                          chooseFlag(fp8AllReduceFormat, fp8AllReduceFormat.getValue(), {"e4m3", "e5m2"}),
                          chooseFlag(msampWeightRounding, msampWeightRounding.getValue(), {"nearest", "stochastic"})})
    if (!err.empty())
      return error(err);
  for (const std::string &k : rematerializeSources)
    if (!llvm::is_contained(rematerializeFp8Sources(), llvm::StringRef(k)))
      return error("--rematerialize-fp8-sources: '" + k + "' is not valid; use any of: " +
                   llvm::join(rematerializeFp8Sources(), ", "));
  if (keptGemmPrecision.getNumOccurrences() && keptGemmPrecision != "bf16" && keptGemmPrecision != "f32")
    return error("--kept-gemm-precision: '" + keptGemmPrecision + "' is not valid; use bf16 or f32");
  if (evalGraph.getNumOccurrences())
    rc.evalGraph = evalGraph;
  // BF16 activations unless the flag says otherwise: under Accelerate's mixed_precision: bf16 (autocast)
  // and under an FP8 recipe (as TransformerEngine and torchao train, under autocast).
  if ((rc.mixedPrecision == "bf16" || (!rc.backend.empty() && rc.backend != "none")) &&
      !activationPrecision.getNumOccurrences())
    activationPrecision = "bf16";
  // No FP8 recipe with BF16 activations is PyTorch's BF16 autocast: every Linear stays in high
  // precision (octet-fp8-substitute recipe=none) with its GEMMs on BF16 operands.
  bool autocast = activationPrecision == "bf16" && (rc.backend.empty() || rc.backend == "none");
  if (rc.backend == "msamp" && storageLevel.empty())
    storageLevel = rc.msamp.optLevel;
  TrainingFlags msampStorage; // MS-AMP's storage: the level, the rounding, --msamp-float32
  msampStorage.msampLevel = storageLevel;
  msampStorage.msampWeightRounding = msampWeightRounding;
  msampStorage.fp8AllReduceFormat = fp8AllReduceFormat;
  if (std::string err = resolveMsampFloat32(msampFloat32, msampFloat32.getNumOccurrences(), train, msampStorage);
      !err.empty())
    return error(err);
  // Data parallelism: the flag, or an Accelerate config's distributed_type (refused there when it is
  // not data parallelism).
  bool dataParallelOn = dataParallel || rc.dataParallel;
  if (gradientBucketBytes < 0)
    return error("--gradient-bucket-bytes=" + std::to_string(gradientBucketBytes.getValue()) +
                 " is not valid; use an integer >= 0");
  if (shardOptimizer < 0 || shardOptimizer == 1)
    return error("--shard-optimizer=" + std::to_string(shardOptimizer.getValue()) +
                 " is not valid; use the number of ranks (2 or more), or 0 for none");
  if (shardOptimizer > 1 && !dataParallelOn)
    return error("--shard-optimizer shards across data-parallel ranks; add --data-parallel");
  if (dataParallelOn) {
    std::string why = dataParallel ? "--data-parallel" : configFile + ": distributed_type " + rc.distributedType;
    if (!train || gradOnly)
      return error(why + " trains across ranks; add --train (without --gradients-only)");
  }
  int64_t budgetBytes = 0;
  if (memoryBudget.getNumOccurrences() && !parseByteCount(memoryBudget, budgetBytes))
    return error("--memory-budget='" + memoryBudget + "' is not valid; use a positive size such as 80GiB, 120GB or "
                 "a number of bytes");
  int64_t accumSteps = gradAccumSteps.getNumOccurrences() ? gradAccumSteps.getValue() : rc.gradAccumSteps;
  std::string accumWhy = gradAccumSteps.getNumOccurrences() ? std::string("--grad-accum-steps")
                                                            : configFile + ": gradient_accumulation_steps";
  if (accumSteps < 1 || accumSteps > (int64_t(1) << 20))
    return error(accumWhy + "=" + std::to_string(accumSteps) + " is not valid; use 1 to 1048576 micro-batches");
  if (accumSteps > 1 && (!train || gradOnly))
    return error(accumWhy + " accumulates gradients over micro-batches of a training step; add --train (without "
                 "--gradients-only)");
  if (!train && (gradOnly || lossName.getNumOccurrences() || freeze.getNumOccurrences() ||
                 optimizerName.getNumOccurrences() || lr.getNumOccurrences()))
    return error("--gradients-only, --loss, --freeze, --optimizer and --lr apply to training; add --train");
  // The training passes' options (TrainingPipeline.cpp); a model with a TrainingInfoProto supplies
  // the optimizer the flags do not set.
  auto trainingPipelineFor = [&](ModuleOp module, bool plan) {
    if (!train)
      return std::string();
    TrainingFlags f = msampStorage; // MS-AMP's level, rounding, format and float32 parts
    f.loss = lossName;
    f.freeze = freeze;
    f.fusedGrads = plan && fuseGrads;
    f.gradientsOnly = gradOnly;
    f.optimizer = optimizerName;
    f.optimizerGiven = optimizerName.getNumOccurrences();
    f.lr = lr;
    f.beta1 = {beta1, beta1.getNumOccurrences() > 0};
    f.beta2 = {beta2, beta2.getNumOccurrences() > 0};
    f.eps = {adamEps, adamEps.getNumOccurrences() > 0};
    f.weightDecay = {weightDecay, weightDecay.getNumOccurrences() > 0};
    f.momentum = {momentum, momentum.getNumOccurrences() > 0};
    f.clipGradNorm = clipGradNorm.getNumOccurrences() ? clipGradNorm.getValue() : rc.gradClip;
    f.schedule = lrSchedule;
    f.warmupSteps = warmupSteps;
    f.totalSteps = totalSteps;
    f.minLr = minLr;
    f.keepGradients = keepGradients;
    f.fuseMsampAdam = plan && fuseMsampAdam;
    f.dataParallel = dataParallelOn;
    f.fp8AllReduce = fp8AllReduce;
    f.bucketBytes = gradientBucketBytes;
    f.shardWorldSize = shardOptimizer;
    f.numProcesses = rc.numProcesses;
    f.gradAccumSteps = accumSteps;
    return trainingPipeline(module, f);
  };
  if (attentionWorkspaceBytes < 0)
    return error("--attention-workspace-bytes=" + std::to_string(attentionWorkspaceBytes) +
                 " must be 0 (no bound) or more");
  if (lossChunkBytes < 1)
    return error("--loss-chunk-bytes=" + std::to_string(lossChunkBytes) + " must be at least 1 (--chunk-loss=false "
                 "keeps the loss whole)");
  if (!train && !storageLevel.empty() && rc.backend != "msamp")
    return error("--recipe '" + recipe + "': MS-AMP storage levels apply to training; add --train");
  std::string reportOptions;
  if (report)
    reportOptions = "format=" + reportFormat + (outputFilename == "-" ? " output=/dev/stderr" : "");

  const RecipeInfo *recipeInfo = nullptr;
  std::string recipeName = rc.backend;
  if (!recipeName.empty()) {
    recipe = recipeName;
    recipeInfo = lookupRecipe(recipe);
    if (!recipeInfo) {
      std::string known;
      for (const RecipeInfo &r : getRecipes())
        known += (known.empty() ? "" : ", ") + r.name;
      return error("unknown recipe '" + recipe + "' (--recipe); known recipes: " + known);
    }
  }

  // Paths before any work: no model read from a terminal, no result over its own input or into
  // a directory that does not exist (the error would otherwise come after the whole compile).
  if (inputFilename == "-" && llvm::sys::Process::StandardInIsUserInput())
    return error("no input model; usage: fp8-opt MODEL.onnx [--recipe te] [--train] -o OUT.plan (--help lists "
                 "the options)");
  if (outputFilename != "-") {
    if (inputFilename != "-" && llvm::sys::fs::equivalent(inputFilename, outputFilename))
      return error("-o '" + outputFilename + "' is the input model; write the result to another file");
    llvm::SmallString<256> dir(outputFilename.getValue());
    llvm::sys::path::remove_filename(dir);
    if (!dir.empty() && !llvm::sys::fs::is_directory(dir))
      return error("-o '" + outputFilename + "': the directory '" + dir + "' does not exist; create it first");
  }

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFilename, &errorMessage);
  if (!input)
    return error("cannot read '" + inputFilename + "': " + errorMessage);

  if (!inputFormat.empty() && inputFormat != "mlir" && inputFormat != "onnx")
    return error("--input-format='" + inputFormat + "' is not valid; use mlir or onnx");
  InputFormat format = inputFormat == "mlir"   ? InputFormat::MLIR
                       : inputFormat == "onnx" ? InputFormat::ONNX
                                               : InputFormat::Auto;
  if (format == InputFormat::Auto) {
    llvm::StringRef ext = llvm::sys::path::extension(inputFilename);
    if (ext == ".onnx")
      format = InputFormat::ONNX;
    else if (ext == ".mlir")
      format = InputFormat::MLIR;
    else // a ModelProto starts with field 1 (ir_version), tag byte 0x08
      format = !input->getBuffer().empty() && input->getBuffer()[0] == '\x08' ? InputFormat::ONNX
                                                                              : InputFormat::MLIR;
  }
  Emit out = emit;
  if (out == Emit::Auto)
    out = llvm::sys::path::extension(outputFilename) == ".onnx"  ? Emit::ONNX
          : llvm::sys::path::extension(outputFilename) == ".plan" ? Emit::Plan
                                                                  : Emit::MLIR;
  // Kept layers compute as under autocast in plans; ONNX and MLIR output keep the model's types.
  rc.keptGemmPrecision = keptGemmPrecision.getNumOccurrences() ? keptGemmPrecision.getValue()
                         : out == Emit::Plan                    ? "bf16"
                                                                : "f32";
  rc.padKeptGemms = padKeptGemms;
  autocast = autocast && out == Emit::Plan;
  if (report && (rc.backend.empty() || rc.backend == "none") && !autocast)
    return error("--report needs a recipe (--recipe te|ao|msamp or --config with mixed_precision: fp8)");
  if (autocast)
    rc.backend = "none";
  if (accumSteps > 1 && out == Emit::ONNX)
    return error(accumWhy + ": an ONNX training step has no micro-batch phases; write a plan (-o model.plan)");
  if (format == InputFormat::ONNX && (splitInputFile || verifyDiagnostics))
    return error("--split-input-file and --verify-diagnostics apply to MLIR input only");
  JsonPlanReport jsonReport; // --report-format=json with a plan: one document, layers and plan
  if (report && reportFormat == "json" && out == Emit::Plan) {
    if (std::string err = jsonReport.create(); !err.empty())
      return error(err);
    reportOptions = "format=json output=" + jsonReport.path();
  }

  std::vector<std::string> rematSources; // what octet-rematerialize-fp8-casts recomputes (choosePlanPasses)
  struct BudgetChoice {
    int64_t predicted = -1, state = 0, arena = 0;
  } budgetChoice; // --memory-budget's prediction for the chosen recomputation
  bool trial = false;                     // a candidate's compile: no reports
  bool rematChosen = false;               // the compiler chose rematSources
  bool fp8Recipe = recipeInfo && recipeInfo->name != "none";
  auto runPasses = [&](ModuleOp module, MLIRContext &ctx) -> LogicalResult {
    std::string trainingPipeline = trainingPipelineFor(module, out == Emit::Plan);
    // Training plans: GELU as one op and fused attention before autodiff, so that their
    // gradients read their inputs only (no [T, T] or GELU intermediates live across the step).
    bool trainPlan = out == Emit::Plan && !trainingPipeline.empty();
    bool attentionFirst = trainPlan && fuseAttention;
    std::string before;
    if (trainPlan && (geluOp || normOps)) {
      std::string kinds = geluOp ? "gelu" : "";
      if (normOps)
        kinds += std::string(kinds.empty() ? "" : ",") + "layer_norm,rms_norm";
      before +=
          std::string(fp8Recipe || autocast ? "" : "octet-raise-layers{layers=" + kinds + "},") +
          "octet-lower-layers{gelu-op=" + (geluOp ? "true" : "false") +
          " norm-ops=" + (normOps ? "true" : "false") + "},";
    }
    if (trainPlan && fuseRotary)
      before += "octet-fuse-rotary,";
    if (attentionFirst)
      before += std::string("octet-fuse-attention{max-workspace-bytes=") + std::to_string(attentionWorkspaceBytes) +
                " fold-head-transposes=" + (foldHeadTransposes ? "true" : "false") +
                "},";
    // A loss that reads a padded kept GEMM's logits reads them padded (-inf), not sliced.
    if (!trainingPipeline.empty() && padKeptGemms)
      before += "octet-pad-loss-classes,";
    trainingPipeline = before + trainingPipeline;
    PassManager pm(&ctx, ModuleOp::getOperationName());
    if (!trial) { // a candidate's compile prints nothing (choosePlanPasses)
      applyPassManagerCLOptions(pm);
      applyDefaultTimingPassManagerCLOptions(pm);
    }
    if (fp8Recipe || autocast) {
      if (failed(buildRecipePipeline(pm, rc.toPassOptions() + (shareInputScaling ? "" : " share-input-scaling=false"),
                                     trial ? std::string() : reportOptions, trainingPipeline)))
        return failure();
    } else {
      if (recipeInfo)
        recipeInfo->build(pm);
      if (!trainingPipeline.empty() && failed(parsePassPipeline(trainingPipeline + ",cse", pm)))
        return failure();
    }
    auto errorHandler = [&](const llvm::Twine &msg) {
      emitError(UnknownLoc::get(&ctx)) << msg;
      return failure();
    };
    if (failed(passPipeline.addToPipeline(pm, errorHandler)))
      return failure();
    // Plans and ONNX models hold no nn layers; ONNX holds no fp8 ops (QDQ instead).
    if (out == Emit::Plan || out == Emit::ONNX) {
      pm.addPass(createLowerLayers());
      if (out == Emit::Plan) {
        PlanPassFlags pf;
        pf.trainPlan = trainPlan;
        pf.attentionFirst = attentionFirst;
        pf.fuseRotary = fuseRotary;
        pf.fuseAttention = fuseAttention;
        pf.foldHeadTransposes = foldHeadTransposes;
        pf.fusePointwise = fusePointwise;
        pf.fuseCastAmax = fuseCastAmax;
        pf.castTranspose = castTranspose;
        pf.groupCasts = groupCasts;
        pf.rematerializeFp8Casts = rematerializeFp8Casts;
        pf.sinkScaleUpdates = sinkScaleUpdates;
        pf.dataParallel = dataParallelOn;
        pf.overlapCollectives = overlapCollectives;
        pf.delayWeightGradients = delayWeightGradients;
        pf.chunkLoss = chunkLoss;
        pf.foldResidualAdds = foldResidualAdds;
        pf.foldWideningCasts = foldWideningCasts;
        pf.fusePointwiseChains = fusePointwiseChains;
        pf.fuseRuns = fuseRuns;
        pf.fuseCastColumnSums = fuseCastColumnSums;
        pf.fuseGeluRecompute = fuseGeluRecompute;
        pf.fuseCastSources = fuseCastSources;
        pf.fuseProducerAmax = fuseProducerAmax;
        pf.fuseAmaxScale = fuseAmaxScale;
        pf.fuseResidualNorms = fuseResidualNorms;
        pf.foldGemmBias = foldGemmBias;
        pf.attentionWorkspaceBytes = attentionWorkspaceBytes;
        pf.lossChunkBytes = lossChunkBytes;
        pf.activationPrecision = activationPrecision;
        pf.attentionPrecision = attentionPrecision;
        pf.rematSources = rematSources;
        addPlanPasses(pm, pf);
      }
      if (out == Emit::ONNX) {
        Fp8ToQdqOptions qo;
        qo.gemm = qdqGemm;
        pm.addPass(createFp8ToQdq(qo));
      }
    }
    if (accumSteps > 1) // what runs in the last micro-batch only: on the final ops
      pm.addPass(createMicroBatchPhases());
    if (failed(pm.run(module)))
      return failure();
    if (report && dataParallelOn && !trial)
      reportCollectives(module, outputFilename == "-" ? llvm::errs() : llvm::outs());
    return success();
  };
  // Which FP8 codes a plan recomputes for the backward (--rematerialize-fp8-sources): the user's
  // list, else the compiler's choice: `activation` (copies that cost no time), then, under te's
  // delayed scaling, `gelu` and `weight` in turn, each kept where it lowers the arena's peak by at
  // least 1% (the codes it recomputes are live there: on the 1.3B GPT at 8 x 2048 they are, at
  // batch 1 the peak lies elsewhere and recomputing would cost time for nothing). Under dynamic
  // scaling (ao, msamp) a recomputed cast needs its amax pass again and the GELU's is not in its
  // gradient's pass: 9 ms of a 235 ms step there (docs/BENCHMARKS.md), so activation alone. Each
  // candidate compiles a copy of the module, its diagnostics unprinted (the chosen one compiles
  // again, printing them).
  auto choosePlanPasses = [&](ModuleOp module, MLIRContext &ctx) -> LogicalResult {
    rematSources = rematerializeSources.empty() ? std::vector<std::string>{"activation"}
                                                : std::vector<std::string>(rematerializeSources);
    rematChosen = rematerializeSources.empty();
    bool budgeted = budgetBytes > 0 && out == Emit::Plan;
    if (!budgeted &&
        (out != Emit::Plan || !rematerializeFp8Casts || !rematerializeSources.empty() || rc.backend != "te"))
      return runPasses(module, ctx);
    // A candidate's compile of a copy: its arena's peak, and (predicted) that plus its state's bytes.
    int64_t lastState = 0;
    auto arenaWith = [&](std::vector<std::string> sources) -> std::optional<int64_t> {
      OwningOpRef<ModuleOp> copy = module.clone();
      std::vector<std::string> chosen = std::exchange(rematSources, sources);
      ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
      trial = true;
      std::string bytes;
      int64_t arena = -1;
      bool ok = succeeded(runPasses(*copy, ctx)) &&
                succeeded(exportToPlanBytes(*copy, bytes, "fp8-opt", &arena, inPlaceUpdates));
      trial = false;
      rematSources = std::move(chosen);
      lastState = ok ? stateBytes(*copy) : 0;
      return ok ? std::optional<int64_t>(arena) : std::nullopt;
    };
    if (budgeted) {
      // --memory-budget: the least recomputation whose predicted device bytes fit, trying the
      // user's sources alone where given, else each FP8 source in turn from the cheapest.
      std::vector<std::vector<std::string>> ladder = {rematSources};
      if (rematerializeSources.empty() && rematerializeFp8Casts && fp8Recipe)
        for (const char *extra : {"gelu", "weight", "layernorm"}) {
          ladder.push_back(ladder.back());
          ladder.back().push_back(extra);
        }
      int64_t smallest = -1;
      for (const std::vector<std::string> &sources : ladder) {
        std::optional<int64_t> arena = arenaWith(sources);
        if (!arena)
          return runPasses(module, ctx); // the candidate's error, printed by the real compile
        int64_t predicted = *arena + lastState;
        smallest = smallest < 0 ? predicted : std::min(smallest, predicted);
        if (predicted <= budgetBytes) {
          rematSources = sources;
          budgetChoice = {predicted, lastState, *arena};
          return runPasses(module, ctx);
        }
      }
      return emitError(module.getLoc())
             << "--memory-budget " << memoryBudget << ": the plan needs at least " << describeBytes(smallest)
             << " on the device (state " << describeBytes(lastState) << ", the rest its activations) with every "
             << "recomputation Octet has (" << llvm::join(ladder.back(), ", ")
             << "); raise the budget, lower the batch, or add --grad-accum-steps";
    }
    std::optional<int64_t> best = arenaWith(rematSources);
    for (const char *extra : {"gelu", "weight"}) {
      if (!best)
        break;
      std::vector<std::string> more = rematSources;
      more.push_back(extra);
      if (std::optional<int64_t> a = arenaWith(more); a && *a < *best - *best / 100) {
        rematSources = std::move(more);
        best = a;
      }
    }
    return runPasses(module, ctx);
  };
  auto emitModule = [&](ModuleOp module, llvm::raw_ostream &os) -> LogicalResult {
    if (out == Emit::MLIR) {
      module.print(os);
      os << "\n";
      return success();
    }
    std::string bytes;
    if (out == Emit::Plan) {
      int64_t arena = 0;
      if (failed(exportToPlanBytes(module, bytes, std::string("fp8-opt ") + OCTET_VERSION, &arena, inPlaceUpdates)))
        return failure();
      if (report) { // the memory plan's peak and the fusion groups, with the per-layer report
        std::string facts;
        llvm::raw_string_ostream ros(facts);
        ros << "peak activation memory (plan arena): " << arena << " bytes, activations stored in "
            << (activationPrecision == "bf16" ? "BF16" : "float32")
            << (activationPrecision.getNumOccurrences() ? " (--activation-precision)"
                                                        : " (the default under an FP8 recipe or mixed_precision: bf16)")
            << "\n";
        if (rematerializeFp8Casts && !autocast) // autocast: no FP8 codes
          ros << "FP8 codes recomputed for the backward: " << llvm::join(rematSources, ", ")
              << (!rematChosen          ? ""
                  : rc.backend == "te" ? " (the compiler's choice: gelu and weight only where each lowers the arena's "
                                         "peak by 1% or more)"
                                       : " (the default under dynamic scaling, where recomputing more costs time)")
              << "\n";
        if (train && !storageLevel.empty())
          ros << msampStorageLine(msampStorage, msampFloat32.getNumOccurrences()) << "\n";
        if (budgetChoice.predicted >= 0)
          ros << "memory budget " << describeBytes(budgetBytes) << ": predicted "
              << describeBytes(budgetChoice.predicted) << " (state " << describeBytes(budgetChoice.state)
              << ", arena " << describeBytes(budgetChoice.arena) << "), recomputing FP8 codes of "
              << llvm::join(rematSources, ", ") << "\n";
        reportPlanFusions(module, ros);
        llvm::raw_ostream &rep = outputFilename == "-" ? llvm::errs() : llvm::outs();
        if (jsonReport.path().empty())
          rep << facts;
        else if (std::string err = jsonReport.print(facts, rep); !err.empty())
          return emitError(module.getLoc(), err);
      }
    } else if (failed(exportToOnnxBytes(module, bytes))) {
      return failure();
    }
    os << bytes;
    return success();
  };

  std::string result;
  llvm::raw_string_ostream resultStream(result);

  if (format == InputFormat::ONNX) {
    MLIRContext ctx(registry);
    ctx.printOpOnDiagnostic(false);
    ScopedDiagnosticHandler handler(&ctx, [](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Note)
        return success();
      std::string where = octet::describeLocation(d.getLocation());
      auto &os = d.getSeverity() == DiagnosticSeverity::Error
                     ? llvm::WithColor::error(llvm::errs(), "fp8-opt")
                     : llvm::WithColor::warning(llvm::errs(), "fp8-opt");
      os << octet::oneLine((where.empty() ? "" : where + ": ") + d.str()) << "\n"; // names may hold newlines
      return success();
    });
    ImportOptions opts;
    opts.fileName = inputFilename == "-" ? "<stdin>" : inputFilename.getValue();
    opts.baseDir = llvm::sys::path::parent_path(inputFilename).str();
    opts.inferShapes = !noShapeInference;
    opts.genericOnly = genericOnly;
    opts.foldShapes = foldShapes;
    if (absentWeights != "zeros" && absentWeights != "error") {
      llvm::WithColor::error(llvm::errs(), "fp8-opt")
          << "--absent-weights: '" << absentWeights << "' is not valid; use zeros or error\n";
      return 1;
    }
    opts.absentWeightsAsZeros = absentWeights == "zeros";
    if (std::string bad = octet::parseInputShapes(inputShape, opts.inputShapes); !bad.empty()) {
      llvm::WithColor::error(llvm::errs(), "fp8-opt")
          << "--input-shape '" << bad << "' is not valid; use NAME=AxB with dimensions >= 1, each input once "
          << "(e.g. input_ids=8x2048)\n";
      return 1;
    }
    OwningOpRef<ModuleOp> module = importOnnxBuffer(input->getBuffer(), &ctx, opts);
    if (!module || failed(checkImportedModel(*module, /*checkOps=*/!allowCustomOps && (out == Emit::Plan || train))) || failed(choosePlanPasses(*module, ctx)) ||
        failed(emitModule(*module, resultStream)))
      return 1;
    resultStream.flush();
    return octet::writeOutput(outputFilename, result) ? 0 : 1;
  }

  // MLIR input: one fresh context per chunk, as mlir-opt does.
  auto processChunk = [&](std::unique_ptr<llvm::MemoryBuffer> chunk, llvm::raw_ostream &os) {
    MLIRContext ctx(registry);
    ctx.allowUnregisteredDialects(false);
    ctx.printOpOnDiagnostic(!verifyDiagnostics);
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(chunk), llvm::SMLoc());
    auto body = [&]() -> LogicalResult {
      OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
      if (!module || failed(choosePlanPasses(*module, ctx)))
        return failure();
      return emitModule(*module, os);
    };
    if (!verifyDiagnostics) {
      SourceMgrDiagnosticHandler handler(sourceMgr, &ctx);
      return body();
    }
    SourceMgrDiagnosticVerifierHandler handler(sourceMgr, &ctx);
    (void)body();
    return handler.verify();
  };
  if (failed(splitAndProcessBuffer(std::move(input), processChunk, resultStream, splitInputFile,
                                   /*insertMarkerInOutput=*/true)))
    return 1;
  resultStream.flush();
  return octet::writeOutput(outputFilename, result) ? 0 : 1;
}
