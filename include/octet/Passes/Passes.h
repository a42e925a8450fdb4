//===- Passes.h - Octet's pass library and named pipelines ----------------===//
#ifndef OCTET_PASSES_PASSES_H
#define OCTET_PASSES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include <functional>
#include <string>
#include <vector>

namespace octet {

#define GEN_PASS_DECL
#include "octet/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "octet/Passes/Passes.h.inc"

/// A named FP8 recipe pipeline (`fp8-opt --recipe NAME`). Each is also a
/// registered pass pipeline `octet-recipe-NAME` usable from --pass-pipeline.
struct RecipeInfo {
  std::string name;
  std::string description;
  std::function<void(mlir::OpPassManager &)> build;
};

/// The recipes known to this build, in registration order.
const std::vector<RecipeInfo> &getRecipes();
/// The recipe called `name`, or nullptr.
const RecipeInfo *lookupRecipe(llvm::StringRef name);
/// Adds a recipe pipeline: octet-raise-layers, octet-fp8-substitute with
/// `substituteOptions`, octet-fp8-report with `reportOptions` (skipped when
/// empty), then for training the non-FP8 layers lowered and
/// `trainingPipeline` (octet-autodiff, octet-optimizer), octet-fp8-expand, cse.
mlir::LogicalResult buildRecipePipeline(mlir::OpPassManager &pm, const std::string &substituteOptions,
                                        const std::string &reportOptions, const std::string &trainingPipeline = "");
/// A quoted pass option value (name="a b") keeps its quotes in MLIR 16; this
/// strips one pair.
inline void unquoteOption(std::string &v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
    v = v.substr(1, v.size() - 2);
}

/// Registers the recipe pipelines with MLIR's pass pipeline registry.
void registerRecipePipelines();

/// The kinds of copy octet-rematerialize-fp8-casts makes (its `sources` option, fp8-opt's
/// --rematerialize-fp8-sources): weight, activation, gelu, layernorm.
llvm::ArrayRef<llvm::StringRef> rematerializeFp8Sources();

/// fp8-opt --report for data-parallel plans: the all-reduces of a step and the payload bytes each
/// rank hands them, by element type, with what the FP8 gradients would take in float32.
void reportCollectives(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace octet

#endif // OCTET_PASSES_PASSES_H
