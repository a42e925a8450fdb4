//===- ONNXTypedOps.cpp - The importer's typed-op table and result types ---===//
#include "ONNXTypedOps.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace octet::detail {

const llvm::StringMap<TypedOpInfo> &typedOps() {
  static const llvm::StringMap<TypedOpInfo> table = [] {
    llvm::StringMap<TypedOpInfo> t;
    for (const char *u : {"Neg", "Abs", "Sqrt", "Reciprocal", "Tanh", "Sigmoid", "Exp", "Log",
                          "Relu"})
      t[u] = {6, 1, 1};
    t["Erf"] = {9, 1, 1};
    t["Sin"] = {7, 1, 1};
    t["Cos"] = {7, 1, 1};
    t["Identity"] = {1, 1, 1};
    t["Not"] = {1, 1, 1};
    t["Gelu"] = {20, 1, 1};
    for (const char *b : {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "And",
                          "Or"})
      t[b] = {7, 2, 1};
    t["LessOrEqual"] = {12, 2, 1};
    t["GreaterOrEqual"] = {12, 2, 1};
    t["Max"] = {8, -1, 1};
    t["Min"] = {8, -1, 1};
    t["Where"] = {9, 3, 1};
    t["Clip"] = {11, 3, 1};
    t["Cast"] = {6, 1, 1};
    t["MatMul"] = {1, 2, 1};
    t["Gemm"] = {11, 3, 1};
    t["LayerNormalization"] = {17, 3, 3};
    t["RMSNormalization"] = {23, 2, 1};
    t["Softmax"] = {13, 1, 1};
    t["LogSoftmax"] = {13, 1, 1};
    t["SoftmaxCrossEntropyLoss"] = {12, 3, 2};
    t["ReduceMean"] = {18, 2, 1};
    t["ReduceMax"] = {18, 2, 1};
    t["ReduceSum"] = {13, 2, 1};
    t["Reshape"] = {5, 2, 1};
    t["Transpose"] = {1, 1, 1};
    t["Concat"] = {4, -1, 1};
    t["Split"] = {13, 2, -1};
    t["Slice"] = {10, 5, 1};
    t["Gather"] = {1, 2, 1};
    t["GatherElements"] = {11, 2, 1};
    t["Unsqueeze"] = {13, 2, 1};
    t["Squeeze"] = {13, 2, 1};
    t["Expand"] = {8, 2, 1};
    t["Shape"] = {1, 1, 1};
    t["Constant"] = {1, 0, 1};
    t["ConstantOfShape"] = {9, 1, 1};
    t["Range"] = {11, 3, 1};
    t["Trilu"] = {14, 2, 1};
    t["Dropout"] = {12, 3, 2};
    t["QuantizeLinear"] = {10, 3, 1};
    t["DequantizeLinear"] = {10, 3, 1};
    return t;
  }();
  return table;
}

std::optional<SmallVector<int64_t>> squeezedShape(ArrayRef<int64_t> in, ArrayRef<int64_t> axes, bool unsqueeze) {
  const int64_t rank = int64_t(in.size()), outRank = unsqueeze ? rank + int64_t(axes.size()) : rank;
  SmallVector<bool> at(size_t(outRank), false);
  for (int64_t a : axes) {
    if (a < 0)
      a += outRank;
    if (a < 0 || a >= outRank || at[size_t(a)] || (!unsqueeze && in[size_t(a)] != 1))
      return std::nullopt;
    at[size_t(a)] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0, k = 0; d < outRank; ++d)
    if (unsqueeze)
      shape.push_back(at[size_t(d)] ? 1 : in[size_t(k++)]);
    else if (!(axes.empty() ? in[size_t(d)] == 1 : at[size_t(d)]))
      shape.push_back(in[size_t(d)]);
  return shape;
}

SmallVector<int64_t> sliceIndices(int64_t n, int64_t start, int64_t end, int64_t step) {
  auto clampIndex = [&](int64_t v) {
    if (v < 0)
      v += n;
    return step > 0 ? std::clamp<int64_t>(v, 0, n) : std::clamp<int64_t>(v, -1, n - 1);
  };
  SmallVector<int64_t> picked;
  for (int64_t k = clampIndex(start), e = clampIndex(end); step > 0 ? k < e : k > e; k += step) {
    picked.push_back(k);
    if (step > 0 ? e - k - step <= 0 : k - e + step <= 0) // the next index would pass the end (no overflow)
      break;
  }
  return picked;
}

