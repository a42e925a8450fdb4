//===- FoldResidualAdds.cpp - A residual Add as the accumulate of its GEMM ===//
//
// octet-fold-residual-adds: x + Linear(h), a transformer block's residual connection, is an FP8
// GEMM whose float32 result (bias included) goes, through one Reshape at most, only to an
// onnx.Add whose other operand is float32 of the Add's own type (no broadcast). The GEMM takes
// that operand as its `accumulate` C, D = C + (the scaled product + bias), which cuBLASLt reads in
// the GEMM's epilogue (beta = 1); its result, reshaped back, replaces the Add's, and the Add's
// pass over both tensors goes. The CPU reference adds in the order the Add did (the product plus
// the bias, then C: IEEE addition commutes), so a plan gives the same bits with the fold and
// without. The new GEMM stands where the Add stood (C may be computed after the GEMM). fp8-opt
// runs it when writing a plan, after precision assignment, with `--fold-residual-adds` (off by
// default: on the H100 the 1.3B GPT's folded GEMMs took 0.348 and 0.567 ms against 0.265 and
// 0.514 for GEMM and Add apart; cuBLASLt reads C in its epilogue at about 1.6 TB/s, and the
// float32 bias took a pass of its own).
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "OnnxBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace octet {
#define GEN_PASS_DEF_FOLDRESIDUALADDS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

bool perTensor(Value s) {
  auto t = s.getType().dyn_cast<RankedTensorType>();
  return t && t.hasStaticShape() && t.getNumElements() == 1;
}

/// The GEMM a residual Add can take as its accumulate, with the Reshape between them (or null).
struct Foldable {
  fp8::GemmOp gemm;
  ox::ReshapeOp view;
  Value other; // the Add's other operand: C
};

/// Whether `v` (operand of `add`) is such a GEMM's result, the Add its only reader.
std::optional<Foldable> foldable(ox::AddOp add, Value v, Value other) {
  auto result = octet::staticTensor(add.getC().getType());
  if (!result || !result.getElementType().isF32() || other.getType() != add.getC().getType() ||
      v.getType().cast<ShapedType>().getElementType() != result.getElementType() || !v.hasOneUse())
    return std::nullopt;
  Foldable f;
  f.other = other;
  if ((f.view = v.getDefiningOp<ox::ReshapeOp>())) {
    v = f.view.getData();
    if (!v.hasOneUse())
      return std::nullopt;
  }
  f.gemm = v.getDefiningOp<fp8::GemmOp>();
  if (!f.gemm || f.gemm.getAccumulate() || f.gemm.getDScale() || f.gemm.getWithAmax() ||
      !perTensor(f.gemm.getAScaleInv()) || !perTensor(f.gemm.getBScaleInv()))
    return std::nullopt;
  auto d = octet::staticTensor(f.gemm.getD().getType());
  if (!d || !d.getElementType().isF32() || d.getNumElements() != result.getNumElements())
    return std::nullopt;
  return f;
}

struct FoldResidualAdds : octet::impl::FoldResidualAddsBase<FoldResidualAdds> {
  using FoldResidualAddsBase::FoldResidualAddsBase;

  void runOnOperation() override {
    SmallVector<ox::AddOp> adds;
    getOperation().walk([&](ox::AddOp a) { adds.push_back(a); });
    for (ox::AddOp add : adds) {
      std::optional<Foldable> f = foldable(add, add.getB(), add.getA());
      if (!f)
        f = foldable(add, add.getA(), add.getB());
      if (!f)
        continue;
      fp8::GemmOp g = f->gemm;
      OpBuilder b(add);
      octet::OnnxBuilder ox(b, add.getLoc());
      auto d = g.getD().getType().cast<RankedTensorType>();
      Value c = f->other;
      if (c.getType() != g.getD().getType())
        c = ox.reshape(c, d.getShape());
      auto folded = b.create<fp8::GemmOp>(g.getLoc(), d, TypeRange{}, g.getA(), g.getB(), g.getAScaleInv(),
                                          g.getBScaleInv(), g.getBias(), Value(), c, g.getTransposeA(),
                                          g.getTransposeB(), g.getAccumulation(), false);
      for (NamedAttribute a : g->getAttrs())
        if (!folded->hasAttr(a.getName()))
          folded->setAttr(a.getName(), a.getValue()); // the layer's name, its result's name
      folded->setAttr("octet.residual_add", b.getUnitAttr());
      Value r = folded.getD();
      if (r.getType() != add.getC().getType())
        r = ox.reshape(r, add.getC().getType().cast<RankedTensorType>().getShape());
      if (Attribute names = add->getAttr("octet.result_names"))
        r.getDefiningOp()->setAttr("octet.result_names", names);
      add.getC().replaceAllUsesWith(r);
      add->erase();
      if (f->view)
        f->view->erase();
      g->erase();
    }
  }
};

} // namespace
