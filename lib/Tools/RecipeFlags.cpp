//===- RecipeFlags.cpp - fp8-opt's Accelerate fp8_config flags ------------===//
#include "octet/Tools/RecipeFlags.h"

#include "octet/Support/RecipeConfig.h"

using namespace octet;

std::string octet::chooseFlag(const llvm::cl::opt<std::string> &o, std::string &dst,
                              std::initializer_list<const char *> allowed) {
  if (o.getNumOccurrences() == 0)
    return "";
  std::string list;
  for (const char *a : allowed) {
    if (o.getValue() == a) {
      dst = o.getValue();
      return "";
    }
    list += std::string(list.empty() ? "" : ", ") + a;
  }
  return "--" + o.ArgStr.str() + "='" + o.getValue() + "' is not valid; use one of: " + list;
}

std::string octet::boundFlag(const llvm::cl::opt<int64_t> &o, int64_t &dst, int64_t min,
                             int64_t max) {
  if (o.getNumOccurrences() == 0)
    return "";
  if (o.getValue() < min || o.getValue() > max)
    return "--" + o.ArgStr.str() + "=" + std::to_string(o.getValue()) +
           " is not valid; use an integer >= " + std::to_string(min) +
           (max < std::numeric_limits<int64_t>::max() ? " and <= " + std::to_string(max) : "");
  dst = o.getValue();
  return "";
}

std::string RecipeFlags::apply(RecipeConfig &rc, const std::string &configFile) const {
  for (std::string err :
       {chooseFlag(fp8Format, rc.te.fp8Format, {"E4M3", "HYBRID"}),
        chooseFlag(amaxComputeAlgo, rc.te.amaxComputeAlgo, {"max", "most_recent"}),
        chooseFlag(optLevel, rc.msamp.optLevel, {"O1", "O2", "O3"}),
        chooseFlag(aoRecipe, rc.ao.recipe, {"tensorwise", "rowwise", "rowwise_with_gw_hp"}),
        boundFlag(amaxHistoryLen, rc.te.amaxHistoryLen, 1, kMaxAmaxHistoryLen),
        boundFlag(margin, rc.te.margin, 0, kMaxMargin), boundFlag(interval, rc.te.interval, 1)})
    if (!err.empty())
      return err;
  if (overridePrecision.getNumOccurrences()) {
    for (bool &b : rc.te.overrideLinearPrecision)
      b = false;
    for (const std::string &g : overridePrecision) {
      int i = g == "fprop" ? 0 : g == "dgrad" ? 1 : g == "wgrad" ? 2 : -1;
      if (i < 0)
        return "--override-linear-precision: '" + g +
               "' is not valid; use any of: fprop, dgrad, wgrad";
      rc.te.overrideLinearPrecision[i] = true;
    }
  }
  if (autocastEval.getNumOccurrences())
    rc.te.useAutocastDuringEval = autocastEval;
  if (moduleFilter.getNumOccurrences())
    rc.ao.moduleFilter = moduleFilter;
  if (keepFirstLast && noKeepFirstLast)
    return "--keep-first-last and --no-keep-first-last contradict each other; pass one";
  if (keepFirstLast.getNumOccurrences() || noKeepFirstLast)
    rc.ao.keepFirstLast = keepFirstLast && !noKeepFirstLast;
  if (padInnerDim.getNumOccurrences())
    rc.ao.padInnerDim = padInnerDim;
  if (roundScalesPow2.getNumOccurrences())
    rc.ao.roundScalesToPowerOf2 = roundScalesPow2;
  if (rc.ao.roundScalesToPowerOf2 && rc.backend != "ao" &&
      (roundScalesPow2.getNumOccurrences() || rc.ao.roundScalesGiven))
    return (roundScalesPow2 ? "--round-scales-to-power-of-2"
                            : configFile + ": round_scales_to_power_of_2") +
           " is an ao option (torchao's tensorwise scaling); the " +
           (rc.backend.empty() ? "none" : rc.backend) +
           " recipe's scales come from its own rules: remove the flag or use --recipe ao";
  rc.keepOutputLayer = keepOutputLayer;
  return "";
}
