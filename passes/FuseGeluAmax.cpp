//===- FuseGeluAmax.cpp - A GELU's amax in the GELU's pass ------------------===//
//
// octet-fuse-gelu-amax: dynamic scaling (torchao's `ao`, MS-AMP) needs the amax of a Linear's
// input before it can cast it; where that input is a GELU's result (the MLP's second Linear), the
// amax (fp8.amax over the whole tensor) reads the GELU's output again right after the GELU wrote
// it. The pair becomes a fusion group (FusionGroups.h, kind "gelu_amax"): a backend takes the
// max |y| of the values the GELU stores as it stores them, and the amax reads nothing. The CPU
// runs both ops as they are (the same bits: the max of the stored values).
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "FusionGroups.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace octet {
#define GEN_PASS_DEF_FUSEGELUAMAX
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

struct FuseGeluAmax : octet::impl::FuseGeluAmaxBase<FuseGeluAmax> {
  using FuseGeluAmaxBase::FuseGeluAmaxBase;

  void runOnOperation() override {
    SmallVector<std::pair<Operation *, Operation *>> pairs;
    getOperation().walk([&](fp8::AmaxOp a) {
      auto g = a.getInput().getDefiningOp<ox::GeluOp>();
      if (!g || a.getRowwise() || g->hasAttr("octet.fusion") || a->hasAttr("octet.fusion"))
        return;
      pairs.push_back({g, a});
    });
    for (auto [g, a] : pairs)
      if (!g->hasAttr("octet.fusion")) // one amax per GELU
        octet::markFusionGroup({g, a}, "gelu_amax");
  }
};

} // namespace
