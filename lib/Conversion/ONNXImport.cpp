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
using octet::detail::rewriteAtImport;
using octet::detail::inferResultType;
using octet::detail::TypedOpInfo;
using octet::detail::typedOps;
namespace ox = octet::onnx_dialect;

namespace {

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

llvm::StringMap<int64_t> opsetMap(const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto> &ids) {
  llvm::StringMap<int64_t> m;
  for (const auto &o : ids)
    m[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  return m;
}

Type Importer::elementType(int32_t code, Location loc, llvm::StringRef what) {
  if (code == onnx::TensorProto::STRING)
    return ox::StringType::get(ctx);
  Type t = ox::getElementTypeForOnnxCode(ctx, code);
  if (!t)
    emitError(loc) << "unsupported element type " << ox::getOnnxTypeName(code) << " (" << code
                   << ") in " << what;
  return t;
}

Type Importer::convertType(const onnx::TypeProto &type, Location loc,
                           SmallVectorImpl<Attribute> *dimParams) {
  switch (type.value_case()) {
  case onnx::TypeProto::kTensorType: {
    const auto &tt = type.tensor_type();
    Type elt = tt.elem_type() == 0 ? Type(ox::UnknownType::get(ctx))
                                   : elementType(tt.elem_type(), loc, "a value type");
    if (!elt)
      return {};
    if (!tt.has_shape())
      return UnrankedTensorType::get(elt);
    SmallVector<int64_t> dims;
    int64_t bytes = 8; // the widest element: a count whose bytes overflow is refused, not wrapped
    for (const auto &d : tt.shape().dim()) {
      if (d.has_dim_value() && d.dim_value() < 0) {
        emitError(loc) << "a value's type has the negative dimension " << d.dim_value()
                       << "; dimensions are >= 0 or symbolic (dim_param)";
        return {};
      }
      if (d.has_dim_value() && __builtin_mul_overflow(bytes, d.dim_value(), &bytes)) {
        emitError(loc) << "a value's type has more elements than fit in 64 bits; fix its dimensions";
        return {};
      }
      std::optional<int64_t> bound = d.has_dim_param() ? octet::detail::evaluateDim(d.dim_param(), symbols) : std::nullopt;
      dims.push_back(d.has_dim_value() ? d.dim_value() : bound ? *bound : ShapedType::kDynamic);
      if (dimParams)
        dimParams->push_back(StringAttr::get(ctx, d.has_dim_param() ? d.dim_param() : ""));
    }
    return RankedTensorType::get(dims, elt);
  }
  case onnx::TypeProto::kSequenceType: {
    Type e = convertType(type.sequence_type().elem_type(), loc, nullptr);
    return e ? ox::SeqType::get(ctx, e) : Type();
  }
  case onnx::TypeProto::kOptionalType: {
    Type e = convertType(type.optional_type().elem_type(), loc, nullptr);
    return e ? ox::OptType::get(ctx, e) : Type();
  }
  case onnx::TypeProto::VALUE_NOT_SET:
    return UnrankedTensorType::get(ox::UnknownType::get(ctx));
  default:
    emitError(loc) << "unsupported value type (map or sparse tensor); only tensors, sequences "
                      "and optionals are supported";
    return {};
  }
}

FailureOr<ElementsAttr> Importer::convertTensor(const onnx::TensorProto &t, Location loc,
                                                bool allowResource) {
  std::string what = "tensor '" + t.name() + "'";
  Type elt = elementType(t.data_type(), loc, what);
  if (!elt)
    return failure();
  SmallVector<int64_t> dims;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return emitError(loc) << what << " has a negative dimension " << d, failure();
    dims.push_back(d);
    if (__builtin_mul_overflow(n, d, &n))
      return emitError(loc) << what << " declares more elements than fit in 64 bits; fix its dims", failure();
  }
  auto type = RankedTensorType::get(dims, elt);

  if (t.data_type() == onnx::TensorProto::STRING) {
    if (t.string_data_size() != n)
      return emitError(loc) << what << " has " << t.string_data_size() << " strings for " << n
                            << " elements",
             failure();
    SmallVector<StringRef> strs;
    for (const auto &s : t.string_data())
      strs.push_back(s);
    return ElementsAttr(DenseElementsAttr::get(type, strs));
  }

  // Storage bytes per element (bool and float8 use one byte).
  int64_t width = elt.isInteger(1) ? 1
                  : elt.isa<ComplexType>()
                      ? 2 * (elt.cast<ComplexType>().getElementType().getIntOrFloatBitWidth() / 8)
                      : elt.getIntOrFloatBitWidth() / 8;
  int64_t bytes;
  if (__builtin_mul_overflow(n, width, &bytes))
    return emitError(loc) << what << " declares more bytes than fit in 64 bits; fix its dims", failure();
  std::string raw;
  if (t.data_location() == onnx::TensorProto::EXTERNAL && opts.absentWeightsAsZeros &&
      elt.isIntOrFloat() && !elt.isInteger(1)) {
    std::string location;
    for (const auto &kv : t.external_data())
      if (kv.key() == "location")
        location = kv.value();
    llvm::SmallString<256> path(opts.baseDir);
    llvm::sys::path::append(path, location);
    if (!location.empty() && !llvm::sys::fs::exists(path)) // a splat: no bytes
      return ElementsAttr(elt.isa<FloatType>()
                              ? DenseElementsAttr::get(type, APFloat::getZero(elt.cast<FloatType>().getFloatSemantics()))
                              : DenseElementsAttr::get(type, APInt::getZero(elt.getIntOrFloatBitWidth())));
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto ext = readExternalData(t, opts, loc);
    if (failed(ext))
      return failure();
    raw = std::move(*ext);
  } else if (t.has_raw_data()) {
    raw = t.raw_data();
  } else {
    // The values the typed field holds, checked against the shape before anything is allocated
    // (a tensor declared [2^20, 2^20] with no data is an error, not an allocation).
    int32_t code = t.data_type();
    int64_t got = code == onnx::TensorProto::FLOAT || code == onnx::TensorProto::COMPLEX64 ? t.float_data_size()
                  : code == onnx::TensorProto::DOUBLE || code == onnx::TensorProto::COMPLEX128
                      ? t.double_data_size()
                  : code == onnx::TensorProto::INT64 ? t.int64_data_size()
                  : code == onnx::TensorProto::UINT32 || code == onnx::TensorProto::UINT64 ? t.uint64_data_size()
                                                                                           : t.int32_data_size();
    if (got != n * (elt.isa<ComplexType>() ? 2 : 1))
      return emitError(loc) << what << " has " << got << " values in its typed data field for " << n
                            << " elements (" << ox::getOnnxTypeName(code) << ")",
             failure();
    raw.resize(size_t(bytes));
    char *out = raw.data();
    auto put = [&](int64_t i, const void *src, size_t w) { std::memcpy(out + i * w, src, w); };
    switch (bytes ? code : int32_t(onnx::TensorProto::UNDEFINED)) { // empty: memcpy never sees a null field
    case onnx::TensorProto::UNDEFINED:
      break;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::COMPLEX64:
      std::memcpy(out, t.float_data().data(), raw.size());
      break;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::COMPLEX128:
      std::memcpy(out, t.double_data().data(), raw.size());
      break;
    case onnx::TensorProto::INT64:
      std::memcpy(out, t.int64_data().data(), raw.size());
      break;
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v = t.uint64_data(i);
        if (width == 4) {
          uint32_t v32 = static_cast<uint32_t>(v);
          put(i, &v32, 4);
        } else {
          put(i, &v, 8);
        }
      }
      break;
    default: // INT32 and every narrower type are stored in int32_data
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = t.int32_data(i);
        if (width == 4)
          put(i, &v, 4);
        else if (width == 2) {
          uint16_t v16 = static_cast<uint16_t>(v);
          put(i, &v16, 2);
        } else {
          uint8_t v8 = static_cast<uint8_t>(v);
          put(i, &v8, 1);
        }
      }
      break;
    }
  }
  if (static_cast<int64_t>(raw.size()) != bytes)
    return emitError(loc) << what << " holds " << raw.size() << " bytes of data, but its shape and "
                          << ox::getOnnxTypeName(t.data_type()) << " need " << bytes,
           failure();

  if (elt.isInteger(1)) {
    SmallVector<bool> bits(n);
    for (int64_t i = 0; i < n; ++i)
      bits[i] = raw[i] != 0;
    return ElementsAttr(DenseElementsAttr::get(type, bits));
  }
  // Large tensors live in the context's resource blobs, not uniqued attributes.
  if (allowResource && n > 64 && !elt.isa<ComplexType>()) {
    std::string key;
    for (char c : t.name())
      key.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ? c : '_');
    if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0])))
      key = "t_" + key;
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(ArrayRef<char>(raw.data(), raw.size()),
                                                           alignof(uint64_t));
    auto &manager = DenseResourceElementsHandle::getManagerInterface(ctx);
    DenseResourceElementsHandle handle = manager.insert(key, std::move(blob));
    return ElementsAttr(DenseResourceElementsAttr::get(type, handle));
  }
  bool splat = false;
  if (!DenseElementsAttr::isValidRawBuffer(type, ArrayRef<char>(raw.data(), raw.size()), splat))
    return emitError(loc) << what << ": data does not match its type", failure();
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(raw.data(), raw.size())));
}

