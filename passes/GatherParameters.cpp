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
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

namespace octet {
#define GEN_PASS_DEF_GATHERPARAMETERS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

/// One gather of a parameter: the all-gather and the single-reader ops after it that cut the
/// padding off and convert the weight, in order; the last one's result is what the layers read.
struct Gather {
  fp8::AllGatherOp gather;
  SmallVector<Operation *> chain;
  Value weight() { return chain.empty() ? gather.getOutput() : chain.back()->getResult(0); }
};

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

  int64_t run(func::FuncOp func) {
    Block &body = func.getBody().front();
    Operation *loss = lossOp(func);
    if (loss)
      loss = body.findAncestorOpInBlock(*loss);
    llvm::DenseMap<Operation *, int64_t> pos;
    int64_t n = 0;
    for (Operation &op : body)
      pos[&op] = n++;
    // Each marked gather, its chain, and its readers (the ops of the body that read the weight).
    struct Found {
      Gather g;
      SmallVector<OpOperand *> forward, backward;
    };
    SmallVector<Found> found;
    for (auto ag : body.getOps<fp8::AllGatherOp>()) {
      if (!ag->hasAttr(octet::kParameterGatherAttr))
        continue;
      Found f{{ag, {}}, {}, {}};
      for (Value v = ag.getOutput(); v.hasOneUse() && isChainOp(*v.getUsers().begin(), v);
           v = f.g.chain.back()->getResult(0))
        f.g.chain.push_back(*v.getUsers().begin());
      for (OpOperand &u : f.g.weight().getUses())
        if (Operation *at = body.findAncestorOpInBlock(*u.getOwner()))
          (loss && loss->isBeforeInBlock(at) ? f.backward : f.forward).push_back(&u);
      found.push_back(std::move(f));
    }
    auto at = [&](OpOperand *u) { return pos.lookup(body.findAncestorOpInBlock(*u->getOwner())); };
    auto first = [&](ArrayRef<OpOperand *> uses) {
      OpOperand *best = uses.front();
      for (OpOperand *u : uses)
        if (at(u) < at(best))
          best = u;
      return body.findAncestorOpInBlock(*best->getOwner());
    };
    auto moveBefore = [](Gather &g, Operation *reader) {
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
    SmallVector<Gather> placed;
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
      // The backward's own gather: a copy of the gather and its chain before its first reader.
      OpBuilder b(first(f.backward));
      IRMapping map;
      Gather copy{cast<fp8::AllGatherOp>(b.clone(*f.g.gather, map)), {}};
      for (Operation *c : f.g.chain)
        copy.chain.push_back(b.clone(*c, map));
      for (OpOperand *u : f.backward)
        u->set(copy.weight());
      placed.push_back(copy);
    }
    // Prefetch: each all-gather goes before the first reader of the gather `prefetch` ahead of it
    // (the chain stays with the readers: the wait, once octet-overlap-collectives splits it).
    auto head = [](Gather &g) { return g.chain.empty() ? g.gather->getNextNode() : g.chain.front(); };
    llvm::sort(placed, [&](Gather &a, Gather &b) { return head(a)->isBeforeInBlock(head(b)); });
    // Never above what it gathers (MS-AMP O3's FP8 codes are cast at the step's start, one weight
    // after another): then right after that.
    if (prefetch > 0)
      for (size_t k = placed.size(); k-- > size_t(prefetch);) {
        Operation *g = placed[k].gather, *target = placed[k - size_t(prefetch)].gather;
        Operation *input = g->getOperand(0).getDefiningOp();
        if (!input || input->isBeforeInBlock(target))
          g->moveBefore(target);
        else if (input->isBeforeInBlock(g))
          g->moveAfter(input);
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
