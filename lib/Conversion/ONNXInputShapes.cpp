//===- ONNXInputShapes.cpp - Symbolic input dimensions made static ---------===//
#include "ONNXInputShapes.h"

#include "mlir/IR/Diagnostics.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <sstream>

using namespace mlir;

namespace octet::detail {

static std::string dimsText(const onnx::TypeProto &t) {
  std::ostringstream os;
  os << "[";
  const char *sep = "";
  for (const auto &d : t.tensor_type().shape().dim()) {
    os << sep << (d.has_dim_value() ? std::to_string(d.dim_value()) : d.has_dim_param() ? d.dim_param() : "?");
    sep = ", ";
  }
  os << "]";
  return os.str();
}

LogicalResult bindInputShapes(const onnx::GraphProto &graph, const std::map<std::string, std::vector<int64_t>> &shapes,
                              Location loc, llvm::StringMap<std::vector<int64_t>> &inputs,
                              llvm::StringMap<int64_t> &symbols) {
  llvm::StringMap<std::string> boundBy; // symbol -> the input that gave its value
  for (auto &[name, dims] : shapes) {
    const onnx::ValueInfoProto *in = nullptr;
    for (const auto &i : graph.input())
      if (i.name() == name)
        in = &i;
    if (!in) {
      std::string names;
      for (const auto &i : graph.input())
        names += (names.empty() ? "" : ", ") + i.name();
      return emitError(loc) << "--input-shape: the model has no input '" << name << "'; its inputs: " << names;
    }
    if (!in->type().has_tensor_type() || !in->type().tensor_type().has_shape()) {
      inputs[name] = dims; // an input of unknown rank takes the given shape whole
      continue;
    }
    const auto &shape = in->type().tensor_type().shape();
    if (shape.dim_size() != int(dims.size()))
      return emitError(loc) << "--input-shape " << name << ": " << dims.size() << " dimensions given, the input has "
                            << shape.dim_size() << " " << dimsText(in->type());
    for (int k = 0; k < shape.dim_size(); ++k) {
      const auto &d = shape.dim(k);
      int64_t v = dims[size_t(k)];
      if (d.has_dim_value() && d.dim_value() != v)
        return emitError(loc) << "--input-shape " << name << ": dimension " << k << " is " << d.dim_value()
                              << " in the model " << dimsText(in->type()) << ", not " << v;
      if (!d.has_dim_param() || d.dim_param().empty())
        continue;
      auto [it, fresh] = symbols.try_emplace(d.dim_param(), v);
      if (!fresh && it->second != v)
        return emitError(loc) << "--input-shape: the dimension '" << d.dim_param() << "' is " << it->second << " in "
                              << boundBy[d.dim_param()] << " and " << v << " in " << name
                              << "; give it one value";
      boundBy.try_emplace(d.dim_param(), name);
    }
    inputs[name] = dims;
  }
  return success();
}

namespace {
/// Recursive descent over + - * // / % ( ) integers, symbols, Max(..) and Min(..).
struct DimParser {
  llvm::StringRef s;
  const llvm::StringMap<int64_t> &symbols;
  size_t i = 0;
  bool ok = true;

  void skip() {
    while (i < s.size() && s[i] == ' ')
      ++i;
  }
  bool eat(llvm::StringRef t) {
    skip();
    if (!s.substr(i).startswith(t))
      return false;
    i += t.size();
    return true;
  }
  int64_t fail() {
    ok = false;
    return 0;
  }
  int64_t primary() {
    skip();
    if (eat("(")) {
      int64_t v = sum();
      return eat(")") ? v : fail();
    }
    if (eat("-"))
      return -primary();
    size_t start = i;
    while (i < s.size() && (std::isalnum((unsigned char)s[i]) || s[i] == '_'))
      ++i;
    llvm::StringRef word = s.slice(start, i);
    if (word.empty())
      return fail();
    if (std::isdigit((unsigned char)word[0])) {
      int64_t v = 0;
      return word.getAsInteger(10, v) ? fail() : v;
    }
    if (word == "Max" || word == "Min") {
      if (!eat("("))
        return fail();
      int64_t v = sum();
      while (ok && eat(","))
        v = word == "Max" ? std::max(v, sum()) : std::min(v, sum());
      return eat(")") ? v : fail();
    }
    auto it = symbols.find(word);
    return it == symbols.end() ? fail() : it->second;
  }
  int64_t product() {
    int64_t v = primary();
    while (ok) {
      if (eat("*"))
        v *= primary();
      else if (eat("//") || eat("/")) {
        int64_t d = primary();
        v = d ? (v - ((v % d) + d) % d) / d : fail(); // floor division
      } else if (eat("%")) {
        int64_t d = primary();
        v = d ? ((v % d) + d) % d : fail();
      } else
        break;
    }
    return v;
  }
  int64_t sum() {
    int64_t v = product();
    while (ok) {
      if (eat("+"))
        v += product();
      else if (eat("-"))
        v -= product();
      else
        break;
    }
    return v;
  }
};
} // namespace

std::optional<int64_t> evaluateDim(llvm::StringRef expr, const llvm::StringMap<int64_t> &symbols) {
  if (symbols.empty())
    return std::nullopt;
  DimParser p{expr, symbols};
  int64_t v = p.sum();
  p.skip();
  if (!p.ok || p.i != expr.size() || v < 0)
    return std::nullopt;
  return v;
}

} // namespace octet::detail
