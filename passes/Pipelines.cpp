//===- Pipelines.cpp - Named recipe pipelines (fp8-opt --recipe) ----------===//
#include "octet/Passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace octet {

LogicalResult buildRecipePipeline(OpPassManager &pm, const std::string &substituteOptions,
                                  const std::string &reportOptions, const std::string &trainingPipeline) {
  std::string p = "octet-raise-layers,octet-fp8-substitute{" + substituteOptions + "}";
  if (!reportOptions.empty())
    p += ",octet-fp8-report{" + reportOptions + "}";
  if (!trainingPipeline.empty()) // differentiate the FP8 Linear layers before they expand
    p += (llvm::StringRef(trainingPipeline).startswith("octet-lower-layers") ? "," : ",octet-lower-layers,") +
         trainingPipeline;
  p += ",octet-fp8-expand,cse";
  return parsePassPipeline(p, pm);
}

const std::vector<RecipeInfo> &getRecipes() {
  auto recipe = [](const char *name) {
    return [name](OpPassManager &pm) { (void)buildRecipePipeline(pm, std::string("recipe=") + name, ""); };
  };
  static const std::vector<RecipeInfo> recipes = {
      {"none", "no FP8: the model keeps its own precision (CSE only)",
       [](OpPassManager &pm) { pm.addPass(createCSEPass()); }},
      {"te", "TransformerEngine: delayed scaling, HYBRID formats, every Linear with dims % 16 == 0", recipe("te")},
      {"ao", "torchao float8: dynamic scaling (tensorwise / rowwise), first and last Linear kept", recipe("ao")},
      {"msamp", "MS-AMP: forward as O1 with power-of-2 scales; O1/O2/O3 storage for training", recipe("msamp")},
  };
  return recipes;
}

const RecipeInfo *lookupRecipe(llvm::StringRef name) {
  for (const RecipeInfo &r : getRecipes())
    if (r.name == name)
      return &r;
  return nullptr;
}

void registerRecipePipelines() {
  for (const RecipeInfo &r : getRecipes()) {
    // PassPipelineRegistration keeps its builder; copy the recipe into it.
    auto build = r.build;
    PassPipelineRegistration<>("octet-recipe-" + r.name, r.description,
                               [build](OpPassManager &pm) { build(pm); });
  }
}

} // namespace octet
