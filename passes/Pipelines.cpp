//===- Pipelines.cpp - Named recipe pipelines (fp8-opt --recipe) ----------===//
#include "octet/Passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace octet {

const std::vector<RecipeInfo> &getRecipes() {
  static const std::vector<RecipeInfo> recipes = {
      {"none", "no FP8: the model keeps its own precision (CSE only)",
       [](OpPassManager &pm) { pm.addPass(createCSEPass()); }},
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
