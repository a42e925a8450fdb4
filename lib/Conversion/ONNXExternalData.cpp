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
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <cstdlib>

using namespace mlir;

FailureOr<octet::ExternalBytes> octet::mapExternalData(const onnx::TensorProto &t, const ImportOptions &opts,
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
  uint64_t size = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, size))
    return emitError(loc) << "tensor '" << t.name() << "': cannot read external data file '" << path
                          << "': " << ec.message() << " (keep it next to the model)",
           failure();
  if (offset > size || (length >= 0 && offset + uint64_t(length) > size))
    return emitError(loc) << "tensor '" << t.name() << "': external data file '" << path
                          << "' is too short (" << size << " bytes) for offset " << offset << " and length "
                          << length,
           failure();
  uint64_t n = length < 0 ? size - offset : uint64_t(length);
  // Only the tensor's own bytes are mapped: a model's weights are never all in memory at once.
  auto buf = llvm::MemoryBuffer::getFileSlice(path, n, offset, /*IsVolatile=*/false);
  if (!buf)
    return emitError(loc) << "tensor '" << t.name() << "': cannot read external data file '" << path
                          << "': " << buf.getError().message() << " (keep it next to the model)",
           failure();
  ExternalBytes out;
  out.bytes = (*buf)->getBuffer();
  out.file = std::move(*buf);
  return out;
}

FailureOr<std::string> octet::readExternalData(const onnx::TensorProto &t, const ImportOptions &opts,
                                           Location loc) {
  FailureOr<ExternalBytes> mapped = mapExternalData(t, opts, loc);
  if (failed(mapped))
    return failure();
  return mapped->bytes.str();
}
