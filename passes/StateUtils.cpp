//===- StateUtils.cpp - Runtime state in functions -----------------------===//
#include "StateUtils.h"
#include "llvm/ADT/StringExtras.h"

#include "OnnxBuilder.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"

using namespace mlir;
namespace ox = octet::onnx_dialect;

Value octet::getOrCreateState(func::FuncOp func, Location loc, StringRef name, DenseElementsAttr init) {
  Block &entry = func.getBody().front();
  Operation *last = nullptr; // new state goes after the existing initializers
  for (auto i : entry.getOps<ox::InitializerOp>()) {
    if (i.getName() == name && i->hasAttr(kFp8StateAttr))
      return i.getResult();
    last = i;
  }
  OpBuilder top = OpBuilder::atBlockBegin(&entry);
  if (last)
    top.setInsertionPointAfter(last);
  auto op = top.create<ox::InitializerOp>(loc, init.getType(), top.getStringAttr(name), init);
  op->setAttr(kFp8StateAttr, top.getUnitAttr());
  return op.getResult();
}

std::string octet::stateName(Value v) {
  auto init = v.getDefiningOp<ox::InitializerOp>();
  return init ? init.getName().str() : "";
}

void octet::appendResult(func::FuncOp func, Value v, StringRef name, ArrayRef<NamedAttribute> attrs) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  NamedAttrList list(attrs);
  list.set(ox::kNameAttr, StringAttr::get(func.getContext(), name));
  func.insertResult(func.getNumResults(), v.getType(), list.getDictionary(func.getContext()));
  ret->insertOperands(ret->getNumOperands(), v);
}

void octet::appendStateUpdates(func::FuncOp func, ArrayRef<std::pair<std::string, Value>> updates) {
  Builder b(func.getContext());
  for (auto &[name, v] : updates)
    appendResult(func, v, name + ".next", {b.getNamedAttr(kStateUpdateAttr, b.getStringAttr(name))});
}

std::pair<Value, Value> octet::msampScale(OpBuilder &b, Location loc, Value amax, Type format) {
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  auto ds = b.create<octet::fp8::DynamicScaleOp>(loc, scalar, scalar, amax, TypeAttr::get(format),
                                                 b.getBoolAttr(true), b.getF32FloatAttr(1e-12f));
  return {ds.getScale(), ds.getScaleInv()};
}

Value octet::flatPadded(OpBuilder &b, Location loc, Value v, int64_t worldSize) {
  auto t = v.getType().cast<RankedTensorType>();
  int64_t n = t.getNumElements(), padded = (n + worldSize - 1) / worldSize * worldSize;
  OnnxBuilder ox(b, loc);
  Value flat = t.getRank() == 1 ? v : ox.reshape(v, {n});
  if (padded == n)
    return flat;
  auto zt = RankedTensorType::get({padded - n}, t.getElementType());
  Value zeros = ox.constant(DenseElementsAttr::get(
      zt, ArrayRef<Attribute>{FloatAttr::get(t.getElementType(), 0.0)}));
  return ox.op("Concat", RankedTensorType::get({padded}, t.getElementType()), {flat, zeros}, {ox.si64("axis", 0)});
}

std::string octet::layerOf(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    if (!parts[i].empty() && llvm::all_of(parts[i], [](char c) { return c >= '0' && c <= '9'; }))
      return llvm::join(parts.begin(), parts.begin() + i + 1, ".");
  return "";
}

