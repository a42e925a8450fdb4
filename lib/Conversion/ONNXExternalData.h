//===- ONNXExternalData.h - A tensor's bytes from an external data file -*- C++ -*-===//
#ifndef OCTET_LIB_CONVERSION_ONNXEXTERNALDATA_H
#define OCTET_LIB_CONVERSION_ONNXEXTERNALDATA_H

#include "octet/Conversion/ONNXImport.h"

#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"

#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <string>

namespace onnx {
class TensorProto;
}

namespace octet {

/// The bytes of a tensor stored in an external data file (its `location`, relative to the model's
/// directory, opts.baseDir; `offset` and `length`); a failure is emitted at `loc`, naming the tensor.
/// A tensor's bytes in its external data file, mapped (only its own range), with what keeps the
/// mapping alive.
struct ExternalBytes {
  std::unique_ptr<llvm::MemoryBuffer> file;
  llvm::StringRef bytes;
};
mlir::FailureOr<ExternalBytes> mapExternalData(const onnx::TensorProto &t, const ImportOptions &opts,
                                              mlir::Location loc);
/// The same bytes, copied.
mlir::FailureOr<std::string> readExternalData(const onnx::TensorProto &t, const ImportOptions &opts,
                                              mlir::Location loc);

} // namespace octet

#endif
