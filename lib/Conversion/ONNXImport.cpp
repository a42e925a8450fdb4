//===- ONNXImport.cpp - onnx::ModelProto -> MLIR (onnx dialect) -----------===//
//
// Each node goes through a table keyed by op type and minimum opset version:
// nodes of the default domain whose opset is new enough become typed ops
// (fixed arity: missing optional inputs/outputs are `none` values); model-
// local functions are inlined; everything else becomes `onnx.node`.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/ONNXImport.h"

#include "ONNXExternalData.h"
#include "ONNXImporter.h"
#include "ONNXTypedOps.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Support/ProtoIO.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Dialect/Traits.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "ONNXInputShapes.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <deque>

using namespace mlir;
using octet::ImportOptions;
namespace ox = octet::onnx_dialect;

namespace octet::detail {

static llvm::StringMap<int64_t> opsetMap(const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto> &ids) {
  llvm::StringMap<int64_t> m;
  for (const auto &o : ids)
    m[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  return m;
}

/// Orders nodes so that every value is defined before use (Kahn's algorithm,
/// keeping the file order where it already is one). Reports dangling inputs
/// and cycles at the node.
LogicalResult Importer::sortNodes(const Scope &scope,
                                  llvm::ArrayRef<const onnx::NodeProto *> nodes,
                                  std::vector<const onnx::NodeProto *> &order,
                                  const llvm::StringSet<> &graphInputs) {
  llvm::StringMap<size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto &o : nodes[i]->output())
      if (!o.empty() && !producer.try_emplace(o, i).second)
        return emitError(fileLoc) << "value '" << o << "' is produced by two nodes ('"
                                  << nodes[producer[o]]->name() << "' and '" << nodes[i]->name()
                                  << "')",
               failure();
  // Names a node reads, including those its subgraphs capture from outside.
  auto collectInputs = [&](const onnx::NodeProto &n, auto &self, std::vector<std::string> &out) -> void {
    for (const auto &i : n.input())
      if (!i.empty())
        out.push_back(i);
    for (const auto &a : n.attribute()) {
      std::vector<const onnx::GraphProto *> gs;
      if (a.has_g())
        gs.push_back(&a.g());
      for (const auto &g : a.graphs())
        gs.push_back(&g);
      for (const onnx::GraphProto *g : gs) {
        llvm::StringSet<> local;
        for (const auto &x : g->input()) local.insert(x.name());
        for (const auto &x : g->initializer()) local.insert(x.name());
        for (const auto &sn : g->node())
          for (const auto &o : sn.output()) local.insert(o);
        for (const auto &sn : g->node()) {
          std::vector<std::string> inner;
          self(sn, self, inner);
          for (auto &s : inner)
            if (!local.contains(s))
              out.push_back(s);
        }
      }
    }
  };
  std::vector<std::vector<size_t>> users(nodes.size());
  std::vector<size_t> pending(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::vector<std::string> ins;
    collectInputs(*nodes[i], collectInputs, ins);
    for (const auto &in : ins) {
      auto it = producer.find(in);
      if (it != producer.end()) {
        users[it->second].push_back(i);
        ++pending[i];
      } else if (!graphInputs.contains(in) && !scope.lookup(in)) {
        emitError(nodeLoc(*nodes[i], "", i))
            << "input '" << in << "' of node '" << nodes[i]->name() << "' (" << nodes[i]->op_type()
            << ") is not produced by any node, graph input or initializer (dangling edge)";
        return failure();
      }
    }
  }
  std::vector<size_t> ready;
  for (size_t i = nodes.size(); i-- > 0;)
    if (pending[i] == 0)
      ready.push_back(i);
  // `ready` is a stack with the smallest index on top to keep the file order.
  while (!ready.empty()) {
    size_t i = ready.back();
    ready.pop_back();
    order.push_back(nodes[i]);
    std::vector<size_t> newly;
    for (size_t u : users[i])
      if (--pending[u] == 0)
        newly.push_back(u);
    for (size_t u : newly)
      ready.push_back(u);
    llvm::sort(ready, std::greater<size_t>());
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (pending[i] != 0)
        return emitError(nodeLoc(*nodes[i], "", i))
                   << "node '" << nodes[i]->name() << "' (" << nodes[i]->op_type()
                   << ") is part of a cycle; an ONNX graph must be acyclic",
               failure();
  }
  return success();
}

LogicalResult Importer::importGraph(const onnx::GraphProto &graph, Block *block, Scope &scope,
                                    const llvm::StringMap<int64_t> &opsets,
                                    SmallVectorImpl<Value> *outputs) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(block);

