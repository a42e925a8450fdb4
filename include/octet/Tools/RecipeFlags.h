//===- RecipeFlags.h - fp8-opt's Accelerate fp8_config flags ----*- C++ -*-===//
#ifndef OCTET_TOOLS_RECIPEFLAGS_H
#define OCTET_TOOLS_RECIPEFLAGS_H

#include "octet/Support/RecipeConfig.h"

#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

namespace octet {

/// "" when `o` was not given or holds one of `allowed` (then copied to `dst`), else the one-line
/// error naming the flag and the values it takes.
std::string chooseFlag(const llvm::cl::opt<std::string> &o, std::string &dst,
                       std::initializer_list<const char *> allowed);

/// "" when `o` was not given or lies in [min, max] (then copied to `dst`), else the error line.
std::string boundFlag(const llvm::cl::opt<int64_t> &o, int64_t &dst, int64_t min,
                      int64_t max = std::numeric_limits<int64_t>::max());

/// The flags that set a recipe's knobs (Accelerate's fp8_config keys: te's scaling, msamp's level,
/// ao's recipe and layer policy, the output layer). Constructing it registers them with LLVM's
/// command line in `cat`; apply() writes those given over a config file's values.
struct RecipeFlags {
  explicit RecipeFlags(llvm::cl::OptionCategory &category) : cat(category) {}
  RecipeFlags(const RecipeFlags &) = delete;
  RecipeFlags &operator=(const RecipeFlags &) = delete;

  /// Writes the flags given over `rc` (loaded from `configFile`, if any, with --recipe applied);
  /// "" or the one-line error.
  std::string apply(RecipeConfig &rc, const std::string &configFile) const;

  llvm::cl::OptionCategory &cat;
  llvm::cl::opt<std::string> fp8Format{"fp8-format", llvm::cl::desc("te: E4M3 or HYBRID"),
                                       llvm::cl::cat(cat)};
  llvm::cl::opt<int64_t> amaxHistoryLen{
      "amax-history-len", llvm::cl::desc("te: amax history length"), llvm::cl::cat(cat)};
  llvm::cl::opt<std::string> amaxComputeAlgo{
      "amax-compute-algo", llvm::cl::desc("te: max (default) or most_recent (Accelerate's)"),
      llvm::cl::cat(cat)};
  llvm::cl::opt<int64_t> margin{"margin", llvm::cl::desc("te: scaling margin (powers of 2)"),
                                llvm::cl::cat(cat)};
  llvm::cl::opt<int64_t> interval{"interval", llvm::cl::desc("te: recompute scales every N steps"),
                                  llvm::cl::cat(cat)};
  llvm::cl::list<std::string> overridePrecision{
      "override-linear-precision",
      llvm::cl::desc("GEMMs kept in high precision: fprop,dgrad,wgrad"), llvm::cl::CommaSeparated,
      llvm::cl::cat(cat)};
  llvm::cl::opt<bool> autocastEval{"use-autocast-during-eval",
                                   llvm::cl::desc("FP8 in eval graphs too"), llvm::cl::cat(cat)};
  llvm::cl::opt<std::string> optLevel{"opt-level", llvm::cl::desc("msamp: O1, O2 or O3"),
                                      llvm::cl::cat(cat)};
  llvm::cl::opt<std::string> aoRecipe{
      "ao-recipe", llvm::cl::desc("ao: tensorwise, rowwise or rowwise_with_gw_hp"),
      llvm::cl::cat(cat)};
  llvm::cl::opt<std::string> moduleFilter{"module-filter",
                                          llvm::cl::desc("Only layers whose name matches REGEX"),
                                          llvm::cl::value_desc("REGEX"), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> keepFirstLast{
      "keep-first-last",
      llvm::cl::desc(
          "ao: keep the first and last Linear (default; --no-keep-first-last converts them)"),
      llvm::cl::cat(cat)};
  llvm::cl::opt<bool> noKeepFirstLast{"no-keep-first-last", llvm::cl::Hidden, llvm::cl::cat(cat)};
  llvm::cl::opt<bool> roundScalesPow2{
      "round-scales-to-power-of-2",
      llvm::cl::desc("ao tensorwise: round each scale down to a power of 2 (default; =false: "
                     "torchao's tensorwise)"),
      llvm::cl::cat(cat)};
  llvm::cl::opt<bool> keepOutputLayer{
      "keep-output-layer",
      llvm::cl::desc(
          "Every recipe: the output layer (a Linear whose result reaches no other Linear: a GPT's "
          "lm_head) stays in high precision, as FP8 there costs loss (docs/BENCHMARKS.md; default "
          "on; "
          "--keep-output-layer=false converts it, as Accelerate's own rules do)"),
      llvm::cl::init(true), llvm::cl::cat(cat)};
  llvm::cl::opt<bool> padInnerDim{
      "pad-inner-dim",
      llvm::cl::desc("Convert layers whose dims are not multiples of 16 (zero-padded to them)"),
      llvm::cl::cat(cat)};
};

} // namespace octet

#endif // OCTET_TOOLS_RECIPEFLAGS_H
