//===- Fp8AllGather.cpp - Gather sharded weights as their FP8 codes -------===//
//
// octet-fp8-all-gather (Passes.td): a sharded weight that only FP8 casts read is cast on its
// shard and gathered as codes, a byte an element. Runs before octet-gather-parameters, while the
// optimizer's all-gathers still sit at the step's start; that pass then places the new gathers.
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
#define GEN_PASS_DEF_FP8ALLGATHER
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

bool isScalar(Value v) { return v.getType().cast<RankedTensorType>().getRank() == 0; }

/// A gathered weight all of whose readers are per-tensor FP8 casts and the amaxes their scales
/// come from: the gather, the ops from it to the weight (Slice, Reshape, Cast), and its readers.
struct Site {
  fp8::AllGatherOp gather;
  SmallVector<Operation *> chain;
  Value weight;
  SmallVector<fp8::AmaxOp> amaxes;
  SmallVector<Operation *> casts;   // fp8.cast and fp8.cast_amax, in block order
  llvm::SetVector<Operation *> cone; // what the casts' scales are computed by after the gather
  Value source;                      // the shard as the casts read it (the chain's Cast applied)
};

Value scaleOf(Operation *cast) {
  if (auto c = dyn_cast<fp8::CastAmaxOp>(cast))
    return c.getScaleInv();
  return cast->getOperand(1);
}

