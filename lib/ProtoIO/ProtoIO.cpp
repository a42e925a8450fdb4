//===- ProtoIO.cpp - ONNX protobuf I/O (built with exceptions) ------------===//
#include "octet/Support/ProtoIO.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace octet::proto {

bool parseModel(const void *data, size_t size, onnx::ModelProto &model, std::string &error) {
  if (size == 0) {
    error = "the file is empty, not an ONNX model";
    return false;
  }
  if (size > static_cast<size_t>(INT_MAX)) {
    error = "the model is over 2 GiB; store its weights as external data";
    return false;
  }
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t *>(data),
                                            static_cast<int>(size));
  in.SetTotalBytesLimit(INT_MAX);
  if (!model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    error = "not a valid ONNX model (protobuf parse failed: the file is truncated, corrupt or "
            "not an ONNX ModelProto)";
    return false;
  }
  if (!model.has_graph()) {
    error = "not a valid ONNX model: it has no graph (truncated or not an ONNX ModelProto)";
    return false;
  }
  if (model.opset_import_size() == 0 && model.ir_version() >= 3) {
    error = "not a valid ONNX model: it imports no opset (truncated?)";
    return false;
  }
  return true;
}

bool loadModelFile(const std::string &path, onnx::ModelProto &model, std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    error = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    error = "is a directory, not an ONNX model";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parseModel(bytes.data(), bytes.size(), model, error);
}

bool inferShapes(onnx::ModelProto &model, std::string &reason) {
  const auto &ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  for (const auto &opset : model.opset_import()) {
    std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    auto it = ranges.find(domain);
    if (it == ranges.end()) {
      reason = "shape inference skipped: unknown domain '" + domain + "'";
      return false;
    }
    if (opset.version() > it->second.second) {
      reason = "shape inference skipped: opset " + std::to_string(opset.version()) +
               " of domain '" + domain + "' is newer than libonnx's " +
               std::to_string(it->second.second);
      return false;
    }
  }
  try {
    onnx::ModelProto copy = model;
    onnx::shape_inference::InferShapes(copy);
    model.Swap(&copy);
    return true;
  } catch (const std::exception &e) {
    reason = std::string("shape inference failed: ") + e.what();
    return false;
  }
}

bool serializeModel(const onnx::ModelProto &model, std::string &bytes, std::string &error) {
  if (model.ByteSizeLong() > static_cast<size_t>(INT_MAX)) {
    error = "the model is over protobuf's 2 GiB limit";
    return false;
  }
  if (!model.SerializeToString(&bytes)) {
    error = "protobuf serialization failed";
    return false;
  }
  return true;
}

/// StringStringEntryProto entries of field `number`, read from a message's unknown fields (fields
/// newer than this libonnx); entries that do not parse are skipped.
static std::vector<std::pair<std::string, std::string>> unknownMetadata(const google::protobuf::Message &msg,
                                                                        int number) {
  std::vector<std::pair<std::string, std::string>> out;
  const google::protobuf::UnknownFieldSet &unknown = msg.GetReflection()->GetUnknownFields(msg);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &f = unknown.field(i);
    if (f.number() != number || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited()))
      out.emplace_back(entry.key(), entry.value());
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> graphMetadata(const onnx::GraphProto &graph) {
  constexpr int kGraphMetadataProps = 16; // onnx.proto (IR version 10): GraphProto.metadata_props
  return unknownMetadata(graph, kGraphMetadataProps);
}

std::vector<std::pair<std::string, std::string>> nodeMetadata(const onnx::NodeProto &node) {
  constexpr int kNodeMetadataProps = 9; // onnx.proto (IR version 10): NodeProto.metadata_props
  return unknownMetadata(node, kNodeMetadataProps);
}

static void setUnknownMetadata(google::protobuf::Message &msg, int number,
                               const std::vector<std::pair<std::string, std::string>> &entries) {
  google::protobuf::UnknownFieldSet *unknown = msg.GetReflection()->MutableUnknownFields(&msg);
  for (const auto &[k, v] : entries) {
    onnx::StringStringEntryProto entry;
    entry.set_key(k);
    entry.set_value(v);
    unknown->AddLengthDelimited(number, entry.SerializeAsString());
  }
}

void setGraphMetadata(onnx::GraphProto &graph, const std::vector<std::pair<std::string, std::string>> &entries) {
  setUnknownMetadata(graph, 16, entries);
}

void setNodeMetadata(onnx::NodeProto &node, const std::vector<std::pair<std::string, std::string>> &entries) {
  setUnknownMetadata(node, 9, entries);
}

bool writeFileAtomically(const std::string &path, const std::function<bool(const FileSink &, std::string &)> &write,
                         std::string &error) {
  std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) {
    error = std::string("cannot create a temporary file beside it: ") + std::strerror(errno);
    return false;
  }
  // Every byte of [p, p + left) at `offset`, or at the file's end (offset < 0), through EINTR and
  // short writes.
  auto writeAll = [&](int64_t offset, const char *p, size_t left) {
    while (left > 0) {
      ssize_t n = offset < 0 ? ::write(fd, p, left) : ::pwrite(fd, p, left, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        error = std::string("write failed: ") + std::strerror(errno);
        return false;
      }
      p += n;
      left -= static_cast<size_t>(n);
      if (offset >= 0)
        offset += n;
    }
    return true;
  };
  FileSink sink;
  sink.put = [&](const char *p, size_t n) { return writeAll(-1, p, n); };
  sink.patch = [&](uint64_t offset, const char *p, size_t n) { return writeAll(int64_t(offset), p, n); };
  if (!write(sink, error)) {
    ::close(fd);
    ::unlink(name.data());
    return false;
  }
  ::fchmod(fd, 0644);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    error = std::string("fsync/close failed: ") + std::strerror(errno);
    ::unlink(name.data());
    return false;
  }
  if (::rename(name.data(), path.c_str()) != 0) {
    error = std::string("rename failed: ") + std::strerror(errno);
    ::unlink(name.data());
    return false;
  }
  return true;
}

bool writeFileAtomically(const std::string &path, const std::string &bytes, std::string &error) {
  return writeFileAtomically(
      path, [&](const FileSink &sink, std::string &) { return sink.put(bytes.data(), bytes.size()); }, error);
}

} // namespace octet::proto
