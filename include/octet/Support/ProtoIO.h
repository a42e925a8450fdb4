//===- ProtoIO.h - ONNX protobuf I/O without exceptions escaping ----------===//
//
// The only code that calls into libonnx and protobuf parsing. It is built
// with exceptions (ONNX's checker and shape inference throw) and never
// includes LLVM headers; every function reports failure through a message.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_SUPPORT_PROTOIO_H
#define OCTET_SUPPORT_PROTOIO_H

#include <onnx/onnx_pb.h>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace octet::proto {

/// Parses a serialized ModelProto. Fails on bytes that are not a ModelProto,
/// on truncation, and on a model without a graph.
bool parseModel(const void *data, size_t size, onnx::ModelProto &model, std::string &error);

/// Reads and parses a model file.
bool loadModelFile(const std::string &path, onnx::ModelProto &model, std::string &error);

/// Runs ONNX's shape inference in place when this libonnx knows every opset
/// the model imports (an older libonnx would apply old op semantics). Returns
/// false with a reason when it was skipped or failed; the model is unchanged then.
bool inferShapes(onnx::ModelProto &model, std::string &reason);

/// Serializes a model; fails for models over protobuf's 2 GiB limit.
bool serializeModel(const onnx::ModelProto &model, std::string &bytes, std::string &error);

/// The graph's metadata_props (GraphProto field 16, newer than this libonnx, so read from the
/// message's unknown fields): key/value pairs such as the torch.export graph signature that
/// torch.onnx.export (dynamo) records. Entries that do not parse are skipped.
std::vector<std::pair<std::string, std::string>> graphMetadata(const onnx::GraphProto &graph);
/// A node's metadata_props (NodeProto field 9, read the same way): what torch.onnx.export records
/// per node, such as `pkg.torch.onnx.name_scopes` (the modules the node was traced in).
std::vector<std::pair<std::string, std::string>> nodeMetadata(const onnx::NodeProto &node);
/// Writes the graph's back (as the same field), for a model written out again.
void setGraphMetadata(onnx::GraphProto &graph, const std::vector<std::pair<std::string, std::string>> &entries);
void setNodeMetadata(onnx::NodeProto &node, const std::vector<std::pair<std::string, std::string>> &entries);

/// Writes a file atomically: a temporary beside it, fsync, then rename.
bool writeFileAtomically(const std::string &path, const std::string &bytes, std::string &error);

/// What a streamed writer gives its bytes to: `put` appends, `patch` overwrites bytes already put
/// (a checksum known at the end). Each returns false after a failed write.
struct FileSink {
  std::function<bool(const char *data, size_t n)> put;
  std::function<bool(uint64_t offset, const char *data, size_t n)> patch;
};
/// The same, the bytes written by `write` through the sink, one piece at a time; `write` returns
/// false (with `error` set) to abandon the file.
bool writeFileAtomically(const std::string &path, const std::function<bool(const FileSink &, std::string &error)> &write,
                         std::string &error);

} // namespace octet::proto

#endif // OCTET_SUPPORT_PROTOIO_H
