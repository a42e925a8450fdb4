//===- ONNXExport.cpp - MLIR (onnx dialect) -> onnx::ModelProto -----------===//
#include "octet/Conversion/ONNXExport.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Support/ProtoIO.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

class Exporter {
public:
  explicit Exporter(ModuleOp module) : module(module) {}
  LogicalResult run(func::FuncOp func, onnx::ModelProto &model);

private:
  LogicalResult exportGraph(Block &block, onnx::GraphProto &graph, ArrayRef<std::string> inputNames,
                            ArrayRef<std::string> outputNames, ArrayRef<Attribute> outputDims,
                            bool isMain);
  LogicalResult exportOp(Operation &op, onnx::GraphProto &graph);
  LogicalResult exportType(Type type, onnx::TypeProto &proto, Location loc, ArrayAttr dimParams = {});
  LogicalResult exportTensor(ElementsAttr attr, onnx::TensorProto &t, Location loc);
  LogicalResult exportAttribute(StringRef name, Attribute attr, onnx::AttributeProto &a, Location loc);

  std::string freshName(StringRef hint) {
    std::string base = hint.empty() ? "v" : hint.str();
    std::string name = base;
    for (unsigned i = 1; !used.insert(name).second; ++i)
      name = base + "_" + std::to_string(i);
    return name;
  }
  /// The ONNX name of a value, assigning a fresh one on first sight.
  std::string nameOf(Value v) {
    auto it = names.find(v);
    if (it != names.end())
      return it->second;
    std::string hint;
    if (auto r = v.dyn_cast<OpResult>())
      if (auto given = r.getOwner()->getAttrOfType<ArrayAttr>("octet.result_names"))
        if (r.getResultNumber() < given.size())
          if (auto s = given[r.getResultNumber()].dyn_cast<StringAttr>())
            hint = s.str();
    std::string n = freshName(hint.empty() ? "v" + std::to_string(counter++) : hint);
    names[v] = n;
    return n;
  }
  /// Node names are unique in a graph; ops made from one node share its name.
  std::string freshNodeName(const std::string &hint) {
    std::string name = hint;
    for (unsigned i = 1; !usedNodes.insert(name).second; ++i)
      name = hint + "_" + std::to_string(i);
    return name;
  }
  llvm::StringSet<> usedNodes;

  ModuleOp module;
  llvm::DenseMap<Value, std::string> names;
  llvm::StringSet<> used;
  unsigned counter = 0;
};

LogicalResult Exporter::exportType(Type type, onnx::TypeProto &proto, Location loc, ArrayAttr dimParams) {
  if (auto seq = type.dyn_cast<ox::SeqType>())
    return exportType(seq.getElementType(), *proto.mutable_sequence_type()->mutable_elem_type(), loc);
  if (auto opt = type.dyn_cast<ox::OptType>())
    return exportType(opt.getElementType(), *proto.mutable_optional_type()->mutable_elem_type(), loc);
  auto shaped = type.dyn_cast<TensorType>();
  if (!shaped)
    return emitError(loc) << "type " << type << " has no ONNX form";
  auto *tt = proto.mutable_tensor_type();
  Type elt = shaped.getElementType();
  if (elt.isa<ox::UnknownType>()) {
    proto.clear_tensor_type();
    return success();
  }
  int64_t code = ox::getOnnxCodeForElementType(elt);
  if (code == 0)
    return emitError(loc) << "element type " << elt << " has no ONNX form";
  tt->set_elem_type(static_cast<int32_t>(code));
  if (auto ranked = shaped.dyn_cast<RankedTensorType>()) {
    auto *shape = tt->mutable_shape();
    for (auto [i, d] : llvm::enumerate(ranked.getShape())) {
      auto *dim = shape->add_dim();
      StringRef param;
      if (dimParams && i < dimParams.size())
        param = dimParams[i].cast<StringAttr>().getValue();
      if (!ShapedType::isDynamic(d))
        dim->set_dim_value(d);
      else if (!param.empty())
        dim->set_dim_param(param.str());
    }
  }
  return success();
}

