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
// Grouped-query attention: when K and V are [B, G, T, d] tensors each of whose heads is repeated
// H / G times in a row (HF's repeat_kv: Reshape(Expand(Unsqueeze(kv, 2)))), the node reads the
// [B, G, T, d] tensors themselves (ONNX Attention's kv_num_heads = G: query head h reads K/V head
// h / (H / G)), so neither the repeated copies nor their gradients' sums over the group are made.
// K and V of one head broadcast against Q's H (Falcon's multi-query attention) are the case G = 1.
//
// Only masks that are exactly causal are matched (a boolean lower triangle, or 0 on and below
// the diagonal and <= -1e4 above), or masks of zeros (BERT without padding: unmasked); anything
// else stays as it was. A mask may be a constant (any leading dimensions, each slice checked) or
// the subgraph exporters write when the import could not fold it: broadcasts (Expand), Not,
// Cast, Equal(x, 0), Trilu of ones, comparisons of key and query positions (HF's
// LessOrEqual(j, i)), and Where of such a pattern between 0 and a very negative constant.
// The forms torch.onnx.export writes are matched too: F.scaled_dot_product_attention's
// decomposition scales Q and Kt each by the square root of the scale, makes Kt by a Reshape,
// Transpose and Reshape of K, and guards P with Where(IsNaN(P), 0, P) (a fused row always sees
// a key, so it never has a NaN); eager attention reads P through an Identity (dropout in eval
// mode) or a Cast to its own type; copies (Identity) may sit anywhere on Q, K and V. What
// the fused node replaces goes, and with it whatever nothing else reads (the mask's subgraph).
// Heads wider than max-head-dim stay unfused (the CUDA kernels keep a row of the head in
// registers).
//
// ONNX Attention (opset 23: the exporter's SDPA at opset_version=23) becomes the same node where
// it reads Q, K and V with no mask, a causal one or one that masks nothing (the masks above; HF
// passes its causal mask with is_causal = 0), and the operator's ops (repeat of K/V heads,
// MatMul, scale, Where/Add of the mask, Softmax, MatMul) for other masks, which autodiff and the
// backends know; past K/V, softcap and the QK output are refused in one line naming the node.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"
#include "octet/runtime/Attention.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"


