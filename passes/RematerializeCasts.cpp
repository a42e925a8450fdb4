//===- RematerializeCasts.cpp - Recompute casts of parameters and state ----===//
//
// octet-rematerialize-casts: an onnx.Cast of an initializer (a parameter or a state tensor,
// available all step) is cheap to recompute but costly to keep: MS-AMP O2's FP16 weights
// cast to FP32 are read by the forward's FP8 casts and again by the optimizer at the end of
// the step, so one FP32 copy of every weight stays alive across the whole step. The pass
// groups a Cast's readers into clusters (consecutive readers at most `distance` ops apart),
// moves the Cast before its first cluster and gives every later cluster its own copy, placed
// before that cluster's first reader. fp8-opt runs it when writing a plan (after CSE, which
// would merge the copies back).
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"

namespace octet {
#define GEN_PASS_DEF_REMATERIALIZECASTS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

struct RematerializeCasts : octet::impl::RematerializeCastsBase<RematerializeCasts> {
  using RematerializeCastsBase::RematerializeCastsBase;

  void runOnFunction(func::FuncOp f) {
    Block &body = f.getBody().front();
    llvm::DenseMap<Operation *, int64_t> index;
    int64_t n = 0;
    for (Operation &op : body)
      index[&op] = n++;
    SmallVector<ox::CastOp> casts;
    for (auto c : body.getOps<ox::CastOp>())
      if (c.getInput().getDefiningOp<ox::InitializerOp>())
        casts.push_back(c);
    for (ox::CastOp c : casts) {
      // Readers in block order (a reader in a nested region counts at its top-level ancestor).
      SmallVector<std::pair<int64_t, OpOperand *>> uses;
      for (OpOperand &u : c.getResult().getUses())
        if (Operation *top = body.findAncestorOpInBlock(*u.getOwner()))
          uses.push_back({index[top], &u});
      if (uses.empty())
        continue;
      llvm::sort(uses, [](auto &a, auto &b) { return a.first < b.first; });
      Operation *firstTop = body.findAncestorOpInBlock(*uses.front().second->getOwner());
      c->moveBefore(firstTop);
      Value current = c.getResult();
      for (size_t i = 1; i < uses.size(); ++i) {
        if (uses[i].first - uses[i - 1].first > distance) {
          Operation *top = body.findAncestorOpInBlock(*uses[i].second->getOwner());
          OpBuilder b(top);
          current = b.clone(*c)->getResult(0);
        }
        if (current != c.getResult())
          uses[i].second->set(current);
      }
    }
  }

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (distance < 1) {
        f.emitError() << "octet-rematerialize-casts: distance=" << int64_t(distance) << " must be at least 1";
        return signalPassFailure();
      }
      if (!f.getBody().empty())
        runOnFunction(f);
    });
  }
};

} // namespace
