//===- PlanExport.cpp - MLIR -> runtime plan -------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Conversion/MemoryPlan.h"
#include "octet/Support/ProtoIO.h"

#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/runtime/InPlace.h"
#include "octet/runtime/MicroBatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/JSON.h"

#include <cstring>
#include <map>

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

StringRef dtypeName(Type t) {
  if (t.isF32())
    return "float32";
  if (t.isF64())
    return "float64";
  if (t.isF16())
    return "float16";
  if (t.isBF16())
    return "bfloat16";
  if (t.isFloat8E4M3FN())
    return "float8e4m3fn";
  if (t.isFloat8E5M2())
    return "float8e5m2";
  if (t.isInteger(1))
    return "bool";
  if (auto i = t.dyn_cast<IntegerType>()) {
    if (i.isUnsigned())
      return i.getWidth() == 8 ? "uint8" : "";
    switch (i.getWidth()) {
    case 64: return "int64";
    case 32: return "int32";
    case 16: return "int16";
    case 8: return "int8";
    }
  }
  return "";
}

std::string formatFloat(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  char buf[32];
  snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// A float as the plan's JSON holds it: a number, or "nan" / "inf" / "-inf" (JSON has no literal
/// for them; the runtime's reader takes both forms).
llvm::json::Value floatValue(double v) {
  if (std::isfinite(v))
    return v;
  return formatFloat(v);
}

class PlanWriter {
public:
  PlanWriter(func::FuncOp func, bool inPlaceUpdates) : func(func), inPlaceUpdates(inPlaceUpdates) {}
  /// Writes the plan to `sink` (none: only plans it, for its memory facts).
  LogicalResult run(const octet::proto::FileSink *sink, const std::string &producer, StringRef recipe,
                    DictionaryAttr training);

private:
  int idOf(Value v) {
    auto it = ids.find(v);
    return it == ids.end() ? -1 : it->second;
  }
  LogicalResult addValue(Value v, std::string name, Location loc);
  LogicalResult addConstant(Value v, ElementsAttr data, StringRef kind, Location loc);
  LogicalResult convertAttr(StringRef name, Attribute a, llvm::json::Object &out, Location loc);
  LogicalResult lowerOp(Operation &op);
  LogicalResult lowerConstantOp(ox::ConstantOp op);

  func::FuncOp func;
  bool inPlaceUpdates;
  llvm::DenseMap<Value, int> ids;
  llvm::json::Array values, constants, ops, stateUpdates, gradients;
  llvm::StringMap<int> stateIds;
  // The data blob: each constant's attribute at its offset, written when the plan is.
  struct Payload {
    ElementsAttr attr;
    int64_t offset, bytes;
  };
  std::vector<Payload> payload;
  int64_t dataSize = 0;
  // Memory planning: bytes of each value (-1: not in the arena), its defining
  // op index (-1: an input) and last reading op index.
  std::vector<int64_t> valueBytes;
  std::vector<int> firstDef, lastUse;
  std::vector<char> keptAcrossRuns; // alive from before the first op to the end (runtime Plan::keptAcrossRuns)
  llvm::json::Object planArena();
  void keepFirstMicroBatchResults(const llvm::json::Array &outputs);
  void markInPlaceUpdates();
  void keepCastSourcesAlive();
  void keepProducerOperandsAlive();

public:
  int64_t arenaBytes = 0;
  octet::PlanMemoryFacts memory;
};

llvm::json::Object PlanWriter::planArena() {
  // Views: the result of a Reshape (or Squeeze, Unsqueeze, Flatten, Identity) of an arena value
  // of the same size shares its operand's bytes; the two are one buffer, alive from the
  // operand's definition to the last read of either.
  std::vector<int> root(valueBytes.size());
  for (size_t id = 0; id < root.size(); ++id)
    root[id] = int(id);
  llvm::json::Array views;
  for (const llvm::json::Value &o : ops) {
    const llvm::json::Object &op = *o.getAsObject();
    if (!octet::rt::sharesOperandBuffer(op.getString("type")->str()))
      continue;
    const llvm::json::Array &in = *op.getArray("in"), &out = *op.getArray("out");
    int64_t x = in.empty() ? -1 : *in[0].getAsInteger(), y = out.empty() ? -1 : *out[0].getAsInteger();
    if (x < 0 || y < 0 || valueBytes[size_t(x)] <= 0 || valueBytes[size_t(y)] != valueBytes[size_t(x)])
      continue;
    root[size_t(y)] = root[size_t(x)];
    views.push_back(llvm::json::Array{y, x});
  }
  // In-place results: an op that may write its result over an operand (InPlace.h), the last
  // reader of that operand's whole buffer (its views included), gives the result that buffer.
  std::vector<int> rootLast(valueBytes.size(), -1);
  for (size_t id = 0; id < valueBytes.size(); ++id)
    rootLast[size_t(root[id])] = std::max(rootLast[size_t(root[id])], std::max(lastUse[id], firstDef[id]));
  llvm::json::Array inPlace;
  for (int k = 0; k < int(ops.size()); ++k) {
    const llvm::json::Object &op = *ops[size_t(k)].getAsObject();
    int at = octet::rt::resultTakesOperand(op.getString("type")->str());
    const llvm::json::Array &in = *op.getArray("in"), &out = *op.getArray("out");
    if (at < 0 || size_t(at) >= in.size() || out.empty())
      continue;
    int64_t x = *in[size_t(at)].getAsInteger(), y = *out[0].getAsInteger();
    if (x < 0 || y < 0 || valueBytes[size_t(x)] <= 0 || valueBytes[size_t(y)] != valueBytes[size_t(x)] ||
        root[size_t(y)] != int(y) || rootLast[size_t(root[size_t(x)])] != k)
      continue;
    int r = root[size_t(x)];
    for (size_t id = 0; id < root.size(); ++id) // y and its views join x's buffer
      if (root[id] == int(y))
        root[id] = r;
    rootLast[size_t(r)] = std::max(rootLast[size_t(r)], rootLast[size_t(y)]); // a later op may take it in turn
    inPlace.push_back(llvm::json::Array{y, x});
  }
  std::vector<octet::BufferRequest> requests;
  std::vector<int> at(valueBytes.size(), -1); // a root's request
  for (size_t id = 0; id < valueBytes.size(); ++id) {
    if (valueBytes[id] <= 0)
      continue;
    int last = std::max(lastUse[id], firstDef[id]);
    int first = keptAcrossRuns.size() > id && keptAcrossRuns[id] ? 0 : firstDef[id];
    if (int r = root[id]; at[size_t(r)] >= 0) {
      octet::BufferRequest &q = requests[size_t(at[size_t(r)])];
      q.first = std::min(q.first, first);
      q.last = std::max(q.last, last);
    } else {
      at[size_t(r)] = int(requests.size());
      requests.push_back({r, valueBytes[id], first, last});
    }
  }
  octet::MemoryPlan plan = octet::planMemory(requests, octet::kPlanArenaAlignment);
  arenaBytes = plan.arenaBytes;
  octet::LivePeak peak = octet::livePeak(requests, octet::kPlanArenaAlignment);
  memory.arenaBytes = plan.arenaBytes;
  memory.livePeakBytes = peak.bytes;
  memory.aliveBuffers = int64_t(peak.alive.size());
  if (peak.op >= 0 && size_t(peak.op) < ops.size()) {
    const llvm::json::Object &op = *ops[size_t(peak.op)].getAsObject();
    std::optional<llvm::StringRef> name = op.getString("name");
    memory.peakOp = (name && !name->empty() ? name->str() : "op " + std::to_string(peak.op)) + " (" +
                    op.getString("type")->str() + ")";
  } else if (peak.op >= 0) {
    memory.peakOp = "the step's end";
  }
  for (size_t k = 0; k < peak.alive.size() && k < 5; ++k) {
    const octet::BufferRequest &r = requests[peak.alive[k]];
    std::optional<llvm::StringRef> name = values[size_t(r.value)].getAsObject()->getString("name");
    std::string text = name ? name->str() : "";
    if ((text.empty() || text[0] == '%') && r.first >= 0 && size_t(r.first) < ops.size()) {
      // An unnamed result: named by the op that makes it.
      const llvm::json::Object &def = *ops[size_t(r.first)].getAsObject();
      std::optional<llvm::StringRef> op = def.getString("name");
      text = (op && !op->empty() ? op->str() : "op " + std::to_string(r.first)) + " (" +
             def.getString("type")->str() + ")";
    }
    memory.largest.push_back({text, r.bytes});
  }
  std::vector<int64_t> offset(valueBytes.size(), -1);
  for (const octet::BufferPlacement &b : plan.buffers)
    offset[size_t(b.value)] = b.offset;
  llvm::json::Array buffers;
  for (size_t id = 0; id < valueBytes.size(); ++id)
    if (valueBytes[id] > 0)
      buffers.push_back(llvm::json::Array{int64_t(id), offset[size_t(root[id])], valueBytes[id]});
  return llvm::json::Object{{"alignment", octet::kPlanArenaAlignment},
                            {"arena_bytes", plan.arenaBytes},
                            {"buffers", std::move(buffers)},
                            {"views", std::move(views)},
                            {"in_place", std::move(inPlace)}};
}

/// The CUDA runtime may compute the octet::Pointwise programs right before an fp8.cast_amax (views
/// aside; up to 12, its longest run of generated programs) in the cast's own pass, their last
/// result going to the cast only (the GELU gradient before the E5M2 cast of dY). That pass reads the
/// programs' inputs while it writes the cast's outputs, so the inputs stay alive until the cast:
/// the arena must not give the codes their bytes.
void PlanWriter::keepCastSourcesAlive() {
  constexpr int kMaxRun = 12;
  for (int c = 0; c < int(ops.size()); ++c) {
    if (ops[size_t(c)].getAsObject()->getString("type") != "fp8.cast_amax")
      continue;
    for (int k = c - 1, programs = 0; k >= 0 && programs < kMaxRun; --k) {
      const llvm::json::Object &op = *ops[size_t(k)].getAsObject();
      std::string type = op.getString("type")->str();
      if (octet::rt::isView(type))
        continue;
      if (type != "octet::Pointwise")
        break;
      ++programs;
      for (const llvm::json::Value &in : *op.getArray("in"))
        if (int64_t id = *in.getAsInteger(); id >= 0)
          lastUse[size_t(id)] = std::max(lastUse[size_t(id)], c);
    }
  }
}

/// Gradient accumulation's first-micro-batch ops (octet-micro-batch-phases reuse-invariants): what
/// they compute for the other ops, the outputs or the state updates is read by the step's later
/// runs too, so its bytes stay reserved through the whole run (as the runtime's lifetimes() says).
void PlanWriter::keepFirstMicroBatchResults(const llvm::json::Array &outputs) {
  auto ids = [](const llvm::json::Array *a) {
    std::vector<int64_t> v;
    for (const llvm::json::Value &x : *a)
      v.push_back(*x.getAsInteger());
    return v;
  };
  std::vector<int64_t> alsoRead = ids(&outputs);
  for (const llvm::json::Value &u : stateUpdates)
    alsoRead.push_back(*u.getAsObject()->getInteger("value"));
  keptAcrossRuns = octet::rt::keptAcrossRuns(
      valueBytes.size(),
      [&](const auto &visit) {
        for (const llvm::json::Value &o : ops) {
          const llvm::json::Object &op = *o.getAsObject();
          const llvm::json::Object *attrs = op.getObject("attrs");
          visit(attrs && attrs->getObject("first_micro_batch"), ids(op.getArray("in")), ids(op.getArray("out")));
        }
      },
      alsoRead);
  for (size_t id = 0; id < keptAcrossRuns.size(); ++id)
    if (keptAcrossRuns[id])
      lastUse[id] = int(ops.size());
}

/// A producer_amax group's amax (octet-fuse-producer-amax) is taken in its producer's pass, so
/// its result must not be given bytes of an operand that dies at the producer: the producer's
/// operands live until the amax.
void PlanWriter::keepProducerOperandsAlive() {
  std::map<int64_t, int> producerAt; // the group -> its producer's op index
  for (int k = 0; k < int(ops.size()); ++k) {
    const llvm::json::Object &op = *ops[size_t(k)].getAsObject();
    const llvm::json::Object *attrs = op.getObject("attrs");
    const llvm::json::Object *kind = attrs ? attrs->getObject("fusion") : nullptr;
    const llvm::json::Object *group = attrs ? attrs->getObject("fusion_group") : nullptr;
    if (!kind || !group || kind->getString("s") != "producer_amax" || !group->getInteger("i"))
      continue;
    int64_t g = *group->getInteger("i");
    if (op.getString("type") != "fp8.amax") {
      producerAt[g] = k;
      continue;
    }
    auto p = producerAt.find(g);
    if (p == producerAt.end())
      continue;
    for (const llvm::json::Value &in : *ops[size_t(p->second)].getAsObject()->getArray("in"))
      if (int64_t id = *in.getAsInteger(); id >= 0)
        lastUse[size_t(id)] = std::max(lastUse[size_t(id)], k);
  }
}

/// A state update is in place when the new value's op is the last reader of the old value, or
/// comes after it: then the op can write into the state's own bytes. When the op reads the
/// old value itself, it must read element i only where it writes element i (an elementwise op
/// whose operand has the result's shape). The new value then needs no arena buffer.
void PlanWriter::markInPlaceUpdates() {
  llvm::DenseSet<int64_t> states, news;
  for (llvm::json::Value &u : stateUpdates) {
    llvm::json::Object &o = *u.getAsObject();
    int64_t st = *o.getInteger("state"), v = *o.getInteger("value");
    bool fresh = states.insert(st).second & news.insert(v).second;
    int def = firstDef[size_t(v)];
    if (!fresh || def < 0 || valueBytes[size_t(v)] <= 0 || lastUse[size_t(st)] > def)
      continue;
    const llvm::json::Object &sv = *values[size_t(st)].getAsObject(), &vv = *values[size_t(v)].getAsObject();
    if (sv.getString("dtype") != vv.getString("dtype") || !sv.getArray("shape") || !vv.getArray("shape") ||
        *sv.getArray("shape") != *vv.getArray("shape"))
      continue;
    if (lastUse[size_t(st)] == def) {
      const llvm::json::Object &op = *ops[size_t(def)].getAsObject();
      if (!octet::rt::readsElementForElement(op.getString("type")->str()))
        continue; // same shapes, so every operand of an elementwise op that is the state reads index i
    }
    o["in_place"] = true;
    valueBytes[size_t(v)] = -1;
  }
}

LogicalResult PlanWriter::addValue(Value v, std::string name, Location loc) {
  Type type = v.getType();
  if (type.isa<NoneType>())
    return success();
  llvm::json::Object o;
  bool seq = false;
  if (auto s = type.dyn_cast<ox::SeqType>()) {
    seq = true;
    type = s.getElementType();
  }
  auto tt = type.dyn_cast<TensorType>();
  StringRef dt = tt ? dtypeName(tt.getElementType()) : "";
  if (dt.empty())
    return emitError(loc) << "type " << v.getType() << " cannot be represented in a plan";
  if (name.empty())
    name = "%" + std::to_string(values.size());
  o["name"] = name;
  o["dtype"] = dt;
  if (seq)
    o["sequence"] = true;
  else if (tt.hasStaticShape())
    o["shape"] = llvm::json::Array(tt.getShape());
  ids[v] = int(values.size());
  values.push_back(std::move(o));
  int64_t bytes = -1;
  if (!seq && tt.hasStaticShape()) {
    Type e = tt.getElementType();
    int64_t width = e.isIntOrFloat() ? std::max<int64_t>(8, e.getIntOrFloatBitWidth()) / 8 : 0;
    bytes = width ? tt.getNumElements() * width : -1;
  }
  valueBytes.push_back(bytes);
  firstDef.push_back(-1);
  lastUse.push_back(-1);
  return success();
}

/// Gives `fn` the tensor's bytes as a plan stores them (ox::getRawTensorBytes): a view of the
/// attribute's own storage where it holds them so (resource blobs, dense non-splat numbers), else
/// a temporary copy.
bool withRawBytes(ElementsAttr attr, llvm::function_ref<bool(ArrayRef<char>)> fn) {
  if (auto res = attr.dyn_cast<DenseResourceElementsAttr>())
    if (AsmResourceBlob *blob = res.getRawHandle().getBlob())
      return fn(blob->getData());
  auto dense = attr.dyn_cast<DenseElementsAttr>();
  if (dense && !dense.getElementType().isInteger(1) && !dense.getElementType().isa<ox::StringType>() &&
      (!dense.isSplat() || dense.getNumElements() == 1))
    return fn(dense.getRawData());
  std::string raw;
  return succeeded(ox::getRawTensorBytes(attr, raw)) && fn(ArrayRef<char>(raw.data(), raw.size()));
}

LogicalResult PlanWriter::addConstant(Value v, ElementsAttr attr, StringRef kind, Location loc) {
  // A splat (zero moments, absent weights) is stored as one element.
  auto dense = attr.dyn_cast<DenseElementsAttr>();
  bool splat = dense && dense.isSplat() && dense.getNumElements() > 1 &&
               !dense.getElementType().isa<ox::StringType>();
  if (splat)
    attr = DenseElementsAttr::get(RankedTensorType::get({}, dense.getElementType()), dense.getSplatValue<Attribute>());
  int64_t size = -1;
  if (!withRawBytes(attr, [&](ArrayRef<char> raw) {
        size = int64_t(raw.size());
        return true;
      }))
    return emitError(loc) << "constant has no raw data (strings and sparse tensors are not supported in plans)";
  // The plan value carries the attribute's static type (results may be unranked).
  auto &obj = *values[size_t(idOf(v))].getAsObject();
  obj["shape"] = llvm::json::Array((splat ? dense : attr).getType().cast<ShapedType>().getShape());
  dataSize = (dataSize + 63) / 64 * 64;
  llvm::json::Object c{{"value", idOf(v)}, {"offset", dataSize}, {"bytes", size}, {"kind", kind}};
  if (splat)
    c["splat"] = true;
  payload.push_back({attr, dataSize, size});
  dataSize += size;
  constants.push_back(std::move(c));
  valueBytes[size_t(idOf(v))] = -1; // lives in the data blob, not the arena
  return success();
}

LogicalResult PlanWriter::convertAttr(StringRef name, Attribute a, llvm::json::Object &out, Location loc) {
  auto put = [&](StringRef kind, llvm::json::Value v) {
    out[name] = llvm::json::Object{{kind, std::move(v)}};
    return success();
  };
  if (auto b = a.dyn_cast<BoolAttr>())
    return put("i", int64_t(b.getValue()));
  if (auto i = a.dyn_cast<IntegerAttr>())
    return put("i", i.getValue().getSExtValue());
  if (auto f = a.dyn_cast<FloatAttr>())
    return put("f", formatFloat(f.getValueAsDouble()));
  if (auto s = a.dyn_cast<StringAttr>())
    return put("s", s.getValue());
  if (auto t = a.dyn_cast<TypeAttr>())
    return put("s", dtypeName(t.getValue()));
  if (auto e = a.dyn_cast<fp8::AmaxComputeAlgoAttr>())
    return put("s", fp8::stringifyAmaxComputeAlgo(e.getValue()));
  if (auto e = a.dyn_cast<fp8::AccumulationAttr>())
    return put("s", fp8::stringifyAccumulation(e.getValue()));
  if (auto e = a.dyn_cast<fp8::ReductionAttr>())
    return put("s", fp8::stringifyReduction(e.getValue()));
  if (auto arr = a.dyn_cast<DenseI64ArrayAttr>())
    return put("ints", llvm::json::Array(arr.asArrayRef()));
  if (auto arr = a.dyn_cast<DenseF32ArrayAttr>()) {
    llvm::json::Array fs;
    for (float f : arr.asArrayRef())
      fs.push_back(floatValue(f));
    return put("floats", std::move(fs));
  }
  if (auto arr = a.dyn_cast<ArrayAttr>()) {
    llvm::json::Array xs;
    StringRef kind = "ints";
    for (Attribute e : arr) {
      if (auto s = e.dyn_cast<StringAttr>()) {
        kind = "strings";
        xs.push_back(s.getValue());
      } else if (auto i = e.dyn_cast<IntegerAttr>()) {
        xs.push_back(i.getValue().getSExtValue());
      } else if (auto f = e.dyn_cast<FloatAttr>()) {
        kind = "floats";
        xs.push_back(floatValue(f.getValueAsDouble()));
      } else {
        return emitError(loc) << "attribute '" << name << "' has an element with no plan form";
      }
    }
    return put(kind, std::move(xs));
  }
  if (auto e = a.dyn_cast<ElementsAttr>()) {
    auto dense = e.dyn_cast<DenseElementsAttr>();
    auto st = e.getType().cast<ShapedType>();
    StringRef dt = dtypeName(st.getElementType());
    if (!dense || dt.empty())
      return emitError(loc) << "tensor attribute '" << name << "' has no plan form";
    llvm::json::Array vals;
    if (st.getElementType().isa<FloatType>())
      for (APFloat f : dense.getValues<APFloat>())
        vals.push_back(floatValue(f.convertToDouble()));
    else
      for (APInt i : dense.getValues<APInt>())
        vals.push_back(st.getElementType().isInteger(1) ? int64_t(i.getBoolValue()) : i.getSExtValue());
    return put("tensor", llvm::json::Object{{"dtype", dt},
                                            {"shape", llvm::json::Array(st.getShape())},
                                            {"data", std::move(vals)}});
  }
  return emitError(loc) << "attribute '" << name << "' (" << a << ") has no plan form";
}

LogicalResult PlanWriter::lowerConstantOp(ox::ConstantOp op) {
  MLIRContext *ctx = op.getContext();
  ElementsAttr value;
  if (auto v = op.getValueAttr())
    value = v;
  else if (auto f = op.getValueFloatAttr())
    value = DenseElementsAttr::get(RankedTensorType::get({}, Float32Type::get(ctx)), f.getValue());
  else if (auto i = op.getValueIntAttr())
    value = DenseElementsAttr::get(RankedTensorType::get({}, IntegerType::get(ctx, 64)), i.getValue().getSExtValue());
  else if (auto fs = op.getValueFloatsAttr())
    value = DenseElementsAttr::get(RankedTensorType::get({int64_t(fs.size())}, Float32Type::get(ctx)), fs.asArrayRef());
  else if (auto is = op.getValueIntsAttr())
    value = DenseElementsAttr::get(RankedTensorType::get({int64_t(is.size())}, IntegerType::get(ctx, 64)),
                                   is.asArrayRef());
  else
    return op.emitError("string constants cannot be represented in a plan");
  return addConstant(op.getResult(), value, "const", op.getLoc());
}

LogicalResult PlanWriter::lowerOp(Operation &op) {
  auto names = op.getAttrOfType<ArrayAttr>(octet::kResultNamesAttr);
  auto resultName = [&](unsigned i) -> std::string {
    if (names && i < names.size())
      if (auto s = names[i].dyn_cast<StringAttr>())
        return s.str();
    return "";
  };
  for (OpResult r : op.getResults()) {
    // The codes of a cast that also writes its transposed copy, where nothing reads them (the
    // copies octet-rematerialize-fp8-casts makes for a wgrad): the plan leaves them out (-1) and a
    // backend does not write them.
    if (auto c = dyn_cast<fp8::CastAmaxOp>(op); c && r == c.getOutput() && c.getTransposed() && r.use_empty())
      continue;
    if (failed(addValue(r, resultName(r.getResultNumber()), op.getLoc())))
      return failure();
  }

  if (auto init = dyn_cast<ox::InitializerOp>(op)) {
    auto &obj = *values[size_t(idOf(init.getResult()))].getAsObject();
    obj["name"] = init.getName();
    bool state = op.hasAttr(octet::kFp8StateAttr);
    if (state)
      stateIds[init.getName()] = idOf(init.getResult());
    Type elt = init.getType().cast<ShapedType>().getElementType();
    // One rank's shard (MS-AMP O3's sharded masters): the constant's bytes are the whole tensor, of
    // which each rank keeps its part; the value has the shard's shape.
    auto whole = op.getAttrOfType<ElementsAttr>(octet::kShardInitAttr);
    auto shards = op.getAttrOfType<IntegerAttr>(octet::kShardCountAttr);
    if (bool(whole) != bool(shards) || (state && shards && shards.getInt() < 2))
      return op.emitError("a sharded state needs both ") << octet::kShardInitAttr << " and " << octet::kShardCountAttr
                                                         << " (>= 2)";
    if (failed(addConstant(init.getResult(), whole ? whole : init.getValue(),
                           state ? "state" : elt.isa<FloatType>() ? "param" : "const", op.getLoc())))
      return failure();
    if (whole) {
      auto st = init.getType().cast<RankedTensorType>();
      auto wt = whole.getType().cast<RankedTensorType>();
      if (st.getRank() != 1 || st.getElementType() != wt.getElementType() ||
          st.getDimSize(0) != (wt.getNumElements() + shards.getInt() - 1) / shards.getInt())
        return op.emitError("a sharded state's type ") << st << " is not 1/" << shards.getInt() << " of " << wt;
      obj["shape"] = llvm::json::Array(st.getShape());
      auto &c = *constants.back().getAsObject();
      c["shards"] = shards.getInt();
      c["whole_shape"] = llvm::json::Array(wt.getShape());
    }
    if (auto role = op.getAttrOfType<StringAttr>(octet::kRoleAttr))
      (*constants.back().getAsObject())["role"] = role.getValue();
    return success();
  }
  if (auto c = dyn_cast<ox::ConstantOp>(op))
    return lowerConstantOp(c);
  if (isa<ox::NoneOp>(op))
    return success();

  llvm::json::Object o;
  llvm::json::Object attrs;
  std::string type;
  if (auto node = dyn_cast<ox::GenericNodeOp>(op)) {
    if (op.getNumRegions())
      return op.emitError("ops with subgraphs (") << node.getOpType() << ") cannot be run by the CPU runtime";
    type = octet::planOpType(&op);
    if (auto dict = node.getAttrsAttr())
      for (NamedAttribute a : dict)
        if (failed(convertAttr(a.getName(), a.getValue(), attrs, op.getLoc())))
          return failure();
  } else if (isa<ox::ONNXDialect>(op.getDialect()) || isa<fp8::FP8Dialect>(op.getDialect())) {
    type = octet::planOpType(&op);
    for (NamedAttribute a : op.getAttrs()) {
      StringRef n = a.getName().getValue();
      if (n.startswith("onnx.") || n.startswith("octet.") || n == "operand_segment_sizes")
        continue;
      if (failed(convertAttr(n, a.getValue(), attrs, op.getLoc())))
        return failure();
    }
  } else {
    return op.emitError("op '") << op.getName()
                                << "' cannot be written to a plan; lower it first (fp8-opt --emit=plan runs "
                                   "octet-lower-layers)";
  }
  llvm::json::Array ins, outs;
  if (auto segments = op.getAttrOfType<DenseI32ArrayAttr>("operand_segment_sizes")) {
    // Operands at fixed positions: an absent optional one is -1 (trailing ones left out).
    unsigned at = 0;
    for (int32_t n : segments.asArrayRef()) {
      if (n == 0)
        ins.push_back(-1);
      for (int32_t i = 0; i < n; ++i, ++at)
        ins.push_back(idOf(op.getOperand(at)));
    }
    while (!ins.empty() && ins.back().getAsInteger() == int64_t(-1))
      ins.pop_back();
  } else {
    for (Value v : op.getOperands())
      ins.push_back(v.getType().isa<NoneType>() ? -1 : idOf(v));
  }
  for (OpResult r : op.getResults())
    outs.push_back(idOf(r));
  int index = int(ops.size());
  for (Value v : op.getOperands())
    if (int id = idOf(v); id >= 0)
      lastUse[size_t(id)] = std::max(lastUse[size_t(id)], index);
  for (OpResult r : op.getResults())
    if (int id = idOf(r); id >= 0)
      firstDef[size_t(id)] = index;
  // A fusion group the compiler formed (FusionGroups.h), a cast pass (octet-fuse-cast-sources) and
  // a GEMM bias its reader adds (octet-fold-gemm-bias): what the backend runs as one.
  for (StringRef n : {"fusion", "fusion_group", "cast_pass", "bias_fold"})
    if (Attribute a = op.getAttr(("octet." + n).str()))
      if (failed(convertAttr(n, a, attrs, op.getLoc())))
        return failure();
  if (op.hasAttr("octet.last_micro_batch")) // gradient accumulation (octet-micro-batch-phases)
    attrs["last_micro_batch"] = llvm::json::Object{{"i", int64_t(1)}};
  if (op.hasAttr("octet.first_micro_batch"))
    attrs["first_micro_batch"] = llvm::json::Object{{"i", int64_t(1)}};
  o["type"] = type;
  o["name"] = ox::getNodeName(&op);
  o["in"] = std::move(ins);
  o["out"] = std::move(outs);
  if (!attrs.empty())
    o["attrs"] = std::move(attrs);
  ops.push_back(std::move(o));
  return success();
}

LogicalResult PlanWriter::run(const octet::proto::FileSink *sink, const std::string &producer, StringRef recipe,
                              DictionaryAttr training) {
  llvm::json::Array inputs, outputs;
  for (BlockArgument arg : func.getArguments()) {
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), ox::kNameAttr);
    if (failed(addValue(arg, name ? name.str() : "", func.getLoc())))
      return failure();
    if (auto dflt = func.getArgAttrOfType<ElementsAttr>(arg.getArgNumber(), ox::kDefaultAttr)) {
      if (failed(addConstant(arg, dflt, "param", func.getLoc())))
        return failure();
    } else {
      inputs.push_back(idOf(arg));
    }
  }
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        int id = idOf(v);
        if (id < 0)
          return ret.emitError("result ") << i << " cannot be represented in a plan";
        auto name = func.getResultAttrOfType<StringAttr>(i, ox::kNameAttr);
        // Outputs are named after the graph output (a value may be returned twice:
        // the plan names the value after its first output).
        if (name && values[size_t(id)].getAsObject()->getString("name")->startswith("%"))
          (*values[size_t(id)].getAsObject())["name"] = name.getValue();
        outputs.push_back(id);
        if (auto st = func.getResultAttrOfType<StringAttr>(i, octet::kStateUpdateAttr)) {
          auto it = stateIds.find(st.getValue());
          if (it == stateIds.end())
            return ret.emitError("result ") << i << " updates '" << st.getValue()
                                            << "', which is not a state initializer";
          stateUpdates.push_back(llvm::json::Object{{"state", it->second}, {"value", id}});
        }
        if (auto of = func.getResultAttrOfType<StringAttr>(i, octet::kGradOfAttr)) {
          llvm::json::Object g{{"param", of.getValue()}, {"value", id}};
          if (auto st = func.getResultAttrOfType<TypeAttr>(i, octet::kGradStorageAttr))
            g["storage"] = dtypeName(st.getValue());
          gradients.push_back(std::move(g));
        }
      }
      continue;
    }
    if (failed(lowerOp(op)))
      return failure();
  }
  for (const llvm::json::Value &v : outputs) // outputs and next states live to the end
    lastUse[size_t(*v.getAsInteger())] = int(ops.size());
  for (const llvm::json::Value &u : stateUpdates)
    lastUse[size_t(*u.getAsObject()->getInteger("value"))] = int(ops.size());
  keepCastSourcesAlive();
  keepProducerOperandsAlive();
  keepFirstMicroBatchResults(outputs);
  if (inPlaceUpdates)
    markInPlaceUpdates();
  llvm::json::Object memory = planArena();
  llvm::json::Object train;
  if (training)
    for (NamedAttribute a : training)
      if (auto sa = a.getValue().dyn_cast<StringAttr>())
        train[a.getName().getValue()] = sa.getValue();
  llvm::json::Object root{{"format", "octet-plan"},
                          {"version", int64_t(octet::kPlanFormatVersion)},
                          {"producer", producer},
                          {"recipe", recipe},
                          {"training", std::move(train)},
                          {"values", std::move(values)},
                          {"inputs", std::move(inputs)},
                          {"outputs", std::move(outputs)},
                          {"constants", std::move(constants)},
                          {"state_updates", std::move(stateUpdates)},
                          {"gradients", std::move(gradients)},
                          {"memory", std::move(memory)},
                          {"ops", std::move(ops)}};
  std::string header;
  llvm::raw_string_ostream os(header);
  os << llvm::json::Value(std::move(root));
  os.flush();

  if (!sink)
    return success();
  // Fixed part: magic, version, flags, header size, data offset, data size, crc32 (written last:
  // it covers the header and the data, which stream one constant at a time).
  uint64_t headerSize = header.size();
  uint64_t dataOffset = (48 + headerSize + 63) / 64 * 64;
  std::string fixed("OCTPLAN\0", 8);
  auto put32 = [&](uint32_t v) { fixed.append(reinterpret_cast<const char *>(&v), 4); };
  auto put64 = [&](uint64_t v) { fixed.append(reinterpret_cast<const char *>(&v), 8); };
  put32(octet::kPlanFormatVersion);
  put32(0);
  put64(headerSize);
  put64(dataOffset);
  put64(uint64_t(dataSize));
  put32(0); // the crc32, at byte 40
  put32(0);
  auto failedWrite = [&]() { return func.emitError("cannot write the plan"); };
  uint32_t crc = llvm::crc32(0, ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(header.data()), header.size()));
  std::string pad(dataOffset - 48 - headerSize, '\0');
  if (!sink->put(fixed.data(), fixed.size()) || !sink->put(header.data(), header.size()) ||
      !sink->put(pad.data(), pad.size()))
    return failedWrite();
  static const char zeros[64] = {};
  int64_t at = 0;
  for (const Payload &p : payload) {
    if (p.offset > at) { // alignment: zeros, in the checksum too
      size_t n = size_t(p.offset - at);
      crc = llvm::crc32(crc, ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(zeros), n));
      if (!sink->put(zeros, n))
        return failedWrite();
    }
    if (!withRawBytes(p.attr, [&](ArrayRef<char> raw) {
          if (!raw.empty()) // zlib's crc32 of no bytes at a null pointer starts over at 0
            crc = llvm::crc32(crc, ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(raw.data()), raw.size()));
          return int64_t(raw.size()) == p.bytes && sink->put(raw.data(), raw.size());
        }))
      return failedWrite();
    at = p.offset + p.bytes;
  }
  return sink->patch(40, reinterpret_cast<const char *>(&crc), 4) ? success() : failedWrite();
}

} // namespace

