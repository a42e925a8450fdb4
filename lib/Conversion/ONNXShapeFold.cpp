//===- ONNXShapeFold.cpp - Shape computations folded at import -------------===//
//
// Exporters compute shapes at run time: the dynamo exporter's scaled_dot_product_attention takes
// the head size as Shape -> Gather -> CastLike -> Sqrt, and the causal mask's size as Shape ->
// Slice -> Concat -> Expand. Where the shapes are static, these are constants, and the ops after
// them (Expand, Reshape, the scale's Div) get static types. foldNode evaluates such a node now: a
// Shape or Size of an operand whose shape is static, or an op over small constant operands (an
// ONNX Constant, or an integer initializer: never a float initializer, which training may
// change), whose result has at most kMaxFoldElements values. Float arithmetic is float32's (each
// op computed in double and rounded once: exact for + - * / and sqrt); integer Div folds only when
// exact. Anything else stays an op.
//
//===----------------------------------------------------------------------===//
#include "ONNXTypedOps.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Dialect/Traits.h"

#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace octet::detail {
namespace {

constexpr int64_t kMaxFoldElements = 4096;

/// A small tensor's values: floats as double (rounded to the element type after every op), integers
/// and booleans as int64.
struct Small {
  SmallVector<int64_t> shape;
  Type elt;
  std::vector<double> f;
  std::vector<int64_t> i;
  bool isFloat() const { return elt.isa<FloatType>(); }
  int64_t size() const { return isFloat() ? int64_t(f.size()) : int64_t(i.size()); }
  double get(int64_t k) const { return isFloat() ? f[size_t(k)] : double(i[size_t(k)]); }
};

/// The element count, INT64_MAX where it overflows and -1 for a negative (dynamic) dim: either is
/// past kMaxFoldElements or fails the size checks, so nothing that size is folded.
int64_t numel(ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0)
      return -1;
    if (__builtin_mul_overflow(n, d, &n))
      return INT64_MAX;
  }
  return n;
}

/// The value of a Constant, or of an integer (or boolean) initializer.
std::optional<Small> constant(Value v) {
  if (!v)
    return std::nullopt;
  ElementsAttr e;
  if (auto c = v.getDefiningOp<ox::ConstantOp>()) {
    if (c.getValue())
      e = *c.getValue();
    else if (auto a = c.getValueIntsAttr())
      e = DenseIntElementsAttr::get(RankedTensorType::get({int64_t(a.size())}, IntegerType::get(v.getContext(), 64)),
                                    a.asArrayRef());
    else if (auto a = c.getValueIntAttr())
      e = DenseIntElementsAttr::get(RankedTensorType::get({}, IntegerType::get(v.getContext(), 64)),
                                    ArrayRef<int64_t>{a.getInt()});
    else if (auto a = c.getValueFloatAttr())
      e = DenseFPElementsAttr::get(RankedTensorType::get({}, Float32Type::get(v.getContext())),
                                   ArrayRef<float>{float(a.getValueAsDouble())});
  } else if (auto init = v.getDefiningOp<ox::InitializerOp>()) {
    if (init.getValue().getElementType().isa<IntegerType>())
      e = init.getValue();
  }
  auto d = e ? e.dyn_cast<DenseElementsAttr>() : DenseElementsAttr();
  if (!d || !d.getType().hasStaticShape() || d.getNumElements() > kMaxFoldElements)
    return std::nullopt;
  Small s;
  s.shape.assign(d.getType().getShape().begin(), d.getType().getShape().end());
  s.elt = d.getElementType();
  if (auto ft = s.elt.dyn_cast<FloatType>()) {
    for (APFloat x : d.getValues<APFloat>()) {
      bool lost = false;
      x.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      s.f.push_back(x.convertToDouble());
    }
  } else if (auto it = s.elt.dyn_cast<IntegerType>()) {
    for (const APInt &x : d.getValues<APInt>())
      s.i.push_back(it.getWidth() == 1 || it.isUnsigned() ? int64_t(x.getZExtValue()) : x.getSExtValue());
  } else {
    return std::nullopt;
  }
  return s;
}

