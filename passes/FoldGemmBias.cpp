//===- FoldGemmBias.cpp - A float32 FP8 GEMM's bias added by its reader ---===//
//
// octet-fold-gemm-bias: an fp8.gemm with a float32 bias and a float32 result adds the bias in a
// pass over the result of its own (cuBLASLt's FP8 epilogue has no float32 bias there), a read and
// a write of the whole result. Where the op that reads the result next adds it as it reads, that
// pass goes. The pass writes which reader does it as the GEMM's `octet.bias_fold` (the plan's
// `bias_fold`):
//
//   - "attention": BF16 attention alone reads the result (through views: a Q, K or V projection
//     with the heads in place), its forward and gradient add the bias as they convert the
//     operands to BF16;
//   - "gelu": the first op to read the result is a float32 Gelu (the MLP), which adds the bias in
//     place, writes the sum back (later readers read what the GEMM would have written) and takes
//     GELU of it;
//   - "add": the result's one reader (through at most one view) is a float32 Add of another tensor
//     of its shape (the residual stream): x + (y + bias);
//   - "copy": the one reader is a float32 Transpose (a head split), which adds it as it moves each
//     value.
//
// The arithmetic is the same: y + bias rounded to float32, then the reader's. The CPU runs the ops
// as they are (the same bits). Scales may be per tensor or rowwise (ao's rowwise recipes: the CUDA
// backend then needs cuBLASLt's outer-vector mode to write the scaled product, and runs the GEMM
// with its bias where it has none, counting the fold as not applied).
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace octet {
#define GEN_PASS_DEF_FOLDGEMMBIAS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

bool isF32(Value v) {
  auto t = v.getType().dyn_cast<RankedTensorType>();
  return t && t.hasStaticShape() && t.getElementType().isF32();
}

int64_t elementsOf(Value v) { return v.getType().cast<RankedTensorType>().getNumElements(); }

/// Whether BF16-precision attention (forward or gradient, Q, K or V operands) alone reads `v`,
/// through views, and at least one does.
bool onlyAttentionReads(Value v, bool &any) {
  for (OpOperand &use : v.getUses()) {
    Operation *u = use.getOwner();
    if (octet::isViewOp(u) && use.getOperandNumber() == 0) {
      if (!onlyAttentionReads(u->getResult(0), any))
        return false;
      continue;
    }
    std::string t = octet::planOpType(u);
    auto attrs = u->getAttrOfType<DictionaryAttr>("attrs"); // octet-attention-precision's decision
    auto p = attrs ? attrs.getAs<StringAttr>("precision") : StringAttr();
    if ((t != "octet::Attention" && t != "octet::AttentionGrad") || use.getOperandNumber() >= 3 ||
        !p || p.getValue() != "bf16")
      return false;
    any = true;
  }
  return true;
}

/// The reader that adds g's bias (the kinds above), or none.
StringRef foldOf(fp8::GemmOp g) {
  Value y = g.getD();
  auto yt = y.getType().dyn_cast<RankedTensorType>();
  if (!g.getBias() || g.getAccumulate() || g.getDScale() || g.getWithAmax() || g.getTransposeA() ||
      !g.getTransposeB() || !isF32(y) || !isF32(g.getBias()) || yt.getRank() < 1 ||
      elementsOf(g.getBias()) != yt.getShape().back())
    return {};
  bool any = false;
  if (onlyAttentionReads(y, any) && any)
    return "attention";
  Operation *first = nullptr; // the first reader in the block
  for (Operation *u : y.getUsers())
    if (u->getBlock() == g->getBlock() && (!first || u->isBeforeInBlock(first)))
      first = u;
  if (first && isa<ox::GeluOp>(first) && isF32(first->getResult(0)))
    return "gelu";
  // The one reader, through at most one view.
  Value v = y;
  if (!y.hasOneUse())
    return {};
  Operation *r = *y.getUsers().begin();
  if (octet::isViewOp(r) && r->getOperand(0) == y) {
    v = r->getResult(0);
    if (!v.hasOneUse())
      return {};
    r = *v.getUsers().begin();
  }
  if (auto add = dyn_cast<ox::AddOp>(r)) {
    Value other = add.getA() == v ? add.getB() : add.getA();
    if (other != v && isF32(other) && isF32(add.getResult()) && other.getType() == v.getType() &&
        add.getResult().getType() == v.getType() &&
        v.getType().cast<RankedTensorType>().getShape().back() == yt.getShape().back())
      return "add";
    return {};
  }
  if (isa<ox::TransposeOp>(r) && r->getOperand(0) == v && isF32(r->getResult(0)))
    return "copy";
  return {};
}

struct FoldGemmBias : octet::impl::FoldGemmBiasBase<FoldGemmBias> {
  using FoldGemmBiasBase::FoldGemmBiasBase;

  void runOnOperation() override {
    Builder b(&getContext());
    getOperation().walk([&](fp8::GemmOp g) {
      if (StringRef fold = foldOf(g); !fold.empty())
        g->setAttr("octet.bias_fold", b.getStringAttr(fold));
    });
  }
};

} // namespace
