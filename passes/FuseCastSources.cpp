//===- FuseCastSources.cpp - FP8 casts that compute the tensor they cast --===//
//
// octet-fuse-cast-sources: an FP8 cast-transpose (fp8.cast_amax with its transposed copy, what
// the FP8 GEMMs of a Linear and of its weight gradient read) reads its whole input once. Where
// several of them cast one tensor one after another (octet-group-casts puts them so), they read
// it once between them; where the op just before computes that tensor elementwise per row or per
// element and nothing else reads it, the pass can compute it instead, and it is never stored:
//
//   - a float32 LayerNormalization or RMSNormalization over the last axis (the pass applies the
//     rows' statistics);
//   - a Gelu (a GELU the MLP's second Linear casts, forward or recomputed for its weight
//     gradient);
//   - an octet Pointwise program, or a pointwise_chain group (a GELU gradient, an RMSNorm's
//     x * 1/rms * gamma); here a column sum the cast's cast_column_sum group takes in its pass
//     may read the tensor too.
//
// Under dynamic scaling (torchao's `ao`, MS-AMP) the cast's scale comes from the amax of the
// tensor it casts: an fp8.amax of the tensor and the fp8.dynamic_scale made from it sit between
// the producer and the casts. Where the producer is such a LayerNorm, the amax joins the pass: a
// backend takes the rows' statistics and max |y| in one read of the LayerNorm's input, and the
// casts apply the statistics in a second one, so the LayerNorm's output is neither stored nor
// read again (the scale between them stays outside the pass).
//
// The members (the casts, the amax, and the producer or every member of its chain) get the same
// `octet.cast_pass` number (the plan's `cast_pass`): a backend may run them as one pass over the
// tensor. The CPU runs the ops one by one (the same bits). Views (Reshape, Squeeze, Unsqueeze,
// Flatten, Identity) between the members move nothing and are skipped.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace octet {
#define GEN_PASS_DEF_FUSECASTSOURCES
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

constexpr size_t kMaxCasts = 3; // casts of one pass (a backend's targets; docs/PLAN.md)
constexpr llvm::StringLiteral kCastPass = "octet.cast_pass";

/// The op after (before) `op`, constants and views aside.
Operation *nextOp(Operation *op) {
  do
    op = octet::nextStep(op);
  while (op && octet::isViewOp(op));
  return op;
}
Operation *prevOp(Operation *op) {
  do
    op = octet::prevStep(op);
  while (op && octet::isViewOp(op));
  return op;
}

/// The [rows, cols] a cast-transpose takes its float input as (cols the last axis).
std::optional<std::pair<int64_t, int64_t>> castShape(fp8::CastAmaxOp c) {
  auto t = c.getInput().getType().dyn_cast<RankedTensorType>();
  if (!t || !t.hasStaticShape() || t.getRank() < 1 || !c.getTransposed() ||
      !(t.getElementType().isF32() || t.getElementType().isBF16() || t.getElementType().isF16()))
    return std::nullopt;
  int64_t cols = t.getShape().back();
  return std::make_pair(cols ? t.getNumElements() / cols : 0, cols);
}

/// Whether `v` (through views) is read only by `ops`, and is no function result.
bool onlyReadBy(Value v, const llvm::SmallPtrSetImpl<Operation *> &ops) {
  for (OpOperand &use : v.getUses()) {
    Operation *u = use.getOwner();
    if (ops.contains(u))
      continue;
    if (!octet::isViewOp(u) || use.getOperandNumber() != 0 || !onlyReadBy(u->getResult(0), ops))
      return false;
  }
  return true;
}

/// The members of the pointwise_chain group whose last member is `last`, in order; none if `last`
/// is not the group's last.
SmallVector<Operation *> chainEndingAt(Operation *last) {
  auto [first, end] = octet::chainOf(last);
  if (end != last)
    return {};
  SmallVector<Operation *> members;
  for (Operation *op = first; op != last; op = octet::nextStep(op))
    members.push_back(op);
  members.push_back(last);
  return members;
}

/// The per-tensor fp8.amax of `x` whose fp8.dynamic_scale is the op right before `firstCast`
/// (views aside), the amax right before the scale and read by it alone; or null.
fp8::AmaxOp amaxBefore(Value x, Operation *firstCast) {
  auto s = dyn_cast_or_null<fp8::DynamicScaleOp>(prevOp(firstCast));
  auto a = s ? dyn_cast_or_null<fp8::AmaxOp>(prevOp(s)) : fp8::AmaxOp();
  if (!a || s.getAmax() != a.getAmax() || !a.getAmax().hasOneUse() || a.getRowwise() ||
      octet::viewRoot(a.getInput()) != x || a->hasAttr(kCastPass))
    return {};
  return a;
}