/// Rounds a double to the element type (float32: once; integers: truncation as a Cast does).
double roundTo(Type elt, double v) {
  if (auto ft = elt.dyn_cast<FloatType>()) {
    APFloat x(v);
    bool lost = false;
    x.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    x.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
    return x.convertToDouble();
  }
  return v;
}

DenseElementsAttr toAttr(const Small &s) {
  auto type = RankedTensorType::get(s.shape, s.elt);
  if (auto ft = s.elt.dyn_cast<FloatType>()) {
    SmallVector<APFloat> vals;
    for (double v : s.f) {
      APFloat x(v);
      bool lost = false;
      x.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(x);
    }
    return DenseElementsAttr::get(type, vals);
  }
  auto it = s.elt.cast<IntegerType>();
  SmallVector<APInt> vals;
  for (int64_t v : s.i)
    vals.push_back(APInt(it.getWidth(), uint64_t(v), !it.isUnsigned() && it.getWidth() > 1));
  return DenseElementsAttr::get(type, vals);
}

Small make(ArrayRef<int64_t> shape, Type elt) {
  Small s;
  s.shape.assign(shape.begin(), shape.end());
  s.elt = elt;
  return s;
}

void push(Small &s, double v) {
  if (s.isFloat())
    s.f.push_back(roundTo(s.elt, v));
  else if (s.elt.isInteger(1))
    s.i.push_back(v != 0);
  else
    s.i.push_back(int64_t(v));
}

/// Appends element k of `src` to `r` of the same element type: integers copied exactly.
void copyElem(Small &r, const Small &src, int64_t k) {
  if (r.isFloat())
    r.f.push_back(src.get(k));
  else
    r.i.push_back(src.i[size_t(k)]);
}

/// An integer converted to `elt`'s range, or nullopt where it does not fit (no folding then).
std::optional<int64_t> fitInt(Type elt, double v) {
  auto it = elt.cast<IntegerType>();
  if (it.getWidth() == 1)
    return int64_t(v != 0);
  double lo = it.isUnsigned() ? 0.0 : -std::ldexp(1.0, int(it.getWidth()) - 1);
  double hi = std::ldexp(1.0, int(it.getWidth()) - (it.isUnsigned() ? 0 : 1));
  if (!std::isfinite(v) || std::trunc(v) < lo || std::trunc(v) >= hi)
    return std::nullopt;
  return int64_t(std::trunc(v));
}

/// The flat index into an operand of shape `in` that output index `k` of shape `out` broadcasts from.
int64_t broadcastIndex(int64_t k, ArrayRef<int64_t> out, ArrayRef<int64_t> in) {
  int64_t idx = 0, stride = 1;
  for (int64_t d = int64_t(out.size()) - 1, e = int64_t(in.size()) - 1; d >= 0; --d, --e) {
    int64_t c = k % out[size_t(d)];
    k /= out[size_t(d)];
    if (e >= 0) {
      if (in[size_t(e)] != 1)
        idx += c * stride;
      stride *= in[size_t(e)];
    }
  }
  return idx;
}

Attribute attrOf(ArrayRef<NamedAttribute> attrs, StringRef name) {
  for (const NamedAttribute &a : attrs)
    if (a.getName() == name)
      return a.getValue();
  return {};
}

int64_t intAttr(ArrayRef<NamedAttribute> attrs, StringRef name, int64_t dflt) {
  auto a = attrOf(attrs, name).dyn_cast_or_null<IntegerAttr>();
  return a ? a.getInt() : dflt;
}

/// Axes from an attribute (older opsets) or else the constant operand `k`.
std::optional<SmallVector<int64_t>> axesOf(ArrayRef<NamedAttribute> attrs, ArrayRef<Value> operands, size_t k,
                                           StringRef name = "axes") {
  if (auto a = attrOf(attrs, name).dyn_cast_or_null<DenseI64ArrayAttr>())
    return SmallVector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end());
  if (operands.size() <= k || !operands[k] || operands[k].getType().isa<NoneType>())
    return SmallVector<int64_t>();
  auto c = constant(operands[k]);
  if (!c || c->isFloat())
    return std::nullopt;
  return SmallVector<int64_t>(c->i.begin(), c->i.end());
}

