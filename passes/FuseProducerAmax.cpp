//===- FuseProducerAmax.cpp - An amax taken by the op that stores its input ===//
//
// octet-fuse-producer-amax: dynamic scaling (torchao's `ao`, MS-AMP) needs the amax of a Linear's
// input (or output gradient) before it can cast it; where the op right before the amax computes
// that tensor elementwise or per row and stores it, the amax (fp8.amax over the whole tensor)
// reads it again right after it was written. The pair becomes a fusion group (FusionGroups.h,
// kind "producer_amax"): a backend takes the max |y| of the values the producer stores as it
// stores them, and the amax reads nothing. Producers:
//
//   - a Gelu (the MLP's second Linear's input);
//   - an octet Pointwise program in no other group (the GELU's gradient, c_fc's dY);
//   - an octet::LayerNormalizationGrad or RMSNormalizationGrad, of its dX (the residual stream's
//   gradient, the output
//     projections' dY).
//
// Views (Reshape, Squeeze, ...) between the two are skipped; the amax reads the producer's result
// through them. The CPU runs both ops as they are (the same bits: the max of the stored values).
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "FusionGroups.h"
#include "PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace octet {
#define GEN_PASS_DEF_FUSEPRODUCERAMAX
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

/// The op that stores what `a` reads (through views), right before `a` (views aside), if it is a
/// producer this pass pairs; else null.
Operation *producerOf(fp8::AmaxOp a) {
  Value x = octet::viewRoot(a.getInput());
  Operation *p = x.getDefiningOp();
  Operation *before = octet::prevStep(a);
  while (before && octet::isViewOp(before))
    before = octet::prevStep(before);
  if (!p || p != before || p->hasAttr("octet.fusion"))
    return nullptr;
  if (isa<ox::GeluOp>(p) || octet::isPointwiseNode(p))
    return p;
  if ((octet::planOpType(p) == "octet::LayerNormalizationGrad" ||
       octet::planOpType(p) == "octet::RMSNormalizationGrad") &&
      x == p->getResult(0))
    return p;
  return nullptr;
}

struct FuseProducerAmax : octet::impl::FuseProducerAmaxBase<FuseProducerAmax> {
  using FuseProducerAmaxBase::FuseProducerAmaxBase;

  void runOnOperation() override {
    SmallVector<std::pair<Operation *, Operation *>> pairs;
    getOperation().walk([&](fp8::AmaxOp a) {
      if (a.getRowwise() || a->hasAttr("octet.fusion"))
        return;
      if (Operation *p = producerOf(a))
        pairs.push_back({p, a});
    });
    for (auto [p, a] : pairs)
      if (!p->hasAttr("octet.fusion")) // one amax per producer
        octet::markFusionGroup({p, a}, "producer_amax");
  }
};

} // namespace
