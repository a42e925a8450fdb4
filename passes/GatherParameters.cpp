//===- GatherParameters.cpp - Gather sharded parameters where they are read -===//
//
// octet-gather-parameters (Passes.td): a fully sharded parameter (octet-optimizer
// shard-parameters) is read through an fp8.all_gather that octet-optimizer leaves at the step's
// start. Here each gather moves to the first of its readers, once for the forward pass and once
// more for the backward (readers after the loss), so that the gathered weight lives only while a
// layer reads it; then each all-gather is issued `prefetch` gathers early, for
// octet-overlap-collectives to run beside the layers before.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"
#include "StateUtils.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_GATHERPARAMETERS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

/// One gather of a parameter, or of a layer's parameters together: the Concat of their shards (a
/// group's), the all-gather, and the ops after it that take each member's part, cut the padding off
/// and convert the weight, in order; `weights` are what the layers read, one per member.
struct Gather {
  Operation *pack = nullptr;
  fp8::AllGatherOp gather;
  SmallVector<Operation *> chain;
  SmallVector<Value> weights;
  Operation *first() { return pack ? pack : gather.getOperation(); }
};

/// The name of the sharded state a gather reads (through MS-AMP O3's cast to FP8 codes).
StringRef shardName(Value v) {
  for (int depth = 0; depth < 4 && v; ++depth) {
    Operation *op = v.getDefiningOp();
    if (!op)
      return "";
    if (auto init = dyn_cast<ox::InitializerOp>(op))
      return init.getName();
    v = op->getNumOperands() ? op->getOperand(0) : Value();
  }
  return "";
}

bool isChainOp(Operation *op, Value from) {
  if (op->getNumResults() != 1 || op->getNumOperands() == 0 || op->getOperand(0) != from)
    return false;
  if (isa<fp8::DequantizeOp>(op))
    return true;
  return isa<ox::SliceOp, ox::ReshapeOp, ox::CastOp>(op);
}

struct GatherParameters : octet::impl::GatherParametersBase<GatherParameters> {
  using GatherParametersBase::GatherParametersBase;

