//===- FoldWideningCasts.cpp - FP8 casts and amaxes read narrow sources -----===//
//
// octet-fold-widening-casts: an onnx.Cast that widens FP16 or BF16 to float32 is exact, and so is
// reading the narrow value where an fp8.amax, fp8.cast or fp8.cast_amax converts it to float
// itself: max |x| and x / scale_inv are the same numbers. MS-AMP O2/O3 keep weights in FP16 and
// widen them for the forward pass (octet-optimizer), so without this the step writes every FP8
// weight as float32 (2 bytes read, 4 written per element) and reads that twice more, for the
// weight's amax and its cast. The FP8 ops take the Cast's operand instead; a Cast left without
// readers goes.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_FOLDWIDENINGCASTS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

/// The FP16/BF16 value an exact widening Cast to float32 reads, or null.
Value narrowSource(Value v) {
  auto c = v.getDefiningOp<ox::CastOp>();
  if (!c)
    return {};
  auto in = c->getOperand(0).getType().dyn_cast<RankedTensorType>();
  auto out = c->getResult(0).getType().dyn_cast<RankedTensorType>();
  if (!in || !out || !out.getElementType().isF32() || !(in.getElementType().isF16() || in.getElementType().isBF16()))
    return {};
  return c->getOperand(0);
}

struct FoldWideningCasts : octet::impl::FoldWideningCastsBase<FoldWideningCasts> {
  using FoldWideningCastsBase::FoldWideningCastsBase;

  void runOnOperation() override {
    llvm::SetVector<Operation *> casts; // a Cast read by an amax and a cast is one entry
    getOperation().walk([&](Operation *op) {
      if (!isa<fp8::AmaxOp, fp8::CastOp, fp8::CastAmaxOp>(op))
        return;
      Value narrow = narrowSource(op->getOperand(0));
      if (!narrow)
        return;
      casts.insert(op->getOperand(0).getDefiningOp());
      op->setOperand(0, narrow);
    });
    for (Operation *c : casts)
      if (c->use_empty())
        c->erase();
  }
};

} // namespace