std::optional<Small> elementwise(StringRef op, ArrayRef<Small> in, MLIRContext *ctx) {
  SmallVector<int64_t> shape = in[0].shape;
  for (size_t k = 1; k < in.size(); ++k) {
    SmallVector<int64_t> out;
    if (!OpTrait::util::getBroadcastedShape(shape, in[k].shape, out))
      return std::nullopt;
    shape = out;
  }
  int64_t n = numel(shape);
  if (n < 0 || n > kMaxFoldElements)
    return std::nullopt;
  static const llvm::StringSet<> compare = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                                            "Not", "And", "Or"};
  Type elt = compare.contains(op) ? Type(IntegerType::get(ctx, 1)) : (op == "Where" ? in[1].elt : in[0].elt);
  Small r = make(shape, elt);
  bool isInt = !in[0].isFloat();
  // Integers go through doubles: only where every value is exact there (|v| <= 2^53).
  const double exact = std::ldexp(1.0, 53);
  for (const Small &t : in)
    if (!t.isFloat() && llvm::any_of(t.i, [&](int64_t v) { return std::fabs(double(v)) > exact; }))
      return std::nullopt;
  for (int64_t k = 0; k < n; ++k) {
    if (op == "Where") { // a copy of the chosen operand's element
      const Small &pick = in[0].get(broadcastIndex(k, shape, in[0].shape)) != 0 ? in[1] : in[2];
      copyElem(r, pick, broadcastIndex(k, shape, pick.shape));
      continue;
    }
    double a = in[0].get(broadcastIndex(k, shape, in[0].shape));
    double b = in.size() > 1 ? in[1].get(broadcastIndex(k, shape, in[1].shape)) : 0;
    double v;
    if (op == "Add") v = a + b;
    else if (op == "Sub") v = a - b;
    else if (op == "Mul") v = a * b;
    else if (op == "Div") {
      // Integer division that rounds: exact where truncation and flooring agree (non-negative
      // operands: GPT-NeoX's head width, 3 d / 3), else left to the op.
      if (isInt && (b == 0 || (std::fmod(a, b) != 0 && (a < 0 || b < 0))))
        return std::nullopt;
      v = isInt ? std::floor(a / b) : a / b;
    } else if (op == "Max") v = std::fmax(a, b);
    else if (op == "Min") v = std::fmin(a, b);
    else if (op == "Neg") v = -a;
    else if (op == "Abs") v = std::fabs(a);
    else if (op == "Sqrt") v = std::sqrt(a);
    else if (op == "Reciprocal") v = 1.0 / a;
    else if (op == "Equal") v = a == b;
    else if (op == "Less") v = a < b;
    else if (op == "LessOrEqual") v = a <= b;
    else if (op == "Greater") v = a > b;
    else if (op == "GreaterOrEqual") v = a >= b;
    else if (op == "Not") v = a == 0;
    else if (op == "And") v = a != 0 && b != 0;
    else if (op == "Or") v = a != 0 || b != 0;
    else return std::nullopt;
    if (!r.isFloat() && !r.elt.isInteger(1) && !(std::fabs(v) <= exact))
      return std::nullopt;
    push(r, v);
  }
  return r;
}

/// A Cast's values: floats rounded to the target, integers copied where they fit, floats to
/// integers truncated where they fit (else no folding: the op keeps its own rules).
std::optional<Small> convert(const Small &x, Type elt) {
  Small r = make(x.shape, elt);
  for (int64_t k = 0; k < x.size(); ++k) {
    if (r.isFloat()) {
      push(r, x.get(k));
      continue;
    }
    if (!x.isFloat() && elt.cast<IntegerType>().getWidth() == 64 && !elt.cast<IntegerType>().isUnsigned()) {
      r.i.push_back(x.i[size_t(k)]);
      continue;
    }
    auto v = fitInt(elt, x.get(k));
    if (!v)
      return std::nullopt;
    r.i.push_back(*v);
  }
  return r;
}

