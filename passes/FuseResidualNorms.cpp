//===- FuseResidualNorms.cpp - A LayerNorm takes the residual Add before it ===//
//
// octet-fuse-residual-norms: a pre-LN transformer's residual stream is x' = x + sublayer(x), and
// the next block's LayerNormalization reads x' right away. The Add reads two tensors and writes
// x'; the LayerNorm (or, in a cast pass, the row statistics its FP8 casts apply) reads x' again.
// Where a float32 onnx.Add of two operands of its own shape (no broadcast) is the op right before
// (views aside) a float32 LayerNormalization or RMSNormalization (a Llama's) over the last axis
// that reads its result, the pair becomes a fusion group (FusionGroups.h, kind "residual_norm"):
// a backend computes the sum and the norm's row statistics in one pass over the operands, writing
// x' for its other readers (the next residual Add, the norm's gradient), and x' is not read back
// for the statistics. The CPU runs both ops as they are (the same bits: the sum is rounded as the
// Add rounds it).
// Ops already in a fusion group are left alone.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "FusionGroups.h"
#include "PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace octet {
#define GEN_PASS_DEF_FUSERESIDUALNORMS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

bool isF32(Value v) {
  auto t = v.getType().dyn_cast<RankedTensorType>();
  return t && t.hasStaticShape() && t.getElementType().isF32();
}

/// Whether `op` computes from parameters and constants alone (Gemma's 1 + w, the norm's scale),
/// each made before `add`: it may run before the residual Add as well as after it.
bool fromParameters(Operation *op, Operation *add) {
  return op->getNumRegions() == 0 && op->getNumResults() == 1 && !octet::isViewOp(op) &&
         llvm::all_of(op->getOperands(), [&](Value v) {
           Operation *d = v.getDefiningOp();
           return isa_and_nonnull<ox::InitializerOp, ox::ConstantOp>(d) &&
                  (d->getBlock() != add->getBlock() || d->isBeforeInBlock(add));
         });
}

/// The Add `ln` reads (through views) where it is the op right before `ln`, views and ops that
/// compute from parameters alone aside (those move before the Add), and adds two float32 tensors
/// of its result's shape; or null.
ox::AddOp residualAddOf(const octet::RowNorm &ln) {
  auto add = octet::viewRoot(ln.x).getDefiningOp<ox::AddOp>();
  if (!add || add->getBlock() != ln.op->getBlock())
    return {};
  SmallVector<Operation *> hoist;
  Operation *before = octet::prevStep(ln.op);
  while (before && before != add && (octet::isViewOp(before) || fromParameters(before, add))) {
    if (!octet::isViewOp(before))
      hoist.push_back(before);
    before = octet::prevStep(before);
  }
  if (before != add.getOperation())
    return {};
  Type shape = add.getC().getType();
  if (!isF32(add.getC()) || add.getA().getType() != shape || add.getB().getType() != shape)
    return {};
  for (Operation *op : llvm::reverse(hoist))
    op->moveBefore(add);
  return add;
}

struct FuseResidualNorms : octet::impl::FuseResidualNormsBase<FuseResidualNorms> {
  using FuseResidualNormsBase::FuseResidualNormsBase;

  void runOnOperation() override {
    SmallVector<std::pair<Operation *, Operation *>> pairs;
    getOperation().walk([&](Operation *op) {
      octet::RowNorm ln = octet::rowNorm(op);
      if (!ln || op->hasAttr("octet.fusion") || !ln.lastAxisF32())
        return;
      ox::AddOp add = residualAddOf(ln);
      if (add && !add->hasAttr("octet.fusion"))
        pairs.push_back({add, op});
    });
    int64_t next = octet::nextFusionGroup(getOperation(), "residual_norm");
    for (auto [add, ln] : pairs)
      octet::markFusionGroup({add, ln}, "residual_norm", next++);
  }
};

} // namespace
