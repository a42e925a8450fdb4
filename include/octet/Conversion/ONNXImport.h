//===- ONNXImport.h - onnx::ModelProto -> MLIR (onnx dialect) -------------===//
#ifndef OCTET_CONVERSION_ONNXIMPORT_H
#define OCTET_CONVERSION_ONNXIMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include <map>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace octet {

/// On the module of a model with a TrainingInfoProto: what its training ops asked for
/// ({loss, params, optimizer, and the optimizer node's float/string attributes}).
constexpr llvm::StringLiteral kOnnxTrainingAttr = "octet.onnx_training";

struct ImportOptions {
  /// Name of the function the main graph becomes.
  std::string funcName = "main_graph";
  /// Directory that external data locations are relative to ("" = cwd).
  std::string baseDir;
  /// File name used in diagnostics.
  std::string fileName = "<model>";
  /// Run ONNX shape inference first (only where libonnx knows the opsets).
  bool inferShapes = true;
  /// Import every node as the generic `onnx.node` (no typed ops).
  bool genericOnly = false;
  /// Fold shape computations into constants where the shapes are static (fp8-opt --fold-shapes):
  /// a Shape of a static tensor, and small integer and float ops over constants.
  bool foldShapes = true;
  /// Initializers whose external data file does not exist import as zeros
  /// (shape and type only): benchmark graphs whose weights the runtime
  /// creates (fp8-opt --absent-weights zeros, fp8-run --init-params).
  bool absentWeightsAsZeros = false;
  /// Static shapes for graph inputs with symbolic dimensions (fp8-opt --input-shape NAME=AxB): each
  /// symbol (dim_param) the inputs name takes its value wherever the model uses it.
  std::map<std::string, std::vector<int64_t>> inputShapes;
};

/// Imports a parsed model. Errors are emitted as MLIR diagnostics located at
/// the file and node; returns null on failure.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxModel(const onnx::ModelProto &model,
                                                  mlir::MLIRContext *context,
                                                  const ImportOptions &options);

/// Parses serialized ModelProto bytes and imports them.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxBuffer(llvm::StringRef bytes,
                                                   mlir::MLIRContext *context,
                                                   const ImportOptions &options);

/// Reads a model file (external data relative to it) and imports it.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(llvm::StringRef path, mlir::MLIRContext *context,
                                                 ImportOptions options = {});

} // namespace octet

#endif // OCTET_CONVERSION_ONNXIMPORT_H