LogicalResult Exporter::exportTensor(ElementsAttr attr, onnx::TensorProto &t, Location loc) {
  auto type = attr.getType().cast<ShapedType>();
  for (int64_t d : type.getShape())
    t.add_dims(d);
  Type elt = type.getElementType();
  int64_t code = ox::getOnnxCodeForElementType(elt);
  if (elt.isa<ox::StringType>())
    code = onnx::TensorProto::STRING;
  if (code == 0)
    return emitError(loc) << "element type " << elt << " has no ONNX form";
  t.set_data_type(static_cast<int32_t>(code));

  if (auto dense = attr.dyn_cast<DenseElementsAttr>(); dense && code == onnx::TensorProto::STRING) {
    for (StringRef s : dense.getValues<StringRef>())
      t.add_string_data(s.str());
    return success();
  }
  std::string raw;
  if (failed(ox::getRawTensorBytes(attr, raw))) {
    if (attr.isa<DenseResourceElementsAttr>())
      return emitError(loc) << "tensor '" << t.name() << "' refers to a resource blob with no data";
    return emitError(loc) << "only dense and resource tensors can be exported";
  }
  t.set_raw_data(std::move(raw));
  return success();
}

LogicalResult Exporter::exportAttribute(StringRef name, Attribute attr, onnx::AttributeProto &a,
                                        Location loc) {
  a.set_name(name.str());
  if (auto i = attr.dyn_cast<IntegerAttr>()) {
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(i.getValue().getSExtValue());
  } else if (auto f = attr.dyn_cast<FloatAttr>()) {
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(static_cast<float>(f.getValueAsDouble()));
  } else if (auto s = attr.dyn_cast<StringAttr>()) {
    a.set_type(onnx::AttributeProto::STRING);
    a.set_s(s.getValue().str());
  } else if (auto is = attr.dyn_cast<DenseI64ArrayAttr>()) {
    a.set_type(onnx::AttributeProto::INTS);
    for (int64_t v : is.asArrayRef())
      a.add_ints(v);
  } else if (auto fs = attr.dyn_cast<DenseF32ArrayAttr>()) {
    a.set_type(onnx::AttributeProto::FLOATS);
    for (float v : fs.asArrayRef())
      a.add_floats(v);
  } else if (auto sp = attr.dyn_cast<SparseElementsAttr>()) {
    a.set_type(onnx::AttributeProto::SPARSE_TENSOR);
    auto *st = a.mutable_sparse_tensor();
    for (int64_t d : sp.getType().getShape())
      st->add_dims(d);
    if (failed(exportTensor(sp.getValues(), *st->mutable_values(), loc)) ||
        failed(exportTensor(sp.getIndices(), *st->mutable_indices(), loc)))
      return failure();
  } else if (auto e = attr.dyn_cast<ElementsAttr>()) {
    a.set_type(onnx::AttributeProto::TENSOR);
    return exportTensor(e, *a.mutable_t(), loc);
  } else if (auto t = attr.dyn_cast<TypeAttr>()) {
    a.set_type(onnx::AttributeProto::TYPE_PROTO);
    return exportType(t.getValue(), *a.mutable_tp(), loc);
  } else if (auto arr = attr.dyn_cast<ArrayAttr>()) {
    // Lists of strings, tensors, sparse tensors or types (empty: strings).
    Attribute first = arr.empty() ? Attribute() : arr[0];
    if (!first || first.isa<StringAttr>()) {
      a.set_type(onnx::AttributeProto::STRINGS);
      for (Attribute x : arr)
        a.add_strings(x.cast<StringAttr>().getValue().str());
    } else if (first.isa<SparseElementsAttr>()) {
      a.set_type(onnx::AttributeProto::SPARSE_TENSORS);
      for (Attribute x : arr) {
        onnx::AttributeProto tmp;
        if (failed(exportAttribute(name, x, tmp, loc)))
          return failure();
        *a.add_sparse_tensors() = tmp.sparse_tensor();
      }
    } else if (first.isa<ElementsAttr>()) {
      a.set_type(onnx::AttributeProto::TENSORS);
      for (Attribute x : arr)
        if (failed(exportTensor(x.cast<ElementsAttr>(), *a.add_tensors(), loc)))
          return failure();
    } else if (first.isa<TypeAttr>()) {
      a.set_type(onnx::AttributeProto::TYPE_PROTOS);
      for (Attribute x : arr)
        if (failed(exportType(x.cast<TypeAttr>().getValue(), *a.add_type_protos(), loc)))
          return failure();
    } else {
      return emitError(loc) << "attribute '" << name << "' is a list with no ONNX form";
    }
  } else {
    return emitError(loc) << "attribute '" << name << "' (" << attr << ") has no ONNX form";
  }
  return success();
}