  llvm::StringMap<const onnx::TypeProto *> valueTypes;
  for (const auto &vi : graph.value_info())
    valueTypes[vi.name()] = &vi.type();
  for (const auto &vi : graph.output())
    valueTypes[vi.name()] = &vi.type();

  llvm::StringSet<> graphInputs;
  for (const auto &in : graph.input())
    graphInputs.insert(in.name());
  for (const auto &init : graph.initializer())
    graphInputs.insert(init.name());
  for (const auto &sp : graph.sparse_initializer())
    return emitError(fileLoc) << "sparse initializer '" << sp.values().name()
                              << "' is not supported; densify it first",
           failure();

  // Initializers (those that are not also graph inputs; those became args).
  for (const auto &init : graph.initializer()) {
    if (scope.values.count(init.name()))
      continue;
    Location loc = fileLoc; // messages name the tensor themselves
    auto value = convertTensor(init, loc, /*allowResource=*/true);
    if (failed(value))
      return failure();
    auto op = builder.create<ox::InitializerOp>(loc, value->getType(), init.name(), *value);
    scope.values[init.name()] = op.getResult();
  }

  std::vector<const onnx::NodeProto *> nodes, order;
  for (const auto &n : graph.node())
    nodes.push_back(&n);
  if (failed(sortNodes(scope, nodes, order, graphInputs)))
    return failure();
  for (const onnx::NodeProto *n : order)
    if (failed(importNode(*n, scope, opsets, valueTypes, "", nullptr)))
      return failure();

  for (const auto &out : graph.output()) {
    Value v = scope.lookup(out.name());
    if (!v)
      return emitError(fileLoc) << "graph output '" << out.name()
                                << "' is not produced by any node, input or initializer",
             failure();
    outputs->push_back(v);
  }
  return success();
}

LogicalResult Importer::inlineFunction(const onnx::FunctionProto &fn, const onnx::NodeProto &node,
                                       Scope &scope, const std::string &namePrefix) {
  if (++inlineDepth > 64)
    return emitError(fileLoc) << "model-local function '" << fn.name()
                              << "' calls itself recursively",
           failure();
  Scope inner;
  inner.parent = nullptr; // function bodies see only their formal inputs
  for (int i = 0; i < fn.input_size(); ++i) {
    Value v = i < node.input_size() && !node.input(i).empty() ? scope.lookup(node.input(i)) : Value();
    inner.values[fn.input(i)] = v ? v : noneValue();
  }
  llvm::StringMap<int64_t> fnOpsets = opsetMap(fn.opset_import());
  if (fnOpsets.empty())
    fnOpsets = opsetMap(model.opset_import());
  std::string prefix = namePrefix + (node.name().empty() ? fn.name() : node.name()) + "/";
  // Intermediate names of the body never clash with the caller's: own scope.
  llvm::StringMap<const onnx::TypeProto *> noTypes;
  for (const auto &n : fn.node())
    if (failed(importNode(n, inner, fnOpsets, noTypes, prefix, &node)))
      return failure();
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty())
      continue;
    if (i >= fn.output_size())
      return emitError(fileLoc) << "node '" << node.name() << "' has more outputs than function '"
                                << fn.name() << "'",
             failure();
    Value v = inner.lookup(fn.output(i));
    if (!v)
      return emitError(fileLoc) << "function '" << fn.name() << "' never produces its output '"
                                << fn.output(i) << "'",
             failure();
    scope.values[node.output(i)] = v;
  }
  --inlineDepth;
  return success();
}

