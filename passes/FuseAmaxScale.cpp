//===- FuseAmaxScale.cpp - Dynamic scaling's scale in its amax's launch ---------===//
//
// octet-fuse-amax-scale: dynamic scaling (torchao's `ao`, MS-AMP) computes each FP8 operand's
// scale from its amax right away: an fp8.amax over the whole tensor, then an fp8.dynamic_scale of
// that one value. On a GPU the scale is a one-thread launch of its own after the amax's, several
// hundred per step. The pair becomes a fusion group (FusionGroups.h, kind "amax_scale"): a backend
// computes the scale where it finishes the amax. Only an amax that the scale alone reads, right
// before it, and that no other group holds (an amax a producer takes keeps its producer_amax group).
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Passes/Passes.h"

#include "FusionGroups.h"

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
    // One module walk for the numbering, not one per group.
    int64_t next = octet::nextFusionGroup(getOperation(), "amax_scale");
    for (auto [a, d] : pairs)
      octet::markFusionGroup({a, d}, "amax_scale", next++);
  }
};

} // namespace