Type inferResultType(MLIRContext *ctx, llvm::StringRef opType, ArrayRef<Value> operands,
                     ArrayRef<NamedAttribute> attrs, unsigned index) {
  auto attr = [&](llvm::StringRef name) -> Attribute {
    for (const NamedAttribute &a : attrs)
      if (a.getName() == name)
        return a.getValue();
    return {};
  };
  auto known = [](Value v) -> ShapedType {
    if (!v)
      return {};
    auto t = v.getType().dyn_cast<TensorType>();
    return t && !t.getElementType().isa<ox::UnknownType>() ? t : ShapedType();
  };
  auto like = [](ShapedType t, Type elt) -> Type {
    if (t.hasRank())
      return RankedTensorType::get(t.getShape(), elt);
    return UnrankedTensorType::get(elt);
  };
  /// Values of a 1-D int64 constant operand (an ONNX Constant or initializer).
  auto constInts = [](Value v, SmallVectorImpl<int64_t> &out) -> bool {
    ElementsAttr e;
    if (auto c = v.getDefiningOp<ox::GenericNodeOp>(); c && c.getOpType() == "Constant")
      e = c.getAttrs().getAs<ElementsAttr>("value");
    else if (auto c = v.getDefiningOp<ox::ConstantOp>()) {
      if (auto a = c.getValueIntsAttr()) { // value_ints / value_int: no ElementsAttr to read
        out.append(a.asArrayRef().begin(), a.asArrayRef().end());
        return true;
      }
      if (auto a = c.getValueIntAttr()) {
        out.push_back(a.getInt());
        return true;
      }
      e = c.getValue() ? *c.getValue() : ElementsAttr();
    }
    else if (auto init = v.getDefiningOp<ox::InitializerOp>())
      e = init.getValue();
    auto dense = e ? e.dyn_cast<DenseIntElementsAttr>() : DenseIntElementsAttr();
    if (!dense)
      return false;
    for (const APInt &x : dense.getValues<APInt>())
      out.push_back(x.getSExtValue());
    return true;
  };
  // Split (opset 13+: the sizes a constant operand): result `index` of x's shape with its part of
  // the axis.
  if (opType == "Split" && operands.size() == 2 && known(operands[0]) && known(operands[0]).hasRank()) {
    ShapedType xs = known(operands[0]);
    SmallVector<int64_t> sizes;
    auto a = attr("axis").dyn_cast_or_null<IntegerAttr>();
    int64_t r = xs.getRank(), axis = a ? a.getInt() : 0;
    if (!constInts(operands[1], sizes) || index >= sizes.size() || axis < -r || axis >= r)
      return {};
    SmallVector<int64_t> shape(xs.getShape().begin(), xs.getShape().end());
    shape[size_t(axis < 0 ? axis + r : axis)] = sizes[index];
    return RankedTensorType::get(shape, xs.getElementType());
  }
  if (index != 0)
    return {};
  // ONNX Attention (opset 23): Y has Q's batch, heads and queries and V's head size, in Q's layout
  // (4-D [B, H, Tq, dv]; 3-D [B, Tq, H * dv] with q_num_heads and kv_num_heads).
  if (opType == "Attention" && operands.size() >= 3 && known(operands[0]) && known(operands[2]) &&
      known(operands[0]).hasRank() && known(operands[2]).hasRank()) {
    ShapedType q = known(operands[0]), v = known(operands[2]);
    if (q.getRank() == 4 && v.getRank() == 4)
      return RankedTensorType::get({q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
                                   q.getElementType());
    auto qh = attr("q_num_heads").dyn_cast_or_null<IntegerAttr>(), kh = attr("kv_num_heads").dyn_cast_or_null<IntegerAttr>();
    if (q.getRank() == 3 && v.getRank() == 3 && qh && kh && kh.getInt() > 0 && !v.isDynamicDim(2) &&
        v.getDimSize(2) % kh.getInt() == 0)
      return RankedTensorType::get({q.getDimSize(0), q.getDimSize(1), qh.getInt() * (v.getDimSize(2) / kh.getInt())},
                                   q.getElementType());
    return {};
  }
  if (opType == "Constant") {
    if (auto e = attr("value").dyn_cast_or_null<ElementsAttr>())
      return e.getType();
    Builder b(ctx);
    if (attr("value_float"))
      return RankedTensorType::get({}, b.getF32Type());
    if (attr("value_int"))
      return RankedTensorType::get({}, b.getI64Type());
    if (auto a = attr("value_ints").dyn_cast_or_null<DenseI64ArrayAttr>())
      return RankedTensorType::get({a.size()}, b.getI64Type());
    if (auto a = attr("value_floats").dyn_cast_or_null<DenseF32ArrayAttr>())
      return RankedTensorType::get({a.size()}, b.getF32Type());
    return {};
  }
  if (operands.empty())
    return {};
  ShapedType x = known(operands[0]);
  if (opType == "Cast") {
    auto to = attr("to").dyn_cast_or_null<IntegerAttr>();
    Type elt = to ? ox::getElementTypeForOnnxCode(ctx, to.getInt()) : Type();
    return x && elt ? like(x, elt) : Type();
  }
  if (opType == "CastLike") {
    ShapedType t = operands.size() > 1 ? known(operands[1]) : ShapedType();
    return x && t ? like(x, t.getElementType()) : Type();
  }
  if (!x)
    return {};
  static const llvm::StringSet<> sameType = {
      "Identity", "Neg", "Abs", "Sqrt", "Reciprocal", "Tanh", "Sigmoid", "Erf", "Exp", "Log",
      "Sin", "Cos", "Relu", "Gelu", "Softmax", "LogSoftmax", "Not", "Dropout", "Trilu",
      "LayerNormalization", // its Y (its other results: index != 0 above)
      "RMSNormalization"};
  if (sameType.contains(opType))
    return x;
  if (opType == "Expand") { // the broadcast of x's shape and a constant target shape
    SmallVector<int64_t> target, shape;
    if (operands.size() != 2 || !x.hasRank() || !constInts(operands[1], target) ||
        !OpTrait::util::getBroadcastedShape(x.getShape(), target, shape))
      return {};
    return RankedTensorType::get(shape, x.getElementType());
  }
  if ((opType == "Unsqueeze" || opType == "Squeeze") && x.hasRank()) { // axes from a constant (opset 13+)
    SmallVector<int64_t> axes;
    if (operands.size() < 2 || !constInts(operands[1], axes))
      return {};
    auto shape = squeezedShape(x.getShape(), axes, opType == "Unsqueeze");
    return shape ? RankedTensorType::get(*shape, x.getElementType()) : Type();
  }
  if (opType == "IsNaN" || opType == "IsInf")
    return like(x, IntegerType::get(ctx, 1));
  // Gather: data's axes before `axis`, the indices' shape, data's axes after it (the TorchScript
  // exporter's embedding lookups carry no declared shape).
  if (opType == "Gather" && operands.size() == 2) {
    ShapedType idx = known(operands[1]);
    auto a = attr("axis").dyn_cast_or_null<IntegerAttr>();
    int64_t axis = a ? a.getInt() : 0, r = x.hasRank() ? x.getRank() : 0;
    if (!x.hasRank() || !idx || !idx.hasRank() || axis < -r || axis >= r)
      return {};
    axis = axis < 0 ? axis + r : axis;
    SmallVector<int64_t> shape(x.getShape().begin(), x.getShape().begin() + axis);
    shape.append(idx.getShape().begin(), idx.getShape().end());
    shape.append(x.getShape().begin() + axis + 1, x.getShape().end());
    return RankedTensorType::get(shape, x.getElementType());
  }
  // Slice (opset 10+: starts, ends, axes, steps constant operands): each sliced axis's count.
  if (opType == "Slice" && operands.size() >= 3 && x.hasRank()) {
    SmallVector<int64_t> starts, ends, axes, steps;
    int64_t r = x.getRank();
    if (!constInts(operands[1], starts) || !constInts(operands[2], ends) || starts.size() != ends.size())
      return {};
    if (operands.size() > 3 && operands[3] && !operands[3].getType().isa<NoneType>()) {
      if (!constInts(operands[3], axes))
        return {};
    } else {
      for (int64_t i = 0; i < int64_t(starts.size()); ++i)
        axes.push_back(i);
    }
    if (operands.size() > 4 && operands[4] && !operands[4].getType().isa<NoneType>() && !constInts(operands[4], steps))
      return {};
    if (axes.size() != starts.size() || (!steps.empty() && steps.size() != starts.size()))
      return {};
    SmallVector<int64_t> shape(x.getShape().begin(), x.getShape().end());
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i] < 0 ? axes[i] + r : axes[i], step = steps.empty() ? 1 : steps[i];
      if (a < 0 || a >= r || step == 0 || ShapedType::isDynamic(shape[size_t(a)]))
        return {};
      shape[size_t(a)] = int64_t(sliceIndices(shape[size_t(a)], starts[i], ends[i], step).size());
    }
    return RankedTensorType::get(shape, x.getElementType());
  }
  // Pad (opset 11+: the pads a constant operand, all axes): each axis grows by its two pads.
  if (opType == "Pad" && operands.size() >= 2 && x.hasStaticShape() && (operands.size() < 4 || !operands[3] ||
                                                                       operands[3].getType().isa<NoneType>())) {
    SmallVector<int64_t> pads;
    int64_t r = x.getRank();
    if (!constInts(operands[1], pads) || int64_t(pads.size()) != 2 * r)
      return {};
    SmallVector<int64_t> shape(x.getShape().begin(), x.getShape().end());
    for (int64_t i = 0; i < r; ++i)
      if ((shape[size_t(i)] += pads[size_t(i)] + pads[size_t(i + r)]) < 0)
        return {};
    return RankedTensorType::get(shape, x.getElementType());
  }
  // Gemm: [M, K] x [K, N] (either transposed) -> [M, N].
  if (opType == "Gemm" && operands.size() >= 2) {
    ShapedType bt = known(operands[1]);
    auto flag = [&](const char *n) {
      auto f = attr(n).dyn_cast_or_null<IntegerAttr>();
      return f && f.getInt() != 0;
    };
    if (!x.hasRank() || !bt || !bt.hasRank() || x.getRank() != 2 || bt.getRank() != 2)
      return {};
    int64_t m = x.getDimSize(flag("transA") ? 1 : 0), n = bt.getDimSize(flag("transB") ? 0 : 1);
    return RankedTensorType::get({m, n}, x.getElementType());
  }
  static const llvm::StringSet<> broadcast = {"Add", "Sub", "Mul", "Div", "Pow",
                                              "Equal", "Less", "LessOrEqual", "Greater",
                                              "GreaterOrEqual", "And", "Or", "Where",
                                              "Max", "Min", "Sum", "Mean"}; // the last four variadic
  if (broadcast.contains(opType)) {
    SmallVector<int64_t> shape;
    bool ranked = true, first = true;
    for (Value v : operands) {
      ShapedType t = known(v);
      if (!t || !t.hasRank()) {
        ranked = false;
        break;
      }
      SmallVector<int64_t> out;
      if (first) {
        shape.assign(t.getShape().begin(), t.getShape().end());
        first = false;
      } else if (OpTrait::util::getBroadcastedShape(shape, t.getShape(), out)) {
        shape = out;
      } else {
        return {};
      }
    }
    Type elt = opType == "Where" ? (known(operands[1]) ? known(operands[1]).getElementType() : Type())
                                 : x.getElementType();
    static const llvm::StringSet<> compare = {"Equal", "Less", "LessOrEqual", "Greater",
                                              "GreaterOrEqual"};
    if (compare.contains(opType))
      elt = IntegerType::get(ctx, 1);
    if (!elt)
      return {};
    return ranked ? Type(RankedTensorType::get(shape, elt)) : Type(UnrankedTensorType::get(elt));
  }
  if (opType == "Transpose") {
    if (!x.hasRank())
      return x;
    SmallVector<int64_t> perm;
    if (auto p = attr("perm").dyn_cast_or_null<DenseI64ArrayAttr>())
      perm.assign(p.asArrayRef().begin(), p.asArrayRef().end());
    else
      for (int64_t i = x.getRank() - 1; i >= 0; --i)
        perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != x.getRank())
      return {};
    SmallVector<int64_t> shape;
    for (int64_t p : perm) {
      if (p < 0 || p >= x.getRank())
        return {};
      shape.push_back(x.getDimSize(p));
    }
    return RankedTensorType::get(shape, x.getElementType());
  }
  if (opType == "MatMul") {
    ShapedType y = operands.size() > 1 ? known(operands[1]) : ShapedType();
    if (!y || !x.hasRank() || !y.hasRank() || x.getRank() < 2 || y.getRank() < 2)
      return y ? Type(UnrankedTensorType::get(x.getElementType())) : Type();
    SmallVector<int64_t> batch;
    if (!OpTrait::util::getBroadcastedShape(x.getShape().drop_back(2), y.getShape().drop_back(2), batch))
      return {};
    batch.push_back(x.getDimSize(x.getRank() - 2));
    batch.push_back(y.getDimSize(y.getRank() - 1));
    return RankedTensorType::get(batch, x.getElementType());
  }
  if (opType == "Concat") {
    auto axisAttr = attr("axis").dyn_cast_or_null<IntegerAttr>();
    if (!axisAttr || !x.hasRank())
      return UnrankedTensorType::get(x.getElementType());
    int64_t rank = x.getRank(), axis = axisAttr.getInt();
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis >= rank)
      return {};
    SmallVector<int64_t> shape(x.getShape().begin(), x.getShape().end());
    shape[axis] = 0;
    for (Value v : operands) {
      ShapedType t = known(v);
      if (!t || !t.hasRank() || t.getRank() != rank)
        return UnrankedTensorType::get(x.getElementType());
      int64_t d = t.getDimSize(axis);
      shape[axis] = ShapedType::isDynamic(d) || ShapedType::isDynamic(shape[axis]) ? ShapedType::kDynamic
                                                                                   : shape[axis] + d;
    }
    return RankedTensorType::get(shape, x.getElementType());
  }
  if (opType == "Reshape") {
    SmallVector<int64_t> target;
    if (operands.size() < 2 || !constInts(operands[1], target)) {
      ShapedType s = operands.size() > 1 ? known(operands[1]) : ShapedType();
      if (s && s.hasRank() && s.getRank() == 1 && !s.isDynamicDim(0))
        return RankedTensorType::get(SmallVector<int64_t>(s.getDimSize(0), ShapedType::kDynamic),
                                     x.getElementType());
      return UnrankedTensorType::get(x.getElementType());
    }
    auto allowzero = attr("allowzero").dyn_cast_or_null<IntegerAttr>();
    int64_t known = 1, infer = -1;
    for (auto [i, d] : llvm::enumerate(target)) {
      if (d == 0 && !(allowzero && allowzero.getInt())) {
        d = x.hasRank() && static_cast<int64_t>(i) < x.getRank() ? x.getDimSize(i) : ShapedType::kDynamic;
        target[i] = d;
      }
      if (d == -1 && infer >= 0)
        return {}; // two dimensions to infer: not a valid Reshape (the import check names the node)
      if (d == -1)
        infer = i;
      else if (ShapedType::isDynamic(d))
        known = -1;
      else if (d < -1)
        return {}; // a negative dimension other than -1
      else if (known >= 0)
        known *= d;
    }
    if (infer >= 0) {
      int64_t total = x.hasStaticShape() ? x.getNumElements() : -1;
      target[infer] = total >= 0 && known > 0 ? total / known : ShapedType::kDynamic;
    }
    return RankedTensorType::get(target, x.getElementType());
  }
  if (opType == "ReduceMean" || opType == "ReduceSum" || opType == "ReduceMax") {
    auto keep = attr("keepdims").dyn_cast_or_null<IntegerAttr>();
    bool keepdims = !keep || keep.getInt() != 0;
    SmallVector<int64_t> axes;
    bool haveAxes = operands.size() > 1 && !operands[1].getType().isa<NoneType>();
    if (!x.hasRank() || (haveAxes && !constInts(operands[1], axes)))
      return UnrankedTensorType::get(x.getElementType());
    if (!haveAxes) { // all axes (noop_with_empty_axes aside)
      auto noop = attr("noop_with_empty_axes").dyn_cast_or_null<IntegerAttr>();
      if (noop && noop.getInt())
        return x;
      for (int64_t i = 0; i < x.getRank(); ++i)
        axes.push_back(i);
    }
    SmallVector<bool> reduced(x.getRank(), false);
    for (int64_t a : axes) {
      if (a < 0)
        a += x.getRank();
      if (a < 0 || a >= x.getRank())
        return {};
      reduced[a] = true;
    }
    SmallVector<int64_t> shape;
    for (int64_t i = 0; i < x.getRank(); ++i)
      if (!reduced[i])
        shape.push_back(x.getDimSize(i));
      else if (keepdims)
        shape.push_back(1);
    return RankedTensorType::get(shape, x.getElementType());
  }
  if (opType == "QuantizeLinear") {
    ShapedType zp = operands.size() > 2 ? known(operands[2]) : ShapedType();
    if (zp)
      return like(x, zp.getElementType());
    bool noZeroPoint = operands.size() < 3 || operands[2].getType().isa<NoneType>();
    return noZeroPoint && !attr("output_dtype") ? like(x, IntegerType::get(ctx, 8, IntegerType::Unsigned))
                                                : Type();
  }
  if (opType == "DequantizeLinear") {
    ShapedType scale = operands.size() > 1 ? known(operands[1]) : ShapedType();
    return scale ? like(x, scale.getElementType()) : Type();
  }
  if (opType == "SplitToSequence")
    return ox::SeqType::get(ctx, UnrankedTensorType::get(x.getElementType()));
  return {};
}

} // namespace octet::detail
