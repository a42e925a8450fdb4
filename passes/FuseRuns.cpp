//===- FuseRuns.cpp - Runs of small ops of one kind as one launch ---------===//
//
// octet-fuse-runs: the delayed-scaling updates at a step's end (fp8.delayed_scale of one history
// length and setting, side by side after octet-sink-scale-updates) and the optimizer's
// per-parameter sums of squares (whole-tensor float32 onnx.ReduceSumSquare, side by side as
// octet-optimizer writes them) each cost a launch for a few bytes. Each run of two or more
// consecutive ops of one kind and setting becomes a fusion group (FusionGroups.h) that a backend
// runs as one launch; the CPU runs the members one by one, so the arithmetic is the same.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "FusionGroups.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>

namespace octet {
#define GEN_PASS_DEF_FUSERUNS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

/// The run `op` can belong to: its kind and a key that members of one run share, or nothing.
std::optional<std::pair<std::string, std::string>> runKey(Operation &op) {
  if (auto d = dyn_cast<fp8::DelayedScaleOp>(op)) {
    auto h = d.getHistory().getType().dyn_cast<RankedTensorType>();
    if (!h || !h.hasStaticShape() || d.getInterval() > 1 || d.getStep())
      return std::nullopt;
    std::string key = std::to_string(h.getNumElements()) + "/" + std::to_string(d.getMargin()) + "/" +
                      std::to_string(int(d.getAlgo())) + "/" + std::to_string(d.getPowerOfTwo());
    return std::make_pair(std::string("delayed_scale_list"), key);
  }
  if (auto r = dyn_cast<ox::GenericNodeOp>(op); r && r.getOpType() == "ReduceSumSquare" && r.getDomain().empty()) {
    auto in = r->getNumOperands() ? r->getOperand(0).getType().dyn_cast<RankedTensorType>() : RankedTensorType();
    auto out = r->getNumResults() == 1 ? r->getResult(0).getType().dyn_cast<RankedTensorType>() : RankedTensorType();
    // A whole tensor's sum: no axes operand (every axis), one float32 result.
    if (r->getNumOperands() != 1 || !in || !out || !in.hasStaticShape() || !in.getElementType().isF32() ||
        !out.hasStaticShape() || out.getNumElements() != 1 || in.getRank() == 0)
      return std::nullopt;
    return std::make_pair(std::string("sum_squares_list"), std::string());
  }
  return std::nullopt;
}

struct FuseRuns : octet::impl::FuseRunsBase<FuseRuns> {
  using FuseRunsBase::FuseRunsBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (f.getBody().empty())
        return;
      SmallVector<Operation *> run;
      std::optional<std::pair<std::string, std::string>> key;
      llvm::SmallPtrSet<Operation *, 16> members;
      auto flush = [&] {
        if (run.size() >= 2)
          octet::markFusionGroup(run, key->first);
        run.clear();
        members.clear();
        key.reset();
      };
      for (Operation &op : f.getBody().front()) {
        if (isa<ox::InitializerOp, ox::ConstantOp, ox::NoneOp>(op))
          continue;
        auto k = runKey(op);
        bool readsRun = llvm::any_of(op.getOperands(), [&](Value v) { return members.contains(v.getDefiningOp()); });
        if (!k || k != key || readsRun)
          flush();
        if (!k)
          continue;
        key = k;
        run.push_back(&op);
        members.insert(&op);
      }
      flush();
    });
  }
};

} // namespace
