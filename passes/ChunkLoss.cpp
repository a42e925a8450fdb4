//===- ChunkLoss.cpp - The output layer and its loss over token chunks ----===//
//
// octet-chunk-loss: a language model's output layer makes the largest activations of the step,
// the logits [tokens, vocabulary] and their gradient, and in a training plan they live together
// with the FP8 codes of that gradient (and its transposed copy) at the start of the backward.
// Every op from the output GEMM to the GEMMs that read the logits' gradient works on each token
// row independently, so the pass runs them over K chunks of rows, one chunk after the other:
// at most one chunk's logits exist at a time.
//
// The region: the FP8 GEMM P that writes the scores S (its A operand: [tokens, K]), the
// SoftmaxCrossEntropyLoss of S and its gradient (octet::SoftmaxCrossEntropyLossGrad), and what
// reads that gradient: its FP8 cast (the codes split by rows, the transposed copy by columns,
// the amax the maximum over chunks) and the GEMMs that read those codes (the dgrad's rows
// concatenated, the wgrad, which contracts over tokens, added up in float32). A chunk's loss
// is the sum of its rows' losses; the mean divides the sum by the labels not ignored, and the
// gradient takes dY divided by that count. Everything the region reads from outside is either
// the same for every chunk (weights, scales, dY) or sliced along its token axis (the input's
// codes, the labels). Scales computed from the whole gradient (current scaling) or any other
// reader of a split value leave the region as it is.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "OnnxBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

namespace octet {
#define GEN_PASS_DEF_CHUNKLOSS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

using octet::staticTensor;

/// How a region value is split over chunks: along a token axis (0 or 1), or whole in every
/// chunk and combined by a sum (float32 GEMM results, the loss) or a maximum (amaxes).
enum Split : int { Sum = -1, Max = -2 };

/// Whether fp8.gemm `g` has per-tensor scales and no accumulator: a chunk of its rows or of its
/// contraction is the same GEMM on the chunk.
bool chunkable(fp8::GemmOp g) {
  auto perTensor = [](Value s) { auto t = staticTensor(s.getType()); return t && t.getNumElements() == 1; };
  return !g.getDScale() && !g.getWithAmax() && !g.getAccumulate() && perTensor(g.getAScaleInv()) &&
         perTensor(g.getBScaleInv()) && g.getA().getType().cast<ShapedType>().getRank() == 2;
}

bool isLossGrad(Operation *op) {
  auto n = dyn_cast<ox::GenericNodeOp>(op);
  return n && n.getOpType() == "SoftmaxCrossEntropyLossGrad" && n.getDomain() == "octet";
}

struct Region {
  int64_t tokens = 0;
  SmallVector<Operation *> ops;           // block order
  llvm::DenseMap<Value, int> split;       // region results
  llvm::MapVector<Value, int> sliced;     // outside values read by chunks: their token axis
  SmallVector<Operation *> movers;        // outside ops inside the region's span that read its results
  ox::SoftmaxCrossEntropyLossOp loss;
  Operation *grad = nullptr;
};

/// Grows the region from the loss's gradient; a failure names why the loss stays whole.
class RegionBuilder {
public:
  RegionBuilder(Region &r) : r(r) {}

  /// An outside value `v` the region reads along `axis`, which must have the token count there.
  LogicalResult slice(Value v, int axis) {
    auto t = staticTensor(v.getType());
    if (!t || axis >= t.getRank() || t.getDimSize(axis) != r.tokens)
      return failure();
    auto [it, fresh] = r.sliced.insert({v, axis});
    return success(fresh || it->second == axis);
  }

  int splitOf(Value v) const {
    auto it = r.split.find(v);
    return it == r.split.end() ? INT32_MIN : it->second;
  }
  bool inRegion(Value v) const { return r.split.count(v) != 0; }

  /// Adds fp8.gemm `g` that reads a token-split value; `why` says what does not fit.
  LogicalResult addGemm(fp8::GemmOp g, std::string &why) {
    if (!chunkable(g)) {
      why = "a GEMM of the gradient has rowwise scales, an accumulator, or writes FP8 or its amax";
      return failure();
    }
    int aM = g.getTransposeA() ? 1 : 0, aK = 1 - aM, bK = g.getTransposeB() ? 1 : 0;
    int sa = splitOf(g.getA()), sb = splitOf(g.getB());
    if (inRegion(g.getA()) && sa == aM && !inRegion(g.getB())) { // rows of A: rows of D
      r.split[g.getD()] = 0;
    } else if ((inRegion(g.getA()) && sa == aK) || (inRegion(g.getB()) && sb == bK)) {
      // Contracting over tokens: both operands split along K; D is a sum over chunks.
      if ((inRegion(g.getA()) ? sa != aK : failed(slice(g.getA(), aK))) ||
          (inRegion(g.getB()) ? sb != bK : failed(slice(g.getB(), bK))) || g.getBias()) {
        why = "a GEMM contracts over tokens with an operand that is not split along them";
        return failure();
      }
      if (!g.getD().getType().cast<ShapedType>().getElementType().isF32()) {
        why = "a GEMM that contracts over tokens does not give float32";
        return failure();
      }
      r.split[g.getD()] = Sum;
    } else {
      why = "a GEMM reads the gradient along a dimension other than its tokens";
      return failure();
    }
    add(g);
    return success();
  }