LogicalResult Exporter::exportOp(Operation &op, onnx::GraphProto &graph) {
  Location loc = op.getLoc();
  if (auto init = dyn_cast<ox::InitializerOp>(op)) {
    auto *t = graph.add_initializer();
    t->set_name(init.getName().str());
    names[init.getResult()] = init.getName().str();
    return exportTensor(init.getValue(), *t, loc);
  }
  if (isa<ox::NoneOp>(op)) {
    names[op.getResult(0)] = "";
    return success();
  }
  if (isa<func::ReturnOp, ox::YieldOp>(op))
    return success();
  StringRef opType = ox::ONNXDialect::getOnnxOpType(&op);
  if (opType.empty())
    return op.emitOpError() << "has no ONNX form; lower it before exporting to ONNX";

  onnx::NodeProto *node = graph.add_node();
  node->set_op_type(opType.str());
  std::string nn = ox::getNodeName(&op);
  if (!nn.empty())
    node->set_name(freshNodeName(nn));
  auto generic = dyn_cast<ox::GenericNodeOp>(op);
  if (generic && !generic.getDomain().empty())
    node->set_domain(generic.getDomain().str());
  if (auto scopes = op.getAttrOfType<StringAttr>(ox::kNameScopesAttr))
    octet::proto::setNodeMetadata(*node, {{"pkg.torch.onnx.name_scopes", scopes.str()}});

  // Inputs and outputs; trailing absent ones are dropped.
  SmallVector<std::string> ins, outs;
  for (Value v : op.getOperands())
    ins.push_back(v.getType().isa<NoneType>() ? "" : nameOf(v));
  while (!ins.empty() && ins.back().empty())
    ins.pop_back();
  for (Value r : op.getResults())
    outs.push_back(r.getType().isa<NoneType>() ? "" : nameOf(r));
  while (!outs.empty() && outs.back().empty())
    outs.pop_back();
  for (auto &s : ins)
    node->add_input(s);
  for (auto &s : outs)
    node->add_output(s);

  // value_info for intermediates with known types.
  for (Value r : op.getResults()) {
    auto t = r.getType().dyn_cast<RankedTensorType>();
    if (!t || t.getElementType().isa<ox::UnknownType>())
      continue;
    onnx::ValueInfoProto vi;
    vi.set_name(names[r]);
    if (succeeded(exportType(t, *vi.mutable_type(), loc)))
      *graph.add_value_info() = vi;
  }

  if (generic) {
    for (NamedAttribute a : generic.getAttrs())
      if (failed(exportAttribute(a.getName(), a.getValue(), *node->add_attribute(), loc)))
        return failure();
    // Subgraphs: GRAPH attributes, and GRAPHS lists named `name[]`.
    for (auto [nameAttr, region] : llvm::zip(generic.getSubgraphAttrs(), generic.getSubgraphs())) {
      StringRef name = nameAttr.cast<StringAttr>().getValue();
      onnx::GraphProto *g;
      if (name.ends_with("[]")) {
        StringRef base = name.drop_back(2);
        onnx::AttributeProto *a = nullptr;
        for (auto &existing : *node->mutable_attribute())
          if (existing.name() == base)
            a = &existing;
        if (!a) {
          a = node->add_attribute();
          a->set_name(base.str());
          a->set_type(onnx::AttributeProto::GRAPHS);
        }
        g = a->add_graphs();
      } else {
        auto *a = node->add_attribute();
        a->set_name(name.str());
        a->set_type(onnx::AttributeProto::GRAPH);
        g = a->mutable_g();
      }
      g->set_name(freshName(nn.empty() ? "subgraph" : nn + "_" + name.str()));
      SmallVector<std::string> inNames;
      for (size_t i = 0; i < region.front().getNumArguments(); ++i)
        inNames.push_back(freshName(g->name() + "_in"));
      auto yield = cast<ox::YieldOp>(region.front().getTerminator());
      SmallVector<std::string> outNames;
      for (size_t i = 0; i < yield.getOutputs().size(); ++i)
        outNames.push_back(freshName(g->name() + "_out"));
      if (failed(exportGraph(region.front(), *g, inNames, outNames, {}, false)))
        return failure();
    }
    return success();
  }
  // Typed ops: every inherent attribute is an ONNX attribute under its name.
  for (NamedAttribute a : op.getAttrs()) {
    if (a.getName().getValue().contains('.'))
      continue; // discardable attributes of other dialects
    if (failed(exportAttribute(a.getName(), a.getValue(), *node->add_attribute(), loc)))
      return failure();
  }
  return success();
}