namespace octet {
#define GEN_PASS_DEF_FUSEATTENTION
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

static_assert(octet::rt::kCudaAttentionMaxHeadDim == 128, "keep octet-fuse-attention's max-head-dim default equal");

using octet::staticF32;
using octet::throughCopies;

/// The value of a scalar (every element equal) float constant.
std::optional<double> scalarConstant(Value v) {
  v = throughCopies(v);
  DenseElementsAttr a = ox::getConstantValue(v);
  if (!a || !a.getElementType().isa<FloatType>() || !a.isSplat())
    return std::nullopt;
  return a.getSplatValue<APFloat>().convertToDouble();
}

//===----------------------------------------------------------------------===//
// Causal masks: constants, and the subgraphs exporters write for them
//===----------------------------------------------------------------------===//

/// What a mask's truth (nonzero) over its last two axes, query i and key j, is: exactly j <= i
/// (`Visible`, the keys a causal query sees), exactly j > i (`Masked`), or neither known.
enum class Causal { Unknown, Visible, Masked };

Causal flip(Causal c) {
  return c == Causal::Visible ? Causal::Masked : c == Causal::Masked ? Causal::Visible : Causal::Unknown;
}

bool lastTwoAre(Value v, int64_t t) {
  auto ty = v.getType().dyn_cast<RankedTensorType>();
  return ty && ty.hasStaticShape() && ty.getRank() >= 2 && ty.getShape().back() == t &&
         ty.getShape()[size_t(ty.getRank() - 2)] == t;
}

/// `v` without the copies and leading-axis broadcasts that do not change its [.., T, T] pattern.
Value throughBroadcasts(Value v, int64_t t) {
  for (v = throughCopies(v);;) {
    auto e = v.getDefiningOp<ox::ExpandOp>();
    if (!e || !lastTwoAre(e.getInput(), t))
      return v;
    v = throughCopies(e.getInput());
  }
}

/// The mask's constant value: any constant when it is boolean or integer, a Constant op's when it
/// is float (a float initializer is a trained parameter).
DenseElementsAttr maskConstant(Value v) {
  DenseElementsAttr a = ox::getConstantValue(v);
  if (a && a.getElementType().isa<FloatType>() && !v.getDefiningOp<ox::ConstantOp>())
    return {};
  return a;
}

/// Each [T, T] slice of a constant against the causal pattern, by `element(k)` -> visible?
/// (nullopt: neither visible nor masked).
template <typename F>
Causal constantPattern(DenseElementsAttr a, int64_t t, F element) {
  bool visible = true, masked = true;
  for (int64_t k = 0, n = a.getNumElements(); k < n && (visible || masked); ++k) {
    int64_t i = (k / t) % t, j = k % t;
    std::optional<bool> v = element(k);
    visible = visible && v && *v == (j <= i);
    masked = masked && v && *v == (j > i);
  }
  return visible ? Causal::Visible : masked ? Causal::Masked : Causal::Unknown;
}

/// Whether `v` is a constant whose every element is nonzero (a broadcast scalar included).
bool allNonzero(Value v) {
  v = throughCopies(v);
  while (auto e = v.getDefiningOp<ox::ExpandOp>())
    v = throughCopies(e.getInput());
  DenseElementsAttr a = ox::getConstantValue(v);
  if (!a || !a.isSplat())
    return false;
  if (a.getElementType().isa<FloatType>())
    return !a.getSplatValue<APFloat>().isZero();
  return a.getElementType().isIntOrIndex() && !a.getSplatValue<APInt>().isZero();
}

/// o when `v` is [1.., T] (axis -1) or [1.., T, 1] (axis -2) holding k + o at position k.
std::optional<int64_t> iotaOffset(Value v, int64_t t, int axisFromEnd) {
  DenseElementsAttr a = ox::getConstantValue(v);
  if (!a || !a.getElementType().isIntOrIndex() || a.getNumElements() != t)
    return std::nullopt;
  auto shape = a.getType().getShape();
  int64_t r = int64_t(shape.size());
  if (r < axisFromEnd || shape[size_t(r - axisFromEnd)] != t)
    return std::nullopt;
  std::optional<int64_t> o;
  int64_t k = 0;
  for (const APInt &x : a.getValues<APInt>()) {
    int64_t d = x.getSExtValue() - k++;
    if (o && *o != d)
      return std::nullopt;
    o = d;
  }
  return o;
}

/// What the boolean (or 0/1) mask `v` over [.., T, T] is: a constant, a broadcast, Not, Cast,
/// Equal(x, 0), a lower or upper triangle of ones (Trilu), or a comparison of key and query
/// positions (LessOrEqual(j, i) and the like, the positions constants).
Causal causalPattern(Value v, int64_t t) {
  v = throughBroadcasts(v, t);
  Operation *d = v.getDefiningOp();
  if (!d || !lastTwoAre(v, t))
    return Causal::Unknown;
  if (auto n = dyn_cast<ox::NotOp>(d))
    return flip(causalPattern(n.getX(), t));
  if (auto c = dyn_cast<ox::CastOp>(d)) {
    auto in = c->getOperand(0).getType().dyn_cast<RankedTensorType>();
    auto out = c->getResult(0).getType().dyn_cast<RankedTensorType>();
    bool bools = in && out && (in.getElementType().isInteger(1) || out.getElementType().isInteger(1));
    return bools ? causalPattern(c->getOperand(0), t) : Causal::Unknown;
  }
  if (auto e = dyn_cast<ox::EqualOp>(d)) {
    for (int side : {0, 1}) {
      std::optional<double> z = scalarConstant(d->getOperand(unsigned(side)));
      if (!z) { // an integer zero
        DenseElementsAttr a = ox::getConstantValue(d->getOperand(unsigned(side)));
        if (a && a.isSplat() && a.getElementType().isIntOrIndex() && a.getSplatValue<APInt>().isZero())
          z = 0.0;
      }
      if (z && *z == 0.0)
        return flip(causalPattern(d->getOperand(unsigned(1 - side)), t));
    }
    return Causal::Unknown;
  }
  if (auto tr = dyn_cast<ox::TriluOp>(d)) {
    int64_t k = 0;
    if (!tr.getK().getType().isa<NoneType>()) {
      DenseElementsAttr ka = ox::getConstantValue(tr.getK());
      if (!ka || ka.getNumElements() != 1)
        return Causal::Unknown;
      k = (*ka.getValues<APInt>().begin()).getSExtValue();
    }
    if (!allNonzero(tr.getInput()))
      return Causal::Unknown;
    bool upper = tr.getUpper().value_or(0) != 0;
    // Lower: kept where j - i <= k; upper: where j - i >= k.
    return !upper && k == 0 ? Causal::Visible : upper && k == 1 ? Causal::Masked : Causal::Unknown;
  }
  // Comparisons of positions: `j` along the last axis, `i` along the one before.
  auto positions = [&](Value a, Value b, int axisA, int axisB) {
    std::optional<int64_t> oa = iotaOffset(a, t, axisA), ob = iotaOffset(b, t, axisB);
    return oa && ob && *oa == *ob;
  };
  if (isa<ox::LessOrEqualOp>(d) && positions(d->getOperand(0), d->getOperand(1), 1, 2))
    return Causal::Visible; // j <= i
  if (isa<ox::GreaterOrEqualOp>(d) && positions(d->getOperand(0), d->getOperand(1), 2, 1))
    return Causal::Visible; // i >= j
  if (isa<ox::GreaterOp>(d) && positions(d->getOperand(0), d->getOperand(1), 1, 2))
    return Causal::Masked; // j > i
  if (isa<ox::LessOp>(d) && positions(d->getOperand(0), d->getOperand(1), 2, 1))
    return Causal::Masked; // i < j
  DenseElementsAttr a = maskConstant(v);
  if (!a)
    return Causal::Unknown;
  if (a.getElementType().isInteger(1)) {
    auto values = a.getValues<bool>().begin();
    return constantPattern(a, t, [&](int64_t k) { return std::optional<bool>(*(values + k)); });
  }
  if (a.getElementType().isIntOrIndex()) {
    auto values = a.getValues<APInt>().begin();
    return constantPattern(a, t, [&](int64_t k) { return std::optional<bool>(!(*(values + k)).isZero()); });
  }
  return Causal::Unknown;
}

/// Whether the float mask `v` added to the scores is 0 where key j <= query i and <= -1e4 above:
/// a constant, or Where of a causal pattern between 0 and a very negative constant.
bool isAdditiveCausal(Value v, int64_t t) {
  v = throughBroadcasts(v, t);
  if (!lastTwoAre(v, t))
    return false;
  if (auto w = v.getDefiningOp<ox::WhereOp>()) {
    std::optional<double> a = scalarConstant(w.getX()), b = scalarConstant(w.getY());
    if (!a || !b)
      return false;
    Causal c = causalPattern(w.getCondition(), t);
    return (*a == 0.0 && *b <= -1e4 && c == Causal::Visible) || (*a <= -1e4 && *b == 0.0 && c == Causal::Masked);
  }
  DenseElementsAttr a = maskConstant(v);
  if (!a || !a.getElementType().isF32())
    return false;
  auto values = a.getValues<float>().begin();
  return constantPattern(a, t, [&](int64_t k) -> std::optional<bool> {
           float x = *(values + k);
           return x == 0.0f ? std::optional<bool>(true) : x <= -1e4f ? std::optional<bool>(false) : std::nullopt;
         }) == Causal::Visible;
}

/// Whether `v` is a float constant of zeros that broadcasts to `shape` without changing it.
/// Where(all true, 0, x) (BERT's mask without padding) included.
bool isZeros(Value v, ArrayRef<int64_t> shape) {
  auto vt = v.getType().dyn_cast<RankedTensorType>();
  if (!vt || !vt.hasStaticShape() || vt.getRank() > int64_t(shape.size()))
    return false;
  auto s = vt.getShape();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[s.size() - 1 - i] != 1 && s[s.size() - 1 - i] != shape[shape.size() - 1 - i])
      return false;
  if (auto w = v.getDefiningOp<ox::WhereOp>()) {
    std::optional<double> z = scalarConstant(w.getX());
    return z && *z == 0.0 && allNonzero(w.getCondition());
  }
  DenseElementsAttr a = maskConstant(v);
  if (!a || !a.getElementType().isa<FloatType>())
    return false;
  if (a.isSplat())
    return a.getSplatValue<APFloat>().isZero();
  return llvm::all_of(a.getValues<APFloat>(), [](const APFloat &x) { return x.isZero(); });
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

/// `v` through Identity copies (each added to `seen`).
Value skipIdentity(Value v, SmallVectorImpl<Operation *> &seen) {
  while (auto id = v.getDefiningOp<ox::IdentityOp>()) {
    seen.push_back(id);
    v = id.getX();
  }
  return v;
}

/// K when `kt` is K [.., T, d] with its last two axes swapped the way the exporter's SDPA writes it,
/// Reshape(Transpose(Reshape(K, [N, T, d]), [0, 2, 1]), [.., d, T]); `ops` gets those three
/// (outermost first).
Value swappedThroughReshapes(Value kt, SmallVectorImpl<Operation *> &ops) {
  auto outer = kt.getDefiningOp<ox::ReshapeOp>();
  auto tr = outer ? outer.getData().getDefiningOp<ox::TransposeOp>() : ox::TransposeOp();
  auto inner = tr ? tr.getData().getDefiningOp<ox::ReshapeOp>() : ox::ReshapeOp();
  if (!inner || permOf(tr, 3) != SmallVector<int64_t>{0, 2, 1})
    return {};
  Value k = inner.getData();
  auto kType = staticF32(k), ktType = staticF32(kt), flat = staticF32(inner.getResult());
  if (!kType || !ktType || !flat || kType.getRank() != ktType.getRank() || kType.getRank() < 3 || flat.getRank() != 3)
    return {};
  int64_t r = kType.getRank(), n = 1;
  auto ks = kType.getShape(), kts = ktType.getShape();
  for (int64_t i = 0; i + 2 < r; ++i) {
    if (ks[size_t(i)] != kts[size_t(i)])
      return {};
    n *= ks[size_t(i)];
  }
  int64_t t = ks[size_t(r - 2)], d = ks[size_t(r - 1)];
  if (kts[size_t(r - 2)] != d || kts[size_t(r - 1)] != t || flat.getShape() != ArrayRef<int64_t>{n, t, d})
    return {};
  ops.append({outer, tr, inner});
  return k;
}

/// Grouped-query attention's K or V: when `x` [B, H, T, d] is the [B, G, T, d] tensor `kv` with
/// each head repeated H / G times in a row (HF's repeat_kv: Reshape(Expand(Unsqueeze(kv, 2),
/// [B, G, H / G, T, d]), [B, H, T, d]), through copies; the unit axis may be a Reshape), `kv`,
/// with `group` = H / G; else none.
Value repeatedHeads(Value x, int64_t &group, SmallVectorImpl<Operation *> &copies) {
  auto xt = staticF32(x);
  auto merge = skipIdentity(x, copies).getDefiningOp<ox::ReshapeOp>();
  auto expand = merge ? skipIdentity(merge.getData(), copies).getDefiningOp<ox::ExpandOp>() : ox::ExpandOp();
  Operation *unit = expand ? skipIdentity(expand.getInput(), copies).getDefiningOp() : nullptr;
  if (!xt || xt.getRank() != 4 || !unit || !isa<ox::UnsqueezeOp, ox::ReshapeOp>(unit))
    return {};
  Value kv = skipIdentity(unit->getOperand(0), copies);
  auto kvt = staticF32(kv), et = staticF32(expand.getOutput()), ut = staticF32(unit->getResult(0));
  if (!kvt || !et || !ut || kvt.getRank() != 4 || et.getRank() != 5)
    return {};
  auto xs = xt.getShape(), ks = kvt.getShape(), es = et.getShape();
  int64_t g = ks[1], rep = es[2];
  if (ut.getShape() != ArrayRef<int64_t>{ks[0], g, 1, ks[2], ks[3]} ||
      es != ArrayRef<int64_t>{ks[0], g, rep, ks[2], ks[3]} || xs != ArrayRef<int64_t>{ks[0], g * rep, ks[2], ks[3]} ||
      rep < 2 || staticF32(merge.getData()) != et)
    return {};
  group = rep;
  return kv;
}

/// The ops of Where(Not(Equal(P, P)), 0, P) when they are P's only readers besides it (the Where
/// first), else none.
SmallVector<Operation *> nanGuard(Value p) {
  ox::WhereOp where;
  ox::EqualOp eq;
  for (Operation *u : p.getUsers()) {
    if (auto w = dyn_cast<ox::WhereOp>(u); w && w.getY() == p && w.getCondition() != p && w.getX() != p)
      where = where && where != w ? ox::WhereOp() : w;
    else if (auto e = dyn_cast<ox::EqualOp>(u); e && e.getA() == p && e.getB() == p)
      eq = e;
    else
      return {};
  }
  if (!where || !eq || !eq.getC().hasOneUse())
    return {};
  auto no = dyn_cast<ox::NotOp>(*eq.getC().getUsers().begin());
  std::optional<double> zero = scalarConstant(where.getX());
  if (!no || !no.getY().hasOneUse() || where.getCondition() != no.getY() || !zero || *zero != 0.0 ||
      where.getType() != p.getType())
    return {};
  return {where, no, eq};
}

struct FuseAttention : octet::impl::FuseAttentionBase<FuseAttention> {
  using FuseAttentionBase::FuseAttentionBase;

