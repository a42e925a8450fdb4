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
// An operand that is a Reshape of the codes to [rows, K] (the cast's input has
// more dims, K the last: a Linear of a [B, S, K] activation, whose wgrad GEMM
// reads it as [B*S, K]) is the same bytes as the codes: the transposed copy of
// the input as 2-D serves it, and the Reshape goes when nothing else reads it.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_CASTTRANSPOSE
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace fp8 = octet::fp8;
namespace ox = octet::onnx_dialect;

namespace {

/// The fp8.cast_amax output `v` is, directly (rank 2) or through a Reshape to [rows, K] of codes
/// whose last dim is K (the codes as 2-D, the layout of the cast's transposed copy), else null.
fp8::CastAmaxOp castOf(Value v) {
  auto vt = v.getType().dyn_cast<RankedTensorType>();
  if (!vt || !vt.hasStaticShape() || vt.getRank() != 2)
    return {};
  if (auto r = v.getDefiningOp<ox::ReshapeOp>()) {
    auto ca = r.getData().getDefiningOp<fp8::CastAmaxOp>();
    auto in = r.getData().getType().dyn_cast<RankedTensorType>();
    if (!ca || r.getData() != ca.getOutput() || !in || !in.hasStaticShape() || in.getRank() < 2 ||
        in.getShape().back() != vt.getDimSize(1) || in.getNumElements() != vt.getNumElements())
      return {};
    return ca;
  }
  auto ca = v.getDefiningOp<fp8::CastAmaxOp>();
  return ca && v == ca.getOutput() ? ca : fp8::CastAmaxOp();
}

/// The transposed copy of `v` when it is a per-tensor-scaled fp8.cast_amax output as 2-D (castOf;
/// the copy is added to the cast when it has none yet), else null.
Value transposedOf(Value v) {
  fp8::CastAmaxOp ca = castOf(v);
  if (!ca)
    return {};
  auto in = ca.getInput().getType().dyn_cast<RankedTensorType>();
  auto scale = ca.getScaleInv().getType().dyn_cast<RankedTensorType>();
  if (!in || !in.hasStaticShape() || !scale || scale.getNumElements() != 1)
    return {};
  if (Value t = ca.getTransposed())
    return t;
  OpBuilder b(ca);
  auto out = ca.getOutput().getType().cast<RankedTensorType>();
  int64_t cols = in.getShape().back();
  auto tt = RankedTensorType::get({cols, in.getNumElements() / cols}, out.getElementType());
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
    llvm::SetVector<Operation *> reshapes; // a Reshape two GEMMs read is erased once
    // Taken before transposedOf(), which may replace the cast (and so an operand read directly).
    auto noteReshape = [&](ox::ReshapeOp r) {
      if (r)
        reshapes.insert(r);
    };
    for (fp8::GemmOp g : gemms) {
      if (g.getTransposeA())
        if (auto r = g.getA().getDefiningOp<ox::ReshapeOp>(); Value t = transposedOf(g.getA())) {
          g.getAMutable().assign(t);
          g.setTransposeA(false);
          noteReshape(r);
        }
      if (!g.getTransposeB())
        if (auto r = g.getB().getDefiningOp<ox::ReshapeOp>(); Value t = transposedOf(g.getB())) {
          g.getBMutable().assign(t);
          g.setTransposeB(true);
          noteReshape(r);
        }
    }
    for (Operation *r : reshapes)
      if (r->use_empty())
        r->erase();
  }
};

} // namespace
