//===- SinkScaleUpdates.cpp - A step's delayed-scaling updates at its end ---===//
//
// octet-sink-scale-updates: delayed scaling computes each FP8 tensor's next
// scale (fp8.delayed_scale) right after recording its amax, but nothing in the
// step reads the result: it is the next step's state. Moving every such
// update, in order, to the end of the function puts them side by side, so a
// backend runs them as one launch (TransformerEngine updates all scales of a
// step together), and no scale_inv of this step is overwritten while a later
// GEMM of the step still reads it (the plan writer can then update it in
// place).
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace octet {
#define GEN_PASS_DEF_SINKSCALEUPDATES
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace fp8 = octet::fp8;

namespace {

struct SinkScaleUpdates : octet::impl::SinkScaleUpdatesBase<SinkScaleUpdates> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (f.getBody().empty())
        return;
      Block &body = f.getBody().front();
      Operation *end = body.getTerminator();
      SmallVector<fp8::DelayedScaleOp> updates;
      for (auto d : body.getOps<fp8::DelayedScaleOp>())
        if (llvm::all_of(d->getUsers(), [&](Operation *u) { return u == end; }))
          updates.push_back(d);
      for (fp8::DelayedScaleOp d : updates)
        d->moveBefore(end);
    });
  }
};

} // namespace