LogicalResult Importer::importNode(const onnx::NodeProto &node, Scope &scope,
                                   const llvm::StringMap<int64_t> &opsets,
                                   const llvm::StringMap<const onnx::TypeProto *> &valueTypes,
                                   const std::string &namePrefix, const onnx::NodeProto *caller) {
  Location loc = nodeLoc(node, namePrefix, nodeCounter++);
  if (node.op_type().empty())
    return emitError(loc) << "node has no op_type", failure();

  if (const onnx::FunctionProto *fn = findFunction(node))
    return inlineFunction(*fn, node, scope, namePrefix);

  // Attributes; `ref_attr_name` refers to the calling node's attribute.
  SmallVector<NamedAttribute> attrs;
  SmallVector<const onnx::GraphProto *> graphs;
  SmallVector<Attribute> graphNames;
  for (const auto &a0 : node.attribute()) {
    const onnx::AttributeProto *a = &a0;
    if (!a->ref_attr_name().empty()) {
      a = nullptr;
      if (caller)
        for (const auto &ca : caller->attribute())
          if (ca.name() == a0.ref_attr_name())
            a = &ca;
      if (!a)
        continue; // not given by the caller: the op's default applies
    }
    if (a->type() == onnx::AttributeProto::GRAPH || (a->type() == onnx::AttributeProto::UNDEFINED && a->has_g())) {
      graphs.push_back(&a->g());
      graphNames.push_back(builder.getStringAttr(a0.name()));
      continue;
    }
    if (a->type() == onnx::AttributeProto::GRAPHS) {
      for (const auto &g : a->graphs()) {
        graphs.push_back(&g);
        graphNames.push_back(builder.getStringAttr(a0.name() + "[]"));
      }
      continue;
    }
    auto v = convertAttribute(*a, loc);
    if (failed(v))
      return failure();
    attrs.push_back(builder.getNamedAttr(a0.name(), *v));
  }

  // Operands.
  SmallVector<Value> operands;
  for (const auto &in : node.input()) {
    if (in.empty()) {
      operands.push_back(noneValue());
      continue;
    }
    Value v = scope.lookup(in);
    if (!v)
      return emitError(loc) << "input '" << in << "' of node '" << node.name() << "' ("
                            << node.op_type() << ") is not defined (dangling edge)",
             failure();
    operands.push_back(v);
  }

  // A shape computation whose value is known now becomes a constant; exporter forms become ops
  // the backends run (ONNXShapeFold.cpp).
  if (!opts.genericOnly && (node.domain().empty() || node.domain() == "ai.onnx") && graphs.empty() &&
      node.output_size() == 1 && !node.output(0).empty() && node.op_type() != "Constant")
    if (Value v = rewriteAtImport(builder, loc, node.op_type(), operands, attrs, opts.foldShapes)) {
      keepNameScopes(node, v.getDefiningOp());
      scope.values[node.output(0)] = v;
      return success();
    }

  // Result types from value_info / outputs; unknown otherwise.
  SmallVector<Type> resultTypes;
  for (const auto &out : node.output()) {
    if (out.empty()) {
      resultTypes.push_back(NoneType::get(ctx));
      continue;
    }
    auto it = valueTypes.find(out);
    Type t;
    if (it != valueTypes.end()) {
      if (!(t = convertType(*it->second, loc, nullptr)))
        return failure();
      // A declared type without a static shape (a graph output declared without one) takes the
      // static shape inference gives it, of the same element type.
      auto declared = t.dyn_cast<TensorType>();
      if (declared && !declared.hasStaticShape() && !declared.getElementType().isa<ox::UnknownType>())
        if (auto inferred = inferResultType(ctx, node.op_type(), operands, attrs, resultTypes.size())
                                .dyn_cast_or_null<RankedTensorType>();
            inferred && inferred.hasStaticShape() && inferred.getElementType() == declared.getElementType() &&
            (!declared.hasRank() || (declared.getRank() == inferred.getRank() &&
                                     llvm::all_of(llvm::zip(declared.getShape(), inferred.getShape()), [](auto p) {
                                       return ShapedType::isDynamic(std::get<0>(p)) ||
                                              std::get<0>(p) == std::get<1>(p);
                                     }))))
          t = inferred;
    } else {
      t = inferResultType(ctx, node.op_type(), operands, attrs, resultTypes.size());
      if (!t)
        t = UnrankedTensorType::get(ox::UnknownType::get(ctx));
    }
    resultTypes.push_back(t);
  }

  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  auto opsetIt = opsets.find(domain);
  int64_t version = opsetIt == opsets.end() ? 0 : opsetIt->second;
  const auto &table = typedOps();
  auto typed = table.find(node.op_type());
  auto isUnknown = [](Type t) {
    auto s = t.dyn_cast<ShapedType>();
    return s && s.getElementType().isa<ox::UnknownType>();
  };
  bool hasUnknown = llvm::any_of(resultTypes, isUnknown) ||
                    llvm::any_of(ValueRange(operands).getTypes(), isUnknown);
  bool useTyped = !opts.genericOnly && domain.empty() && typed != table.end() &&
                  version >= typed->second.sinceVersion && graphs.empty() && !hasUnknown;
  if (useTyped) {
    const TypedOpInfo &info = typed->second;
    if (info.numInputs >= 0) {
      if (static_cast<int>(operands.size()) > info.numInputs)
        return emitError(loc) << node.op_type() << " node '" << node.name() << "' has "
                              << operands.size() << " inputs; at most " << info.numInputs
                              << " are allowed",
               failure();
      while (static_cast<int>(operands.size()) < info.numInputs)
        operands.push_back(noneValue());
    }
    if (info.numOutputs >= 0) {
      if (static_cast<int>(resultTypes.size()) > info.numOutputs)
        return emitError(loc) << node.op_type() << " node '" << node.name() << "' has "
                              << resultTypes.size() << " outputs; at most " << info.numOutputs
                              << " are allowed",
               failure();
      while (static_cast<int>(resultTypes.size()) < info.numOutputs)
        resultTypes.push_back(NoneType::get(ctx));
    }
    OperationState state(loc, "onnx." + node.op_type());
    state.addOperands(operands);
    state.addTypes(resultTypes);
    state.addAttributes(attrs);
    Operation *op = builder.create(state);
    if (failed(mlir::verify(op)))
      return failure();
    keepNameScopes(node, op);
    // An Identity of an initializer is how the TorchScript exporter hands a merged parameter to
    // another layer; its output's name is that layer's parameter name (octet-unmerge-parameters).
    if (isa<ox::IdentityOp>(op) && !operands.empty() && operands[0].getDefiningOp<ox::InitializerOp>() &&
        !node.output(0).empty())
      op->setAttr("octet.result_names", builder.getStrArrayAttr({node.output(0)}));
    for (auto [name, res] : llvm::zip(node.output(), op->getResults()))
      if (!name.empty())
        scope.values[name] = res;
    return success();
  }

  auto generic = builder.create<ox::GenericNodeOp>(
      loc, resultTypes, operands, builder.getStringAttr(node.op_type()),
      builder.getStringAttr(domain), builder.getDictionaryAttr(attrs),
      builder.getArrayAttr(graphNames), graphs.size());
  for (auto [g, region] : llvm::zip(graphs, generic.getSubgraphs())) {
    Block *body = new Block();
    region.push_back(body);
    Scope sub;
    sub.parent = &scope;
    for (const auto &in : g->input()) {
      Type t = in.has_type() ? convertType(in.type(), loc, nullptr)
                             : UnrankedTensorType::get(ox::UnknownType::get(ctx));
      if (!t)
        return failure();
      sub.values[in.name()] = body->addArgument(t, loc);
    }
    SmallVector<Value> outs;
    if (failed(importGraph(*g, body, sub, opsets, &outs)))
      return failure();
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(body);
    builder.create<ox::YieldOp>(loc, outs);
  }
  for (auto [name, res] : llvm::zip(node.output(), generic.getResults()))
    if (!name.empty())
      scope.values[name] = res;
  keepNameScopes(node, generic);
  return success();
}

