//===- FuseRotary.cpp - Fuse the rotary position embedding -----------------===//
//
// octet-fuse-rotary: the rotary embedding as Hugging Face's apply_rotary_pos_emb writes it and
// torch.onnx.export records it,
//
//   Y = Add(Mul(X, cos), Mul(rotate_half(X), sin)),
//   rotate_half(X) = Concat(Neg(Slice(X, [d/2, d) of the last axis)), Slice(X, [0, d/2)), last axis)
//
// (either operand order of the Add and the Muls, copies (Identity) anywhere), becomes one
// `onnx.node "RotaryEmbedding"` (domain "octet", operands X, cos, sin; cos and sin broadcast to
// X's shape along every axis but the last, where they are X's width). Its gradient is the same
// node with `inverse` = 1, dX = dY cos + rotate_half^T(dY sin) (passes/GradientRules.cpp), so the
// backward keeps X's halves, the Neg, the Concat and the Slices' zero-padded gradients out of the
// plan: one read of X (or dY) and one write where the unfused ops read and write it six times.
// The node's values are the unfused ops' to the bit: each element is x c + r s rounded as the two
// Muls and the Add round them. cos and sin must not depend on a trained parameter (autodiff
// refuses the node's gradient for them; HF's come from position ids and a buffer).
//
// Where X is a head split (Transpose [0, 2, 1, 3] of a [B, S, H, d] projection) and the tables are
// the same for every head, the node rotates the [B, S, H, d] tensor (its tables reshaped to
// [.., S, 1, d]) and the head split follows it, so fused attention reads the heads in place
// (octet-fuse-attention) and no Transpose is left on Q and K.
//
// Partial rotary (Phi, GPT-NeoX: the rotated part a Slice of the head, concatenated with the
// rest) fuses the rotated part. Only what the pattern replaces goes, and with it whatever nothing
// else reads.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"


namespace octet {
#define GEN_PASS_DEF_FUSEROTARY
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

using octet::staticF32;
using octet::throughCopies;

/// The half [begin, begin + half) of the last axis that `v` = Slice(x, ...) takes of x (width 2 half),
/// with x; else none. Ends past the axis (INT64_MAX, as exporters write "to the end") clamp.
std::optional<std::pair<Value, int64_t>> halfSlice(Value v) {
  auto s = throughCopies(v).getDefiningOp<ox::SliceOp>();
  if (!s)
    return std::nullopt;
  auto xt = staticF32(s.getData()), yt = staticF32(s.getOutput());
  if (!xt || !yt)
    return std::nullopt;
  int64_t r = xt.getRank(), w = xt.getShape().back();
  auto starts = ox::getConstantInts(s.getStarts()), ends = ox::getConstantInts(s.getEnds());
  std::optional<SmallVector<int64_t>> axes = SmallVector<int64_t>{r - 1}, steps = SmallVector<int64_t>{1};
  if (!s.getAxes().getType().isa<NoneType>())
    axes = ox::getConstantInts(s.getAxes());
  if (!s.getSteps().getType().isa<NoneType>())
    steps = ox::getConstantInts(s.getSteps());
  if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 || axes->size() != 1 ||
      steps->size() != 1 || (*steps)[0] != 1 || ((*axes)[0] != -1 && (*axes)[0] != r - 1) || w % 2)
    return std::nullopt;
  auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + w : i, int64_t(0), w); };
  int64_t b = clamp((*starts)[0]), e = clamp((*ends)[0]);
  if (e - b != w / 2 || (b != 0 && b != w / 2) || yt.getShape().back() != w / 2)
    return std::nullopt;
  return std::make_pair(s.getData(), b);
}

/// X when `v` is rotate_half(X) = Concat(Neg(X's second half), X's first half) on the last axis.
Value rotateHalf(Value v) {
  auto cat = throughCopies(v).getDefiningOp<ox::ConcatOp>();
  if (!cat || cat.getInputs().size() != 2)
    return {};
  auto ct = staticF32(cat.getConcatResult());
  if (!ct || (cat.getAxis() != -1 && cat.getAxis() != ct.getRank() - 1))
    return {};
  auto neg = throughCopies(cat.getInputs()[0]).getDefiningOp<ox::NegOp>();
  auto second = neg ? halfSlice(neg.getX()) : std::nullopt;
  auto first = halfSlice(cat.getInputs()[1]);
  if (!second || !first || second->first != first->first || second->second == 0 || first->second != 0)
    return {};
  Value x = second->first;
  return staticF32(x) == ct ? x : Value();
}

/// Whether `c` (cos or sin) broadcasts to X's shape without widening it, and has X's width.
bool broadcastsTo(Value c, RankedTensorType xt) {
  auto ct = staticF32(c);
  if (!ct || ct.getRank() > xt.getRank() || ct.getRank() < 1 || ct.getShape().back() != xt.getShape().back())
    return false;
  int64_t off = xt.getRank() - ct.getRank();
  for (int64_t i = 0; i < ct.getRank(); ++i)
    if (ct.getShape()[size_t(i)] != 1 && ct.getShape()[size_t(i)] != xt.getShape()[size_t(i + off)])
      return false;
  return true;
}

