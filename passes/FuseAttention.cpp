//===- FuseAttention.cpp - Fuse scaled dot-product attention ---------------===//
//
// octet-fuse-attention: the attention chain torch.onnx.export writes,
//
//   S = MatMul(Q, Kt) -> [Mul|Div by a positive scalar constant]* ->
//       [Where(causal, S, very negative constant) | Add(S, causal 0/-inf mask)] ->
//       [Mul|Div ...]* -> Softmax(last axis) -> Y = MatMul(P, V)
//
// whose intermediates have no other readers, becomes one `onnx.node "Attention"` (domain
// "octet") with operands (Q, K, V), attributes `scale` and `is_causal` (ONNX Attention's
// names; keys after the query are masked), and results (Y, LSE), LSE being the rows'
// log-sum-exp that the gradient (octet::AttentionGrad, GradientRules.cpp) recomputes the
// probabilities from. K is Kt with its last two dimensions swapped (folded into the Transpose
// that made Kt when there is one). Runtimes run it without materialising the [.., T, T]
// scores and probabilities: the CUDA kernels tile over keys with an online softmax.
//
// Head split and merge (fold-head-transposes, on by default): when Q, K and V are each
// Transpose(x, [0, 2, 1, 3]) of a [B, S, H, d] tensor (a projection's result split into heads),
// the node reads them as ONNX Attention's 3-D inputs instead, Q [B, Sq, H * d] and K, V
// [B, Sk, H * d] (Reshapes of the transposes' inputs: views), with attributes `q_num_heads` =
// `kv_num_heads` = H; Y is then [B, Sq, H * d] and LSE stays [B, H, Sq]. A Transpose of Y with
// [0, 2, 1, 3] (the merge of the heads) becomes a Reshape of the new Y. The runtimes index the
// heads in place, so the copies to and from the head-major layout are gone (and the gradient,
// octet::AttentionGrad, reads and writes the same layout).
//
// Only masks that are exactly causal are matched (a boolean lower triangle, or 0 on and below
// the diagonal and <= -1e4 above); anything else stays as it was. Heads wider than
// max-head-dim stay unfused (the CUDA kernels keep a row of the head in registers).
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"
#include "octet/runtime/Attention.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_FUSEATTENTION
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

static_assert(octet::rt::kCudaAttentionMaxHeadDim == 128, "keep octet-fuse-attention's max-head-dim default equal");

RankedTensorType staticF32(Value v) {
  auto t = v.getType().dyn_cast<RankedTensorType>();
  return t && t.hasStaticShape() && t.getElementType().isF32() ? t : RankedTensorType();
}

/// The value of a scalar (every element equal) float constant.
std::optional<double> scalarConstant(Value v) {
  DenseElementsAttr a = ox::getConstantValue(v);
  if (!a || !a.getElementType().isa<FloatType>() || !a.isSplat())
    return std::nullopt;
  return a.getSplatValue<APFloat>().convertToDouble();
}

/// Whether `mask` is [1.., T, T] with ones(true)/zeros exactly where key j <= query i.
/// `additive`: a float mask, 0 where visible and <= -1e4 where masked.
bool isCausalMask(Value mask, int64_t t, bool additive) {
  DenseElementsAttr a = ox::getConstantValue(mask);
  if (!a)
    return false;
  if (additive && !mask.getDefiningOp<ox::ConstantOp>()) // a float initializer is a trained parameter
    return false;
  auto shape = a.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 1] != t || shape[shape.size() - 2] != t)
    return false;
  for (size_t i = 0; i + 2 < shape.size(); ++i)
    if (shape[i] != 1)
      return false;
  if (additive) {
    if (!a.getElementType().isF32())
      return false;
    int64_t k = 0;
    for (float v : a.getValues<float>()) {
      int64_t i = k / t, j = k % t;
      if (j <= i ? v != 0.0f : !(v <= -1e4f))
        return false;
      ++k;
    }
    return true;
  }
  if (!a.getElementType().isInteger(1))
    return false;
  int64_t k = 0;
  for (bool v : a.getValues<bool>()) {
    int64_t i = k / t, j = k % t;
    if (v != (j <= i))
      return false;
    ++k;
  }
  return true;
}

