//===- ONNX.h - The onnx dialect ------------------------------------------===//
#ifndef OCTET_DIALECT_ONNX_IR_ONNX_H
#define OCTET_DIALECT_ONNX_IR_ONNX_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <string>

#include "octet/Dialect/ONNX/IR/ONNXOpsDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "octet/Dialect/ONNX/IR/ONNXOpsTypes.h.inc"

#define GET_OP_CLASSES
#include "octet/Dialect/ONNX/IR/ONNXOps.h.inc"

namespace octet::onnx_dialect {
/// Module attributes that hold ModelProto fields outside the graph.
constexpr llvm::StringLiteral kIrVersionAttr = "onnx.ir_version";
constexpr llvm::StringLiteral kOpsetImportAttr = "onnx.opset_import";
constexpr llvm::StringLiteral kProducerNameAttr = "onnx.producer_name";
constexpr llvm::StringLiteral kProducerVersionAttr = "onnx.producer_version";
constexpr llvm::StringLiteral kDomainAttr = "onnx.domain";
constexpr llvm::StringLiteral kModelVersionAttr = "onnx.model_version";
constexpr llvm::StringLiteral kDocStringAttr = "onnx.doc_string";
constexpr llvm::StringLiteral kMetadataAttr = "onnx.metadata_props";
/// The graph's metadata_props (the torch.export graph signature of a dynamo export, for one).
constexpr llvm::StringLiteral kGraphMetadataAttr = "onnx.graph_metadata_props";
constexpr llvm::StringLiteral kGraphNameAttr = "onnx.graph_name";
/// A node's `pkg.torch.onnx.name_scopes` metadata (torch.onnx.export, dynamo), kept as written: the
/// Python list of the module paths the node was traced in, then the node's own FX name.
constexpr llvm::StringLiteral kNameScopesAttr = "onnx.name_scopes";
/// The module an op was traced in, from its kNameScopesAttr ("model.layers.0.self_attn.q_proj"), or
/// "" where the op has none or it names no module.
std::string getModulePath(mlir::Operation *op);
/// Argument/result attributes: the ONNX value name and symbolic dim names.
constexpr llvm::StringLiteral kNameAttr = "onnx.name";
constexpr llvm::StringLiteral kDimParamsAttr = "onnx.dim_params";
/// Argument attribute: an initializer that is also a graph input (a default).
constexpr llvm::StringLiteral kDefaultAttr = "onnx.default";
/// The function a model is imported into.
constexpr llvm::StringLiteral kMainGraphName = "main_graph";

/// The default opset version of a domain in the module ("" is ai.onnx), or 0.
int64_t getOpsetVersion(mlir::Operation *moduleOrNested, llvm::StringRef domain = "");

/// ONNX TensorProto.DataType code <-> MLIR element type (null / 0 if none).
mlir::Type getElementTypeForOnnxCode(mlir::MLIRContext *ctx, int64_t code);
int64_t getOnnxCodeForElementType(mlir::Type type);
/// "FLOAT", "FLOAT8E4M3FN", ... for diagnostics.
llvm::StringRef getOnnxTypeName(int64_t code);

/// The ONNX node name an op came from (its NameLoc, also inside a FusedLoc), or "".
std::string getNodeName(mlir::Operation *op);

/// The little-endian row-major bytes of a dense or resource tensor, splats
/// expanded and i1 stored one byte per element (ONNX raw_data). Fails for
/// strings, sparse tensors and resources without data.
mlir::LogicalResult getRawTensorBytes(mlir::ElementsAttr attr, std::string &out);

/// The value of `v` when an onnx.Constant (any value_* form) or an
/// onnx.initializer defines it; null otherwise.
mlir::DenseElementsAttr getConstantValue(mlir::Value v);
/// The elements of a constant integer tensor, or std::nullopt.
std::optional<llvm::SmallVector<int64_t>> getConstantInts(mlir::Value v);
} // namespace octet::onnx_dialect

#endif // OCTET_DIALECT_ONNX_IR_ONNX_H
