//===- FuseCastAmax.cpp - One pass over a tensor for its FP8 cast and amax ---===//
//
// octet-fuse-cast-amax: `fp8.cast %x, %s` and a per-tensor `fp8.amax %x` (what
// delayed scaling emits for every FP8 operand) become `fp8.cast_amax %x, %s`, so
// the backend reads %x once. The fused op goes where the later of the two was
// when no reader of the earlier op's result sits between them, else where the
// earlier one was when the later one's operands are defined there (the amax
// read by fp8.delayed_scale before the cast); otherwise the pair stays. A cast
// pairs with one amax.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Passes/Passes.h"

#include "BlockOrder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"

namespace octet {
#define GEN_PASS_DEF_FUSECASTAMAX
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace fp8 = octet::fp8;

namespace {

/// Whether every reader of `v` (at its ancestor in `body`) comes after `point`.
bool readersFollow(Block &body, Value v, Operation *point) {
  for (Operation *user : v.getUsers()) {
    Operation *top = body.findAncestorOpInBlock(*user);
    if (!top || top == point || top->isBeforeInBlock(point))
      return false;
  }
  return true;
}

struct FuseCastAmax : octet::impl::FuseCastAmaxBase<FuseCastAmax> {
  void runOnFunction(func::FuncOp f) {
    Block &body = f.getBody().front();
    // Per input value, its per-tensor amax ops in the body (not yet fused).
    llvm::DenseMap<Value, SmallVector<fp8::AmaxOp, 1>> amaxOf;
    for (auto a : body.getOps<fp8::AmaxOp>())
      if (!a.getRowwise())
        amaxOf[a.getInput()].push_back(a);
    SmallVector<fp8::CastOp> casts(body.getOps<fp8::CastOp>());
    for (fp8::CastOp c : casts) {
      auto it = amaxOf.find(c.getInput());
      if (it == amaxOf.end())
        continue;
      auto &cands = it->second;
      for (auto *a = cands.begin(); a != cands.end(); ++a) {
        bool castFirst = c->isBeforeInBlock(*a);
        Operation *earlier = castFirst ? c.getOperation() : a->getOperation();
        Operation *later = castFirst ? a->getOperation() : c.getOperation();
        // At the later op when the earlier one's readers all follow it; else at the earlier op
        // when the later one's operands exist there (delayed scaling reads the amax before the cast).
        Operation *at = readersFollow(body, earlier->getResult(0), later) ? later
                        : llvm::all_of(later->getOperands(), [&](Value v) { return octet::definedBefore(body, v, earlier); })
                            ? earlier
                            : nullptr;
        if (!at)
          continue;
        OpBuilder b(at);
        auto fused = b.create<fp8::CastAmaxOp>(b.getFusedLoc({c.getLoc(), a->getLoc()}), c.getType(),
                                              a->getType(), /*transposed=*/Type(), c.getInput(),
                                              c.getScaleInv(), c.getSaturate());
        // The plan names the results as the two ops named theirs.
        auto nameOf = [&](Operation *op) -> Attribute {
          auto names = op->getAttrOfType<ArrayAttr>(octet::kResultNamesAttr);
          return names && !names.empty() ? names[0] : b.getStringAttr("");
        };
        if (c->hasAttr(octet::kResultNamesAttr) || (*a)->hasAttr(octet::kResultNamesAttr))
          fused->setAttr(octet::kResultNamesAttr, b.getArrayAttr({nameOf(c), nameOf(*a)}));
        c.getResult().replaceAllUsesWith(fused.getOutput());
        a->getResult().replaceAllUsesWith(fused.getAmax());
        a->erase();
        c->erase();
        cands.erase(a);
        break;
      }
    }
  }

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (!f.getBody().empty())
        runOnFunction(f);
    });
  }
};

} // namespace
