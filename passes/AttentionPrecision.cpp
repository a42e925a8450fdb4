//===- AttentionPrecision.cpp - Tensor-core precision of fused attention ---===//
//
// octet-attention-precision: the compiler, not the runtime, decides at what operand precision a
// GPU backend computes each fused attention op (Passes.td). The decision is the op's `precision`
// attribute, which the plan keeps and the CUDA executor follows.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace octet {
#define GEN_PASS_DEF_ATTENTIONPRECISION
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;

namespace {

struct AttentionPrecision : octet::impl::AttentionPrecisionBase<AttentionPrecision> {
  using AttentionPrecisionBase::AttentionPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (precision != "auto" && precision != "bf16" && precision != "tf32") {
      module.emitError() << "octet-attention-precision: precision='" << precision
                         << "' is not auto, bf16 or tf32";
      return signalPassFailure();
    }
    auto recipe = module->getAttrOfType<StringAttr>(octet::kRecipeAttr);
    bool fp8Recipe = recipe && !recipe.getValue().empty() && recipe.getValue() != "none";
    WalkResult r = module.walk([&](Operation *op) {
      std::string t = octet::planOpType(op);
      if (t != "octet::Attention" && t != "octet::AttentionGrad")
        return WalkResult::advance();
      bool bf16Operand = llvm::any_of(op->getOperands(), [](Value v) {
        return getElementTypeOrSelf(v.getType()).isBF16();
      });
      std::string chosen = precision == "auto" ? (bf16Operand || fp8Recipe ? "bf16" : "tf32") : std::string(precision);
      if (chosen == "tf32" && bf16Operand) {
        op->emitError() << "octet-attention-precision: precision=tf32, but this " << t
                        << " reads BF16 operands; use bf16 or auto, or float32 activations";
        return WalkResult::interrupt();
      }
      auto attrs = op->getAttrOfType<DictionaryAttr>("attrs");
      NamedAttrList list(attrs ? attrs : DictionaryAttr::get(op->getContext()));
      list.set("precision", StringAttr::get(op->getContext(), chosen));
      op->setAttr("attrs", list.getDictionary(op->getContext()));
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
