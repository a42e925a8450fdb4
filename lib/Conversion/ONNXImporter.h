//===- ONNXImporter.h - The ONNX importer's state (private) -----*- C++ -*-===//
//
// The class that walks an onnx::ModelProto into the onnx dialect, shared by the files that define
// its parts: ONNXImport.cpp (graphs, nodes, functions, the entry points) and ONNXImportTensors.cpp
// (types, tensors and attributes).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_LIB_CONVERSION_ONNXIMPORTER_H
#define OCTET_LIB_CONVERSION_ONNXIMPORTER_H

#include "octet/Conversion/ONNXImport.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace octet::detail {

using namespace mlir;
namespace ox = octet::onnx_dialect;


/// Names visible in a graph: its own values, then its enclosing graphs'.
struct Scope {
  Scope *parent = nullptr;
  llvm::StringMap<Value> values;
  Value lookup(llvm::StringRef name) const {
    for (const Scope *s = this; s; s = s->parent) {
      auto it = s->values.find(name);
      if (it != s->values.end())
        return it->second;
    }
    return {};
  }
};

/// How a function call's formal names map to the caller's values.
struct InlineFrame {
  const onnx::NodeProto *caller = nullptr;
  std::string prefix;
};

class Importer {
public:
  Importer(MLIRContext *ctx, const onnx::ModelProto &model, const ImportOptions &opts)
      : ctx(ctx), model(model), opts(opts), builder(ctx) {
    fileLoc = FileLineColLoc::get(ctx, opts.fileName, 0, 0);
  }

  OwningOpRef<ModuleOp> run();

private:
  // Types and tensors.
  Type convertType(const onnx::TypeProto &type, Location loc, SmallVectorImpl<Attribute> *dimParams);
  // --input-shape: the inputs' static shapes, and the values of the symbols they name.
  llvm::StringMap<std::vector<int64_t>> inputDims;
  llvm::StringMap<int64_t> symbols;
  Type elementType(int32_t code, Location loc, llvm::StringRef what);
  FailureOr<ElementsAttr> convertTensor(const onnx::TensorProto &t, Location loc, bool allowResource);
  FailureOr<Attribute> convertAttribute(const onnx::AttributeProto &a, Location loc);

  // Graphs and nodes.
  LogicalResult importGraph(const onnx::GraphProto &graph, Block *block, Scope &scope,
                            const llvm::StringMap<int64_t> &opsets, SmallVectorImpl<Value> *outputs);
  LogicalResult importNode(const onnx::NodeProto &node, Scope &scope,
                           const llvm::StringMap<int64_t> &opsets,
                           const llvm::StringMap<const onnx::TypeProto *> &valueTypes,
                           const std::string &namePrefix,
                           const onnx::NodeProto *caller);
  void keepNameScopes(const onnx::NodeProto &node, Operation *op);
  LogicalResult inlineFunction(const onnx::FunctionProto &fn, const onnx::NodeProto &node,
                               Scope &scope, const std::string &namePrefix);
  LogicalResult sortNodes(const Scope &scope,
                          llvm::ArrayRef<const onnx::NodeProto *> nodes,
                          std::vector<const onnx::NodeProto *> &order,
                          const llvm::StringSet<> &graphInputs);

  Location nodeLoc(const onnx::NodeProto &node, llvm::StringRef prefix, size_t index) {
    std::string name = node.name().empty()
                           ? (node.op_type() + "_" + std::to_string(index))
                           : node.name();
    return NameLoc::get(StringAttr::get(ctx, prefix.str() + name), fileLoc);
  }
  Value noneValue() {
    return builder.create<ox::NoneOp>(fileLoc, NoneType::get(ctx)).getResult();
  }
  const onnx::FunctionProto *findFunction(const onnx::NodeProto &node) const {
    auto it = functions.find(node.domain() + "\x1f" + node.op_type());
    return it == functions.end() ? nullptr : it->second;
  }

  MLIRContext *ctx;
  const onnx::ModelProto &model;
  const ImportOptions &opts;
  OpBuilder builder;
  Location fileLoc = UnknownLoc::get(ctx);
  llvm::StringMap<const onnx::FunctionProto *> functions;
  size_t resourceCounter = 0;
  unsigned inlineDepth = 0;
  size_t nodeCounter = 0;
};

} // namespace octet::detail

#endif