/// x's [B, S, H, d] source when x = Transpose(source, [0, 2, 1, 3]) (a head split).
Value headSplit(Value x) {
  auto t = throughCopies(x).getDefiningOp<ox::TransposeOp>();
  if (!t || !staticF32(t.getData()) || staticF32(t.getData()).getRank() != 4)
    return {};
  auto perm = t.getPerm();
  return perm && *perm == ArrayRef<int64_t>{0, 2, 1, 3} ? t.getData() : Value();
}

/// Whether a table [.., S, d] of a head split's rotation is the same for every head: its axis 1 of
/// 4 (right-aligned) is 1 or absent.
bool sameForEveryHead(Value c) {
  auto ct = staticF32(c);
  return ct && (ct.getRank() < 3 || ct.getShape()[size_t(ct.getRank() - 3)] == 1);
}

/// A table for [B, H, S, d] as one for [B, S, H, d]: its head axis (size 1) moved after S, a
/// Reshape (the same values in the same order).
Value headsLast(octet::OnnxBuilder &ox, Value c) {
  auto cs = staticF32(c).getShape();
  if (cs.size() < 3)
    return cs.size() == 2 ? ox.reshape(c, {cs[0], 1, cs[1]}) : c;
  SmallVector<int64_t> shape(cs.begin(), cs.end());
  std::swap(shape[shape.size() - 3], shape[shape.size() - 2]);
  return ox.reshape(c, shape);
}

struct FuseRotary : octet::impl::FuseRotaryBase<FuseRotary> {
  using FuseRotaryBase::FuseRotaryBase;

  /// Fuses the pattern rooted at `add` when it matches; returns whether it did.
  bool tryFuse(ox::AddOp add) {
    auto yt = staticF32(add.getResult());
    if (!yt || yt.getRank() < 1)
      return false;
    // One Mul is X cos, the other rotate_half(X) sin: try both assignments of each.
    for (int side = 0; side < 2; ++side) {
      auto plain = throughCopies(add->getOperand(unsigned(side))).getDefiningOp<ox::MulOp>();
      auto rotated = throughCopies(add->getOperand(unsigned(1 - side))).getDefiningOp<ox::MulOp>();
      if (!plain || !rotated || !plain->hasOneUse() || !rotated->hasOneUse())
        continue;
      for (int r = 0; r < 2; ++r) {
        Value rot = rotated->getOperand(unsigned(r)), sin = rotated->getOperand(unsigned(1 - r));
        Value x = rotateHalf(rot);
        if (!x || !throughCopies(rot).hasOneUse())
          continue;
        for (int p = 0; p < 2; ++p) {
          Value px = plain->getOperand(unsigned(p)), cos = plain->getOperand(unsigned(1 - p));
          if (throughCopies(px) != x || staticF32(x) != yt || !broadcastsTo(cos, yt) || !broadcastsTo(sin, yt))
            continue;
          OpBuilder b(add);
          Location loc = b.getFusedLoc({add.getLoc(), plain.getLoc(), rotated.getLoc()});
          octet::OnnxBuilder ox(b, loc);
          auto node = [&](Value in, Value c, Value s) {
            OperationState st(loc, "onnx.node");
            st.addOperands({in, c, s});
            st.addTypes({in.getType()});
            st.addAttribute("op_type", b.getStringAttr("RotaryEmbedding"));
            st.addAttribute("domain", b.getStringAttr("octet"));
            st.addAttribute("attrs", b.getDictionaryAttr({}));
            return b.create(st)->getResult(0);
          };
          Value y;
          // X a head split (Transpose [0, 2, 1, 3] of [B, S, H, d]) with tables the same for every
          // head: rotate the [B, S, H, d] tensor and split the heads after, so that attention can
          // read the heads in place (octet-fuse-attention's fold-head-transposes).
          if (Value x0 = headSplit(x); x0 && sameForEveryHead(cos) && sameForEveryHead(sin))
            y = b.create<ox::TransposeOp>(loc, yt, node(x0, headsLast(ox, cos), headsLast(ox, sin)),
                                          b.getDenseI64ArrayAttr({0, 2, 1, 3}))
                    .getResult();
          else
            y = node(x, cos, sin);
          add.getResult().replaceAllUsesWith(y);
          octet::eraseWithUnread({add}); // with the Muls, the Concat, the Neg, the Slices; parameters stay
          return true;
        }
      }
    }
    return false;
  }

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      SmallVector<ox::AddOp> adds(f.getOps<ox::AddOp>());
      for (ox::AddOp a : adds)
        tryFuse(a);
    });
  }
};

} // namespace
