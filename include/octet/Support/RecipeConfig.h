//===- RecipeConfig.h - Accelerate's FP8 recipe knobs -----------*- C++ -*-===//
//
// One struct per recipe with every knob of Accelerate's TERecipeKwargs,
// MSAMPRecipeKwargs and AORecipeKwargs. Filled from an Accelerate config
// file (yaml-cpp; this file and its .cpp use no LLVM) and from fp8-opt
// flags, then turned into octet-fp8-substitute's pass options.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_SUPPORT_RECIPECONFIG_H
#define OCTET_SUPPORT_RECIPECONFIG_H

#include <cstdint>
#include <string>

namespace octet {

/// The largest amax history (entries per FP8 tensor: 4 MiB of float32 each; TE's default is 1024)
/// and margin (2^margin divides the scale in float32: at 128 it is infinite and every scale 0).
constexpr int64_t kMaxAmaxHistoryLen = int64_t(1) << 20;
constexpr int64_t kMaxMargin = 127;

struct TERecipe {
  std::string fp8Format = "HYBRID";          // E4M3 | HYBRID
  int64_t amaxHistoryLen = 1024;
  /// TransformerEngine's own default, the history's largest amax; Accelerate's TERecipeKwargs default,
  /// most_recent, drifted above BF16 in the 350M convergence benchmark (docs/BENCHMARKS.md section 10).
  std::string amaxComputeAlgo = "max"; // max | most_recent
  int64_t margin = 0;
  int64_t interval = 1;
  bool overrideLinearPrecision[3] = {false, false, false}; // fprop, dgrad, wgrad
  bool useAutocastDuringEval = false;
};

struct MSAMPRecipe {
  std::string optLevel = "O2"; // O1 | O2 | O3
};

struct AORecipe {
  std::string recipe = "tensorwise"; // tensorwise | rowwise | rowwise_with_gw_hp
  std::string moduleFilter;          // regex on layer names ("" = all)
  bool keepFirstLast = true;
  // Tensorwise: each scale rounded down to a power of 2 (torchao: off; Octet: on, from the
  // convergence benchmark, docs/BENCHMARKS.md).
  bool roundScalesToPowerOf2 = true;
  bool roundScalesGiven = false; // the config file says round_scales_to_power_of_2
  bool padInnerDim = false;
  int enableFsdpFloat8AllGather = -1; // -1: unsaid (fp8-opt --fp8-all-gather decides), else 0 or 1
};

struct RecipeConfig {
  std::string backend; // te | msamp | ao | "" (none)
  /// Accelerate's mixed_precision: no, bf16 (autocast: BF16 GEMMs and activations) or fp8; "" unsaid.
  std::string mixedPrecision;
  TERecipe te;
  MSAMPRecipe msamp;
  AORecipe ao;
  bool evalGraph = false;
  /// Every recipe keeps the output layer (a Linear whose result reaches no other Linear) in high
  /// precision; false converts it as Accelerate's own rules do (fp8-opt --keep-output-layer=false).
  bool keepOutputLayer = true;
  /// The GEMMs of kept layers: f32, or bf16 (as under autocast; fp8-opt's default for plans).
  std::string keptGemmPrecision = "f32";
  /// BF16 kept GEMMs with N no multiple of 8 compute N rounded up (octet-fp8-recipe pad-kept-gemms).
  bool padKeptGemms = true;
  /// Accelerate's distributed_type (NO, MULTI_GPU, MULTI_CPU; others are refused) and
  /// num_processes: data parallelism when either asks for more than one process.
  std::string distributedType = "NO";
  int64_t numProcesses = 1;
  /// num_machines (num_processes counts all of theirs), main_process_ip and main_process_port:
  /// fp8-run's --nnodes, --master-addr and --master-port (each machine gives its --node-rank).
  int64_t numMachines = 1, mainProcessPort = 0;
  std::string mainProcessIp;
  bool dataParallel = false;
  /// ZeRO over num_processes: 0 none (data parallelism), 2 the optimizer and gradients sharded
  /// (fp8-opt --shard-optimizer; DeepSpeed zero_stage 2, FSDP SHARD_GRAD_OP), 3 the parameters too
  /// (--shard-parameters; zero_stage 3, FSDP FULL_SHARD).
  int64_t zeroStage = 0;
  /// FSDP's fsdp_backward_prefetch (NO_PREFETCH: 0) as fp8-opt --gather-prefetch; -1: not given.
  int64_t gatherPrefetch = -1;
  /// deepspeed_config.gradient_accumulation_steps (fp8-opt --grad-accum-steps): micro-batches per step.
  int64_t gradAccumSteps = 1;
  /// deepspeed_config.gradient_clipping (fp8-opt --clip-grad-norm where that is not given); 0: none.
  double gradClip = 0;

  /// The option string of octet-fp8-substitute ("recipe=te fp8-format=HYBRID ...").
  std::string toPassOptions() const;
};

/// Applies `--recipe NAME` to `config`: a backend (te, ao, msamp, none), a suffix for msamp's level or
/// ao's recipe ("msamp:O2", "ao:rowwise"), or TE's GEMM scaling combined with MS-AMP's storage
/// ("te+msamp:O2"), whose level goes to `storageLevel`. Returns false with a one-line message naming
/// the flag on a malformed name (an unknown backend is the caller's to report).
bool applyRecipeName(const std::string &name, RecipeConfig &config, std::string &storageLevel, std::string &error);

/// Reads an Accelerate config (`mixed_precision: fp8` and an `fp8_config:`
/// block, in the spellings `accelerate config` writes or the launch flags'
/// `fp8_*` keys). Returns false with a one-line message naming the file and
/// key on error.
bool loadAccelerateConfig(const std::string &path, RecipeConfig &config, std::string &error);
/// The same from the file's text (`path` names it in errors): the fuzz target's entry.
bool parseAccelerateConfig(const std::string &text, const std::string &path, RecipeConfig &config,
                           std::string &error);

} // namespace octet

#endif
