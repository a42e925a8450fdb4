//===- PadLossClasses.cpp - A loss reads padded logits, the padding as -inf ===//
//
// octet-pad-loss-classes: pad-kept-gemms (octet-fp8-substitute) computes a kept BF16 GEMM whose N
// is no multiple of 8 over N rounded up (zero weight columns) and slices the result back. When
// that result is a classifier's logits (GPT-2's lm_head, 50257 words), the slice copies them
// (16384 x 50257 BF16 values at 16 x 1024 tokens), its gradient pads dY back, and the loss and its
// gradient read rows of an odd length one element at a time. Here the loss reads the padded logits
// instead: the padding's columns become -inf (an Add of a row of zeros and -infs), and the ops
// between (Cast, Reshape) widen with them. exp(-inf - max) is 0, so the log-sum-exp, the loss and
// the real columns' gradient are the same numbers, and the padding's gradient is exactly 0; the
// labels are below N.
//
// Matched: a Slice marked `octet.pad_slice` (pad-kept-gemms) whose result flows, each value read
// once, through Casts and Reshapes that keep the class axis last (a constant shape whose last entry
// is N or -1) into the scores of a SoftmaxCrossEntropyLoss of [M, N] scores without class weights
// or a log_prob result in use. Anything else keeps the Slice.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <limits>

namespace octet {
#define GEN_PASS_DEF_PADLOSSCLASSES
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

/// `t` with its last dimension `n`.
RankedTensorType withLast(RankedTensorType t, int64_t n) {
  SmallVector<int64_t> s(t.getShape());
  s.back() = n;
  return RankedTensorType::get(s, t.getElementType());
}

/// The ops from `slice`'s result to the loss that reads it (the loss last), or empty when the
/// chain is not one this pass widens.
SmallVector<Operation *> lossChain(ox::SliceOp slice, int64_t n) {
  SmallVector<Operation *> chain;
  Value v = slice.getOutput();
  while (true) {
    if (!v.hasOneUse())
      return {};
    auto t = v.getType().dyn_cast<RankedTensorType>();
    if (!t || !t.hasStaticShape() || t.getRank() < 1 || t.getShape().back() != n)
      return {};
    Operation *user = *v.getUsers().begin();
    if (auto loss = dyn_cast<ox::SoftmaxCrossEntropyLossOp>(user)) {
      if (loss.getScores() != v || t.getRank() != 2 || !loss.getWeights().getType().isa<NoneType>() ||
          !loss.getLogProb().use_empty())
        return {};
      chain.push_back(user);
      return chain;
    }
    if (auto r = dyn_cast<ox::ReshapeOp>(user)) {
      auto shape = ox::getConstantInts(r.getShape());
      auto out = r.getReshaped().getType().dyn_cast<RankedTensorType>();
      if (r.getData() != v || !shape || shape->empty() || (shape->back() != n && shape->back() != -1) || !out ||
          !out.hasStaticShape() || out.getShape().back() != n)
        return {};
    } else if (!isa<ox::CastOp>(user)) {
      return {};
    }
    chain.push_back(user);
    v = user->getResult(0);
  }
}

struct PadLossClasses : octet::impl::PadLossClassesBase<PadLossClasses> {
  using PadLossClassesBase::PadLossClassesBase;

  void runOnOperation() override {
    SmallVector<ox::SliceOp> slices;
    getOperation().walk([&](ox::SliceOp s) {
      if (s->hasAttr("octet.pad_slice"))
        slices.push_back(s);
    });
    for (ox::SliceOp slice : slices) {
      Value padded = slice.getData();
      auto pt = padded.getType().dyn_cast<RankedTensorType>();
      auto st = slice.getOutput().getType().dyn_cast<RankedTensorType>();
      if (!pt || !st || !pt.hasStaticShape() || !st.hasStaticShape() || pt.getRank() != st.getRank())
        continue;
      int64_t n = st.getShape().back(), np = pt.getShape().back();
      auto elt = pt.getElementType().dyn_cast<FloatType>();
      SmallVector<Operation *> chain = lossChain(slice, n);
      if (chain.empty() || !elt || np <= n)
        continue;
      // padded + [0 x N, -inf x (Np - N)]: the real columns unchanged (x + 0 is x), the padding -inf.
      OpBuilder ob(slice);
      octet::OnnxBuilder ox(ob, slice.getLoc());
      const llvm::fltSemantics &sem = elt.getFloatSemantics();
      SmallVector<APFloat> row(size_t(n), APFloat::getZero(sem));
      row.append(size_t(np - n), APFloat::getInf(sem, /*Negative=*/true));
      Value bias = ox.constant(DenseElementsAttr::get(RankedTensorType::get({np}, elt), row));
      Value masked = ox.op("Add", pt, {padded, bias});
      for (Operation *op : chain) {
        if (auto r = dyn_cast<ox::ReshapeOp>(op)) {
          SmallVector<int64_t> shape = *ox::getConstantInts(r.getShape());
          if (shape.back() == n) {
            shape.back() = np;
            OpBuilder rb(op);
            Operation *old = r.getShape().getDefiningOp();
            r->setOperand(1, octet::OnnxBuilder(rb, op->getLoc()).i64s(shape));
            if (isa_and_nonnull<ox::ConstantOp>(old) && old->use_empty())
              old->erase();
          }
        }
        if (!isa<ox::SoftmaxCrossEntropyLossOp>(op)) {
          Value res = op->getResult(0);
          res.setType(withLast(res.getType().cast<RankedTensorType>(), np));
        }
      }
      slice.getOutput().replaceAllUsesWith(masked);
      slice->erase();
    }
  }
};

} // namespace
