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
// A plain per-tensor fp8.cast (current scaling: its scale comes from the
// tensor's own amax, which a pass before it took) gains the copy the same way:
// it becomes an fp8.cast_amax whose amax nothing reads.
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

/// The op that cast `v`: an fp8.cast_amax or a plain fp8.cast whose output `v` is, directly (rank
/// 2) or through a Reshape to [rows, K] of codes whose last dim is K (the codes as 2-D, the layout
/// of the cast's transposed copy), else null.
Operation *castOf(Value v) {
  auto vt = v.getType().dyn_cast<RankedTensorType>();
  if (!vt || !vt.hasStaticShape() || vt.getRank() != 2)
    return {};
  auto isCast = [](Operation *op) { return op && isa<fp8::CastAmaxOp, fp8::CastOp>(op); };
  if (auto r = v.getDefiningOp<ox::ReshapeOp>()) {
    Operation *c = r.getData().getDefiningOp();
    auto in = r.getData().getType().dyn_cast<RankedTensorType>();
    if (!isCast(c) || r.getData() != c->getResult(0) || !in || !in.hasStaticShape() || in.getRank() < 2 ||
        in.getShape().back() != vt.getDimSize(1) || in.getNumElements() != vt.getNumElements())
      return {};
    return c;
  }
  Operation *c = v.getDefiningOp();
  return isCast(c) && v == c->getResult(0) ? c : nullptr;
}

/// The transposed copy of `v` when it is a per-tensor-scaled FP8 cast's output as 2-D (castOf; the
/// copy is added to the cast when it has none yet, a plain fp8.cast becoming an fp8.cast_amax whose
/// amax nothing reads), else null.
Value transposedOf(Value v) {
  Operation *c = castOf(v);
  if (!c)
    return {};
  auto ca = dyn_cast<fp8::CastAmaxOp>(c);
  Value input = c->getOperand(0), scaleInv = c->getOperand(1);
  auto in = input.getType().dyn_cast<RankedTensorType>();
  auto scale = scaleInv.getType().dyn_cast<RankedTensorType>();
  if (!in || !in.hasStaticShape() || !scale || scale.getNumElements() != 1)
    return {};
  if (ca && ca.getTransposed())
    return ca.getTransposed();
  OpBuilder b(c);
  Value output = c->getResult(0);
  auto out = output.getType().cast<RankedTensorType>();
  int64_t cols = in.getShape().back();
  auto tt = RankedTensorType::get({cols, in.getNumElements() / cols}, out.getElementType());
  Type amaxType = ca ? ca.getAmax().getType() : Type(RankedTensorType::get({}, b.getF32Type()));
  bool saturate = ca ? ca.getSaturate() : cast<fp8::CastOp>(c).getSaturate();
  auto n = b.create<fp8::CastAmaxOp>(c->getLoc(), out, amaxType, tt, input, scaleInv, saturate);
  if (auto names = c->getAttrOfType<ArrayAttr>(octet::kResultNamesAttr)) {
    SmallVector<Attribute, 3> all(names.begin(), names.end());
    all.resize(2, b.getStringAttr(""));
    auto first = all[0].dyn_cast<StringAttr>();
    all.push_back(b.getStringAttr(first && !first.getValue().empty() ? (first.getValue() + "_t").str() : ""));
    n->setAttr(octet::kResultNamesAttr, b.getArrayAttr(all));
  }
  output.replaceAllUsesWith(n.getOutput());
  if (ca)
    ca.getAmax().replaceAllUsesWith(n.getAmax());
  c->erase();
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