std::optional<Small> fold(MLIRContext *ctx, StringRef op, ArrayRef<Value> operands, ArrayRef<NamedAttribute> attrs) {
  Type i64 = IntegerType::get(ctx, 64);
  // An attribute of the wrong kind is the typed op's to refuse (its verifier names the node).
  for (const NamedAttribute &a : attrs) {
    StringRef n = a.getName().getValue();
    bool isInt = n == "axis" || n == "start" || n == "end" || n == "to" || n == "allowzero" || n == "upper";
    bool isInts = n == "axes" || n == "starts" || n == "ends" || n == "steps";
    if ((isInt && !a.getValue().isa<IntegerAttr>()) || (isInts && !a.getValue().isa<DenseI64ArrayAttr>()) ||
        (n == "value" && !a.getValue().isa<DenseElementsAttr>()))
      return std::nullopt;
  }
  if (op == "Shape" || op == "Size") {
    auto t = operands.empty() ? RankedTensorType() : operands[0].getType().dyn_cast<RankedTensorType>();
    if (!t || !t.hasStaticShape())
      return std::nullopt;
    if (op == "Size") {
      Small r = make({}, i64);
      r.i.push_back(t.getNumElements());
      return r;
    }
    int64_t rank = t.getRank(), start = intAttr(attrs, "start", 0), end = intAttr(attrs, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    Small r = make({end - start}, i64);
    for (int64_t d = start; d < end; ++d)
      r.i.push_back(t.getDimSize(d));
    return r;
  }
  if (op == "CastLike") { // the target is any tensor's element type, the value a constant
    auto c = operands.size() == 2 ? constant(operands[0]) : std::nullopt;
    auto t = operands.size() == 2 ? operands[1].getType().dyn_cast<TensorType>() : TensorType();
    if (!c || !t || !(t.getElementType().isa<FloatType>() || t.getElementType().isa<IntegerType>()))
      return std::nullopt;
    return convert(*c, t.getElementType());
  }
  // Every other op needs its operands constant (up to the first absent optional one).
  SmallVector<Small> in;
  for (Value v : operands) {
    if (!v || v.getType().isa<NoneType>())
      break;
    auto c = constant(v);
    if (!c)
      return std::nullopt;
    in.push_back(*c);
  }
  if (in.empty())
    return std::nullopt;
  static const llvm::StringSet<> unary = {"Neg", "Abs", "Sqrt", "Reciprocal", "Not"};
  static const llvm::StringSet<> elementwiseOps = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Neg", "Abs", "Sqrt",
                                                   "Reciprocal", "Equal", "Less", "LessOrEqual", "Greater",
                                                   "GreaterOrEqual", "Not", "And", "Or", "Where"};
  if ((op == "Max" || op == "Min" || op == "Sum" || op == "Mean") && in.size() == 1)
    return in[0]; // of one input: that input
  if (elementwiseOps.contains(op)) {
    size_t arity = op == "Where" ? 3 : unary.contains(op) ? 1 : 2;
    if (in.size() != arity)
      return std::nullopt;
    return elementwise(op, in, ctx);
  }
  const Small &x = in[0];
  if (op == "Identity")
    return x;
  if (op == "Cast") {
    auto to = attrOf(attrs, "to").dyn_cast_or_null<IntegerAttr>();
    Type elt = to ? ox::getElementTypeForOnnxCode(ctx, to.getInt()) : Type();
    if (!elt || !(elt.isa<FloatType>() || elt.isa<IntegerType>()))
      return std::nullopt;
    return convert(x, elt);
  }
  if (op == "Gather") {
    if (in.size() != 2 || in[1].isFloat())
      return std::nullopt;
    int64_t rank = int64_t(x.shape.size()), axis = intAttr(attrs, "axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank)
      return std::nullopt;
    SmallVector<int64_t> shape(x.shape.begin(), x.shape.begin() + axis);
    shape.append(in[1].shape.begin(), in[1].shape.end());
    shape.append(x.shape.begin() + axis + 1, x.shape.end());
    int64_t outer = numel(ArrayRef<int64_t>(x.shape).take_front(axis)), dim = x.shape[size_t(axis)];
    int64_t inner = numel(ArrayRef<int64_t>(x.shape).drop_front(axis + 1));
    if (numel(shape) < 0 || numel(shape) > kMaxFoldElements)
      return std::nullopt;
    Small r = make(shape, x.elt);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j : in[1].i) {
        if (j < 0) j += dim;
        if (j < 0 || j >= dim)
          return std::nullopt;
        for (int64_t k = 0; k < inner; ++k)
          copyElem(r, x, (o * dim + j) * inner + k);
      }
    return r;
  }
  if (op == "Concat") {
    int64_t rank = int64_t(x.shape.size()), axis = intAttr(attrs, "axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank)
      return std::nullopt;
    SmallVector<int64_t> shape = x.shape;
    shape[size_t(axis)] = 0;
    for (const Small &s : in) {
      if (s.shape.size() != x.shape.size() || s.elt != x.elt)
        return std::nullopt;
      shape[size_t(axis)] += s.shape[size_t(axis)];
    }
    if (numel(shape) < 0 || numel(shape) > kMaxFoldElements)
      return std::nullopt;
    int64_t outer = numel(ArrayRef<int64_t>(x.shape).take_front(axis));
    Small r = make(shape, x.elt);
    for (int64_t o = 0; o < outer; ++o)
      for (const Small &s : in) {
        int64_t chunk = numel(ArrayRef<int64_t>(s.shape).drop_front(axis));
        for (int64_t k = 0; k < chunk; ++k)
          copyElem(r, s, o * chunk + k);
      }
    return r;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    auto axes = axesOf(attrs, operands, 1);
    auto shape = axes ? squeezedShape(x.shape, *axes, op == "Unsqueeze") : std::nullopt;
    if (!shape)
      return std::nullopt;
    Small r = x;
    r.shape = *shape;
    return r;
  }
  if (op == "Slice") { // one axis of any rank (the TorchScript exporter reverses [2, 2] pad pairs)
    auto starts = axesOf(attrs, operands, 1, "starts"), ends = axesOf(attrs, operands, 2, "ends");
    auto axes = axesOf(attrs, operands, 3), steps = axesOf(attrs, operands, 4, "steps");
    int64_t rank = int64_t(x.shape.size());
    if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 || rank < 1)
      return std::nullopt;
    int64_t axis = axes->empty() ? 0 : (*axes)[0];
    if (axis < -rank || axis >= rank)
      return std::nullopt;
    axis = axis < 0 ? axis + rank : axis;
    int64_t n = x.shape[size_t(axis)], step = steps->empty() ? 1 : (*steps)[0], inner = 1;
    if (step == 0)
      return std::nullopt;
    for (int64_t d = axis + 1; d < rank; ++d)
      inner *= x.shape[size_t(d)];
    SmallVector<int64_t> picked = sliceIndices(n, (*starts)[0], (*ends)[0], step);
    SmallVector<int64_t> shape(x.shape.begin(), x.shape.end());
    shape[size_t(axis)] = int64_t(picked.size());
    Small r = make(shape, x.elt);
    for (int64_t o = 0; o < (n * inner ? x.size() / (n * inner) : 0); ++o)
      for (int64_t k : picked)
        for (int64_t c = 0; c < inner; ++c)
          copyElem(r, x, (o * n + k) * inner + c);
    return r;
  }
  if (op == "Reshape") {
    if (in.size() != 2 || in[1].isFloat())
      return std::nullopt;
    SmallVector<int64_t> shape(in[1].i.begin(), in[1].i.end());
    int64_t known = 1, infer = -1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 0 && intAttr(attrs, "allowzero", 0) == 0 && d < x.shape.size())
        shape[d] = x.shape[d];
      if (shape[d] == -1)
        infer = int64_t(d);
      else if (shape[d] < 0 || __builtin_mul_overflow(known, shape[d], &known))
        return std::nullopt;
    }
    if (infer >= 0 && known > 0)
      shape[size_t(infer)] = x.size() / known;
    if (numel(shape) != x.size())
      return std::nullopt;
    Small r = x;
    r.shape = shape;
    return r;
  }
  if (op == "ConstantOfShape" || op == "Expand") {
    const bool expand = op == "Expand";
    if ((expand && (in.size() != 2 || in[1].isFloat())) || (!expand && x.isFloat()))
      return std::nullopt;
    ArrayRef<int64_t> target = expand ? ArrayRef<int64_t>(in[1].i) : ArrayRef<int64_t>(x.i);
    Small fill = make({}, Float32Type::get(ctx));
    fill.f.push_back(0.0);
    if (auto v = attrOf(attrs, "value").dyn_cast_or_null<DenseElementsAttr>(); !expand && v) {
      if (v.getNumElements() != 1)
        return std::nullopt;
      fill = make({}, v.getElementType());
      if (fill.isFloat()) {
        APFloat f = *v.getValues<APFloat>().begin();
        bool lost = false;
        f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
        fill.f.push_back(f.convertToDouble());
      }
      else
        fill.i.push_back((*v.getValues<APInt>().begin()).getSExtValue());
    }
    const Small &src = expand ? x : fill;
    SmallVector<int64_t> shape;
    if (expand) {
      if (!OpTrait::util::getBroadcastedShape(src.shape, target, shape))
        return std::nullopt;
    } else {
      shape.assign(target.begin(), target.end());
    }
    if (llvm::any_of(shape, [](int64_t d) { return d < 0; }) || numel(shape) > kMaxFoldElements)
      return std::nullopt;
    Small r = make(shape, src.elt);
    for (int64_t k = 0; k < numel(shape); ++k)
      copyElem(r, src, broadcastIndex(k, shape, src.shape));
    return r;
  }
  if (op == "CumSum") { // OPT's positions: the running sum of a mask of ones along the sequence
    if (in.size() != 2 || in[1].size() != 1 || x.shape.empty())
      return std::nullopt;
    int64_t rank = int64_t(x.shape.size()), axis = int64_t(in[1].get(0));
    if (axis < -rank || axis >= rank)
      return std::nullopt;
    axis = axis < 0 ? axis + rank : axis;
    bool exclusive = intAttr(attrs, "exclusive", 0) != 0, reverse = intAttr(attrs, "reverse", 0) != 0;
    int64_t n = x.shape[size_t(axis)], inner = 1;
    for (int64_t d = axis + 1; d < rank; ++d)
      inner *= x.shape[size_t(d)];
    std::vector<double> out(size_t(x.size()));
    for (int64_t o = 0; o < x.size() / std::max<int64_t>(n * inner, 1); ++o)
      for (int64_t c = 0; c < inner; ++c) {
        double acc = 0; // in the element type: rounded after every addition, as a sequential kernel
        for (int64_t j = 0; j < n; ++j) {
          int64_t k = (o * n + (reverse ? n - 1 - j : j)) * inner + c;
          if (exclusive)
            out[size_t(k)] = acc;
          acc = roundTo(x.elt, acc + x.get(k));
          if (!exclusive)
            out[size_t(k)] = acc;
        }
      }
    Small r = make(x.shape, x.elt);
    for (double v : out)
      push(r, v);
    return r;
  }
  if (op == "Range") {
    if (in.size() != 3)
      return std::nullopt;
    double start = in[0].get(0), limit = in[1].get(0), delta = in[2].get(0);
    if (delta == 0)
      return std::nullopt;
    double count = std::ceil((limit - start) / delta);
    if (!(count <= double(kMaxFoldElements)) ||
        (!x.isFloat() && !(std::fabs(start) <= 0x1p53 && std::fabs(limit) <= 0x1p53 && std::fabs(delta) <= 0x1p53)))
      return std::nullopt;
    int64_t n = std::max<int64_t>(int64_t(count), 0);
    Small r = make({n}, x.elt);
    for (int64_t k = 0; k < n; ++k)
      push(r, start + double(k) * delta);
    return r;
  }
  return std::nullopt;
}

} // namespace