octet::GatheredTogether octet::gatherTogether(OpBuilder &b, Location loc, ArrayRef<Operation *> members) {
  auto first = cast<fp8::AllGatherOp>(members.front());
  Block *body = b.getInsertionBlock();
  octet::OnnxBuilder ox(b, loc);
  int64_t n = first.getWorldSize(), total = 0;
  Type elt = first.getInput().getType().cast<RankedTensorType>().getElementType();
  SmallVector<Value> shards;
  for (Operation *m : members) {
    shards.push_back(m->getOperand(0));
    total += m->getOperand(0).getType().cast<RankedTensorType>().getDimSize(0);
  }
  GatheredTogether out;
  Value packed = ox.op("Concat", RankedTensorType::get({total}, elt), shards, {ox.si64("axis", 0)});
  out.pack = packed.getDefiningOp();
  auto gather = b.create<fp8::AllGatherOp>(loc, RankedTensorType::get({n * total}, elt), packed, b.getI64IntegerAttr(n));
  for (NamedAttribute a : first->getDialectAttrs())
    gather->setAttr(a.getName(), a.getValue());
  out.gather = gather;
  Value rows = ox.reshape(gather, {n, total});
  out.unpack.push_back(rows.getDefiningOp());
  int64_t at = 0;
  for (Operation *m : members) {
    int64_t len = m->getOperand(0).getType().cast<RankedTensorType>().getDimSize(0);
    Value part = ox.op("Slice", RankedTensorType::get({n, len}, elt),
                       {rows, ox.i64s({at}), ox.i64s({at + len}), ox.i64s({1}), ox.none()});
    Value whole = ox.reshape(part, {n * len});
    out.unpack.push_back(part.getDefiningOp());
    out.unpack.push_back(whole.getDefiningOp());
    m->getResult(0).replaceAllUsesWith(whole);
    m->erase();
    at += len;
  }
  for (Operation *op : out.unpack)
    for (Value v : op->getOperands())
      if (Operation *c = v.getDefiningOp(); c && c->getNumOperands() == 0 && c->getBlock() == body)
        c->moveBefore(&body->front());
  return out;
}

SmallVector<Value> octet::maxOverRanks(OpBuilder &b, Location loc, ArrayRef<Value> scalars) {
  auto max = fp8::ReductionAttr::get(b.getContext(), fp8::Reduction::max);
  if (scalars.size() == 1)
    return {b.create<fp8::AllReduceOp>(loc, scalars[0].getType(), scalars[0], Value(), max)};
  OnnxBuilder ox(b, loc);
  SmallVector<Value> rows;
  for (Value s : scalars)
    rows.push_back(ox.reshape(s, {1}));
  auto all = RankedTensorType::get({int64_t(rows.size())}, b.getF32Type());
  Value reduced = b.create<fp8::AllReduceOp>(loc, all, ox.op("Concat", all, rows, {ox.si64("axis", 0)}), Value(), max);
  SmallVector<Value> out;
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  for (size_t i = 0; i < scalars.size(); ++i)
    out.push_back(ox.op("Gather", scalar,
                        {reduced, ox.constant(DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()), int64_t(i)))},
                        {ox.si64("axis", 0)}));
  return out;
}

Value octet::unpadded(OpBuilder &b, Location loc, Value gathered, RankedTensorType whole) {
  OnnxBuilder ox(b, loc);
  int64_t n = whole.getNumElements();
  auto gt = gathered.getType().cast<RankedTensorType>();
  Value v = gathered;
  if (gt.getDimSize(0) != n)
    v = ox.op("Slice", RankedTensorType::get({n}, gt.getElementType()),
              {gathered, ox.i64s({0}), ox.i64s({n}), ox.i64s({0}), ox.none()});
  return whole.getRank() == 1 ? v : ox.reshape(v, whole.getShape());
}

Value octet::linearWeightSource(Operation *op) {
  auto l = cast<octet::fp8::LinearOp>(op);
  Value w = l.getWeight();
  if (!l->hasAttr("octet.padded_from"))
    return w;
  while (auto c = w.getDefiningOp<ox::ConcatOp>())
    if (c->getNumOperands() == 2 && ox::getConstantValue(c->getOperand(1)))
      w = c->getOperand(0);
    else
      break;
  return w;
}

void octet::setTrainingKeys(ModuleOp m, ArrayRef<std::pair<StringRef, std::string>> keys) {
  Builder b(m.getContext());
  NamedAttrList training;
  if (auto d = m->getAttrOfType<DictionaryAttr>(octet::kTrainingAttr))
    training.append(d.getValue());
  for (auto &[key, value] : keys)
    training.set(key, b.getStringAttr(value));
  m->setAttr(octet::kTrainingAttr, training.getDictionary(m.getContext()));
}