LogicalResult Exporter::exportGraph(Block &block, onnx::GraphProto &graph,
                                    ArrayRef<std::string> inputNames,
                                    ArrayRef<std::string> outputNames, ArrayRef<Attribute> outputDims,
                                    bool isMain) {
  llvm::StringSet<> declared;
  for (auto [arg, name] : llvm::zip(block.getArguments(), inputNames)) {
    names[arg] = name;
    declared.insert(name);
    if (!isMain) {
      auto *vi = graph.add_input();
      vi->set_name(name);
      if (failed(exportType(arg.getType(), *vi->mutable_type(), arg.getLoc())))
        return failure();
    }
  }
  Operation *term = block.getTerminator();
  // Give returned values their output names before the nodes are emitted, so
  // no Identity is needed where a node produces an output directly.
  llvm::DenseSet<Value> claimed;
  for (auto [v, name] : llvm::zip(term->getOperands(), outputNames)) {
    Operation *def = v.getDefiningOp();
    bool producedHere = def && def->getBlock() == &block && !isa<ox::InitializerOp, ox::NoneOp>(def);
    if (producedHere && !names.count(v) && claimed.insert(v).second)
      names[v] = name;
  }
  for (Operation &op : block)
    if (failed(exportOp(op, graph)))
      return failure();
  for (auto [i, v] : llvm::enumerate(term->getOperands())) {
    const std::string &name = outputNames[i];
    if (nameOf(v) != name) {
      // Outputs that are inputs, initializers or repeated values: an Identity.
      auto *node = graph.add_node();
      node->set_op_type("Identity");
      node->set_name(freshName(name + "_identity"));
      node->add_input(nameOf(v));
      node->add_output(name);
    }
    auto *vi = graph.add_output();
    vi->set_name(name);
    declared.insert(name);
    ArrayAttr dims = i < outputDims.size() ? outputDims[i].dyn_cast_or_null<ArrayAttr>() : ArrayAttr();
    if (failed(exportType(v.getType(), *vi->mutable_type(), term->getLoc(), dims)))
      return failure();
  }
  // value_info is for intermediates only.
  auto *infos = graph.mutable_value_info();
  infos->erase(std::remove_if(infos->begin(), infos->end(),
                              [&](const onnx::ValueInfoProto &vi) { return declared.contains(vi.name()); }),
               infos->end());
  return success();
}