  /// The op that ends the forward pass: the loss's own op (before the average over ranks).
  static Operation *lossOp(func::FuncOp func) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      if (!func.getResultAttr(r, octet::kLossAttr))
        continue;
      Operation *op = ret.getOperand(r).getDefiningOp();
      while (op && isa<fp8::AllReduceOp>(op) && op->getOperand(0).getDefiningOp())
        op = op->getOperand(0).getDefiningOp();
      return op;
    }
    return nullptr;
  }

  /// Each marked gather, its chain, and its readers (the ops of the body that read a weight).
  /// A merged layer's member: its shard, the value standing for its own gather's result (the
  /// layer's unpacked part), its chain and the weight the layers read.
  struct Part {
    Value shard, whole;
    Type gathered;
    SmallVector<Operation *> chain;
    Value weight;
  };
  struct Found {
    Gather g;
    SmallVector<OpOperand *> forward, backward;
    SmallVector<Part> parts; // a merged layer's members (empty for a parameter gathered alone)
  };

  /// The members' gathers become one: their shards concatenated, gathered, and each member's part
  /// taken back out of every rank's slice (FSDP2's copy-in and copy-out), where the last of them was.
  Found merge(MutableArrayRef<Found> members) {
    Operation *last = members.front().g.gather;
    SmallVector<Operation *> gathers;
    for (Found &m : members) {
      gathers.push_back(m.g.gather);
      if (last->isBeforeInBlock(m.g.gather))
        last = m.g.gather;
    }
    OpBuilder b(last->getContext());
    b.setInsertionPointAfter(last);
    octet::GatheredTogether t = octet::gatherTogether(b, last->getLoc(), gathers);
    Found out;
    out.g.pack = t.pack;
    out.g.gather = cast<fp8::AllGatherOp>(t.gather);
    out.g.chain = t.unpack;
    // The members' own chains follow, in order (each was after its own gather).
    Operation *cursor = out.g.chain.back();
    for (auto [i, m] : llvm::enumerate(members)) {
      Value whole = t.unpack[2 + 2 * i]->getResult(0);
      // A member read as gathered (a 1-D weight the ranks divide: no padding to cut) is read as its part now.
      Value weight = m.g.chain.empty() ? whole : m.g.weights.front();
      m.g.weights.assign(1, weight);
      out.parts.push_back({t.pack->getOperand(unsigned(i)), whole, whole.getType(), m.g.chain, weight});
      for (Operation *c : m.g.chain) {
        c->moveAfter(cursor);
        cursor = c;
        out.g.chain.push_back(c);
      }
      out.g.weights.append(m.g.weights);
      out.forward.append(m.forward);
      out.backward.append(m.backward);
    }
    // The members' chain constants to the body's top: the whole moves before the first member's
    // first reader, which may come before the other members' constants.
    Block *body = out.g.gather->getBlock();
    for (Operation *op : out.g.chain)
      for (Value v : op->getOperands())
        if (Operation *c = v.getDefiningOp(); c && c->getNumOperands() == 0 && c->getBlock() == body)
          c->moveBefore(&body->front());
    return out;
  }

  int64_t run(func::FuncOp func) {
    Block &body = func.getBody().front();
    Operation *loss = lossOp(func);
    if (loss)
      loss = body.findAncestorOpInBlock(*loss);
    std::vector<Found> found;
    for (auto ag : llvm::make_early_inc_range(body.getOps<fp8::AllGatherOp>())) {
      if (!ag->hasAttr(octet::kParameterGatherAttr))
        continue;
      Found f;
      f.g.gather = ag;
      Value w = ag.getOutput();
      while (w.hasOneUse() && isChainOp(*w.getUsers().begin(), w)) {
        f.g.chain.push_back(*w.getUsers().begin());
        w = f.g.chain.back()->getResult(0);
      }
      f.g.weights.push_back(w);
      for (OpOperand &u : w.getUses())
        if (Operation *at = body.findAncestorOpInBlock(*u.getOwner()))
          (loss && loss->isBeforeInBlock(at) ? f.backward : f.forward).push_back(&u);
      found.push_back(std::move(f));
    }
    // One gather a layer (unit=layer): the parameters of one repeated block, of one element type.
    if (unit == "layer") {
      std::vector<Found> grouped;
      struct Layer {
        std::string name;
        Type elt;
        std::vector<Found> members;
      };
      std::vector<Layer> layers;
      for (Found &f : found) {
        std::string layer = octet::layerOf(shardName(f.g.gather.getInput()));
        Type elt = f.g.gather.getInput().getType().cast<RankedTensorType>().getElementType();
        if (layer.empty()) {
          grouped.push_back(std::move(f));
          continue;
        }
        auto it = llvm::find_if(layers, [&](const Layer &l) { return l.name == layer && l.elt == elt; });
        if (it == layers.end())
          layers.push_back({layer, elt, {}}), it = std::prev(layers.end());
        it->members.push_back(std::move(f));
      }
      for (Layer &l : layers)
        grouped.push_back(l.members.size() == 1 ? std::move(l.members.front()) : merge(l.members));
      found = std::move(grouped);
    }
    llvm::DenseMap<Operation *, int64_t> pos;
    int64_t n = 0;
    for (Operation &op : body)
      pos[&op] = n++;
    auto at = [&](OpOperand *u) { return pos.lookup(body.findAncestorOpInBlock(*u->getOwner())); };
    auto first = [&](ArrayRef<OpOperand *> uses) {
      OpOperand *best = uses.front();
      for (OpOperand *u : uses)
        if (at(u) < at(best))
          best = u;
      return body.findAncestorOpInBlock(*best->getOwner());
    };
    auto moveBefore = [&](Gather &g, Operation *reader) {
      // What a layer's gather reads but its first reader does not (MS-AMP O3's codes and scales of
      // the other members, made one weight after another before each is read) moves up with it.
      llvm::SetVector<Operation *> own, cone;
      if (g.pack)
        own.insert(g.pack);
      own.insert(g.gather);
      own.insert(g.chain.begin(), g.chain.end());
      SmallVector<Operation *> work(own.begin(), own.end());
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        for (Value v : op->getOperands())
          if (Operation *d = v.getDefiningOp())
            if (Operation *in = body.findAncestorOpInBlock(*d);
                in && !own.contains(in) && !in->isBeforeInBlock(reader) && cone.insert(in))
              work.push_back(in);
      }
      SmallVector<Operation *> up(cone.begin(), cone.end());
      llvm::sort(up, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      for (Operation *op : up)
        op->moveBefore(reader);
      if (g.pack)
        g.pack->moveBefore(reader);
      g.gather->moveBefore(reader);
      for (Operation *c : g.chain)
        c->moveBefore(reader);
    };
    // Whether another parameter is read between `lo` and `hi`: then this one's weight is let go after
    // its forward readers and gathered again; else (the last layers before the loss) it stays.
    auto othersBetween = [&](const Found &self, int64_t lo, int64_t hi) {
      for (const Found &o : found)
        if (&o != &self)
          for (const auto *uses : {&o.forward, &o.backward})
            for (OpOperand *u : *uses)
              if (at(u) > lo && at(u) < hi)
                return true;
      return false;
    };
    std::vector<Gather> placed;
    for (Found &f : found) {
      if (f.forward.empty() && f.backward.empty())
        continue;
      SmallVector<OpOperand *> all(f.forward);
      all.append(f.backward);
      int64_t lastForward = -1;
      for (OpOperand *u : f.forward)
        lastForward = std::max(lastForward, at(u));
      bool again = !f.forward.empty() && !f.backward.empty() &&
                   othersBetween(f, lastForward, pos.lookup(first(f.backward)));
      moveBefore(f.g, first(again ? ArrayRef<OpOperand *>(f.forward) : ArrayRef<OpOperand *>(all)));
      placed.push_back(f.g);
      if (!again)
        continue;
      // The backward's own gather: a copy of the gather and its chain before its first reader; of a
      // layer, only of the members the backward reads (FP8 recipes read their forward's FP8 copies
      // of the matrices there, and the norms' weights alone).
      OpBuilder b(first(f.backward));
      IRMapping map;
      Gather copy;
      SmallVector<Part *> read;
      for (Part &p : f.parts)
        if (llvm::any_of(f.backward, [&](OpOperand *u) { return u->get() == p.weight; }))
          read.push_back(&p);
      if (!f.parts.empty() && read.size() < f.parts.size()) {
        Location loc = f.g.gather.getLoc();
        SmallVector<Operation *> gathers;
        for (Part *p : read) {
          auto g = b.create<fp8::AllGatherOp>(loc, p->gathered, p->shard, f.g.gather.getWorldSizeAttr());
          g->setAttr(octet::kParameterGatherAttr, b.getUnitAttr());
          gathers.push_back(g);
        }
        assert(!gathers.empty() && "a backward reader reads one of the members");
        if (gathers.size() == 1) {
          copy.gather = cast<fp8::AllGatherOp>(gathers.front());
          map.map(read.front()->whole, copy.gather.getOutput());
        } else {
          octet::GatheredTogether t = octet::gatherTogether(b, loc, gathers);
          copy.pack = t.pack;
          copy.gather = cast<fp8::AllGatherOp>(t.gather);
          copy.chain = t.unpack;
          for (auto [i, p] : llvm::enumerate(read))
            map.map(p->whole, t.unpack[2 + 2 * i]->getResult(0));
        }
        for (Part *p : read) {
          for (Operation *c : p->chain)
            copy.chain.push_back(b.clone(*c, map));
          copy.weights.push_back(map.lookupOrDefault(p->weight));
        }
        for (OpOperand *u : f.backward)
          u->set(map.lookupOrDefault(u->get()));
        placed.push_back(copy);
        continue;
      }
      if (f.g.pack)
        copy.pack = b.clone(*f.g.pack, map);
      copy.gather = cast<fp8::AllGatherOp>(b.clone(*f.g.gather, map));
      for (Operation *c : f.g.chain)
        copy.chain.push_back(b.clone(*c, map));
      for (Value w : f.g.weights)
        copy.weights.push_back(map.lookupOrDefault(w));
      for (OpOperand *u : f.backward)
        u->set(map.lookupOrDefault(u->get()));
      placed.push_back(copy);
    }
    // Prefetch: each all-gather goes before the first reader of the gather `prefetch` ahead of it
    // (the chain stays with the readers: the wait, once octet-overlap-collectives splits it).
    auto head = [](Gather &g) { return g.chain.empty() ? g.gather->getNextNode() : g.chain.front(); };
    llvm::sort(placed, [&](Gather &a, Gather &b) { return head(a)->isBeforeInBlock(head(b)); });
    // Never above what it gathers (MS-AMP O3's FP8 codes are cast at the step's start, one weight
    // after another): then right after the last of that.
    if (prefetch > 0)
      for (size_t k = placed.size(); k-- > size_t(prefetch);) {
        Gather &g = placed[k];
        Operation *from = g.first(), *target = placed[k - size_t(prefetch)].first();
        Operation *input = nullptr;
        for (Value v : from->getOperands())
          if (Operation *d = v.getDefiningOp())
            if (Operation *in = body.findAncestorOpInBlock(*d); in && (!input || input->isBeforeInBlock(in)))
              input = in;
        if (!input || input->isBeforeInBlock(target))
          from->moveBefore(target);
        else if (input->isBeforeInBlock(from))
          from->moveAfter(input);
        if (g.pack)
          g.gather->moveAfter(g.pack);
      }
    regathers += int64_t(placed.size()) - int64_t(llvm::count_if(found, [](const Found &f) {
                   return !f.forward.empty() || !f.backward.empty();
                 }));
    return int64_t(placed.size());
  }

  int64_t regathers = 0;

  void runOnOperation() override {
    if (prefetch < 0) {
      getOperation().emitError() << "octet-gather-parameters: prefetch must be 0 or more, not " << int64_t(prefetch);
      return signalPassFailure();
    }
    if (unit != "layer" && unit != "parameter") {
      getOperation().emitError() << "octet-gather-parameters: unit '" << unit << "' is not known; use layer or parameter";
      return signalPassFailure();
    }
    int64_t n = 0;
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        n += run(f);
    if (!n)
      return;
    auto i64 = [&](int64_t v) { return IntegerAttr::get(IntegerType::get(&getContext(), 64), v); };
    getOperation()->setAttr(octet::kParameterGathersAttr, i64(n));
    getOperation()->setAttr(octet::kParameterRegathersAttr, i64(regathers));
    getOperation()->setAttr(octet::kGatherPrefetchAttr, i64(prefetch));
  }
};

} // namespace
