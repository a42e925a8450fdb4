//===- CastTranspose.cpp - FP8 casts write the layout their GEMMs need ----===//
//
// octet-cast-transpose: cuBLASLt's FP8 GEMMs take both operands K-contiguous
// (A as [M, K], B as [N, K]). Where an fp8.gemm reads an operand in the other
// layout (A with `transpose_a`, B without `transpose_b`) and that operand is an
// fp8.cast_amax's output with a per-tensor scale, the cast gains its
// `transposed` result and the GEMM reads that instead, with the flag flipped:
// the cast writes both layouts from its one read of the input, and no
// transpose of FP8 codes runs before the GEMM (TransformerEngine's
// cast-transpose). The products are unchanged; only where the codes lie.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace octet {
#define GEN_PASS_DEF_CASTTRANSPOSE
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace fp8 = octet::fp8;

namespace {

/// The transposed copy of `v` when it is a per-tensor-scaled fp8.cast_amax output of rank 2 (added
/// to the cast when it has none yet), else null.
Value transposedOf(Value v) {
  auto ca = v.getDefiningOp<fp8::CastAmaxOp>();
  if (!ca || v != ca.getOutput())
    return {};
  auto in = ca.getInput().getType().dyn_cast<RankedTensorType>();
  auto scale = ca.getScaleInv().getType().dyn_cast<RankedTensorType>();
  if (!in || !in.hasStaticShape() || in.getRank() != 2 || !scale || scale.getNumElements() != 1)
    return {};
  if (Value t = ca.getTransposed())
    return t;
  OpBuilder b(ca);
  auto out = ca.getOutput().getType().cast<RankedTensorType>();
  auto tt = RankedTensorType::get({in.getDimSize(1), in.getDimSize(0)}, out.getElementType());
  auto n = b.create<fp8::CastAmaxOp>(ca.getLoc(), out, ca.getAmax().getType(), tt, ca.getInput(), ca.getScaleInv(),
                                     ca.getSaturate());
  if (auto names = ca->getAttrOfType<ArrayAttr>(octet::kResultNamesAttr)) {
    SmallVector<Attribute, 3> all(names.begin(), names.end());
    all.resize(2, b.getStringAttr(""));
    auto first = all[0].dyn_cast<StringAttr>();
    all.push_back(b.getStringAttr(first && !first.getValue().empty() ? (first.getValue() + "_t").str() : ""));
    n->setAttr(octet::kResultNamesAttr, b.getArrayAttr(all));
  }
  ca.getOutput().replaceAllUsesWith(n.getOutput());
  ca.getAmax().replaceAllUsesWith(n.getAmax());
  ca->erase();
  return n.getTransposed();
}

struct CastTranspose : octet::impl::CastTransposeBase<CastTranspose> {
  void runOnOperation() override {
    SmallVector<fp8::GemmOp> gemms;
    getOperation().walk([&](fp8::GemmOp g) { gemms.push_back(g); });
    for (fp8::GemmOp g : gemms) {
      if (g.getTransposeA())
        if (Value t = transposedOf(g.getA())) {
          g.getAMutable().assign(t);
          g.setTransposeA(false);
        }
      if (!g.getTransposeB())
        if (Value t = transposedOf(g.getB())) {
          g.getBMutable().assign(t);
          g.setTransposeB(true);
        }
    }
  }
};

} // namespace
