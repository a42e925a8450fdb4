//===- ImportChecks.h - What fp8-opt refuses right after import -*- C++ -*-===//
#ifndef OCTET_TOOLS_IMPORTCHECKS_H
#define OCTET_TOOLS_IMPORTCHECKS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <map>
#include <string>
#include <vector>

namespace octet {
/// The newest default-domain ONNX opset whose semantics the importer models.
constexpr int64_t kMaxOnnxOpset = 23;
/// Refuses an imported model that no backend could run: an opset newer than kMaxOnnxOpset, and
/// (with `checkOps`) untyped nodes whose op type the runtime has no kernel for. Emits one error
/// located at the node.
mlir::LogicalResult checkImportedModel(mlir::ModuleOp module, bool checkOps);

/// Part of checkImportedModel for plans: untyped nodes whose inputs are static but whose output
/// shape the importer could not infer, and tensors past 2^40 bytes; each names the node.
mlir::LogicalResult checkShapes(mlir::ModuleOp module);
/// Adds `--input-shape` specs ("NAME=AxB", dimensions >= 1, each input once) to `shapes`; returns
/// the first spec that is not valid, or "" when all are.
std::string parseInputShapes(llvm::ArrayRef<std::string> specs, std::map<std::string, std::vector<int64_t>> &shapes);
} // namespace octet

#endif // OCTET_TOOLS_IMPORTCHECKS_H
