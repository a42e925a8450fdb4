//===- Fp8OptMain.cpp - The fp8-opt driver --------------------------------===//
#include "octet/Tools/Fp8OptMain.h"

#include "octet/Conversion/ONNXExport.h"
#include "octet/Conversion/ONNXImport.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/InitAll.h"
#include "octet/Passes/Passes.h"
#include "octet/Support/ProtoIO.h"
#include "octet/Support/RecipeConfig.h"
#include "octet/Tools/Help.h"
#include "octet/Tools/ImportChecks.h"
#include "octet/Tools/OutputFiles.h"
#include "octet/Tools/PlanPipeline.h"
#include "octet/Tools/MemoryBudget.h"
#include "octet/Tools/PlanFlags.h"
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
  return fp8OptRun(argc, argv);
}

int octet::fp8OptRun(int argc, char **argv) {
  // A second run in one process (octet-batch) parses its command line afresh: every option back
  // to its default, none seen yet.
  cl::ResetAllOptionOccurrences();
  registerAllPasses();
  DialectRegistry registry;
  registerAllDialects(registry);

  // Octet's options in groups (LLVM prints the groups in name order); LLVM's and MLIR's own
  // options are hidden: --help-hidden lists them.
  static cl::OptionCategory basicCat("Basics");
  static cl::OptionCategory importCat("Import and testing");
  static cl::OptionCategory optCat("Plan optimizations (each a pass; on unless noted)");
  static PlanFlags plan(optCat); // the plan passes' flags (PlanFlags.h)
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

  static cl::OptionCategory recipeCat("FP8 recipes (Accelerate's fp8_config keys)");
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
               "docs/BENCHMARKS.md), gradients (FP8 otherwise; all-reduced in float32; O1's default with weights: "
               "its FP8 ones cost loss), or none (MS-AMP's own)"),
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

  static cl::OptionCategory trainCat("Training (autodiff and optimizer)");
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
  static cl::opt<int64_t> shardParameters(
      "shard-parameters",
      cl::desc("Data-parallel plans: shard the parameters too over N ranks (ZeRO-3 / FSDP's full sharding): "
               "each large parameter is held as 1/N per rank with its gradient and optimizer state, and "
               "all-gathered just before the layers read it, again for the backward pass (MS-AMP O3: as FP8 "
               "codes); the plan then runs on exactly N ranks (default 0: parameters replicated)"),
      cl::value_desc("N"), cl::init(0), cl::cat(dpCat));
  static cl::opt<int64_t> gatherPrefetch(
      "gather-prefetch",
      cl::desc("--shard-parameters: issue each parameter's all-gather this many gathers before its readers, "
               "to run beside the layers before (default 1; 0: right before them)"),
      cl::value_desc("P"), cl::init(1), cl::cat(dpCat));
  static cl::opt<bool> fp8AllGather(
      "fp8-all-gather",
      cl::desc("--shard-parameters: gather a weight that only per-tensor FP8 casts read (te, ao tensorwise, "
               "MS-AMP O1/O2) as its FP8 codes, cast on each rank's shard with the scale all ranks share "
               "(torchao's enable_fsdp_float8_all_gather; the same bits, a quarter of the bytes); false: "
               "gather the weight, then cast (default true)"),
      cl::init(true), cl::cat(dpCat));
  static cl::opt<std::string> shardUnit(
      "shard-unit",
      cl::desc("Sharded plans: what one collective moves. layer (default): the parameters of one repeated "
               "block (FSDP's wrapped module, named by the first numbered part of their names, as "
               "'model.layers.3') gathered together and their float32 gradients reduce-scattered together; "
               "parameter: each alone"),
      cl::value_desc("layer|parameter"), cl::init("layer"), cl::cat(dpCat));
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
  static cl::opt<bool> reuseWeightCasts(
      "reuse-weight-casts",
      cl::desc("With --grad-accum-steps: what stays the same through an optimizer step (a weight's FP8 codes, a "
               "kept layer's BF16 copy) is made in its first micro-batch and kept for the others, as "
               "TransformerEngine's is_first_microbatch (default on; under --memory-budget only where it "
               "needs no more recomputation)"),
      cl::init(true), cl::cat(trainCat));
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
  // Static as every option here: LLVM keeps each registered option until the process ends.
  static PassPipelineCLParser passPipeline("", "Compiler passes to run", "p");

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
  static const char *overview =
      "fp8-opt: rewrites ONNX training graphs for FP8 mixed-precision training\n\n"
      "  fp8-opt model.onnx --recipe te --train -o model.plan     a training step for fp8-run\n"
      "  fp8-opt model.onnx --config accel.yaml --train -o m.plan the recipe of an Accelerate config\n"
      "  fp8-opt model.onnx --recipe te -o out.onnx               FP8 as ONNX QDQ (onnxruntime)\n"
      "  fp8-opt model.onnx -o model.mlir                         import to MLIR\n"
      "  fp8-opt in.mlir --pass-pipeline='builtin.module(cse)'    run passes on MLIR\n"