/// A Transpose's permutation (reversed dimensions when it has none).
SmallVector<int64_t> permOf(ox::TransposeOp t, int64_t rank) {
  SmallVector<int64_t> p;
  if (auto pa = t.getPermAttr())
    p.assign(pa.asArrayRef().begin(), pa.asArrayRef().end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      p.push_back(i);
  return p;
}

bool isHeadSwap(ArrayRef<int64_t> perm) { return perm.size() == 4 && perm == ArrayRef<int64_t>{0, 2, 1, 3}; }

/// x's [B, S, H, d] source when x = Transpose(source, [0, 2, 1, 3]).
Value headSplitSource(Value x) {
  auto t = x.getDefiningOp<ox::TransposeOp>();
  return t && isHeadSwap(permOf(t, 4)) && staticF32(t.getData()) ? t.getData() : Value();
}

struct FuseAttention : octet::impl::FuseAttentionBase<FuseAttention> {
  using FuseAttentionBase::FuseAttentionBase;

  /// Fuses the chain ending at `softmax` when it matches; returns whether it did.
  bool tryFuse(ox::SoftmaxOp softmax) {
    Value p = softmax.getOutput();
    auto pt = staticF32(p);
    if (!pt || pt.getRank() < 3 || !p.hasOneUse())
      return false;
    int64_t axis = softmax.getAxis().value_or(-1);
    if (axis != -1 && axis != pt.getRank() - 1)
      return false;
    auto pv = dyn_cast<ox::MatMulOp>(*p.getUsers().begin());
    if (!pv || pv.getA() != p)
      return false;
    SmallVector<Operation *> chain{softmax}; // the ops that go, root last
    double scale = 1.0;
    bool causal = false;
    Value x = softmax.getInput();
    ox::MatMulOp qk;
    while (!qk) {
      Operation *d = x.getDefiningOp();
      if (!d || !x.hasOneUse() || !staticF32(x) || staticF32(x).getShape() != pt.getShape())
        return false;
      chain.push_back(d);
      if (auto m = dyn_cast<ox::MatMulOp>(d)) {
        qk = m;
      } else if (isa<ox::MulOp, ox::DivOp>(d)) {
        bool div = isa<ox::DivOp>(d);
        int side = div ? 1 : scalarConstant(d->getOperand(1)) ? 1 : 0;
        std::optional<double> c = scalarConstant(d->getOperand(side));
        if (!c || !(*c > 0) || !std::isfinite(*c))
          return false;
        scale = div ? scale / *c : scale * *c;
        x = d->getOperand(1 - side);
      } else if (auto w = dyn_cast<ox::WhereOp>(d)) {
        std::optional<double> neg = scalarConstant(w.getY());
        if (causal || !neg || !(*neg <= -1e4) || !isCausalMask(w.getCondition(), pt.getShape().back(), false))
          return false;
        causal = true;
        x = w.getX();
      } else if (auto add = dyn_cast<ox::AddOp>(d)) {
        int side = isCausalMask(add.getB(), pt.getShape().back(), true) ? 1
                   : isCausalMask(add.getA(), pt.getShape().back(), true) ? 0
                                                                            : -1;
        if (causal || side < 0)
          return false;
        causal = true;
        x = d->getOperand(unsigned(1 - side));
      } else {
        return false;
      }
    }
    Value q = qk.getA(), kt = qk.getB(), v = pv.getB();
    auto qt = staticF32(q), ktt = staticF32(kt), vt = staticF32(v);
    if (!qt || !ktt || !vt || qt.getRank() != pt.getRank() || ktt.getRank() != pt.getRank() ||
        vt.getRank() != pt.getRank())
      return false;
    int64_t r = pt.getRank();
    auto qs = qt.getShape(), ks = ktt.getShape(), vs = vt.getShape();
    for (int64_t i = 0; i + 2 < r; ++i)
      if (qs[i] != pt.getShape()[i] || ks[i] != qs[i] || vs[i] != qs[i])
        return false; // broadcast batch dimensions stay unfused
    int64_t tq = qs[r - 2], d = qs[r - 1], tk = ks[r - 1];
    if (ks[r - 2] != d || vs[r - 2] != tk || vs[r - 1] != d || d > maxHeadDim || (causal && tq != tk))
      return false;

    OpBuilder b(pv);
    SmallVector<Location> locs{pv.getLoc()};
    for (Operation *o : chain)
      locs.push_back(o->getLoc());
    Location loc = b.getFusedLoc(locs);
    // K = Kt with its last two dimensions swapped; fold a Transpose that produced Kt.
    SmallVector<int64_t> perm;
    for (int64_t i = 0; i < r; ++i)
      perm.push_back(i);
    std::swap(perm[size_t(r - 1)], perm[size_t(r - 2)]);
    Value kSrc = kt;
    if (auto tr = kt.getDefiningOp<ox::TransposeOp>()) {
      SmallVector<int64_t> inner = permOf(tr, r);
      SmallVector<int64_t> composed;
      for (int64_t i = 0; i < r; ++i)
        composed.push_back(inner[size_t(perm[size_t(i)])]);
      perm = composed;
      kSrc = tr.getData();
    }
    SmallVector<int64_t> kShape(qs.begin(), qs.end());
    kShape[size_t(r - 2)] = tk;
    auto kType = RankedTensorType::get(kShape, b.getF32Type());
    octet::OnnxBuilder ox(b, loc);
    SmallVector<int64_t> lseShape(qs.begin(), qs.end() - 1);
    SmallVector<NamedAttribute> attrs{b.getNamedAttr("scale", b.getF32FloatAttr(float(scale))),
                                      ox.si64("is_causal", causal)};
    if (maxWorkspaceBytes > 0) // the gradient (GradientRules.cpp) takes the forward's attributes
      attrs.push_back(ox.si64("max_workspace_bytes", maxWorkspaceBytes));
    // Heads in place: Q, K and V all split from [B, S, H, d] tensors.
    Value qSrc = foldHeadTransposes ? headSplitSource(q) : Value(), vSrc = qSrc ? headSplitSource(v) : Value();
    bool headsInPlace = vSrc && isHeadSwap(perm);
    Value k = kSrc;
    Type yType = pv.getType();
    if (headsInPlace) {
      int64_t batch = qs[0], heads = qs[1];
      q = ox.reshape(qSrc, {batch, tq, heads * d});
      k = ox.reshape(kSrc, {batch, tk, heads * d});
      v = ox.reshape(vSrc, {batch, tk, heads * d});
      yType = RankedTensorType::get({batch, tq, heads * d}, b.getF32Type());
      attrs.push_back(ox.si64("q_num_heads", heads));
      attrs.push_back(ox.si64("kv_num_heads", heads));
    } else if (!llvm::all_of(llvm::enumerate(perm), [](auto e) { return int64_t(e.index()) == e.value(); })) {
      k = b.create<ox::TransposeOp>(loc, kType, kSrc, b.getDenseI64ArrayAttr(perm)).getResult();
    }
    OperationState st(loc, "onnx.node");
    st.addOperands({q, k, v});
    st.addTypes({yType, RankedTensorType::get(lseShape, b.getF32Type())});
    st.addAttribute("op_type", b.getStringAttr("Attention"));
    st.addAttribute("domain", b.getStringAttr("octet"));
    st.addAttribute("attrs", b.getDictionaryAttr(attrs));
    Operation *fused = b.create(st);
    Value y = fused->getResult(0);
    if (headsInPlace) {
      // Y as [B, S, H, d]: the merge of the heads (Transpose [0, 2, 1, 3]) is this view; any
      // other reader gets the head-major Y back through one Transpose.
      Value y4 = ox.reshape(y, {qs[0], tq, qs[1], d});
      SmallVector<ox::TransposeOp> merges;
      for (Operation *u : pv->getUsers())
        if (auto t = dyn_cast<ox::TransposeOp>(u); t && isHeadSwap(permOf(t, 4)))
          merges.push_back(t);
      for (ox::TransposeOp t : merges) {
        t.getResult().replaceAllUsesWith(y4);
        t->erase();
      }
      y = pv->use_empty() ? Value()
                          : b.create<ox::TransposeOp>(loc, pv.getType(), y4, b.getDenseI64ArrayAttr({0, 2, 1, 3}))
                                .getResult();
    }
    if (y)
      pv.getResult().replaceAllUsesWith(y);
    SmallVector<Operation *> splits; // the head-split Transposes of Q and V, dropped when unread
    for (Value x : {qk.getA(), pv.getB()})
      if (auto t = x.getDefiningOp<ox::TransposeOp>(); t && headsInPlace)
        splits.push_back(t);
    llvm::SetVector<Operation *> constants; // the mask and scalars, dropped when nothing else reads them
    for (Operation *o : chain)
      for (Value v : o->getOperands())
        if (auto c = v.getDefiningOp<ox::ConstantOp>())
          constants.insert(c);
    pv->erase();
    for (Operation *o : chain) // softmax first, then up to the scores' MatMul
      o->erase();
    for (Operation *c : constants)
      if (c->use_empty())
        c->erase();
    if (auto tr = kt.getDefiningOp<ox::TransposeOp>(); tr && tr->use_empty())
      tr->erase();
    for (Operation *t : splits)
      if (t->use_empty())
        t->erase();
    return true;
  }

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (maxHeadDim < 1) {
        f.emitError() << "octet-fuse-attention: max-head-dim=" << int64_t(maxHeadDim) << " must be at least 1";
        return signalPassFailure();
      }
      if (maxWorkspaceBytes < 0) {
        f.emitError() << "octet-fuse-attention: max-workspace-bytes=" << int64_t(maxWorkspaceBytes)
                      << " must be 0 (no bound) or more";
        return signalPassFailure();
      }
      SmallVector<ox::SoftmaxOp> softmaxes(f.getOps<ox::SoftmaxOp>());
      for (ox::SoftmaxOp s : softmaxes)
        tryFuse(s);
    });
  }
};

} // namespace