FailureOr<Attribute> Importer::convertAttribute(const onnx::AttributeProto &a, Location loc) {
  switch (a.type()) {
  case onnx::AttributeProto::FLOAT:
    return Attribute(builder.getF32FloatAttr(a.f()));
  case onnx::AttributeProto::INT:
    return Attribute(builder.getIntegerAttr(builder.getIntegerType(64, /*isSigned=*/true), a.i()));
  case onnx::AttributeProto::STRING:
    return Attribute(builder.getStringAttr(a.s()));
  case onnx::AttributeProto::FLOATS:
    return Attribute(builder.getDenseF32ArrayAttr(SmallVector<float>(a.floats().begin(), a.floats().end())));
  case onnx::AttributeProto::INTS:
    return Attribute(builder.getDenseI64ArrayAttr(SmallVector<int64_t>(a.ints().begin(), a.ints().end())));
  case onnx::AttributeProto::STRINGS: {
    SmallVector<Attribute> v;
    for (const auto &s : a.strings())
      v.push_back(builder.getStringAttr(s));
    return Attribute(builder.getArrayAttr(v));
  }
  case onnx::AttributeProto::TENSOR: {
    auto t = convertTensor(a.t(), loc, /*allowResource=*/false);
    if (failed(t))
      return failure();
    return Attribute(*t);
  }
  case onnx::AttributeProto::TENSORS: {
    SmallVector<Attribute> v;
    for (const auto &t : a.tensors()) {
      auto e = convertTensor(t, loc, false);
      if (failed(e))
        return failure();
      v.push_back(*e);
    }
    return Attribute(builder.getArrayAttr(v));
  }
  case onnx::AttributeProto::SPARSE_TENSOR:
  case onnx::AttributeProto::SPARSE_TENSORS: {
    auto one = [&](const onnx::SparseTensorProto &sp) -> FailureOr<Attribute> {
      auto values = convertTensor(sp.values(), loc, false);
      auto indices = convertTensor(sp.indices(), loc, false);
      if (failed(values) || failed(indices))
        return failure();
      SmallVector<int64_t> dims(sp.dims().begin(), sp.dims().end());
      auto type = RankedTensorType::get(dims, values->getElementType());
      auto idx = indices->dyn_cast<DenseIntElementsAttr>();
      auto val = values->dyn_cast<DenseElementsAttr>();
      if (!idx || !val)
        return emitError(loc) << "attribute '" << a.name() << "': malformed sparse tensor", failure();
      return Attribute(SparseElementsAttr::get(type, idx, val));
    };
    if (a.type() == onnx::AttributeProto::SPARSE_TENSOR)
      return one(a.sparse_tensor());
    SmallVector<Attribute> v;
    for (const auto &sp : a.sparse_tensors()) {
      auto e = one(sp);
      if (failed(e))
        return failure();
      v.push_back(*e);
    }
    return Attribute(builder.getArrayAttr(v));
  }
  case onnx::AttributeProto::TYPE_PROTO: {
    Type t = convertType(a.tp(), loc, nullptr);
    if (!t)
      return failure();
    return Attribute(TypeAttr::get(t));
  }
  case onnx::AttributeProto::TYPE_PROTOS: {
    SmallVector<Attribute> v;
    for (const auto &tp : a.type_protos()) {
      Type t = convertType(tp, loc, nullptr);
      if (!t)
        return failure();
      v.push_back(TypeAttr::get(t));
    }
    return Attribute(builder.getArrayAttr(v));
  }
  default:
    return emitError(loc) << "attribute '" << a.name() << "' has no type (UNDEFINED)", failure();
  }
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

} // namespace

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
    return finish(Importer(context, model, options).run());
  onnx::ModelProto inferred = model;
  std::string reason;
  if (!proto::inferShapes(inferred, reason))
    return finish(Importer(context, model, options).run());
  return finish(Importer(context, inferred, options).run());
}

OwningOpRef<ModuleOp> importOnnxBuffer(llvm::StringRef bytes, MLIRContext *context,
                                       const ImportOptions &options) {
  onnx::ModelProto model;
  std::string error;
  if (!proto::parseModel(bytes.data(), bytes.size(), model, error)) {
    emitError(FileLineColLoc::get(context, options.fileName, 0, 0)) << error;
    return nullptr;
  }
  return importOnnxModel(model, context, options);
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
  return importOnnxModel(model, context, options);
}

} // namespace octet