"\nUSAGE: fp8-opt [options] <model.onnx | input.mlir>";
  // --help: Octet's groups in a newcomer's order, each line within 100 columns (Help.h);
  // --help-hidden and --help-list stay LLVM's, with every description whole.
  for (int i = 1; i < argc; ++i)
    if (StringRef(argv[i]) == "--help" || StringRef(argv[i]) == "-help") {
      printGroupedHelp(llvm::outs(), overview, {&basicCat, &recipeCat, &trainCat, &dpCat, &optCat, &importCat});
      return 0;
    }
  cl::ParseCommandLineOptions(argc, argv, overview);

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
                          chooseFlag(plan.activationPrecision, plan.activationPrecision.getValue(), {"bf16", "f32"}),
                          chooseFlag(plan.attentionPrecision, plan.attentionPrecision.getValue(), {"auto", "bf16", "tf32"}),
                          chooseFlag(fp8AllReduceFormat, fp8AllReduceFormat.getValue(), {"e4m3", "e5m2"}),
                          chooseFlag(msampWeightRounding, msampWeightRounding.getValue(), {"nearest", "stochastic"})})
    if (!err.empty())
      return error(err);
  for (const std::string &k : plan.rematerializeSources)
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
      !plan.activationPrecision.getNumOccurrences())
    plan.activationPrecision = "bf16";
  // No FP8 recipe with BF16 activations is PyTorch's BF16 autocast: every Linear stays in high
  // precision (octet-fp8-substitute recipe=none) with its GEMMs on BF16 operands.
  bool autocast = plan.activationPrecision == "bf16" && (rc.backend.empty() || rc.backend == "none");
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
  // ZeRO from the flags, or from an Accelerate config (DeepSpeed's zero_stage, FSDP's sharding
  // strategy) over its num_processes; a flag given wins.
  int64_t shardOpt = shardOptimizer, shardParams = shardParameters, prefetch = gatherPrefetch;
  if (!shardOptimizer.getNumOccurrences() && !shardParameters.getNumOccurrences() && rc.zeroStage >= 2)
    (rc.zeroStage == 3 ? shardParams : shardOpt) = rc.numProcesses;
  if (!gatherPrefetch.getNumOccurrences() && rc.gatherPrefetch >= 0)
    prefetch = rc.gatherPrefetch;
  if (shardOpt < 0 || shardOpt == 1)
    return error("--shard-optimizer=" + std::to_string(shardOpt) +
                 " is not valid; use the number of ranks (2 or more), or 0 for none");
  if (shardOpt > 1 && !dataParallelOn)
    return error("--shard-optimizer shards across data-parallel ranks; add --data-parallel");
  if (shardParams < 0 || shardParams == 1)
    return error("--shard-parameters=" + std::to_string(shardParams) +
                 " is not valid; use the number of ranks (2 or more), or 0 for none");
  if (shardParams > 1 && !dataParallelOn)
    return error("--shard-parameters shards across data-parallel ranks; add --data-parallel");
  if (shardParams > 1 && shardOpt > 1 && shardOpt != shardParams)
    return error("--shard-optimizer=" + std::to_string(shardOpt) + " and --shard-parameters=" +
                 std::to_string(shardParams) +
                 " name different rank counts; --shard-parameters shards the optimizer too: give it alone");
  if (prefetch < 0)
    return error("--gather-prefetch=" + std::to_string(prefetch) + " is not valid; use 0 or more gathers");
  if (shardUnit != "layer" && shardUnit != "parameter")
    return error("--shard-unit=" + shardUnit + " is not valid; use layer or parameter");
  if (shardUnit.getNumOccurrences() && shardParams < 2 && shardOpt < 2)
    return error("--shard-unit groups the collectives of sharded state; add --shard-parameters N or --shard-optimizer N");
  if (gatherPrefetch.getNumOccurrences() && shardParams < 2)
    return error("--gather-prefetch places the gathers of sharded parameters; add --shard-parameters N");
  bool fp8Gather = fp8AllGather.getNumOccurrences() || rc.ao.enableFsdpFloat8AllGather < 0
                       ? bool(fp8AllGather)
                       : rc.ao.enableFsdpFloat8AllGather == 1;
  if (fp8AllGather.getNumOccurrences() && shardParams < 2)
    return error("--fp8-all-gather decides how sharded weights are gathered; add --shard-parameters N");
  if (dataParallelOn) {
    std::string why = dataParallel ? "--data-parallel" : configFile + ": distributed_type " + rc.distributedType;
    if (!train || gradOnly)
      return error(why + " trains across ranks; add --train (without --gradients-only)");
  }
  int64_t budgetBytes = 0;
  std::string budgetWhy; // auto: whose memory
  if (plan.memoryBudget.getNumOccurrences() && plan.memoryBudget == "auto") {
    std::string why;
    std::optional<int64_t> device = visibleDeviceBytes(why);
    if (!device)
      return error("--memory-budget auto: " + why + "; give the memory of the GPU the plan will train on (80GiB)");
    budgetBytes = *device - kAutoBudgetReserve;
    budgetWhy = " (auto: this machine's GPU, " + describeBytes(*device) + ", less 3 GiB for the CUDA context and "
                "libraries)";
  } else if (plan.memoryBudget.getNumOccurrences() && !parseByteCount(plan.memoryBudget, budgetBytes)) {
    return error("--memory-budget='" + plan.memoryBudget + "' is not valid; use a positive size such as 80GiB, 120GB, a "
                 "number of bytes or auto");
  }
  int64_t blocksWanted = 0;
  if (plan.checkpointBlocks.getNumOccurrences()) {
    char *end = nullptr;
    long long n = std::strtoll(plan.checkpointBlocks.c_str(), &end, 10);
    if (plan.checkpointBlocks == "all")
      blocksWanted = -1;
    else if (plan.checkpointBlocks.empty() || *end || n < 0 || n > 100000)
      return error("--checkpoint-blocks='" + plan.checkpointBlocks + "' is not valid; use a number of blocks or all");
    else
      blocksWanted = n;
    if (!train || gradOnly)
      return error("--checkpoint-blocks recomputes a training step's blocks; add --train (without --gradients-only)");
  }
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
  auto trainingPipelineFor = [&](ModuleOp module, bool forPlan) {
    if (!train)
      return std::string();
    TrainingFlags f = msampStorage; // MS-AMP's level, rounding, format and float32 parts
    f.loss = lossName;
    f.freeze = freeze;
    f.fusedGrads = forPlan && plan.fuseGrads;
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
    f.keepGradients = plan.keepGradients;
    f.fuseMsampAdam = forPlan && plan.fuseMsampAdam;
    f.dataParallel = dataParallelOn;
    f.fp8AllReduce = fp8AllReduce;
    f.bucketBytes = gradientBucketBytes;
    f.shardWorldSize = shardParams > 1 ? shardParams : shardOpt;
    f.shardParameters = shardParams > 1;
    f.shardUnit = shardUnit;
    f.numProcesses = rc.numProcesses;
    f.numMachines = rc.numMachines;
    f.mainProcessIp = rc.mainProcessIp;
    f.mainProcessPort = rc.mainProcessPort;
    f.gradAccumSteps = accumSteps;
    return trainingPipeline(module, f);
  };
  if (plan.attentionWorkspaceBytes < 0)
    return error("--attention-workspace-bytes=" + std::to_string(plan.attentionWorkspaceBytes) +
                 " must be 0 (no bound) or more");
  if (plan.lossChunkBytes < 1)
    return error("--loss-chunk-bytes=" + std::to_string(plan.lossChunkBytes) + " must be at least 1 (--chunk-loss=false "
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
  int64_t blocksChosen = blocksWanted;   // what octet-checkpoint-blocks checkpoints
  std::optional<Prediction> budgetChoice; // --memory-budget's prediction for the chosen recomputation
  bool trial = false;                     // a candidate's compile: no reports
  bool rematChosen = false;               // the compiler chose rematSources
  bool reuseCasts = reuseWeightCasts && accumSteps > 1; // octet-micro-batch-phases reuse-invariants
  std::string reuseWhy; // where --memory-budget turned it off
  bool fp8Recipe = recipeInfo && recipeInfo->name != "none";
  auto runPasses = [&](ModuleOp module, MLIRContext &ctx) -> LogicalResult {
    std::string trainingPipeline = trainingPipelineFor(module, out == Emit::Plan);
    // Training plans: GELU as one op and fused attention before autodiff, so that their
    // gradients read their inputs only (no [T, T] or GELU intermediates live across the step).
    bool trainPlan = out == Emit::Plan && !trainingPipeline.empty();
    bool attentionFirst = trainPlan && plan.fuseAttention;
    std::string before;
    if (trainPlan && (plan.geluOp || plan.normOps)) {
      std::string kinds = plan.geluOp ? "gelu" : "";
      if (plan.normOps)
        kinds += std::string(kinds.empty() ? "" : ",") + "layer_norm,rms_norm";
      before +=
          std::string(fp8Recipe || autocast ? "" : "octet-raise-layers{layers=" + kinds + "},") +
          "octet-lower-layers{gelu-op=" + (plan.geluOp ? "true" : "false") +
          " norm-ops=" + (plan.normOps ? "true" : "false") + "},";
    }
    if (trainPlan && plan.fuseRotary)
      before += "octet-fuse-rotary,";
    if (attentionFirst)
      before += std::string("octet-fuse-attention{max-workspace-bytes=") + std::to_string(plan.attentionWorkspaceBytes) +
                " fold-head-transposes=" + (plan.foldHeadTransposes ? "true" : "false") +
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
    // Parameters the TorchScript exporter merged train apart, before any layer is recognized.
    if (!trainingPipeline.empty())
      pm.addPass(createUnmergeParameters());
    if (fp8Recipe || autocast) {
      if (failed(buildRecipePipeline(pm, rc.toPassOptions() + (plan.shareInputScaling ? "" : " share-input-scaling=false"),
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
        pf.fuseRotary = plan.fuseRotary;
        pf.fuseAttention = plan.fuseAttention;
        pf.foldHeadTransposes = plan.foldHeadTransposes;
        pf.fusePointwise = plan.fusePointwise;
        pf.fuseCastAmax = plan.fuseCastAmax;
        pf.castTranspose = plan.castTranspose;
        pf.groupCasts = plan.groupCasts;
        pf.rematerializeFp8Casts = plan.rematerializeFp8Casts;
        pf.sinkScaleUpdates = plan.sinkScaleUpdates;
        pf.freeEarly = plan.freeEarly;
        pf.dataParallel = dataParallelOn;
        pf.overlapCollectives = overlapCollectives;
        pf.delayWeightGradients = delayWeightGradients;
        pf.gatherPrefetch = shardParams > 1 ? prefetch : -1;
        pf.shardUnit = shardUnit;
        pf.fp8AllGather = fp8Gather;
        pf.chunkLoss = plan.chunkLoss;
        pf.foldResidualAdds = plan.foldResidualAdds;
        pf.foldWideningCasts = plan.foldWideningCasts;
        pf.fusePointwiseChains = plan.fusePointwiseChains;
        pf.fuseRuns = plan.fuseRuns;
        pf.fuseCastColumnSums = plan.fuseCastColumnSums;
        pf.fuseGeluRecompute = plan.fuseGeluRecompute;
        pf.fuseCastSources = plan.fuseCastSources;
        pf.fuseProducerAmax = plan.fuseProducerAmax;
        pf.fuseAmaxScale = plan.fuseAmaxScale;
        pf.fuseResidualNorms = plan.fuseResidualNorms;
        pf.foldGemmBias = plan.foldGemmBias;
        pf.attentionWorkspaceBytes = plan.attentionWorkspaceBytes;
        pf.lossChunkBytes = plan.lossChunkBytes;
        pf.activationPrecision = plan.activationPrecision;
        pf.attentionPrecision = plan.attentionPrecision;
        pf.rematSources = rematSources;
        pf.checkpointBlocks = blocksChosen;
        addPlanPasses(pm, pf);
      }
      if (out == Emit::ONNX) {
        Fp8ToQdqOptions qo;
        qo.gemm = qdqGemm;
        pm.addPass(createFp8ToQdq(qo));
      }
    }
    if (accumSteps > 1) { // what runs in the last micro-batch only, and the first: on the final ops
      MicroBatchPhasesOptions mo;
      mo.reuseInvariants = reuseCasts;
      pm.addPass(createMicroBatchPhases(mo));
    }
    if (failed(pm.run(module)))
      return failure();
    if (int64_t done = 0, of = 0; !trial && out == Emit::Plan && blocksWanted != 0 &&
                                  (checkpointedBlocks(module, done, of), done == 0))
      return emitError(module.getLoc()) << "--checkpoint-blocks " << plan.checkpointBlocks
                                        << ": no block to checkpoint (" << checkpointedBlocksWhy(module)
                                        << "); leave the flag out";
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
    rematSources = plan.rematerializeSources.empty() ? std::vector<std::string>{"activation"}
                                                : std::vector<std::string>(plan.rematerializeSources);
    rematChosen = plan.rematerializeSources.empty();
    bool budgeted = budgetBytes > 0 && out == Emit::Plan;
    if (!budgeted &&
        (out != Emit::Plan || !plan.rematerializeFp8Casts || !plan.rematerializeSources.empty() || rc.backend != "te"))
      return runPasses(module, ctx);
    // A candidate's compile of a copy: its arena's peak, and (predicted) that plus its state's bytes.
    int64_t lastState = 0, lastBlocks = 0, lastBlocksOf = 0;
    auto arenaWith = [&](std::vector<std::string> sources) -> std::optional<int64_t> {
      OwningOpRef<ModuleOp> copy = module.clone();
      std::vector<std::string> chosen = std::exchange(rematSources, sources);
      ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
      trial = true;
      int64_t arena = -1;
      bool ok = succeeded(runPasses(*copy, ctx)) && succeeded(planMemoryFacts(*copy, plan.inPlaceUpdates, arena));
      trial = false;
      rematSources = std::move(chosen);
      lastState = ok ? stateBytes(*copy) : 0;
      checkpointedBlocks(*copy, lastBlocks, lastBlocksOf);
      return ok ? std::optional<int64_t>(arena) : std::nullopt;
    };
    if (budgeted) {
      // --memory-budget: the least recomputation whose predicted device bytes fit: the user's
      // sources alone where given, else each FP8 source in turn from the cheapest; then whole
      // blocks, the fewest that fit (unless --checkpoint-blocks fixed them).
      std::vector<Recomputation> ladder = {{rematSources, blocksWanted}};
      if (plan.rematerializeSources.empty() && plan.rematerializeFp8Casts && fp8Recipe)
        for (const char *extra : {"gelu", "weight", "layernorm"}) {
          ladder.push_back(ladder.back());
          ladder.back().fp8Sources.push_back(extra);
        }
      auto compile = [&](const Recomputation &r) -> std::optional<Prediction> {
        int64_t blocks = std::exchange(blocksChosen, r.blocks);
        std::optional<int64_t> arena = arenaWith(r.fp8Sources);
        blocksChosen = blocks;
        if (!arena)
          return std::nullopt;
        return Prediction{*arena, lastState, lastBlocksOf, lastBlocks};
      };
      BudgetSearch found;
      if (reuseCasts && !reuseWeightCasts.getNumOccurrences()) {
        // The weights' casts kept across micro-batches only where that fits without recomputing
        // more than the plan does anyway.
        found = searchMemoryBudget(budgetBytes, {ladder.front()}, false, compile);
        if (!found.chosen && !found.failed) {
          reuseCasts = false;
          reuseWhy = "keeping them across the step's micro-batches, the plan needs " +
                     describeBytes(found.smallest.total()) + ", past --memory-budget without more recomputation";
        }
      }
      if (!found.chosen && !found.failed)
        found = searchMemoryBudget(budgetBytes, ladder, !plan.checkpointBlocks.getNumOccurrences(), compile);
      if (found.chosen) {
        rematSources = found.chosen->fp8Sources;
        blocksChosen = found.chosen->blocks;
        budgetChoice = found.prediction;
      }
      if (found.chosen || found.failed) // a failed candidate's error, printed by the real compile
        return runPasses(module, ctx);
      return emitError(module.getLoc())
             << "--memory-budget " << plan.memoryBudget << ": the plan needs at least "
             << describeBytes(found.smallest.total()) << " on the device (state "
             << describeBytes(found.smallest.state) << ", the rest its activations) with every recomputation Octet has ("
             << llvm::join(ladder.back().fp8Sources, ", ")
             << (found.smallest.blocks > 0 ? "; " + std::to_string(found.smallest.blocks) + " of " +
                                                  std::to_string(found.smallest.blocksOf) + " blocks checkpointed"
                                            : "")
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
  // A plan from an ONNX model goes straight to its file, one constant at a time: the weights are
  // not copied into memory again (stdout and devices take the bytes whole).
  std::string streamTo;
  auto emitModule = [&](ModuleOp module, llvm::raw_ostream &os) -> LogicalResult {
    if (out == Emit::MLIR) {
      module.print(os);
      os << "\n";
      return success();
    }
    std::string bytes;
    if (out == Emit::Plan) {
      int64_t arena = 0;
      PlanMemoryFacts memory;
      std::string producer = std::string("fp8-opt ") + OCTET_VERSION;
      if (!streamTo.empty() ? failed(exportToPlanFile(module, streamTo, producer, &arena, plan.inPlaceUpdates, &memory))
                            : failed(exportToPlanBytes(module, bytes, producer, &arena, plan.inPlaceUpdates, &memory)))
        return failure();
      if (report) { // the memory plan's peak and the fusion groups, with the per-layer report
        std::string facts;
        llvm::raw_string_ostream ros(facts);
        ros << "peak activation memory (plan arena): " << arena << " bytes, activations stored in "
            << (plan.activationPrecision == "bf16" ? "BF16" : "float32")
            << (plan.activationPrecision.getNumOccurrences() ? " (--activation-precision)"
                                                        : " (the default under an FP8 recipe or mixed_precision: bf16)")
            << "\n";
        if (memory.livePeakBytes > 0)
          ros << arenaPeakLine(memory) << "\n";
        if (plan.rematerializeFp8Casts && !autocast) // autocast: no FP8 codes
          ros << "FP8 codes recomputed for the backward: " << llvm::join(rematSources, ", ")
              << (!rematChosen          ? ""
                  : budgetChoice       ? " (--memory-budget's choice)"
                  : rc.backend == "te" ? " (the compiler's choice: gelu and weight only where each lowers the arena's "
                                         "peak by 1% or more)"
                                       : " (the default under dynamic scaling, where recomputing more costs time)")
              << "\n";
        if (train && !storageLevel.empty())
          ros << msampStorageLine(msampStorage, msampFloat32.getNumOccurrences()) << "\n";
        if (train)
          ros << checkpointingLine(module, blocksWanted != 0 ? "--checkpoint-blocks"
                                           : budgetChoice       ? "--memory-budget"
                                                                : "")
              << "\n";
        if (auto freed = module->getAttrOfType<IntegerAttr>("octet.freed_early"))
          ros << "freed early: " << freed.getInt()
              << " values, whose readers moved up to the op that makes them (--free-early)\n";
        if (budgetChoice)
          ros << "memory budget " << describeBytes(budgetBytes) << budgetWhy << ": predicted "
              << describeBytes(budgetChoice->total()) << " (state " << describeBytes(budgetChoice->state)
              << ", arena " << describeBytes(budgetChoice->arena) << "), recomputing "
              << (fp8Recipe ? "FP8 codes of " + llvm::join(rematSources, ", ") : std::string())
              << (fp8Recipe && budgetChoice->blocks > 0 ? " and " : "")
              << (budgetChoice->blocks > 0 ? std::to_string(budgetChoice->blocks) + " whole blocks"
                  : fp8Recipe              ? ""
                                           : "nothing")
              << "\n";
        if (!reuseWhy.empty())
          ros << "weights' casts made in every micro-batch: " << reuseWhy << "\n";
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
    llvm::sys::fs::file_status outStatus;
    if (out == Emit::Plan && outputFilename != "-" &&
        (llvm::sys::fs::status(outputFilename, outStatus) ||
         outStatus.type() == llvm::sys::fs::file_type::regular_file))
      streamTo = outputFilename;
    OwningOpRef<ModuleOp> module = importOnnxBuffer(input->getBuffer(), &ctx, opts);
    if (!module || failed(checkImportedModel(*module, /*checkOps=*/!allowCustomOps && (out == Emit::Plan || train))) || failed(choosePlanPasses(*module, ctx)) ||
        failed(emitModule(*module, resultStream)))
      return 1;
    resultStream.flush();
    if (!streamTo.empty())
      return 0;
    return octet::writeOutput(outputFilename, result) ? 0 : 1;
  }

#if defined(OCTET_STATIC_MLIR_BUILD) && !defined(__clang__)
  // Compiled by GCC and linked against Debian's static MLIR archives (built by Clang), parsing MLIR
  // text aborts inside MLIR's own parser: an inline function's lambda (AsmParser::parseTypeList's)
  // is instantiated weakly in both, GCC and Clang lay out its captures differently, and the linker
  // keeps GCC's copy for Clang's callers. The shared libMLIR keeps its own copies. Built by Clang
  // (scripts/build_static_fp8opt.sh), the layouts agree; a GCC static build reads ONNX only.
  llvm::errs() << "fp8-opt: error: " << inputFilename
               << ": this self-contained fp8-opt (static MLIR) reads ONNX models only; compile MLIR text with "
                  "the shared build (build/bin/fp8-opt)\n";
  return 1;
#endif
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
