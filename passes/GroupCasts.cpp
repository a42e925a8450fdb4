//===- GroupCasts.cpp - The FP8 casts of one tensor side by side ----------===//
//
// octet-group-casts: Linears that read one tensor (the Q, K and V projections
// of a LayerNorm's output) each cast it with a scale of their own right before
// their GEMM, so the casts sit apart with other work between them. Every
// fp8.cast_amax of a value moves up, in order, to just after the first one
// where all its operands are defined there (the scale_inv is state, an
// argument), so a backend can read the tensor once for all of them, or compute
// it in the same pass. Moving an op earlier keeps its results before their
// readers; only the order of independent ops changes, so the arithmetic is the
// same. A cast more than `distance` ops after the previous one of its group
// stays (a backward cast of a forward tensor would keep its codes alive all
// step).
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Passes/Passes.h"

#include "BlockOrder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/MapVector.h"

namespace octet {
#define GEN_PASS_DEF_GROUPCASTS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace fp8 = octet::fp8;

namespace {

struct GroupCasts : octet::impl::GroupCastsBase<GroupCasts> {
  using GroupCastsBase::GroupCastsBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (f.getBody().empty())
        return;
      Block &body = f.getBody().front();
      llvm::DenseMap<Operation *, int64_t> index; // positions before any move
      int64_t n = 0;
      for (Operation &op : body)
        index[&op] = n++;
      llvm::MapVector<Value, SmallVector<fp8::CastAmaxOp, 3>> castsOf;
      for (auto c : body.getOps<fp8::CastAmaxOp>())
        castsOf[c.getInput()].push_back(c);
      for (auto &[x, casts] : castsOf) {
        Operation *last = casts.front();
        int64_t previous = index[last];
        for (fp8::CastAmaxOp c : llvm::ArrayRef(casts).drop_front()) {
          int64_t at = index[c];
          if (at - std::exchange(previous, at) > distance)
            break; // this cast and the later ones stay
          Operation *next = last->getNextNode();
          if (c.getOperation() == next) {
            last = c;
            continue;
          }
          if (!llvm::all_of(c->getOperands(), [&](Value v) { return octet::definedBefore(body, v, next); }))
            continue;
          c->moveAfter(last);
          last = c;
        }
      }
    });
  }
};

} // namespace
