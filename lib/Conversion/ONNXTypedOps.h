//===- ONNXTypedOps.h - The importer's private helpers -*- C++ -*-===//
//
// Private to lib/Conversion: which ONNX op types become typed `onnx.*` ops (from which opset, with
// how many inputs and outputs), and the result types the importer infers where a model leaves a
// node's outputs untyped.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_LIB_CONVERSION_ONNXTYPEDOPS_H
#define OCTET_LIB_CONVERSION_ONNXTYPEDOPS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace onnx {
class ModelProto;
}

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

/// The indices ONNX Slice takes from an axis of length n: start, end (negative counted from the end,
/// clamped as the spec says for the step's sign) and step (nonzero).
llvm::SmallVector<int64_t> sliceIndices(int64_t n, int64_t start, int64_t end, int64_t step);

/// The shape of Unsqueeze (`unsqueeze`) or Squeeze of `in` by `axes` (negative counted from the end;
/// Squeeze with no axes drops every 1), or nullopt where the axes are invalid for it.
std::optional<llvm::SmallVector<int64_t>> squeezedShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes,
                                                         bool unsqueeze);

/// A single-result node evaluated at import, where that is possible now (ONNXShapeFold.cpp): a Shape
/// or Size of a statically shaped operand, or a shape computation over small constants. Null when
/// it is not.
mlir::DenseElementsAttr foldNode(mlir::MLIRContext *ctx, llvm::StringRef opType, llvm::ArrayRef<mlir::Value> operands,
                                 llvm::ArrayRef<mlir::NamedAttribute> attrs);

/// The importer's rewrites of one node (ONNXShapeFold.cpp): with `fold`, a node foldNode evaluates
/// becomes an onnx.Constant; IsNaN(x) becomes Not(Equal(x, x)); a scalar Unsqueeze or Squeeze axis
/// becomes a 1-D constant (in `operands`, and null is returned: the node is still built). Returns
/// the value that replaces the node's result, or null.
mlir::Value rewriteAtImport(mlir::OpBuilder &builder, mlir::Location loc, llvm::StringRef opType,
                            llvm::SmallVectorImpl<mlir::Value> &operands, llvm::ArrayRef<mlir::NamedAttribute> attrs,
                            bool fold);

/// ONNX's training IR (TrainingInfoProto: an algorithm graph with a Gradient node and an optimizer
/// node) as Octet's training form in `out`: the main graph plus the algorithm nodes the loss needs,
/// the loss first; `spec` gets what the nodes asked for (ONNXTrainingForm.cpp).
mlir::LogicalResult trainingForm(const onnx::ModelProto &in, onnx::ModelProto &out, mlir::MLIRContext *ctx,
                                 mlir::Location loc, mlir::DictionaryAttr &spec);

} // namespace octet::detail

#endif
