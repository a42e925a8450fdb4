//===- ONNXTypedOps.h - The importer's typed-op table and result types -*- C++ -*-===//
//
// Private to lib/Conversion: which ONNX op types become typed `onnx.*` ops (from which opset, with
// how many inputs and outputs), and the result types the importer infers where a model leaves a
// node's outputs untyped.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_LIB_CONVERSION_ONNXTYPEDOPS_H
#define OCTET_LIB_CONVERSION_ONNXTYPEDOPS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/StringMap.h"

namespace octet::detail {

/// Typed ops: ONNX op_type -> (first opset whose semantics the op models,
/// fixed input count or -1 for variadic, fixed output count or -1).
struct TypedOpInfo {
  int64_t sinceVersion;
  int numInputs;
  int numOutputs;
};

const llvm::StringMap<TypedOpInfo> &typedOps();

/// Result types for nodes whose outputs the model leaves untyped (exporters
/// often omit value_info). Conservative: returns null when unsure, and the
/// value stays `tensor<*x!onnx.unknown>`.
mlir::Type inferResultType(mlir::MLIRContext *ctx, llvm::StringRef opType, llvm::ArrayRef<mlir::Value> operands,
                           llvm::ArrayRef<mlir::NamedAttribute> attrs, unsigned index);

} // namespace octet::detail

#endif