LogicalResult Exporter::run(func::FuncOp func, onnx::ModelProto &model) {
  Operation *m = module.getOperation();
  auto getInt = [&](StringRef key, int64_t def) {
    auto a = m->getAttrOfType<IntegerAttr>(key);
    return a ? a.getInt() : def;
  };
  auto getStr = [&](StringRef key) -> std::string {
    auto a = m->getAttrOfType<StringAttr>(key);
    return a ? a.getValue().str() : "";
  };
  bool hasFloat8 = false;
  module.walk([&](Operation *op) {
    auto check = [&](Type t) {
      if (auto s = t.dyn_cast<ShapedType>())
        hasFloat8 |= s.getElementType().isFloat8E4M3FN() || s.getElementType().isFloat8E5M2();
    };
    llvm::for_each(op->getOperandTypes(), check);
    llvm::for_each(op->getResultTypes(), check);
  });
  // Float8 needs IR 9 and opset 19.
  model.set_ir_version(std::max<int64_t>(getInt(ox::kIrVersionAttr, 8), hasFloat8 ? 9 : 0));
  if (auto opsets = m->getAttrOfType<DictionaryAttr>(ox::kOpsetImportAttr)) {
    for (NamedAttribute o : opsets) {
      auto *id = model.add_opset_import();
      bool isDefault = o.getName() == "ai.onnx" || o.getName().getValue().empty();
      id->set_domain(isDefault ? "" : o.getName().str());
      int64_t v = o.getValue().cast<IntegerAttr>().getInt();
      id->set_version(isDefault && hasFloat8 ? std::max<int64_t>(v, 19) : v);
    }
  } else {
    auto *id = model.add_opset_import();
    id->set_domain("");
    id->set_version(hasFloat8 ? 19 : 17);
  }
  model.set_producer_name(m->hasAttr(ox::kProducerNameAttr) ? getStr(ox::kProducerNameAttr) : "octet");
  if (m->hasAttr(ox::kProducerVersionAttr))
    model.set_producer_version(getStr(ox::kProducerVersionAttr));
  if (m->hasAttr(ox::kDomainAttr))
    model.set_domain(getStr(ox::kDomainAttr));
  if (m->hasAttr(ox::kModelVersionAttr))
    model.set_model_version(getInt(ox::kModelVersionAttr, 0));
  if (m->hasAttr(ox::kDocStringAttr))
    model.set_doc_string(getStr(ox::kDocStringAttr));
  if (auto md = m->getAttrOfType<DictionaryAttr>(ox::kMetadataAttr))
    for (NamedAttribute kv : md) {
      auto *p = model.add_metadata_props();
      p->set_key(kv.getName().str());
      p->set_value(kv.getValue().cast<StringAttr>().getValue().str());
    }

  onnx::GraphProto &graph = *model.mutable_graph();
  if (auto md = m->getAttrOfType<DictionaryAttr>(ox::kGraphMetadataAttr)) {
    std::vector<std::pair<std::string, std::string>> entries;
    for (NamedAttribute kv : md)
      entries.emplace_back(kv.getName().str(), kv.getValue().cast<StringAttr>().getValue().str());
    octet::proto::setGraphMetadata(graph, entries);
  }
  auto graphName = func->getAttrOfType<StringAttr>(ox::kGraphNameAttr);
  graph.set_name(graphName ? graphName.getValue().str() : func.getSymName().str());
  if (func.getBody().getBlocks().size() != 1)
    return func.emitOpError("must have exactly one block to export to ONNX");
  Block &entry = func.getBody().front();

  // Reserve every declared name first so generated names never collide.
  SmallVector<std::string> inNames, outNames;
  SmallVector<Attribute> outDims;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto n = func.getArgAttrOfType<StringAttr>(i, ox::kNameAttr);
    inNames.push_back(n ? n.getValue().str() : "input_" + std::to_string(i));
  }
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto n = func.getResultAttrOfType<StringAttr>(i, ox::kNameAttr);
    outNames.push_back(n ? n.getValue().str() : "output_" + std::to_string(i));
    outDims.push_back(func.getResultAttr(i, ox::kDimParamsAttr));
  }
  for (auto &n : llvm::concat<std::string>(inNames, outNames))
    used.insert(n);
  func.walk([&](ox::InitializerOp init) { used.insert(init.getName()); });

  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto *vi = graph.add_input();
    vi->set_name(inNames[i]);
    if (failed(exportType(entry.getArgument(i).getType(), *vi->mutable_type(), func.getLoc(),
                          func.getArgAttrOfType<ArrayAttr>(i, ox::kDimParamsAttr))))
      return failure();
    if (auto def = func.getArgAttrOfType<ElementsAttr>(i, ox::kDefaultAttr)) {
      auto *t = graph.add_initializer();
      t->set_name(inNames[i]);
      if (failed(exportTensor(def, *t, func.getLoc())))
        return failure();
    }
  }
  return exportGraph(entry, graph, inNames, outNames, outDims, /*isMain=*/true);
}

} // namespace

namespace octet {

LogicalResult exportToOnnx(ModuleOp module, onnx::ModelProto &model, const ExportOptions &options) {
  func::FuncOp func;
  if (!options.funcName.empty()) {
    func = module.lookupSymbol<func::FuncOp>(options.funcName);
    if (!func)
      return module.emitError() << "no function '" << options.funcName << "' to export";
  } else {
    func = module.lookupSymbol<func::FuncOp>(ox::kMainGraphName);
    if (!func) {
      auto funcs = module.getOps<func::FuncOp>();
      if (std::distance(funcs.begin(), funcs.end()) != 1)
        return module.emitError()
               << "cannot tell which function is the model: name it @main_graph";
      func = *funcs.begin();
    }
  }
  return Exporter(module).run(func, model);
}

LogicalResult exportToOnnxBytes(ModuleOp module, std::string &bytes, const ExportOptions &options) {
  onnx::ModelProto model;
  if (failed(exportToOnnx(module, model, options)))
    return failure();
  std::string error;
  if (!proto::serializeModel(model, bytes, error))
    return module.emitError() << error;
  return success();
}

} // namespace octet