/// The modules torch.onnx.export traced the node in (its `pkg.torch.onnx.name_scopes` metadata), on
/// the op as onnx.name_scopes: layers are named after them where the exporter renamed weights.
void Importer::keepNameScopes(const onnx::NodeProto &node, Operation *op) {
  for (const auto &[key, value] : octet::proto::nodeMetadata(node))
    if (key == "pkg.torch.onnx.name_scopes")
      op->setAttr(ox::kNameScopesAttr, builder.getStringAttr(value));
}

OwningOpRef<ModuleOp> Importer::run() {
  ctx->loadDialect<ox::ONNXDialect, func::FuncDialect>();
  if (failed(octet::detail::bindInputShapes(model.graph(), opts.inputShapes, fileLoc, inputDims, symbols)))
    return nullptr;
  for (const auto &fn : model.functions())
    functions[fn.domain() + "\x1f" + fn.name()] = &fn;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  Builder b(ctx);
  SmallVector<NamedAttribute> opsetAttrs;
  for (const auto &o : model.opset_import())
    // The default domain is spelled "ai.onnx": an empty attribute name does not parse back.
    opsetAttrs.push_back(b.getNamedAttr(o.domain().empty() ? "ai.onnx" : o.domain(),
                                        b.getI64IntegerAttr(o.version())));
  Operation *m = module->getOperation();
  m->setAttr(ox::kIrVersionAttr, b.getI64IntegerAttr(model.ir_version()));
  m->setAttr(ox::kOpsetImportAttr, b.getDictionaryAttr(opsetAttrs));
  if (model.has_producer_name())
    m->setAttr(ox::kProducerNameAttr, b.getStringAttr(model.producer_name()));
  if (model.has_producer_version())
    m->setAttr(ox::kProducerVersionAttr, b.getStringAttr(model.producer_version()));
  if (!model.domain().empty())
    m->setAttr(ox::kDomainAttr, b.getStringAttr(model.domain()));
  if (model.model_version() != 0)
    m->setAttr(ox::kModelVersionAttr, b.getI64IntegerAttr(model.model_version()));
  if (!model.doc_string().empty())
    m->setAttr(ox::kDocStringAttr, b.getStringAttr(model.doc_string()));
  if (model.metadata_props_size()) {
    SmallVector<NamedAttribute> md;
    for (const auto &kv : model.metadata_props())
      md.push_back(b.getNamedAttr(kv.key(), b.getStringAttr(kv.value())));
    m->setAttr(ox::kMetadataAttr, b.getDictionaryAttr(md));
  }
  if (auto gmd = octet::proto::graphMetadata(model.graph()); !gmd.empty()) {
    SmallVector<NamedAttribute> md;
    llvm::StringSet<> seen; // a key given twice keeps its first value
    for (const auto &[k, v] : gmd)
      if (seen.insert(k).second)
        md.push_back(b.getNamedAttr(k, b.getStringAttr(v)));
    m->setAttr(ox::kGraphMetadataAttr, b.getDictionaryAttr(md));
  }

  const onnx::GraphProto &graph = model.graph();
  llvm::StringMap<const onnx::TensorProto *> inits;
  for (const auto &t : graph.initializer())
    if (!inits.try_emplace(t.name(), &t).second) { // two tensors of one name: which one a node reads is unknowable
      emitError(NameLoc::get(b.getStringAttr(t.name()), fileLoc))
          << "initializer '" << t.name() << "' is listed twice; an ONNX graph names each value once";
      return nullptr;
    }

  // A graph input/output: its type, name and symbolic dim names.
  auto signatureEntry = [&](const onnx::ValueInfoProto &vi, Location loc,
                            SmallVectorImpl<NamedAttribute> &attrs) -> Type {
    SmallVector<Attribute> dimParams;
    Type t = vi.has_type() ? convertType(vi.type(), loc, &dimParams)
                           : UnrankedTensorType::get(ox::UnknownType::get(ctx));
    attrs.push_back(b.getNamedAttr(ox::kNameAttr, b.getStringAttr(vi.name())));
    if (llvm::any_of(dimParams, [](Attribute a) { return !a.cast<StringAttr>().getValue().empty(); }))
      attrs.push_back(b.getNamedAttr(ox::kDimParamsAttr, b.getArrayAttr(dimParams)));
    return t;
  };
  // Signature: graph inputs (an initializer of the same name is a default).
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  llvm::StringSet<> inputNames;
  for (const auto &in : graph.input()) {
    Location loc = NameLoc::get(b.getStringAttr(in.name()), fileLoc);
    if (!inputNames.insert(in.name()).second) {
      emitError(loc) << "graph input '" << in.name() << "' is listed twice; list each input once";
      return nullptr;
    }
    SmallVector<NamedAttribute> attrs;
    Type t = signatureEntry(in, loc, attrs);
    if (!t)
      return nullptr;
    if (auto given = inputDims.find(in.name()); given != inputDims.end()) // --input-shape
      if (auto st = t.dyn_cast<ShapedType>())
        t = RankedTensorType::get(given->second, st.getElementType());
    if (auto it = inits.find(in.name()); it != inits.end()) {
      auto v = convertTensor(*it->second, loc, true);
      if (failed(v))
        return nullptr;
      attrs.push_back(b.getNamedAttr(ox::kDefaultAttr, *v));
    }
    argTypes.push_back(t);
    argAttrs.push_back(b.getDictionaryAttr(attrs));
  }
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  llvm::StringSet<> outputNames;
  for (const auto &out : graph.output()) {
    if (!outputNames.insert(out.name()).second) {
      emitError(NameLoc::get(b.getStringAttr(out.name()), fileLoc))
          << "graph output '" << out.name() << "' is listed twice; list each output once";
      return nullptr;
    }
    SmallVector<NamedAttribute> attrs;
    Type t = signatureEntry(out, NameLoc::get(b.getStringAttr(out.name()), fileLoc), attrs);
    if (!t)
      return nullptr;
    resultTypes.push_back(t);
    resultAttrs.push_back(b.getDictionaryAttr(attrs));
  }

  builder.setInsertionPointToEnd(module->getBody());
  auto func = builder.create<func::FuncOp>(fileLoc, opts.funcName,
                                           builder.getFunctionType(argTypes, resultTypes));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);
  if (!graph.name().empty())
    func->setAttr(ox::kGraphNameAttr, b.getStringAttr(graph.name()));
  Block *entry = func.addEntryBlock();

  Scope scope;
  for (auto [in, arg] : llvm::zip(graph.input(), entry->getArguments()))
    scope.values[in.name()] = arg;
  SmallVector<Value> outputs;
  if (failed(importGraph(graph, entry, scope, opsetMap(model.opset_import()), &outputs)))
    return nullptr;
  // Output types come from the graph's declaration; a value of a refined type
  // is returned as is when compatible.
  for (auto [i, v] : llvm::enumerate(outputs)) {
    if (v.getType() != resultTypes[i]) {
      auto vt = v.getType().dyn_cast<ShapedType>(), rt = resultTypes[i].dyn_cast<ShapedType>();
      bool unknownOut = rt && rt.getElementType().isa<ox::UnknownType>();
      bool unknownIn = vt && vt.getElementType().isa<ox::UnknownType>();
      if (unknownIn && !unknownOut && v.isa<OpResult>() &&
          isa<ox::GenericNodeOp>(v.getDefiningOp())) {
        v.setType(resultTypes[i]); // the graph declares what the untyped producer gives
        continue;
      }
      if (unknownOut || !vt || !rt || vt.getElementType() != rt.getElementType()) {
        if (unknownOut) {
          resultTypes[i] = v.getType();
          continue;
        }
        emitError(NameLoc::get(b.getStringAttr(graph.output(i).name()), fileLoc))
            << "graph output '" << graph.output(i).name() << "' is declared " << resultTypes[i]
            << " but its producer gives " << v.getType();
        return nullptr;
      }
      resultTypes[i] = v.getType();
    }
  }
  func.setFunctionType(builder.getFunctionType(argTypes, resultTypes));
  builder.setInsertionPointToEnd(entry);
  builder.create<func::ReturnOp>(fileLoc, outputs);
  if (failed(mlir::verify(*module)))
    return nullptr;
  return module;
}

} // namespace octet::detail

