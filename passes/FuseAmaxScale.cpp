//===- FuseAmaxScale.cpp - Dynamic scaling's scale in its amax's launch ---------===//
//
// octet-fuse-amax-scale: dynamic scaling (torchao's `ao`, MS-AMP) computes each FP8 operand's
// scale from its amax right away: an fp8.amax over the whole tensor, then an fp8.dynamic_scale of
// that one value. On a GPU the scale is a one-thread launch of its own after the amax's, several
// hundred per step. The pair becomes a fusion group (FusionGroups.h, kind "amax_scale"): a backend
// computes the scale where it finishes the amax. Only an amax that the scale alone reads, right
// before it, and that no other group holds (a GELU's amax keeps its gelu_amax group).
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace octet {
#define GEN_PASS_DEF_FUSEAMAXSCALE
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace fp8 = octet::fp8;

namespace {

struct FuseAmaxScale : octet::impl::FuseAmaxScaleBase<FuseAmaxScale> {
  using FuseAmaxScaleBase::FuseAmaxScaleBase;

  void runOnOperation() override {
    SmallVector<std::pair<Operation *, Operation *>> pairs;
    getOperation().walk([&](fp8::AmaxOp a) {
      auto d = dyn_cast_or_null<fp8::DynamicScaleOp>(a->getNextNode());
      if (!d || a.getRowwise() || !a.getAmax().hasOneUse() || d.getAmax() != a.getAmax() ||
          a->hasAttr("octet.fusion") || d->hasAttr("octet.fusion"))
        return;
      pairs.push_back({a, d});
    });
    // One number per group, in order (markFusionGroup's walk per group would be quadratic).
    Builder b(&getContext());
    int64_t next = 0;
    getOperation().walk([&](Operation *op) {
      auto k = op->getAttrOfType<StringAttr>("octet.fusion");
      auto g = op->getAttrOfType<IntegerAttr>("octet.fusion_group");
      if (k && g && k.getValue() == "amax_scale")
        next = std::max(next, g.getInt() + 1);
    });
    for (auto [a, d] : pairs) {
      for (Operation *op : {a, d}) {
        op->setAttr("octet.fusion", b.getStringAttr("amax_scale"));
        op->setAttr("octet.fusion_group", b.getI64IntegerAttr(next));
      }
      ++next;
    }
  }
};

} // namespace
