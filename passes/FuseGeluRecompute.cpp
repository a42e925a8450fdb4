//===- FuseGeluRecompute.cpp - A recomputed GELU's cast in the GELU gradient's cast ===//
//
// octet-fuse-gelu-recompute: where octet-rematerialize-fp8-casts recomputes the GELU in the
// backward (`sources=gelu`: the MLP's second Linear's transposed input codes, for its weight
// gradient, cast again instead of kept across the step), the backward reads the GELU's input h
// twice: once for GELU(h) and its cast, once more a few ops later for the GELU's gradient, a
// Pointwise program (or chain) of h and dY whose result an FP8 cast-transpose reads (the first
// Linear's dY). The pass moves the GELU and its cast to just before that program, and the ops
// that read the cast's codes (the weight-gradient GEMM) to just after the gradient's cast, and
// marks the GELU and its cast as a fusion group (FusionGroups.h, kind "gelu_recompute_cast"): a
// backend computes GELU(h) and its codes in the pass of the gradient's cast, which reads h
// anyway, so h is read once. The CPU runs the ops one by one in their new order (the same bits).
//
// Only a GELU whose one reader is an fp8.cast_amax whose codes nothing reads (its transposed copy
// alone: a recomputed cast), within kReach ops of the gradient's first program; ops that read the
// cast's results must not feed the gradient or its cast.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "FusionGroups.h"
#include "PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_FUSEGELURECOMPUTE
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

constexpr int kReach = 16; // ops between the GELU's cast and the gradient's first program, at most

/// A Pointwise program or a member of a pointwise_chain group.
bool isPointwise(Operation *op) { return octet::isPointwiseNode(op) || octet::fusionOf(op) == "pointwise_chain"; }

/// The FP8 cast-transpose that reads `v` or a view (Reshape) of it, if any.
fp8::CastAmaxOp castOf(Value v) {
  for (Operation *u : v.getUsers()) {
    if (auto c = dyn_cast<fp8::CastAmaxOp>(u); c && c.getInput() == v && c.getTransposed())
      return c;
    if (auto r = dyn_cast<ox::ReshapeOp>(u))
      if (auto c = castOf(r.getResult()))
        return c;
  }
  return {};
}

struct FuseGeluRecompute : octet::impl::FuseGeluRecomputeBase<FuseGeluRecompute> {
  using FuseGeluRecomputeBase::FuseGeluRecomputeBase;

  /// Fuses the GELU `g` where it can; false where it leaves it.
  bool tryFuse(ox::GeluOp g, int64_t group) {
    Value y = g.getResult();
    if (!y.hasOneUse() || g->hasAttr("octet.fusion"))
      return false;
    auto c1 = dyn_cast<fp8::CastAmaxOp>(*y.getUsers().begin());
    if (!c1 || c1.getInput() != y || c1->getBlock() != g->getBlock() || c1->hasAttr("octet.fusion") ||
        !c1.getTransposed() || !c1.getResult(0).use_empty())
      return false;
    Value h = g.getX();
    auto yt = y.getType().dyn_cast<RankedTensorType>();
    // The gradient: the first program after the cast that reads h, within reach.
    Operation *reader = nullptr;
    int steps = 0;
    for (Operation *op = c1->getNextNode(); op && steps <= kReach && !reader; op = op->getNextNode(), ++steps)
      if (isPointwise(op) && llvm::is_contained(op->getOperands(), h))
        reader = op;
    if (!reader || !yt || !yt.hasStaticShape())
      return false;
    auto [first, last] = octet::chainOf(reader);
    if (!c1->isBeforeInBlock(first) || last->getNumResults() != 1)
      return false;
    fp8::CastAmaxOp c2 = castOf(last->getResult(0));
    if (!c2)
      return false;
    auto dt = c2.getInput().getType().dyn_cast<RankedTensorType>();
    // The gradient's cast-transpose, over the GELU's [rows, cols] and element type, after it.
    if (!dt || !dt.hasStaticShape() || c2->getBlock() != g->getBlock() || !last->isBeforeInBlock(c2) ||
        dt.getElementType() != yt.getElementType() || dt.getNumElements() != yt.getNumElements() ||
        dt.getShape().back() != yt.getShape().back())
      return false;
    // The ops between the cast and the gradient that read the cast's results (through any chain
    // of readers) move after the gradient's cast; none may feed the gradient or its cast.
    llvm::SetVector<Operation *> later;
    llvm::SmallPtrSet<Operation *, 8> region; // first .. c2
    for (Operation *op = first;; op = op->getNextNode()) {
      region.insert(op);
      if (op == c2.getOperation())
        break;
    }
    for (Operation *op = c1->getNextNode(); op != first; op = op->getNextNode()) {
      bool reads = llvm::any_of(op->getOperands(), [&](Value v) {
        Operation *d = v.getDefiningOp();
        return d == c1.getOperation() || (d && later.contains(d));
      });
      if (!reads)
        continue;
      if (op->getNumRegions())
        return false;
      for (Value r : op->getResults())
        for (Operation *u : r.getUsers())
          if (region.contains(u))
            return false;
      later.insert(op);
    }
    g->moveBefore(first);
    c1->moveBefore(first);
    Operation *at = c2;
    for (Operation *op : later) {
      op->moveAfter(at);
      at = op;
    }
    octet::markFusionGroup({g, c1}, "gelu_recompute_cast", group);
    return true;
  }

  void runOnOperation() override {
    SmallVector<ox::GeluOp> gelus;
    getOperation().walk([&](ox::GeluOp g) { gelus.push_back(g); });
    int64_t next = octet::nextFusionGroup(getOperation(), "gelu_recompute_cast");
    for (ox::GeluOp g : gelus)
      if (tryFuse(g, next))
        ++next;
  }
};

} // namespace