  LogicalResult addCast(fp8::CastAmaxOp c, std::string &why) {
    if (splitOf(c.getInput()) != 0 || c.getInput().getType().cast<ShapedType>().getRank() != 2) {
      why = "an FP8 cast reads a chunked value by columns";
      return failure();
    }
    r.split[c.getOutput()] = 0;
    r.split[c.getAmax()] = Max;
    if (c.getTransposed())
      r.split[c.getTransposed()] = 1;
    add(c);
    return success();
  }

  void add(Operation *op) { r.ops.push_back(op); }

private:
  Region &r;
};

/// The region of `loss`, or failure with `why`.
LogicalResult buildRegion(ox::SoftmaxCrossEntropyLossOp loss, Region &r, std::string &why) {
  Value s = loss.getScores(), labels = loss.getLabels();
  auto st = staticTensor(s.getType());
  StringRef reduction = loss.getReduction().value_or("mean");
  if (!st || st.getRank() != 2 || !loss.getWeights().getType().isa<NoneType>() ||
      (reduction != "mean" && reduction != "sum") || !loss.getLogProb().use_empty()) {
    why = "the loss is not a mean or sum over [tokens, classes] scores without class weights";
    return failure();
  }
  r.tokens = st.getDimSize(0);
  r.loss = loss;
  auto p = s.getDefiningOp<fp8::GemmOp>();
  if (!p) {
    why = "the scores do not come from an FP8 GEMM";
    return failure();
  }
  for (Operation *u : s.getUsers()) {
    if (u == loss.getOperation())
      continue;
    auto n = dyn_cast<ox::GenericNodeOp>(u);
    if (!isLossGrad(u) || r.grad || u->getOperand(0) != s || u->getOperand(1) != labels) {
      why = "the scores have a reader other than the loss and its gradient";
      return failure();
    }
    auto attrs = n->getAttrOfType<DictionaryAttr>("attrs");
    auto red = attrs ? attrs.getAs<StringAttr>("reduction") : StringAttr();
    if ((red ? red.getValue() : StringRef("mean")) != reduction) {
      why = "the gradient's reduction differs from the loss's";
      return failure();
    }
    r.grad = u;
  }
  if (!r.grad) {
    why = "the loss has no gradient in this function";
    return failure();
  }
  RegionBuilder b(r);
  if (!chunkable(p) || p.getTransposeA() || failed(b.slice(p.getA(), 0)) || failed(b.slice(labels, 0))) {
    why = "the output GEMM's input is not [tokens, features] with per-tensor scales";
    return failure();
  }
  r.split[s] = 0;
  r.split[r.grad->getResult(0)] = 0;
  b.add(p);
  b.add(loss);
  b.add(r.grad);
  // Grow: every reader of a split value joins, or reads a GEMM's rows after they are concatenated.
  SmallVector<Value> work = {r.grad->getResult(0)};
  llvm::SmallPtrSet<Operation *, 8> seen = {p, loss.getOperation(), r.grad};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *u : v.getUsers()) {
      if (seen.count(u))
        continue;
      LogicalResult ok = failure();
      if (auto c = dyn_cast<fp8::CastAmaxOp>(u); c && c.getInput() == v)
        ok = b.addCast(c, why);
      else if (auto g = dyn_cast<fp8::GemmOp>(u))
        ok = b.addGemm(g, why);
      else if (v.getDefiningOp<fp8::GemmOp>() && b.splitOf(v) == 0)
        continue; // an outside reader of the dgrad's rows: they are concatenated for it
      else
        why = "'" + u->getName().getStringRef().str() + "' reads a value split by tokens";
      if (failed(ok))
        return failure();
      seen.insert(u);
      for (Value res : u->getResults())
        if (b.splitOf(res) >= 0)
          work.push_back(res);
    }
  }
  // Block order, and the outside ops in the region's span that depend on its results (they move
  // after the chunks); a region op must not read one of those.
  Block *block = p->getBlock();
  llvm::sort(r.ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  if (r.ops.front() != p.getOperation() || llvm::any_of(r.ops, [&](Operation *o) { return o->getBlock() != block; })) {
    why = "the region spans blocks";
    return failure();
  }
  llvm::SmallPtrSet<Operation *, 16> inRegion(r.ops.begin(), r.ops.end()), dependent;
  for (Operation *op = p->getNextNode(); op && op != r.ops.back(); op = op->getNextNode()) {
    if (inRegion.count(op)) {
      for (Value x : op->getOperands())
        if (Operation *d = x.getDefiningOp(); d && dependent.count(d)) {
          why = "an op of the region reads a value computed from the region's results";
          return failure();
        }
      continue;
    }
    bool dep = false;
    op->walk([&](Operation *inner) {
      for (Value x : inner->getOperands())
        if (Operation *d = x.getDefiningOp(); d && (inRegion.count(d) || dependent.count(d)))
          dep = true;
    });
    if (dep) {
      dependent.insert(op);
      r.movers.push_back(op);
    }
  }
  return success();
}

