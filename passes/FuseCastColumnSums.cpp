//===- FuseCastColumnSums.cpp - A bias gradient in its dY cast's pass -----===//
//
// octet-fuse-cast-column-sums: the backward of a Linear with a bias casts dY to FP8 with its
// transposed copy (fp8.cast_amax with `transposed`) and sums dY over its rows for the bias
// gradient (onnx.ReduceSum over every axis but the last, float32 [N]). The pair becomes a fusion
// group (FusionGroups.h, kind "cast_column_sum"): a backend takes the column sums in the cast's
// pass as per-tile partials, and the sum adds up those partials instead of reading dY again. The
// CPU runs both ops as they are.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "FusionGroups.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"

namespace octet {
#define GEN_PASS_DEF_FUSECASTCOLUMNSUMS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

/// Whether `r` sums a float32 or BF16 tensor over every axis but the last into float32 of that
/// axis's length (keepdims either way): a bias gradient.
bool isColumnSum(ox::ReduceSumOp r) {
  auto in = r.getData().getType().dyn_cast<RankedTensorType>();
  auto out = r.getReduced().getType().dyn_cast<RankedTensorType>();
  if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape() || in.getRank() < 2 ||
      !(in.getElementType().isF32() || in.getElementType().isBF16()) || !out.getElementType().isF32() ||
      out.getNumElements() != in.getShape().back())
    return false;
  auto c = r.getAxes() ? r.getAxes().getDefiningOp<ox::ConstantOp>() : ox::ConstantOp();
  auto axes = c && c.getValue() ? c.getValue()->dyn_cast<DenseIntElementsAttr>() : DenseIntElementsAttr();
  if (!axes)
    return false;
  llvm::SmallBitVector seen(size_t(in.getRank()));
  for (const APInt &a : axes) {
    int64_t v = a.getSExtValue() < 0 ? a.getSExtValue() + in.getRank() : a.getSExtValue();
    if (v < 0 || v >= in.getRank() - 1 || seen.test(size_t(v)))
      return false;
    seen.set(size_t(v));
  }
  return int64_t(seen.count()) == in.getRank() - 1;
}

struct FuseCastColumnSums : octet::impl::FuseCastColumnSumsBase<FuseCastColumnSums> {
  using FuseCastColumnSumsBase::FuseCastColumnSumsBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (f.getBody().empty())
        return;
      llvm::DenseMap<Value, Operation *> castOf; // a value's latest cast with a transposed copy, unpaired
      for (Operation &op : f.getBody().front()) {
        if (auto c = dyn_cast<fp8::CastAmaxOp>(op)) {
          if (c.getTransposed())
            castOf[c.getInput()] = &op;
          continue;
        }
        auto r = dyn_cast<ox::ReduceSumOp>(op);
        if (!r || !isColumnSum(r))
          continue;
        auto it = castOf.find(r.getData());
        if (it == castOf.end())
          continue;
        octet::markFusionGroup({it->second, &op}, "cast_column_sum");
        castOf.erase(it);
      }
    });
  }
};

} // namespace
