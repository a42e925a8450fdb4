//===- ONNXExternalData.cpp - A tensor's bytes from an external data file -===//
//
// ONNX models over 2 GB keep tensors in files beside the model (TensorProto external_data:
// location, offset, length). The location must stay inside the model's directory; a file that is
// missing or too short is one error naming the tensor and the file.
//
//===----------------------------------------------------------------------===//
#include "ONNXExternalData.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <cstdlib>

using namespace mlir;

FailureOr<std::string> octet::readExternalData(const onnx::TensorProto &t, const ImportOptions &opts,
                                           Location loc) {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::strtoull(kv.value().c_str(), nullptr, 10);
    else if (kv.key() == "length")
      length = std::strtoll(kv.value().c_str(), nullptr, 10);
  }
  if (location.empty())
    return emitError(loc) << "tensor '" << t.name() << "' has external data without a location",
           failure();
  if (llvm::sys::path::is_absolute(location) ||
      llvm::any_of(llvm::make_range(llvm::sys::path::begin(location), llvm::sys::path::end(location)),
                   [](llvm::StringRef c) { return c == ".."; }))
    return emitError(loc) << "tensor '" << t.name() << "': external data location '" << location
                          << "' must be a relative path inside the model's directory",
           failure();
  llvm::SmallString<256> path(opts.baseDir);
  llvm::sys::path::append(path, location);
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return emitError(loc) << "tensor '" << t.name() << "': cannot read external data file '"
                          << path << "': " << buf.getError().message()
                          << " (keep it next to the model)",
           failure();
  llvm::StringRef data = (*buf)->getBuffer();
  if (offset > data.size() || (length >= 0 && offset + length > data.size()))
    return emitError(loc) << "tensor '" << t.name() << "': external data file '" << path
                          << "' is too short (" << data.size() << " bytes) for offset " << offset
                          << " and length " << length,
           failure();
  return data.substr(offset, length < 0 ? llvm::StringRef::npos : size_t(length)).str();
}