std::string octet::planOpType(Operation *op) {
  if (auto node = dyn_cast<ox::GenericNodeOp>(op)) {
    std::string type = node.getOpType().str();
    if (!node.getDomain().empty() && node.getDomain() != "ai.onnx")
      type = node.getDomain().str() + "::" + type;
    return type;
  }
  if (isa<ox::ONNXDialect>(op->getDialect()))
    return ox::ONNXDialect::getOnnxOpType(op).str();
  if (isa<fp8::FP8Dialect>(op->getDialect()))
    return op->getName().getStringRef().str();
  return "";
}

namespace {
LogicalResult exportPlan(ModuleOp module, const octet::proto::FileSink *sink, const std::string &producer,
                         int64_t *arenaBytes, bool inPlaceUpdates, octet::PlanMemoryFacts *memory) {
  func::FuncOp func;
  for (auto f : module.getOps<func::FuncOp>())
    if (!func || f.getName() == ox::kMainGraphName)
      func = f;
  if (!func)
    return module.emitError("no function to write as a plan");
  if (!func.getBody().hasOneBlock())
    return func.emitError("the function must have a single block");
  StringRef recipe;
  if (auto r = module->getAttrOfType<StringAttr>(octet::kRecipeAttr))
    recipe = r.getValue();
  PlanWriter writer(func, inPlaceUpdates);
  if (failed(writer.run(sink, producer, recipe, module->getAttrOfType<DictionaryAttr>(octet::kTrainingAttr))))
    return failure();
  if (arenaBytes)
    *arenaBytes = writer.arenaBytes;
  if (memory)
    *memory = writer.memory;
  return success();
}
} // namespace