/// The fewest chunks, each of a whole multiple of 16 rows (FP8 GEMMs contract over them), whose
/// scores take at most `maxBytes`; 1 when none does.
int64_t chunkCount(int64_t tokens, int64_t scoreBytes, int64_t maxBytes) {
  if (scoreBytes <= maxBytes)
    return 1;
  for (int64_t k = 2; k <= tokens / 16; ++k)
    if (tokens % k == 0 && (tokens / k) % 16 == 0 && scoreBytes / k <= maxBytes)
      return k;
  return 1;
}

RankedTensorType withDim(Type t, int axis, int64_t n) {
  auto r = t.cast<RankedTensorType>();
  SmallVector<int64_t> shape(r.getShape());
  shape[size_t(axis)] = n;
  return RankedTensorType::get(shape, r.getElementType());
}

void copyResultName(Operation *from, unsigned result, Operation *to, StringRef suffix = "") {
  auto names = from->getAttrOfType<ArrayAttr>(octet::kResultNamesAttr);
  if (!names || result >= names.size())
    return;
  auto n = names[result].dyn_cast<StringAttr>();
  if (n && !n.getValue().empty())
    octet::setResultNames(to, {(n.getValue() + suffix).str()});
}

void rewrite(Region &r, int64_t k) {
  Operation *last = r.ops.back();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  Location loc = r.loss.getLoc();
  octet::OnnxBuilder ox(b, loc);
  int64_t rows = r.tokens / k;
  bool mean = r.loss.getReduction().value_or("mean") == "mean";
  Value labels = r.loss.getLabels(), count, dy = r.grad->getOperand(2);
  if (mean) {
    auto f32 = [&](ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, b.getF32Type()); };
    if (auto ii = r.loss.getIgnoreIndex()) { // the labels not ignored, as the mean counts them
      auto lt = labels.getType().cast<RankedTensorType>();
      auto bits = RankedTensorType::get(lt.getShape(), b.getI1Type());
      Value ignore = ox.constant(DenseElementsAttr::get(RankedTensorType::get({}, lt.getElementType()),
                                                        APInt(lt.getElementType().getIntOrFloatBitWidth(), *ii, true)));
      Value kept = ox.op("Not", bits, {ox.op("Equal", bits, {labels, ignore})});
      Value ones = ox.op("Cast", f32(lt.getShape()), {kept}, {ox.si64("to", 1)});
      count = ox.op("ReduceSum", f32({}), {ones, ox.i64s({0})}, {ox.si64("keepdims", 0)});
    } else {
      count = ox.f32(float(r.tokens));
    }
    dy = ox.op("Div", dy.getType(), {dy, count});
  }
  llvm::MapVector<Value, Value> combined;
  llvm::MapVector<Value, SmallVector<Value>> parts;
  auto addTo = [&](Value orig, Value v, StringRef opType) {
    auto [it, fresh] = combined.insert({orig, v});
    if (!fresh)
      it->second = ox.op(opType, orig.getType(), {it->second, v});
  };
  Value noSteps = ox.none();
  for (int64_t c = 0; c < k; ++c) {
    IRMapping map;
    Value start = ox.i64s({c * rows}), stop = ox.i64s({(c + 1) * rows});
    for (auto [v, axis] : r.sliced)
      map.map(v, ox.op("Slice", withDim(v.getType(), axis, rows), {v, start, stop, ox.i64s({axis}), noSteps}));
    std::string suffix = ".chunk" + std::to_string(c);
    for (Operation *op : r.ops) {
      Operation *n = b.clone(*op, map);
      n->removeAttr("octet.fusion");
      n->removeAttr("octet.fusion_group");
      n->setAttr("octet.loss_chunk", b.getI64IntegerAttr(c)); // fp8-opt --report counts them
      if (auto names = op->getAttrOfType<ArrayAttr>(octet::kResultNamesAttr)) {
        SmallVector<std::string> renamed;
        for (Attribute a : names)
          renamed.push_back((a.cast<StringAttr>().getValue() + suffix).str());
        octet::setResultNames(n, renamed);
      }
      if (op == r.loss.getOperation()) {
        n->setAttr("reduction", b.getStringAttr("sum"));
        addTo(r.loss.getOutput(), n->getResult(0), "Add");
        continue;
      }
      if (op == r.grad) {
        NamedAttrList attrs(op->getAttrOfType<DictionaryAttr>("attrs"));
        attrs.set("reduction", b.getStringAttr("sum"));
        n->setAttr("attrs", attrs.getDictionary(b.getContext()));
        n->setOperand(2, dy);
      }
      if (auto g = dyn_cast<fp8::GemmOp>(n); g && r.split.lookup(op->getResult(0)) == Sum && c > 0) {
        // The weight gradient adds this chunk's product to the previous chunks' sum, in place.
        auto acc = b.create<fp8::GemmOp>(g.getLoc(), g.getD().getType(), TypeRange{}, g.getA(), g.getB(),
                                         g.getAScaleInv(), g.getBScaleInv(), Value(), Value(),
                                         combined.lookup(op->getResult(0)), g.getTransposeA(), g.getTransposeB(),
                                         g.getAccumulation(), false);
        for (NamedAttribute a : g->getAttrs())
          if (!acc->hasAttr(a.getName()))
            acc->setAttr(a.getName(), a.getValue()); // octet.loss_chunk too
        g->erase();
        combined[op->getResult(0)] = acc.getD();
        continue;
      }
      for (auto [orig, res] : llvm::zip(op->getResults(), n->getResults())) {
        int s = r.split.lookup(orig);
        if (s >= 0) {
          res.setType(withDim(orig.getType(), s, rows));
          if (llvm::any_of(orig.getUsers(), [&](Operation *u) { return !llvm::is_contained(r.ops, u); }))
            parts[orig].push_back(res);
        } else {
          addTo(orig, res, s == Sum ? "Add" : "Max");
        }
      }
    }
  }
  for (auto &[orig, vs] : parts)
    combined[orig] = ox.op("Concat", orig.getType(), vs, {ox.si64("axis", 0)});
  if (mean)
    combined[r.loss.getOutput()] = ox.op("Div", r.loss.getOutput().getType(), {combined[r.loss.getOutput()], count});
  for (auto &[orig, v] : combined) { // the whole value keeps its name
    copyResultName(orig.getDefiningOp(), orig.cast<OpResult>().getResultNumber(), v.getDefiningOp());
    orig.replaceAllUsesWith(v);
  }
  Operation *end = &*std::prev(b.getInsertionPoint());
  for (Operation *m : r.movers) {
    m->moveAfter(end);
    end = m;
  }
  for (Operation *op : llvm::reverse(r.ops))
    op->erase();
}