  /// Fuses the chain ending at `softmax` when it matches; returns whether it did.
  bool tryFuse(ox::SoftmaxOp softmax) {
    Value p = softmax.getOutput();
    auto pt = staticF32(p);
    if (!pt || pt.getRank() < 3)
      return false;
    int64_t axis = softmax.getAxis().value_or(-1);
    if (axis != -1 && axis != pt.getRank() - 1)
      return false;
    // The exporter's guard of fully masked rows, Where(IsNaN(P), 0, P) (IsNaN imported as
    // Not(Equal(P, P))): a fused row always sees a key (causal or unmasked), so it has no NaN.
    SmallVector<Operation *> guard;
    Value probs = p;
    if (!p.hasOneUse()) {
      guard = nanGuard(p);
      if (guard.empty())
        return false;
      probs = guard.front()->getResult(0);
    }
    if (!probs.hasOneUse())
      return false;
    // Copies: dropout exported in eval mode (Identity), a Cast to the type it has.
    for (Operation *u = *probs.getUsers().begin();
         isa<ox::IdentityOp>(u) || (isa<ox::CastOp>(u) && u->getResult(0).getType() == probs.getType());
         u = *probs.getUsers().begin()) {
      guard.insert(guard.begin(), u);
      probs = u->getResult(0);
      if (!probs.hasOneUse())
        return false;
    }
    auto pv = dyn_cast<ox::MatMulOp>(*probs.getUsers().begin());
    if (!pv || pv.getA() != probs)
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
        // Where(visible, S, very negative) or Where(masked, very negative, S).
        int64_t t = pt.getShape().back();
        Causal c = causalPattern(w.getCondition(), t);
        std::optional<double> negY = scalarConstant(w.getY()), negX = scalarConstant(w.getX());
        bool keepX = c == Causal::Visible && negY && *negY <= -1e4;
        bool keepY = c == Causal::Masked && negX && *negX <= -1e4;
        if (causal || !(keepX || keepY))
          return false;
        causal = true;
        x = keepX ? w.getX() : w.getY();
      } else if (auto add = dyn_cast<ox::AddOp>(d)) {
        int side = isAdditiveCausal(add.getB(), pt.getShape().back())   ? 1
                   : isAdditiveCausal(add.getA(), pt.getShape().back()) ? 0
                                                                        : -1;
        if (side >= 0 && causal)
          return false;
        causal = causal || side >= 0;
        if (side < 0) // a mask of zeros (no padding) masks nothing
          side = isZeros(add.getB(), pt.getShape()) ? 1 : isZeros(add.getA(), pt.getShape()) ? 0 : -1;
        if (side < 0)
          return false;
        x = d->getOperand(unsigned(1 - side));
      } else {
        return false;
      }
    }
    // The exported SDPA scales Q and Kt each by the square root of the scale.
    auto peelScale = [&](Value x) {
      while (Operation *d = x.getDefiningOp()) {
        if (!x.hasOneUse() || !isa<ox::MulOp, ox::DivOp>(d))
          break;
        bool div = isa<ox::DivOp>(d);
        int side = div ? 1 : scalarConstant(d->getOperand(1)) ? 1 : 0;
        std::optional<double> c = scalarConstant(d->getOperand(unsigned(side)));
        Value in = d->getOperand(unsigned(1 - side));
        if (!c || !(*c > 0) || !std::isfinite(*c) || in.getType() != x.getType())
          break;
        scale = div ? scale / *c : scale * *c;
        chain.push_back(d); // after the scores' MatMul, which reads it
        x = in;
      }
      return x;
    };
    SmallVector<Operation *> copies; // Identity ops looked through, dropped when unread
    Value q = skipIdentity(peelScale(qk.getA()), copies), kt = skipIdentity(peelScale(qk.getB()), copies),
          v = skipIdentity(pv.getB(), copies);
    auto qt = staticF32(q), ktt = staticF32(kt), vt = staticF32(v);
    if (!qt || !ktt || !vt || qt.getRank() != pt.getRank() || ktt.getRank() != pt.getRank() ||
        vt.getRank() != pt.getRank())
      return false;
    int64_t r = pt.getRank();
    auto qs = qt.getShape(), ks = ktt.getShape(), vs = vt.getShape();
    // Multi-query attention by broadcasting (Falcon: K and V [B, 1, T, d] against Q's H heads) is
    // grouped-query attention with one K/V head; other broadcast batch dimensions stay unfused.
    int64_t broadcastGroup = 1;
    for (int64_t i = 0; i + 2 < r; ++i) {
      if (r == 4 && i == 1 && ks[i] == 1 && vs[i] == 1 && qs[i] > 1 && qs[i] == pt.getShape()[i]) {
        broadcastGroup = qs[i];
        continue;
      }
      if (qs[i] != pt.getShape()[i] || ks[i] != qs[i] || vs[i] != qs[i])
        return false;
    }
    int64_t tq = qs[r - 2], d = qs[r - 1], tk = ks[r - 1];
    if (ks[r - 2] != d || vs[r - 2] != tk || vs[r - 1] != d || d > maxHeadDim || (causal && tq != tk))
      return false;