DenseElementsAttr foldNode(MLIRContext *ctx, StringRef opType, ArrayRef<Value> operands,
                           ArrayRef<NamedAttribute> attrs) {
  auto r = fold(ctx, opType, operands, attrs);
  if (!r || r->size() != numel(r->shape))
    return {};
  return toAttr(*r);
}

Value rewriteAtImport(OpBuilder &builder, Location loc, StringRef opType, SmallVectorImpl<Value> &operands,
                      ArrayRef<NamedAttribute> attrs, bool fold) {
  auto constantOp = [&](DenseElementsAttr value) {
    OperationState state(loc, "onnx.Constant");
    state.addTypes(value.getType());
    state.addAttribute("value", value);
    return builder.create(state)->getResult(0);
  };
  if (fold)
    if (DenseElementsAttr folded = foldNode(builder.getContext(), opType, operands, attrs))
      return constantOp(folded);
  // IsNaN(x), which the exporters' scaled_dot_product_attention applies to the softmax of a
  // boolean-masked row, is Not(Equal(x, x)) (only NaN differs from itself): ops the backends run.
  if (opType == "IsNaN" && operands.size() == 1) {
    auto x = operands[0].getType().dyn_cast<RankedTensorType>();
    if (x && x.getElementType().isa<FloatType>()) {
      auto b = RankedTensorType::get(x.getShape(), builder.getI1Type());
      OperationState eq(loc, "onnx.Equal");
      eq.addOperands({operands[0], operands[0]});
      eq.addTypes(b);
      OperationState no(loc, "onnx.Not");
      no.addOperands(builder.create(eq)->getResult(0));
      no.addTypes(b);
      return builder.create(no)->getResult(0);
    }
  }
  // CastLike(x, like) (the dynamo exporter's tensor.type_as) is Cast(x) to the element type `like`
  // has: one op for the backends and autodiff.
  if (opType == "CastLike" && operands.size() == 2) {
    auto x = operands[0].getType().dyn_cast<RankedTensorType>();
    auto like = operands[1].getType().dyn_cast<ShapedType>();
    int64_t code = like ? ox::getOnnxCodeForElementType(like.getElementType()) : 0;
    if (x && code > 0) {
      OperationState cast(loc, "onnx.Cast");
      cast.addOperands(operands[0]);
      cast.addTypes(RankedTensorType::get(x.getShape(), like.getElementType()));
      cast.addAttribute("to", builder.getIntegerAttr(builder.getIntegerType(64, true), code));
      return builder.create(cast)->getResult(0);
    }
  }
  // Older opsets' reductions (ReduceMean and ReduceMax before 18, ReduceSum before 13: the axes an
  // attribute, as the TorchScript exporter writes RMSNorm's mean) are the typed ops with the axes
  // a constant operand; without the attribute they reduce every axis (`loss = x.mean()`), as the
  // typed op does without its axes operand (those opsets have no noop_with_empty_axes).
  if ((opType == "ReduceMean" || opType == "ReduceMax" || opType == "ReduceSum") && operands.size() == 1) {
    DenseI64ArrayAttr axes;
    bool malformed = false;
    SmallVector<NamedAttribute> rest;
    for (const NamedAttribute &a : attrs) {
      if (a.getName() == "axes") {
        axes = a.getValue().dyn_cast<DenseI64ArrayAttr>();
        malformed = !axes; // the generic node keeps it, and the import check names it
      } else if (a.getName() != "noop_with_empty_axes") {
        rest.push_back(a);
      } else {
        malformed = true; // not an attribute of these opsets' reductions
      }
    }
    if (!malformed) {
      SmallVector<Value> ins = {operands[0]};
      if (axes) {
        Builder b(builder.getContext());
        auto axesType = RankedTensorType::get({int64_t(axes.size())}, b.getI64Type());
        ins.push_back(constantOp(DenseElementsAttr::get(axesType, axes.asArrayRef())));
      } else {
        ins.push_back(builder.create<ox::NoneOp>(loc, NoneType::get(builder.getContext())).getResult());
      }
      Type t = inferResultType(builder.getContext(), opType, ins, rest, 0);
      if (t) {
        OperationState red(loc, ("onnx." + opType).str());
        red.addOperands(ins);
        red.addTypes(t);
        red.addAttributes(rest);
        return builder.create(red)->getResult(0);
      }
    }
  }
  // A Cast to its operand's own element type (HF's `.to(input_dtype)` and `type_as` of a float32
  // model, TorchScript's `.float()`) is its operand: an Identity, which plans keep as a view.
  if (opType == "Cast" && operands.size() == 1) {
    auto x = operands[0].getType().dyn_cast<RankedTensorType>();
    IntegerAttr to;
    for (const NamedAttribute &a : attrs)
      if (a.getName() == "to")
        to = a.getValue().dyn_cast<IntegerAttr>();
    if (x && to && ox::getOnnxCodeForElementType(x.getElementType()) == to.getInt()) {
      OperationState id(loc, "onnx.Identity");
      id.addOperands(operands[0]);
      id.addTypes(x);
      return builder.create(id)->getResult(0);
    }
  }
  // Max, Min, Sum and Mean of one input (the exporter's broadcast of one index tensor) are it.
  if ((opType == "Max" || opType == "Min" || opType == "Sum" || opType == "Mean") && operands.size() == 1 &&
      operands[0].getType().isa<RankedTensorType>()) {
    OperationState id(loc, "onnx.Identity");
    id.addOperands(operands[0]);
    id.addTypes(operands[0].getType());
    return builder.create(id)->getResult(0);
  }
  // GatherND(data, indices) with batch_dims 0 and one index per tuple (indices [..., 1]: the
  // exporter's tensor[idx], GPT-J's and Falcon's position tables) is Gather(data, indices[..., 0])
  // on axis 0, an op the backends run and autodiff differentiates.
  if (opType == "GatherND" && operands.size() == 2) {
    auto data = operands[0].getType().dyn_cast<RankedTensorType>();
    auto idx = operands[1].getType().dyn_cast<RankedTensorType>();
    int64_t batchDims = 0;
    for (const NamedAttribute &a : attrs)
      if (a.getName() == "batch_dims")
        if (auto i = a.getValue().dyn_cast<IntegerAttr>())
          batchDims = i.getInt();
    if (data && idx && idx.hasStaticShape() && data.getRank() >= 1 && idx.getRank() >= 1 && batchDims == 0 &&
        idx.getShape().back() == 1 && idx.getElementType().isInteger(64)) {
      SmallVector<int64_t> flat(idx.getShape().begin(), idx.getShape().end() - 1), out = flat;
      out.append(data.getShape().begin() + 1, data.getShape().end());
      Builder b(builder.getContext());
      auto shapeType = RankedTensorType::get({int64_t(flat.size())}, b.getI64Type());
      Value shape = constantOp(DenseElementsAttr::get(shapeType, ArrayRef<int64_t>(flat)));
      OperationState reshape(loc, "onnx.Reshape");
      reshape.addOperands({operands[1], shape});
      reshape.addTypes(RankedTensorType::get(flat, idx.getElementType()));
      Value indices = builder.create(reshape)->getResult(0);
      if (fold)
        if (DenseElementsAttr f = foldNode(builder.getContext(), "Reshape", {operands[1], shape}, {}))
          indices = constantOp(f);
      OperationState gather(loc, "onnx.Gather");
      gather.addOperands({operands[0], indices});
      gather.addTypes(RankedTensorType::get(out, data.getElementType()));
      gather.addAttribute("axis", builder.getIntegerAttr(builder.getIntegerType(64, true), 0));
      return builder.create(gather)->getResult(0);
    }
  }
  // Unsqueeze and Squeeze take their axes as a 1-D tensor; the dynamo exporter writes one axis as a
  // scalar constant (which onnxruntime takes too): it becomes the 1-D constant of that axis.
  if ((opType == "Unsqueeze" || opType == "Squeeze") && operands.size() == 2)
    if (auto axes = foldNode(builder.getContext(), "Identity", {operands[1]}, {});
        axes && axes.getType().getRank() == 0)
      operands[1] = constantOp(axes.reshape(RankedTensorType::get({1}, axes.getType().getElementType())));
  return {};
}

} // namespace octet::detail