LogicalResult octet::exportToPlanBytes(ModuleOp module, std::string &bytes, const std::string &producer,
                                       int64_t *arenaBytes, bool inPlaceUpdates, PlanMemoryFacts *memory) {
  bytes.clear();
  proto::FileSink sink;
  sink.put = [&](const char *data, size_t n) {
    bytes.append(data, n);
    return true;
  };
  sink.patch = [&](uint64_t offset, const char *data, size_t n) {
    if (offset + n > bytes.size())
      return false;
    std::memcpy(&bytes[offset], data, n);
    return true;
  };
  return exportPlan(module, &sink, producer, arenaBytes, inPlaceUpdates, memory);
}

LogicalResult octet::exportToPlanFile(ModuleOp module, const std::string &path, const std::string &producer,
                                      int64_t *arenaBytes, bool inPlaceUpdates, PlanMemoryFacts *memory) {
  LogicalResult result = success();
  std::string error;
  bool written = proto::writeFileAtomically(
      path,
      [&](const proto::FileSink &sink, std::string &) {
        result = exportPlan(module, &sink, producer, arenaBytes, inPlaceUpdates, memory);
        return succeeded(result);
      },
      error);
  if (failed(result))
    return failure();
  if (!written)
    return module.emitError() << "cannot write '" << path << "': " << error;
  return success();
}

LogicalResult octet::planMemoryFacts(ModuleOp module, bool inPlaceUpdates, int64_t &arenaBytes,
                                     PlanMemoryFacts *memory) {
  return exportPlan(module, nullptr, "", &arenaBytes, inPlaceUpdates, memory);
}
