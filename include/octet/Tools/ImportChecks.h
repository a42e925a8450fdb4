//===- ImportChecks.h - What fp8-opt refuses right after import -*- C++ -*-===//
#ifndef OCTET_TOOLS_IMPORTCHECKS_H
#define OCTET_TOOLS_IMPORTCHECKS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace octet {
/// The newest default-domain ONNX opset whose semantics the importer models.
constexpr int64_t kMaxOnnxOpset = 23;
/// Refuses an imported model that no backend could run: an opset newer than kMaxOnnxOpset, and
/// (with `checkOps`) untyped nodes whose op type the runtime has no kernel for. Emits one error
/// located at the node.
mlir::LogicalResult checkImportedModel(mlir::ModuleOp module, bool checkOps);
} // namespace octet

#endif // OCTET_TOOLS_IMPORTCHECKS_H
