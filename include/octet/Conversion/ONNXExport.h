//===- ONNXExport.h - MLIR (onnx dialect) -> onnx::ModelProto -------------===//
#ifndef OCTET_CONVERSION_ONNXEXPORT_H
#define OCTET_CONVERSION_ONNXEXPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include <string>

namespace onnx {
class ModelProto;
}

namespace octet {

struct ExportOptions {
  /// The function to export; "" picks `main_graph` or the only function.
  std::string funcName;
};

/// Converts a module in the onnx dialect into a ModelProto. Ops with no ONNX
/// form are reported as errors at their location.
mlir::LogicalResult exportToOnnx(mlir::ModuleOp module, onnx::ModelProto &model,
                                 const ExportOptions &options = {});

/// Exports and serializes.
mlir::LogicalResult exportToOnnxBytes(mlir::ModuleOp module, std::string &bytes,
                                      const ExportOptions &options = {});

} // namespace octet

#endif // OCTET_CONVERSION_ONNXEXPORT_H