/// The ops that compute `x` in the pass of `casts` (whose readers `readers` are allowed), the op
/// right before `first` (the first cast, or the amax the pass takes; views aside), or none.
SmallVector<Operation *> producerOf(Value x, Operation *first, int64_t cols, bool summed,
                                    const llvm::SmallPtrSetImpl<Operation *> &readers) {
  Operation *p = prevOp(first);
  if (!p || x.getDefiningOp() != p || p->hasAttr(kCastPass) || !onlyReadBy(x, readers))
    return {};
  if (octet::RowNorm ln = octet::rowNorm(p)) {
    if (summed || !ln.lastAxisF32() || p->hasAttr("octet.fusion"))
      return {};
    return ln.x.getType().cast<RankedTensorType>().getShape().back() == cols
               ? SmallVector<Operation *>{p}
               : SmallVector<Operation *>{};
  }
  if (isa<ox::GeluOp>(p) && !summed && octet::fusionOf(p) != "producer_amax")
    return {p};
  if (octet::isPointwiseNode(p) && octet::fusionOf(p).empty())
    return {p};
  if (octet::fusionOf(p) == "pointwise_chain")
    return chainEndingAt(p);
  return {};
}

struct FuseCastSources : octet::impl::FuseCastSourcesBase<FuseCastSources> {
  using FuseCastSourcesBase::FuseCastSourcesBase;

  void runOnOperation() override {
    int64_t next = 0;
    getOperation().walk([&](Operation *op) {
      if (auto g = op->getAttrOfType<IntegerAttr>(kCastPass))
        next = std::max(next, g.getInt() + 1);
    });
    getOperation().walk([&](func::FuncOp f) {
      if (f.getBody().empty())
        return;
      SmallVector<fp8::CastAmaxOp> casts;
      for (auto c : f.getBody().front().getOps<fp8::CastAmaxOp>())
        casts.push_back(c);
      Builder b(&getContext());
      for (fp8::CastAmaxOp c : casts) {
        auto shape = castShape(c);
        if (!shape || c->hasAttr(kCastPass))
          continue;
        Value x = octet::viewRoot(c.getInput());
        Type et = c.getInput().getType().cast<TensorType>().getElementType();
        // The casts of the same tensor right after this one.
        SmallVector<Operation *> group{c};
        for (Operation *op = nextOp(c); op && group.size() < kMaxCasts; op = nextOp(op)) {
          auto d = dyn_cast<fp8::CastAmaxOp>(op);
          if (!d || d->hasAttr(kCastPass) || octet::viewRoot(d.getInput()) != x || castShape(d) != shape ||
              d.getInput().getType().cast<TensorType>().getElementType() != et)
            break;
          group.push_back(d);
        }
        // A cast whose column sum its pass takes (cast_column_sum) is one of its own.
        auto isSummed = [](Operation *op) { return octet::fusionOf(op) == "cast_column_sum"; };
        if (isSummed(group.front()))
          group.resize(1);
        else
          group.erase(llvm::find_if(group, isSummed), group.end());
        bool summed = isSummed(group.front());
        llvm::SmallPtrSet<Operation *, 4> readers(group.begin(), group.end());
        if (summed) // the sum reads the tensor the cast reads, in the cast's pass
          for (Operation *u : c.getInput().getUsers())
            if (octet::sameGroup(u, c, "cast_column_sum"))
              readers.insert(u);
        // Dynamic scaling's amax between a LayerNorm and its casts joins their pass.
        SmallVector<Operation *> amax;
        if (fp8::AmaxOp a = summed ? fp8::AmaxOp() : amaxBefore(x, group.front())) {
          readers.insert(a);
          SmallVector<Operation *> p = producerOf(x, a, shape->second, summed, readers);
          if (!p.empty() && octet::rowNorm(p.front()))
            amax = {p.front(), a};
        }
        SmallVector<Operation *> producer =
            amax.empty() ? producerOf(x, group.front(), shape->second, summed, readers) : amax;
        if (group.size() < 2 && producer.empty())
          continue;
        for (Operation *op : llvm::concat<Operation *>(producer, group))
          op->setAttr(kCastPass, b.getI64IntegerAttr(next));
        ++next;
      }
    });
  }
};

} // namespace