    OpBuilder b(pv);
    SmallVector<Location> locs{pv.getLoc()};
    for (Operation *o : llvm::concat<Operation *>(chain, guard))
      locs.push_back(o->getLoc());
    Location loc = b.getFusedLoc(locs);
    // K = Kt with its last two dimensions swapped; fold a Transpose that produced Kt.
    SmallVector<int64_t> perm;
    for (int64_t i = 0; i < r; ++i)
      perm.push_back(i);
    std::swap(perm[size_t(r - 1)], perm[size_t(r - 2)]);
    Value kSrc = kt;
    auto compose = [&](ox::TransposeOp tr) {
      SmallVector<int64_t> inner = permOf(tr, r);
      SmallVector<int64_t> composed;
      for (int64_t i = 0; i < r; ++i)
        composed.push_back(inner[size_t(perm[size_t(i)])]);
      perm = composed;
      kSrc = skipIdentity(tr.getData(), copies);
    };
    SmallVector<Operation *> kSwap; // the exporter's Reshape, Transpose, Reshape that made Kt
    if (auto tr = kt.getDefiningOp<ox::TransposeOp>()) {
      compose(tr);
    } else if (Value k = swappedThroughReshapes(kt, kSwap)) { // Kt is K [.., T, d] swapped
      kSrc = skipIdentity(k, copies);
      for (int64_t i = 0; i < r; ++i)
        perm[size_t(i)] = i;
    }
    auto identity = [&] {
      return llvm::all_of(llvm::enumerate(perm), [](auto e) { return int64_t(e.index()) == e.value(); });
    };
    // Grouped-query attention: K and V each repeat the heads of a [B, G, T, d] tensor H / G times;
    // the node reads those (ONNX Attention's kv_num_heads = G) and the repeats go.
    int64_t group = broadcastGroup, kGroup = 1, vGroup = 1;
    if (r == 4 && identity() && group == 1) {
      SmallVector<Operation *> seen;
      Value kKv = repeatedHeads(kSrc, kGroup, seen), vKv = repeatedHeads(v, vGroup, seen);
      if (kKv && vKv && kGroup == vGroup) {
        group = kGroup;
        kSrc = kKv;
        v = vKv;
        copies.append(seen.begin(), seen.end());
      }
    }
    // K itself a head split (the permutations cancelled): read the [B, S, H, d] tensor it swaps.
    if (identity() && foldHeadTransposes && headSplitSource(kSrc))
      compose(kSrc.getDefiningOp<ox::TransposeOp>());
    SmallVector<int64_t> kShape(qs.begin(), qs.end());
    kShape[size_t(r - 2)] = tk;
    if (group > 1)
      kShape[1] = qs[1] / group;
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
      int64_t batch = qs[0], heads = qs[1], kvHeads = heads / group;
      q = ox.reshape(qSrc, {batch, tq, heads * d});
      k = ox.reshape(kSrc, {batch, tk, kvHeads * d});
      v = ox.reshape(vSrc, {batch, tk, kvHeads * d});
      yType = RankedTensorType::get({batch, tq, heads * d}, b.getF32Type());
      attrs.push_back(ox.si64("q_num_heads", heads));
      attrs.push_back(ox.si64("kv_num_heads", kvHeads));
    } else if (!identity()) {
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
      // Copies of Y (Identity, a Reshape to its own shape: the exporter's view after SDPA) are Y.
      for (bool again = true; again;) {
        again = false;
        for (Operation *u : llvm::make_early_inc_range(pv->getUsers()))
          if ((isa<ox::IdentityOp>(u) || isa<ox::ReshapeOp>(u)) && u->getResult(0).getType() == pv.getType()) {
            u->getResult(0).replaceAllUsesWith(pv.getResult());
            u->erase();
            again = true;
          }
      }
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
    // What goes: P V, the guard and the chain (each before what it reads), then whatever they
    // read that nothing reads any more: the mask's subgraph, the scalars, Kt's reshapes and
    // transposes, the head splits, the copies. Parameters (initializers) stay.
    SmallVector<Operation *> roots{pv};
    roots.append(guard.begin(), guard.end());
    roots.append(chain.begin(), chain.end());
    octet::eraseWithUnread(roots);
    return true;
  }

  /// ONNX Attention (opset 23) as octet's, which takes ONNX's attribute names and layouts (4-D
  /// [B, H, T, d], or 3-D [B, T, H * d] with q_num_heads and kv_num_heads; K and V of fewer heads
  /// shared by groups of query heads) and adds the rows' log-sum-exp [B, H, Tq] its gradient reads.
  /// The attention mask may be causal or let every key through, as the chain's masks above (the
  /// exporter passes HF's causal mask with is_causal = 0); no past K/V, softcap or QK output.
  /// "" once replaced, else what it asks for that the fused op does not do.
  std::string adoptOnnx(ox::GenericNodeOp node) {
    SmallVector<Value> in(node->getOperands());
    if (in.size() < 3)
      return "fewer than three inputs";
    if (llvm::any_of(ArrayRef<Value>(in).drop_front(4), [](Value v) { return !v.getType().isa<NoneType>(); }))
      return "past K and V";
    if (llvm::any_of(node->getResults().drop_front(), [](Value r) { return !r.use_empty(); }))
      return "present K/V or QK outputs that are read";
    int64_t causal = 0, qHeads = 0, kvHeads = 0;
    std::optional<double> scale;
    for (NamedAttribute a : node.getAttrs()) {
      StringRef n = a.getName().getValue();
      auto i = a.getValue().dyn_cast<IntegerAttr>();
      auto f = a.getValue().dyn_cast<FloatAttr>();
      if (n == "is_causal" && i)
        causal = i.getInt();
      else if (n == "q_num_heads" && i)
        qHeads = i.getInt();
      else if (n == "kv_num_heads" && i)
        kvHeads = i.getInt();
      else if (n == "scale" && f)
        scale = f.getValueAsDouble();
      else if (!((n == "softcap" && f && f.getValueAsDouble() == 0) ||
                 (n == "qk_matmul_output_mode" && i && i.getInt() == 0)))
        return "attribute " + n.str();
    }
    auto q = staticF32(in[0]), k = staticF32(in[1]), v = staticF32(in[2]);
    if (!q || !k || !v || q.getRank() != k.getRank() || q.getRank() != v.getRank() ||
        (q.getRank() != 3 && q.getRank() != 4))
      return "Q, K and V other than float32 of static 3-D or 4-D shapes";
    ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape();
    int64_t batch = qs[0], tq, tk, d, heads;
    if (q.getRank() == 4) { // [B, H, T, d]
      heads = qs[1], tq = qs[2], tk = ks[2], d = qs[3], kvHeads = ks[1];
      if (ks[3] != d || v.getShape() != ks || qHeads || heads % kvHeads)
        return "K and V whose heads do not group Q's";
    } else { // [B, T, H * d]
      if (qHeads <= 0 || kvHeads <= 0 || qHeads % kvHeads || qs[2] % qHeads)
        return "3-D inputs without q_num_heads and kv_num_heads that group them";
      heads = qHeads, tq = qs[1], tk = ks[1], d = qs[2] / qHeads;
      if (ks[2] != kvHeads * d || v.getShape() != ks)
        return "K and V whose heads do not group Q's";
    }
    if (ks[0] != batch || d > maxHeadDim)
      return "heads wider than " + std::to_string(int64_t(maxHeadDim));
    if (in.size() > 3 && !in[3].getType().isa<NoneType>()) {
      Value m = in[3];
      auto mt = m.getType().dyn_cast<RankedTensorType>();
      bool visible = mt && (mt.getElementType().isInteger(1) ? tq == tk && causalPattern(m, tk) == Causal::Visible
                                                             : tq == tk && isAdditiveCausal(m, tk));
      bool none = mt && (mt.getElementType().isInteger(1) ? allNonzero(m) : isZeros(m, {batch, heads, tq, tk}));
      if (!visible && !none) { // another mask (a sliding window, padding): the operator's ops
        decomposeOnnx(node, m, causal, scale ? *scale : 1.0 / std::sqrt(double(d)), heads, kvHeads, d);
        return "";
      }
      causal = causal || visible;
    }
    if (causal != 0 && (causal != 1 || tq != tk))
      return "is_causal with other than as many keys as queries";
    OpBuilder b(node);
    octet::OnnxBuilder ox(b, node.getLoc());
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("scale", b.getF32FloatAttr(float(scale ? *scale : 1.0 / std::sqrt(double(d))))),
        ox.si64("is_causal", causal)};
    if (maxWorkspaceBytes > 0)
      attrs.push_back(ox.si64("max_workspace_bytes", maxWorkspaceBytes));
    if (q.getRank() == 3) {
      attrs.push_back(ox.si64("q_num_heads", qHeads));
      attrs.push_back(ox.si64("kv_num_heads", kvHeads));
    }
    OperationState st(node.getLoc(), "onnx.node");
    st.addOperands({in[0], in[1], in[2]});
    st.addTypes({q, RankedTensorType::get({batch, heads, tq}, b.getF32Type())});
    st.addAttribute("op_type", b.getStringAttr("Attention"));
    st.addAttribute("domain", b.getStringAttr("octet"));
    st.addAttribute("attrs", b.getDictionaryAttr(attrs));
    for (NamedAttribute a : node->getAttrs()) // result names, name scopes
      if (a.getName().getValue().startswith("octet.") || a.getName().getValue().startswith("onnx."))
        st.addAttribute(a.getName(), a.getValue());
    Operation *fused = b.create(st);
    node->getResult(0).replaceAllUsesWith(fused->getResult(0));
    octet::eraseWithUnread({node.getOperation()}); // and the mask's ops, once no other node reads them
    return "";
  }

  /// ONNX Attention written as the operator's definition in ops that autodiff and the backends
  /// know (what the exporters wrote before opset 23): K and V of a group repeated for each of its
  /// query heads, S = scale Q K^T, the causal mask and `mask` (boolean: Where; float: added),
  /// Softmax over the keys, P V; 3-D inputs split into heads and Y merged back.
  void decomposeOnnx(ox::GenericNodeOp node, Value mask, int64_t causal, double scale, int64_t heads,
                     int64_t kvHeads, int64_t d) {
    OpBuilder b(node);
    octet::OnnxBuilder ox(b, node.getLoc());
    Value q = node->getOperand(0), k = node->getOperand(1), v = node->getOperand(2);
    auto qt = q.getType().cast<RankedTensorType>();
    int64_t batch = qt.getDimSize(0), three = qt.getRank() == 3;
    auto f32 = [&](ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, b.getF32Type()); };
    auto transpose = [&](Value x, ArrayRef<int64_t> perm) {
      auto xs = x.getType().cast<RankedTensorType>().getShape();
      SmallVector<int64_t> out;
      for (int64_t i : perm)
        out.push_back(xs[size_t(i)]);
      return b.create<ox::TransposeOp>(node.getLoc(), f32(out), x, b.getDenseI64ArrayAttr(perm)).getResult();
    };
    auto heads4 = [&](Value x, int64_t h) { // [B, T, h * d] -> [B, h, T, d]
      auto xs = x.getType().cast<RankedTensorType>().getShape();
      return transpose(ox.reshape(x, {batch, xs[1], h, xs[2] / h}), {0, 2, 1, 3});
    };
    if (three) {
      q = heads4(q, heads);
      k = heads4(k, kvHeads);
      v = heads4(v, kvHeads);
    }
    auto repeat = [&](Value x) { // [B, Hk, T, d] -> [B, H, T, d], head h reading h / (H / Hk)
      if (kvHeads == heads)
        return x;
      auto xs = x.getType().cast<RankedTensorType>().getShape();
      int64_t g = heads / kvHeads;
      Value e = ox.op("Expand", f32({batch, kvHeads, g, xs[2], xs[3]}),
                      {ox.reshape(x, {batch, kvHeads, 1, xs[2], xs[3]}), ox.i64s({batch, kvHeads, g, xs[2], xs[3]})});
      return ox.reshape(e, {batch, heads, xs[2], xs[3]});
    };
    k = repeat(k);
    v = repeat(v);
    int64_t tq = q.getType().cast<RankedTensorType>().getDimSize(2), tk = k.getType().cast<RankedTensorType>().getDimSize(2);
    int64_t dv = v.getType().cast<RankedTensorType>().getDimSize(3);
    auto st = f32({batch, heads, tq, tk});
    Value scores = ox.op("MatMul", st, {q, transpose(k, {0, 1, 3, 2})});
    scores = ox.op("Mul", st, {scores, ox.f32(float(scale))});
    Value lowest = ox.f32(-std::numeric_limits<float>::max());
    if (causal) {
      SmallVector<bool> lower(size_t(tq * tk), false);
      for (int64_t i = 0; i < tq; ++i)
        for (int64_t j = 0; j <= i && j < tk; ++j)
          lower[size_t(i * tk + j)] = true;
      Value c = ox.constant(DenseElementsAttr::get(RankedTensorType::get({tq, tk}, b.getI1Type()), llvm::ArrayRef<bool>(lower)));
      scores = ox.op("Where", st, {c, scores, lowest});
    }
    if (mask.getType().cast<RankedTensorType>().getElementType().isInteger(1))
      scores = ox.op("Where", st, {mask, scores, lowest});
    else
      scores = ox.op("Add", st, {scores, mask});
    Value probs = ox.op("Softmax", st, {scores}, {ox.si64("axis", -1)});
    Value y = ox.op("MatMul", f32({batch, heads, tq, dv}), {probs, v});
    if (three)
      y = ox.reshape(transpose(y, {0, 2, 1, 3}), {batch, tq, heads * dv});
    node->getResult(0).replaceAllUsesWith(y);
    octet::eraseWithUnread({node.getOperation()});
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
      SmallVector<ox::GenericNodeOp> onnxAttention;
      f.walk([&](ox::GenericNodeOp n) {
        if (n.getOpType() == "Attention" && n.getDomain().empty())
          onnxAttention.push_back(n);
      });
      for (ox::GenericNodeOp n : onnxAttention)
        if (std::string why = adoptOnnx(n); !why.empty()) {
          n.emitError() << "ONNX Attention with " << why
                        << " has no fused op that runs it; Octet runs Attention of Q, K and V alone (causal with as "
                           "many keys as queries, or unmasked); export with opset_version=20 for other masks";
          return signalPassFailure();
        }
    });
  }
};

} // namespace