namespace octet {

OwningOpRef<ModuleOp> importOnnxModel(const onnx::ModelProto &original, MLIRContext *context,
                                      const ImportOptions &options) {
  onnx::ModelProto training;
  DictionaryAttr spec;
  const onnx::ModelProto *src = &original;
  if (original.training_info_size() > 0) {
    if (failed(detail::trainingForm(original, training, context, FileLineColLoc::get(context, options.fileName, 0, 0),
                            spec)))
      return nullptr;
    src = &training;
  }
  const onnx::ModelProto &model = *src;
  auto finish = [&](OwningOpRef<ModuleOp> m) {
    if (m && spec)
      (*m)->setAttr(kOnnxTrainingAttr, spec);
    return m;
  };
  if (!options.inferShapes)
    return finish(detail::Importer(context, model, options).run());
  onnx::ModelProto inferred = model;
  std::string reason;
  if (!proto::inferShapes(inferred, reason))
    return finish(detail::Importer(context, model, options).run());
  return finish(detail::Importer(context, inferred, options).run());
}

/// importOnnxModel for a model the caller gives up: shape inference copies the model, so the
/// large initializers' bytes step aside (swapped out, not copied) while it runs and come back to
/// the inferred model after; it reads only small initializers (shapes, axes).
static OwningOpRef<ModuleOp> importOwnedModel(onnx::ModelProto &model, MLIRContext *context,
                                              const ImportOptions &options) {
  if (model.training_info_size() > 0 || !options.inferShapes)
    return importOnnxModel(model, context, options);
  constexpr size_t kAsideBytes = 4096;
  auto *inits = model.mutable_graph()->mutable_initializer();
  std::vector<std::string> aside(size_t(inits->size()));
  for (int i = 0; i < inits->size(); ++i)
    if ((*inits)[i].raw_data().size() >= kAsideBytes)
      (*inits)[i].mutable_raw_data()->swap(aside[size_t(i)]);
  std::string reason;
  (void)proto::inferShapes(model, reason); // where it cannot, the model stays as it was
  inits = model.mutable_graph()->mutable_initializer();
  if (size_t(inits->size()) != aside.size()) {
    emitError(FileLineColLoc::get(context, options.fileName, 0, 0))
        << "shape inference changed the initializers; report this model";
    return nullptr;
  }
  for (int i = 0; i < inits->size(); ++i)
    if (!aside[size_t(i)].empty())
      (*inits)[i].mutable_raw_data()->swap(aside[size_t(i)]);
  ImportOptions inferred = options;
  inferred.inferShapes = false; // done
  return importOnnxModel(model, context, inferred);
}

OwningOpRef<ModuleOp> importOnnxBuffer(llvm::StringRef bytes, MLIRContext *context,
                                       const ImportOptions &options) {
  onnx::ModelProto model;
  std::string error;
  if (!proto::parseModel(bytes.data(), bytes.size(), model, error)) {
    emitError(FileLineColLoc::get(context, options.fileName, 0, 0)) << error;
    return nullptr;
  }
  return importOwnedModel(model, context, options);
}

OwningOpRef<ModuleOp> importOnnxFile(llvm::StringRef path, MLIRContext *context,
                                     ImportOptions options) {
  onnx::ModelProto model;
  std::string error;
  if (options.fileName == "<model>")
    options.fileName = path.str();
  if (!proto::loadModelFile(path.str(), model, error)) {
    emitError(FileLineColLoc::get(context, options.fileName, 0, 0)) << error;
    return nullptr;
  }
  if (options.baseDir.empty())
    options.baseDir = llvm::sys::path::parent_path(path).str();
  return importOwnedModel(model, context, options);
}

} // namespace octet