struct Fp8AllGather : octet::impl::Fp8AllGatherBase<Fp8AllGather> {
  /// The site of `ag`, or why its weight stays in high precision ("" when no FP8 cast reads it).
  static FailureOr<Site> analyze(fp8::AllGatherOp ag, Operation *top, std::string &why) {
    Block *body = ag->getBlock();
    Site s;
    s.gather = ag;
    Value w = ag.getOutput();
    while (w.hasOneUse() && isa<ox::SliceOp, ox::ReshapeOp, ox::CastOp>(*w.getUsers().begin())) {
      s.chain.push_back(*w.getUsers().begin());
      w = s.chain.back()->getResult(0);
    }
    s.weight = w;
    Operation *other = nullptr;
    bool rowwise = false;
    for (OpOperand &u : w.getUses()) {
      Operation *r = u.getOwner();
      if (r->getBlock() != body) {
        other = r;
      } else if (auto a = dyn_cast<fp8::AmaxOp>(r)) {
        rowwise |= a.getRowwise();
        s.amaxes.push_back(a);
      } else if (isa<fp8::CastOp, fp8::CastAmaxOp>(r) && u.getOperandNumber() == 0) {
        rowwise |= !isScalar(scaleOf(r));
        s.casts.push_back(r);
      } else {
        other = r;
      }
    }
    if (s.casts.empty())
      return failure();
    if (rowwise) {
      why = "rowwise scales (a row's amax spans the ranks' shards)";
      return failure();
    }
    if (other) {
      why = "also read in high precision (" + other->getName().getStringRef().str() + ")";
      return failure();
    }
    llvm::sort(s.casts, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    // The scales: state (before the step's gathers), or computed from the weight's own amaxes by
    // fp8.dynamic_scale (current scaling), which then moves to the step's start.
    SmallVector<Value> work;
    for (Operation *c : s.casts)
      work.push_back(scaleOf(c));
    while (!work.empty()) {
      Operation *d = work.pop_back_val().getDefiningOp();
      if (!d || (d->getBlock() == body && d->isBeforeInBlock(top)))
        continue;
      if (llvm::is_contained(s.amaxes, d))
        continue;
      if (d->getBlock() != body || !(isa<fp8::DynamicScaleOp>(d) || d->getNumOperands() == 0)) {
        why = "its scale is computed from more than its amax (" + d->getName().getStringRef().str() + ")";
        return failure();
      }
      if (s.cone.insert(d))
        work.append(d->getOperands().begin(), d->getOperands().end());
    }
    return s;
  }

  /// Rewrites `s` before `top` (the step's first parameter gather); the old gather and its chain go
  /// to `dead`, erased once every site is done (`top` among them).
  void rewrite(Site &s, Operation *top, ArrayRef<Value> reducedAmaxes, SmallVectorImpl<Operation *> &dead) {
    OpBuilder b(top);
    Location loc = s.gather.getLoc();
    for (auto [a, r] : llvm::zip(s.amaxes, reducedAmaxes)) {
      a.getAmax().replaceAllUsesWith(r);
      a->erase();
    }
    SmallVector<Operation *> cone(s.cone.begin(), s.cone.end());
    llvm::sort(cone, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
    for (Operation *op : cone)
      op->moveBefore(top);
    int64_t n = s.gather.getWorldSize();
    int64_t len = s.source.getType().cast<RankedTensorType>().getDimSize(0);
    // One shard cast and gather a scale and format (the backward's recomputed casts share them).
    while (!s.casts.empty()) {
      Operation *c0 = s.casts.front();
      Value scale = scaleOf(c0);
      auto codesType = c0->getResult(0).getType().cast<RankedTensorType>();
      Type format = codesType.getElementType();
      SmallVector<Operation *> same;
      for (Operation *c : s.casts) // c0 among them
        if (scaleOf(c) == scale && c->getResult(0).getType().cast<RankedTensorType>().getElementType() == format &&
            c->getAttr("saturate") == c0->getAttr("saturate"))
          same.push_back(c);
      for (Operation *c : same)
        s.casts.erase(llvm::find(s.casts, c));
      bool wantAmax = llvm::any_of(same, [](Operation *c) {
        auto ca = dyn_cast<fp8::CastAmaxOp>(c);
        return ca && !ca.getAmax().use_empty();
      });
      b.setInsertionPoint(top);
      auto shardCodes = RankedTensorType::get({len}, format);
      auto scalar = RankedTensorType::get({}, b.getF32Type());
      Value codes, amax;
      BoolAttr saturate = c0->getAttrOfType<BoolAttr>("saturate");
      if (!saturate)
        saturate = b.getBoolAttr(true);
      if (wantAmax) {
        auto ca = b.create<fp8::CastAmaxOp>(loc, TypeRange{shardCodes, scalar}, s.source, scale, saturate);
        codes = ca.getOutput();
        amax = ca.getAmax();
      } else {
        codes = b.create<fp8::CastOp>(loc, shardCodes, s.source, scale, saturate);
      }
      auto g = b.create<fp8::AllGatherOp>(loc, RankedTensorType::get({n * len}, format), codes,
                                          s.gather.getWorldSizeAttr());
      for (NamedAttribute a : s.gather->getDialectAttrs())
        g->setAttr(a.getName(), a.getValue());
      Value q = g.getOutput();
      for (Operation *op : s.chain) {
        if (isa<ox::CastOp>(op))
          continue;
        for (Value v : op->getOperands().drop_front()) // shapes and bounds: constants, moved up
          if (Operation *d = v.getDefiningOp(); d && d->getNumOperands() == 0 && top->isBeforeInBlock(d))
            d->moveBefore(top);
        IRMapping map;
        map.map(op->getOperand(0), q);
        Operation *copy = b.clone(*op, map);
        auto t = op->getResult(0).getType().cast<RankedTensorType>();
        copy->getResult(0).setType(RankedTensorType::get(t.getShape(), format));
        q = copy->getResult(0);
      }
      assert(q.getType() == codesType && "the gathered codes have the cast's type");
      for (Operation *c : same) {
        c->getResult(0).replaceAllUsesWith(q);
        if (auto ca = dyn_cast<fp8::CastAmaxOp>(c)) {
          if (Value t = ca.getTransposed(); t && !t.use_empty()) {
            // Made where it is first read (the backward's GEMMs): the codes are gathered again
            // there and freed after, as the forward's are, instead of living through the step.
            Operation *first = *t.getUsers().begin();
            for (Operation *u : t.getUsers())
              if (u->isBeforeInBlock(first))
                first = u;
            OpBuilder here(first);
            t.replaceAllUsesWith(octet::OnnxBuilder(here, c->getLoc()).transposedCodes(q, t.getType().cast<RankedTensorType>()));
          }
          Value a = ca.getAmax();
          if (!a.use_empty()) {
            // Delayed scaling's amax goes to fp8.delayed_scale, whose amax octet-reduce-amaxes
            // all-reduces (max) with the others'; any other reader gets the maximum here.
            bool delayed = llvm::all_of(a.getUsers(), [](Operation *u) { return isa<fp8::DelayedScaleOp>(u); });
            if (delayed) {
              a.replaceAllUsesWith(amax);
            } else {
              OpBuilder after(amax.getContext());
              after.setInsertionPointAfterValue(amax);
              a.replaceAllUsesWith(octet::maxOverRanks(after, loc, {amax}).front());
            }
          }
        }
        c->erase();
      }
    }
    for (Operation *op : llvm::reverse(s.chain))
      dead.push_back(op);
    dead.push_back(s.gather);
  }

  void run(func::FuncOp func, int64_t &count, SmallVectorImpl<Attribute> &kept) {
    Block &body = func.getBody().front();
    SmallVector<fp8::AllGatherOp> gathers;
    for (auto ag : body.getOps<fp8::AllGatherOp>())
      if (ag->hasAttr(octet::kParameterGatherAttr))
        gathers.push_back(ag);
    if (gathers.empty())
      return;
    Operation *top = gathers.front();
    std::vector<Site> sites;
    for (fp8::AllGatherOp ag : gathers) {
      std::string why;
      FailureOr<Site> s = analyze(ag, top, why);
      if (succeeded(s))
        sites.push_back(std::move(*s));
      else if (!why.empty())
        kept.push_back(StringAttr::get(func.getContext(), octet::stateName(ag.getInput()) + ": " + why));
    }
    // The casts read the shard as the weight's chain converts it (MS-AMP's FP16 weights widened).
    OpBuilder b(top);
    SmallVector<Value> amaxes;
    for (Site &s : sites) {
      s.source = s.gather.getInput();
      for (Operation *op : s.chain)
        if (auto c = dyn_cast<ox::CastOp>(op)) {
          auto to = c.getResult().getType().cast<RankedTensorType>().getElementType();
          auto t = s.source.getType().cast<RankedTensorType>();
          IRMapping map;
          map.map(op->getOperand(0), s.source);
          Operation *copy = b.clone(*op, map);
          copy->getResult(0).setType(RankedTensorType::get(t.getShape(), to));
          s.source = copy->getResult(0);
        }
      for (fp8::AmaxOp a : s.amaxes)
        amaxes.push_back(b.create<fp8::AmaxOp>(a.getLoc(), a.getAmax().getType(), s.source, b.getBoolAttr(false)));
    }
    // Every weight's amax (current scaling) in one all-reduce at the step's start.
    SmallVector<Value> reduced;
    if (!amaxes.empty())
      reduced = octet::maxOverRanks(b, top->getLoc(), amaxes);
    size_t next = 0;
    SmallVector<Operation *> dead;
    for (Site &s : sites) {
      rewrite(s, top, ArrayRef<Value>(reduced).slice(next, s.amaxes.size()), dead);
      next += s.amaxes.size();
    }
    for (Operation *op : dead)
      op->erase();
    count += int64_t(sites.size());
  }

  void runOnOperation() override {
    int64_t count = 0;
    SmallVector<Attribute> kept;
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        run(f, count, kept);
    Builder b(&getContext());
    if (count)
      getOperation()->setAttr(octet::kFp8WeightGathersAttr, b.getI64IntegerAttr(count));
    if (!kept.empty())
      getOperation()->setAttr(octet::kFp8GatherKeptAttr, b.getArrayAttr(kept));
  }
};

} // namespace