struct ChunkLoss : octet::impl::ChunkLossBase<ChunkLoss> {
  using ChunkLossBase::ChunkLossBase;

  void runOnOperation() override {
    if (maxChunkBytes < 1) {
      getOperation().walk([&](func::FuncOp f) {
        f.emitError() << "octet-chunk-loss: max-chunk-bytes=" << int64_t(maxChunkBytes) << " must be at least 1";
      });
      return signalPassFailure();
    }
    SmallVector<ox::SoftmaxCrossEntropyLossOp> losses;
    getOperation().walk([&](ox::SoftmaxCrossEntropyLossOp l) { losses.push_back(l); });
    for (ox::SoftmaxCrossEntropyLossOp l : losses) {
      auto st = staticTensor(l.getScores().getType());
      if (!st)
        continue;
      int64_t bytes = st.getNumElements() * int64_t(st.getElementTypeBitWidth() / 8);
      int64_t k = chunkCount(st.getDimSize(0), bytes, maxChunkBytes);
      if (st.getRank() != 2 || k == 1)
        continue;
      Region r;
      std::string why;
      if (failed(buildRegion(l, r, why))) {
        if (verbose)
          l.emitRemark() << "octet-chunk-loss: the loss stays whole: " << why;
        continue;
      }
      if (verbose)
        l.emitRemark() << "octet-chunk-loss: the output layer and its loss run over " << k << " chunks of "
                       << st.getDimSize(0) / k << " tokens";
      rewrite(r, k);
    }
  }
};

} // namespace
