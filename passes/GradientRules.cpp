//===- GradientRules.cpp - Gradient rules of the onnx ops -----------------===//
//
// One rule per op, attached to the op as a GradientOpInterface external model.
// Rules build their gradients from onnx ops (so a differentiated graph stays
// an ONNX graph that any ONNX runtime can execute) and need static shapes.
// The FP8 Linear's rule lives with the recipes (Fp8Gradients.cpp).
//
//===----------------------------------------------------------------------===//
#include "GradientBuilder.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Interfaces/GradientOpInterface.h"

#include "mlir/IR/DialectRegistry.h"

#include <cmath>

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace octet {

//===----------------------------------------------------------------------===//
// GradientBuilder
//===----------------------------------------------------------------------===//

RankedTensorType GradientBuilder::typeOf(Value v) { return v.getType().cast<RankedTensorType>(); }

RankedTensorType GradientBuilder::like(Value v, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, typeOf(v).getElementType());
}

Value GradientBuilder::scalar(double v, Type elt) {
  auto t = RankedTensorType::get({}, elt);
  if (elt.isa<FloatType>())
    return ox.constant(DenseElementsAttr::get(t, ArrayRef<Attribute>{FloatAttr::get(elt, v)}));
  return ox.constant(DenseElementsAttr::get(t, ArrayRef<Attribute>{b.getIntegerAttr(elt, int64_t(v))}));
}

Value GradientBuilder::zeros(RankedTensorType t) {
  return ox.constant(DenseElementsAttr::get(t, ArrayRef<Attribute>{FloatAttr::get(t.getElementType(), 0.0)}));
}

Value GradientBuilder::binary(StringRef op, Value a, Value c, RankedTensorType result) {
  return ox.op(op, result, {a, c});
}

Value GradientBuilder::mul(Value a, Value c) { return binary("Mul", a, c, broadcastType(a, c)); }
Value GradientBuilder::add(Value a, Value c) { return binary("Add", a, c, broadcastType(a, c)); }
Value GradientBuilder::sub(Value a, Value c) { return binary("Sub", a, c, broadcastType(a, c)); }
Value GradientBuilder::div(Value a, Value c) { return binary("Div", a, c, broadcastType(a, c)); }
Value GradientBuilder::unary(StringRef op, Value a) { return ox.op(op, a.getType(), {a}); }

RankedTensorType GradientBuilder::broadcastType(Value a, Value c) {
  ArrayRef<int64_t> x = typeOf(a).getShape(), y = typeOf(c).getShape();
  size_t r = std::max(x.size(), y.size());
  SmallVector<int64_t> out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t dx = i + x.size() >= r ? x[i + x.size() - r] : 1;
    int64_t dy = i + y.size() >= r ? y[i + y.size() - r] : 1;
    out[i] = dx == 1 ? dy : dx;
  }
  return RankedTensorType::get(out, typeOf(a).getElementType());
}

Value GradientBuilder::reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  ArrayRef<int64_t> s = typeOf(x).getShape();
  SmallVector<int64_t> out;
  for (int64_t i = 0; i < int64_t(s.size()); ++i) {
    if (llvm::is_contained(axes, i)) {
      if (keepdims)
        out.push_back(1);
    } else {
      out.push_back(s[i]);
    }
  }
  return ox.op("ReduceSum", like(x, out), {x, ox.i64s(axes)}, {ox.si64("keepdims", keepdims)});
}

Value GradientBuilder::reduceMean(Value x, ArrayRef<int64_t> axes) {
  ArrayRef<int64_t> s = typeOf(x).getShape();
  SmallVector<int64_t> out(s.begin(), s.end());
  for (int64_t a : axes)
    out[a] = 1;
  return ox.op("ReduceMean", like(x, out), {x, ox.i64s(axes)}, {ox.si64("keepdims", 1)});
}

Value GradientBuilder::reshape(Value x, ArrayRef<int64_t> shape) {
  if (typeOf(x).getShape() == shape)
    return x;
  return ox.reshape(x, shape);
}

Value GradientBuilder::transpose(Value x, ArrayRef<int64_t> perm) {
  ArrayRef<int64_t> s = typeOf(x).getShape();
  SmallVector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(s[p]);
  return ox.op("Transpose", like(x, out), {x}, {b.getNamedAttr("perm", b.getDenseI64ArrayAttr(perm))});
}

Value GradientBuilder::swapLastTwo(Value x) {
  int64_t r = typeOf(x).getRank();
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i)
    perm.push_back(i);
  std::swap(perm[r - 1], perm[r - 2]);
  return transpose(x, perm);
}

Value GradientBuilder::sumTo(Value g, RankedTensorType target) {
  ArrayRef<int64_t> gs = typeOf(g).getShape(), ts = target.getShape();
  if (gs == ts)
    return g;
  size_t lead = gs.size() - ts.size();
  SmallVector<int64_t> axes;
  for (size_t i = 0; i < gs.size(); ++i)
    if (i < lead || (ts[i - lead] == 1 && gs[i] != 1))
      axes.push_back(int64_t(i));
  Value r = axes.empty() ? g : reduceSum(g, axes, /*keepdims=*/true);
  return reshape(r, ts);
}

Value GradientBuilder::matmul(Value a, Value c) {
  ArrayRef<int64_t> x = typeOf(a).getShape(), y = typeOf(c).getShape();
  SmallVector<int64_t> batch;
  {
    ArrayRef<int64_t> bx = x.drop_back(2), by = y.drop_back(2);
    size_t r = std::max(bx.size(), by.size());
    for (size_t i = 0; i < r; ++i) {
      int64_t dx = i + bx.size() >= r ? bx[i + bx.size() - r] : 1;
      int64_t dy = i + by.size() >= r ? by[i + by.size() - r] : 1;
      batch.push_back(dx == 1 ? dy : dx);
    }
  }
  batch.push_back(x[x.size() - 2]);
  batch.push_back(y.back());
  return ox.op("MatMul", like(a, batch), {a, c});
}

bool GradientBuilder::allStatic(Operation *op) {
  auto isStatic = [](Type t) { // index and shape operands may be unranked
    auto r = t.dyn_cast<RankedTensorType>();
    bool isFloat = t.isa<ShapedType>() && t.cast<ShapedType>().getElementType().isa<FloatType>();
    return !isFloat || (r && r.hasStaticShape());
  };
  return llvm::all_of(op->getOperandTypes(), isStatic) && llvm::all_of(op->getResultTypes(), isStatic);
}

} // namespace octet

namespace {

using octet::GradientBuilder;
using octet::GradientContext;
using Grads = SmallVectorImpl<Value>;

LogicalResult unsupported(Operation *op, const Twine &what) {
  return op->emitError() << "octet-autodiff: cannot differentiate " << ox::ONNXDialect::getOnnxOpType(op)
                         << " node '" << ox::getNodeName(op) << "': " << what;
}

// Elementwise binary ops with broadcasting ------------------------------------

LogicalResult gradAdd(ox::AddOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx, Grads &out) {
  out.push_back(ctx.wants(0) ? g.sumTo(dy[0], g.typeOf(op.getA())) : Value());
  out.push_back(ctx.wants(1) ? g.sumTo(dy[0], g.typeOf(op.getB())) : Value());
  return success();
}

LogicalResult gradSub(ox::SubOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx, Grads &out) {
  out.push_back(ctx.wants(0) ? g.sumTo(dy[0], g.typeOf(op.getA())) : Value());
  out.push_back(ctx.wants(1) ? g.sumTo(g.unary("Neg", dy[0]), g.typeOf(op.getB())) : Value());
  return success();
}

LogicalResult gradMul(ox::MulOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx, Grads &out) {
  out.push_back(ctx.wants(0) ? g.sumTo(g.mul(dy[0], op.getB()), g.typeOf(op.getA())) : Value());
  out.push_back(ctx.wants(1) ? g.sumTo(g.mul(dy[0], op.getA()), g.typeOf(op.getB())) : Value());
  return success();
}

LogicalResult gradDiv(ox::DivOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx, Grads &out) {
  out.push_back(ctx.wants(0) ? g.sumTo(g.div(dy[0], op.getB()), g.typeOf(op.getA())) : Value());
  // d(a/b)/db = -(a/b)/b
  out.push_back(ctx.wants(1) ? g.sumTo(g.unary("Neg", g.div(g.mul(dy[0], op.getC()), op.getB())), g.typeOf(op.getB()))
                             : Value());
  return success();
}

LogicalResult gradPow(ox::PowOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx, Grads &out) {
  Type elt = g.typeOf(op.getA()).getElementType();
  if (g.typeOf(op.getB()).getElementType() != elt)
    return unsupported(op, "the exponent's element type differs from the base's");
  Value da, db;
  if (ctx.wants(0)) { // b * a^(b-1)
    Value bm1 = g.sub(op.getB(), g.scalar(1.0, elt));
    Value p = g.binary("Pow", op.getA(), bm1, g.broadcastType(op.getA(), bm1));
    da = g.sumTo(g.mul(dy[0], g.mul(op.getB(), p)), g.typeOf(op.getA()));
  }
  if (ctx.wants(1)) // a^b * ln a
    db = g.sumTo(g.mul(dy[0], g.mul(op.getC(), g.unary("Log", op.getA()))), g.typeOf(op.getB()));
  out.append({da, db});
  return success();
}

LogicalResult gradWhere(ox::WhereOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx, Grads &out) {
  Value zero = g.scalar(0.0, g.typeOf(dy[0]).getElementType());
  auto t = g.typeOf(dy[0]);
  out.push_back(Value()); // the condition
  out.push_back(ctx.wants(1) ? g.sumTo(g.ox.op("Where", t, {op.getCondition(), dy[0], zero}), g.typeOf(op.getX()))
                             : Value());
  out.push_back(ctx.wants(2) ? g.sumTo(g.ox.op("Where", t, {op.getCondition(), zero, dy[0]}), g.typeOf(op.getY()))
                             : Value());
  return success();
}

// Elementwise unary ops ---------------------------------------------------------

LogicalResult gradNeg(ox::NegOp, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  out.push_back(g.unary("Neg", dy[0]));
  return success();
}

LogicalResult gradIdentity(Operation *, GradientBuilder &, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  out.push_back(dy[0]);
  return success();
}

LogicalResult gradSqrt(ox::SqrtOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  Type elt = g.typeOf(dy[0]).getElementType();
  out.push_back(g.div(g.mul(dy[0], g.scalar(0.5, elt)), op.getY()));
  return success();
}

LogicalResult gradReciprocal(ox::ReciprocalOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &,
                             Grads &out) {
  out.push_back(g.unary("Neg", g.mul(dy[0], g.mul(op.getY(), op.getY()))));
  return success();
}

LogicalResult gradTanh(ox::TanhOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  Type elt = g.typeOf(dy[0]).getElementType();
  out.push_back(g.mul(dy[0], g.sub(g.scalar(1.0, elt), g.mul(op.getY(), op.getY()))));
  return success();
}

LogicalResult gradSigmoid(ox::SigmoidOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  Type elt = g.typeOf(dy[0]).getElementType();
  out.push_back(g.mul(dy[0], g.mul(op.getY(), g.sub(g.scalar(1.0, elt), op.getY()))));
  return success();
}

LogicalResult gradExp(ox::ExpOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  out.push_back(g.mul(dy[0], op.getY()));
  return success();
}

LogicalResult gradLog(ox::LogOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  out.push_back(g.div(dy[0], op.getX()));
  return success();
}

LogicalResult gradSin(ox::SinOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  out.push_back(g.mul(dy[0], g.unary("Cos", op.getX())));
  return success();
}

LogicalResult gradCos(ox::CosOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  out.push_back(g.unary("Neg", g.mul(dy[0], g.unary("Sin", op.getX()))));
  return success();
}

LogicalResult gradRelu(ox::ReluOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  Type elt = g.typeOf(dy[0]).getElementType();
  Value zero = g.scalar(0.0, elt);
  auto cond = RankedTensorType::get(g.typeOf(dy[0]).getShape(), g.b.getI1Type());
  Value pos = g.ox.op("Greater", cond, {op.getX(), zero});
  out.push_back(g.ox.op("Where", dy[0].getType(), {pos, dy[0], zero}));
  return success();
}

/// d erf(x)/dx = 2/sqrt(pi) * exp(-x^2)
Value erfDerivative(GradientBuilder &g, Value x) {
  Type elt = g.typeOf(x).getElementType();
  Value e = g.unary("Exp", g.unary("Neg", g.mul(x, x)));
  return g.mul(e, g.scalar(2.0 / std::sqrt(M_PI), elt));
}

LogicalResult gradErf(ox::ErfOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  out.push_back(g.mul(dy[0], erfDerivative(g, op.getX())));
  return success();
}

LogicalResult gradGelu(ox::GeluOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  Value x = op.getX();
  Type elt = g.typeOf(x).getElementType();
  auto c = [&](double v) { return g.scalar(v, elt); };
  Value d;
  if (op.getApproximate().value_or("none") == "tanh") {
    // u = k (x + 0.044715 x^3), t = tanh u; d = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2).
    // u in the GELU's own order of operations (k (x + ((0.044715 x) x) x), as the runtimes compute
    // GELU): where a backend recomputes the GELU beside its gradient, it computes u and t once.
    const double k = std::sqrt(2.0 / M_PI);
    Value x2 = g.mul(x, x);
    Value u = g.mul(c(k), g.add(x, g.mul(g.mul(g.mul(c(0.044715), x), x), x)));
    Value t = g.unary("Tanh", u);
    Value left = g.mul(c(0.5), g.add(c(1.0), t));
    Value du = g.mul(c(k), g.add(c(1.0), g.mul(c(3 * 0.044715), x2)));
    Value right = g.mul(g.mul(c(0.5), x), g.mul(g.sub(c(1.0), g.mul(t, t)), du));
    d = g.add(left, right);
  } else {
    // Phi(x) + x phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2)), phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
    Value phiCdf = g.mul(c(0.5), g.add(c(1.0), g.unary("Erf", g.mul(x, c(M_SQRT1_2)))));
    Value pdf = g.mul(g.unary("Exp", g.mul(g.mul(x, x), c(-0.5))), c(1.0 / std::sqrt(2 * M_PI)));
    d = g.add(phiCdf, g.mul(x, pdf));
  }
  out.push_back(g.mul(dy[0], d));
  return success();
}

LogicalResult gradCast(ox::CastOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  auto in = g.typeOf(op.getInput());
  if (!in.getElementType().isa<FloatType>())
    return unsupported(op, "a cast from a non-float type has no gradient");
  if (g.typeOf(dy[0]).getElementType() == in.getElementType()) {
    out.push_back(dy[0]);
    return success();
  }
  out.push_back(g.ox.op("Cast", in, {dy[0]},
                        {g.ox.si64("to", ox::getOnnxCodeForElementType(in.getElementType()))}));
  return success();
}

LogicalResult gradDropout(ox::DropoutOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  auto ratio = ox::getConstantValue(op.getRatio());
  bool training = false;
  if (auto tm = ox::getConstantValue(op.getTrainingMode()))
    training = *tm.getValues<bool>().begin();
  bool zeroRatio = !ratio || (*ratio.getValues<APFloat>().begin()).isZero();
  if (training && !zeroRatio)
    return unsupported(op, "dropout with a non-zero ratio in training mode; export with dropout 0 or in eval mode");
  out.push_back(dy[0]);
  out.append({Value(), Value()});
  return success();
}

// Linear algebra ----------------------------------------------------------------

LogicalResult gradMatMul(ox::MatMulOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx, Grads &out) {
  auto a = g.typeOf(op.getA()), bt = g.typeOf(op.getB());
  if (a.getRank() < 2 || bt.getRank() < 2)
    return unsupported(op, "MatMul with a 1-D operand");
  if (a.getRank() > 2 && bt.getRank() == 2 && a.hasStaticShape() && bt.hasStaticShape()) {
    // B [K, N] shared by every row of A [.., M, K] (a Linear layer as a MatMul, a tied output layer):
    // both gradients are 2-D GEMMs over the R = (..) x M rows, reading B and A as they are. dB is
    // one GEMM, not a batch of [K, N] products summed afterwards.
    int64_t k = a.getShape().back(), n = bt.getShape().back(), r = a.getNumElements() / k;
    Value dy2 = g.reshape(dy[0], {r, n}), none = g.ox.none();
    auto gemm = [&](Value x, Value y, bool tx, bool ty, ArrayRef<int64_t> shape) {
      return g.ox.op("Gemm", RankedTensorType::get(shape, a.getElementType()), {x, y, none},
                     {g.ox.si64("transA", tx), g.ox.si64("transB", ty)});
    };
    out.push_back(ctx.wants(0) ? g.reshape(gemm(dy2, op.getB(), false, true, {r, k}), a.getShape()) : Value());
    out.push_back(ctx.wants(1) ? gemm(g.reshape(op.getA(), {r, k}), dy2, true, false, {k, n}) : Value());
    return success();
  }
  out.push_back(ctx.wants(0) ? g.sumTo(g.matmul(dy[0], g.swapLastTwo(op.getB())), a) : Value());
  out.push_back(ctx.wants(1) ? g.sumTo(g.matmul(g.swapLastTwo(op.getA()), dy[0]), bt) : Value());
  return success();
}

LogicalResult gradGemm(ox::GemmOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx, Grads &out) {
  bool ta = op.getTransA().value_or(0), tb = op.getTransB().value_or(0);
  float alpha = op.getAlpha() ? op.getAlpha()->convertToFloat() : 1.0f;
  float beta = op.getBeta() ? op.getBeta()->convertToFloat() : 1.0f;
  Value none = g.ox.none();
  auto gemm = [&](Value x, Value y, bool tx, bool ty, RankedTensorType t) {
    return g.ox.op("Gemm", t, {x, y, none},
                   {g.b.getNamedAttr("alpha", g.b.getF32FloatAttr(alpha)), g.ox.si64("transA", tx),
                    g.ox.si64("transB", ty)});
  };
  Value dY = dy[0];
  auto at = g.typeOf(op.getA()), bt = g.typeOf(op.getB());
  // With A^ = op(A) [M,K] and B^ = op(B) [K,N]: dA^ = alpha dY B^T, dB^ = alpha A^T dY.
  out.push_back(!ctx.wants(0) ? Value() : ta ? gemm(op.getB(), dY, tb, true, at) : gemm(dY, op.getB(), false, !tb, at));
  out.push_back(!ctx.wants(1) ? Value() : tb ? gemm(dY, op.getA(), true, ta, bt) : gemm(op.getA(), dY, !ta, false, bt));
  Value dc;
  if (ctx.wants(2)) {
    Value s = beta == 1.0f ? dY : g.mul(dY, g.scalar(beta, g.typeOf(dY).getElementType()));
    dc = g.sumTo(s, g.typeOf(op.getC()));
  }
  out.push_back(dc);
  return success();
}

// Normalization, softmax, loss ----------------------------------------------------

/// octet::LayerNormalizationGrad(X, Scale, dY) -> (dX, dScale, dB), attributes axis and epsilon:
/// the runtime recomputes each row's mean and 1/std from X (docs/PLAN.md). Only where Scale
/// holds one float32 value per normalized element, B (when present) has Scale's type and X is
/// float32; false leaves the ONNX spelling to the caller.
/// octet::RMSNormalizationGrad(X, Scale, dY) -> (dX, dScale) likewise, for RMSNormalization (no
/// mean taken out, no bias): `bias` null.
bool fusedNormGrad(Operation *op, Value x, Value scale, Value bias, GradientBuilder &g, Value dY,
                   int64_t axis, float eps, Grads &out) {
  auto xt = g.typeOf(x);
  if (!xt.getElementType().isF32())
    return false;
  int64_t n = 1;
  for (int64_t d : xt.getShape().drop_front(axis))
    n *= d;
  auto st = g.typeOf(scale);
  bool rms = isa<ox::RMSNormalizationOp>(op), hasB = bias && !bias.getType().isa<NoneType>();
  if (!st.getElementType().isF32() || st.getNumElements() != n || (hasB && g.typeOf(bias) != st))
    return false;
  OperationState st2(op->getLoc(), "onnx.node");
  st2.addOperands({x, scale, dY});
  st2.addTypes({xt, st});
  if (!rms)
    st2.addTypes(hasB ? g.typeOf(bias) : st);
  st2.addAttribute("op_type",
                   g.b.getStringAttr(rms ? "RMSNormalizationGrad" : "LayerNormalizationGrad"));
  st2.addAttribute("domain", g.b.getStringAttr("octet"));
  st2.addAttribute("attrs", g.b.getDictionaryAttr({g.ox.si64("axis", axis),
                                                    g.b.getNamedAttr("epsilon", g.b.getF32FloatAttr(eps))}));
  Operation *grad = g.b.create(st2);
  out.push_back(grad->getResult(0));
  out.push_back(grad->getResult(1));
  if (!rms)
    out.push_back(hasB ? grad->getResult(2) : Value());
  return true;
}

/// A norm's first normalized axis (non-negative; attribute default -1) and the axes [axis, rank).
std::pair<int64_t, SmallVector<int64_t>> normalizedAxes(std::optional<int64_t> attr, int64_t rank) {
  int64_t axis = attr.value_or(-1);
  if (axis < 0)
    axis += rank;
  SmallVector<int64_t> axes;
  for (int64_t i = axis; i < rank; ++i)
    axes.push_back(i);
  return {axis, axes};
}

LogicalResult gradLayerNorm(ox::LayerNormalizationOp op, GradientBuilder &g, ArrayRef<Value> dy,
                            GradientContext &ctx, Grads &out) {
  if (dy[1] || dy[2])
    return unsupported(op, "the Mean and InvStdDev outputs are used on the gradient path");
  Value x = op.getX();
  auto xt = g.typeOf(x);
  auto [axis, axes] = normalizedAxes(op.getAxis(), xt.getRank());
  Type elt = xt.getElementType();
  float eps = op.getEpsilon() ? op.getEpsilon()->convertToFloat() : 1e-5f;
  if (ctx.fusedGrads &&
      fusedNormGrad(op, op.getX(), op.getScale(), op.getB(), g, dy[0], axis, eps, out))
    return success();
  // Recompute the normalized input.
  Value mean = g.reduceMean(x, axes);
  Value xc = g.sub(x, mean);
  Value var = g.reduceMean(g.mul(xc, xc), axes);
  Value rstd = g.unary("Reciprocal", g.unary("Sqrt", g.add(var, g.scalar(eps, elt))));
  Value xhat = g.mul(xc, rstd);
  Value dX;
  if (ctx.wants(0)) {
    Value dxhat = g.mul(dy[0], op.getScale());
    Value m1 = g.reduceMean(dxhat, axes);
    Value m2 = g.reduceMean(g.mul(dxhat, xhat), axes);
    dX = g.mul(rstd, g.sub(g.sub(dxhat, m1), g.mul(xhat, m2)));
  }
  out.push_back(dX);
  out.push_back(ctx.wants(1) ? g.sumTo(g.mul(dy[0], xhat), g.typeOf(op.getScale())) : Value());
  out.push_back(ctx.wants(2) ? g.sumTo(dy[0], g.typeOf(op.getB())) : Value());
  return success();
}

/// RMSNormalization: y = x^ Scale, x^ = x / sqrt(mean(x^2) + eps) over the axes from `axis` on;
/// dX = (g - x^ mean(g x^)) / sqrt(mean(x^2) + eps) for g = dY Scale, dScale = sum of dY x^.
LogicalResult gradRMSNorm(ox::RMSNormalizationOp op, GradientBuilder &g, ArrayRef<Value> dy,
                          GradientContext &ctx, Grads &out) {
  Value x = op.getX();
  auto xt = g.typeOf(x);
  auto [axis, axes] = normalizedAxes(op.getAxis(), xt.getRank());
  float eps = op.getEpsilon() ? op.getEpsilon()->convertToFloat() : 1e-5f;
  if (ctx.fusedGrads && fusedNormGrad(op, x, op.getScale(), Value(), g, dy[0], axis, eps, out))
    return success();
  Value rstd = g.unary("Reciprocal", g.unary("Sqrt", g.add(g.reduceMean(g.mul(x, x), axes),
                                                           g.scalar(eps, xt.getElementType()))));
  Value xhat = g.mul(x, rstd);
  Value dX;
  if (ctx.wants(0)) {
    Value dxhat = g.mul(dy[0], op.getScale());
    dX = g.mul(rstd, g.sub(dxhat, g.mul(xhat, g.reduceMean(g.mul(dxhat, xhat), axes))));
  }
  out.push_back(dX);
  out.push_back(ctx.wants(1) ? g.sumTo(g.mul(dy[0], xhat), g.typeOf(op.getScale())) : Value());
  return success();
}

int64_t normAxis(std::optional<int64_t> axis, int64_t def, int64_t rank) {
  int64_t a = axis.value_or(def);
  return a < 0 ? a + rank : a;
}

LogicalResult gradSoftmax(ox::SoftmaxOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  int64_t axis = normAxis(op.getAxis(), -1, g.typeOf(op.getOutput()).getRank());
  Value y = op.getOutput();
  Value s = g.reduceSum(g.mul(dy[0], y), {axis}, true);
  out.push_back(g.mul(y, g.sub(dy[0], s)));
  return success();
}

LogicalResult gradLogSoftmax(ox::LogSoftmaxOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &,
                             Grads &out) {
  int64_t axis = normAxis(op.getAxis(), -1, g.typeOf(op.getOutput()).getRank());
  Value s = g.reduceSum(dy[0], {axis}, true);
  out.push_back(g.sub(dy[0], g.mul(g.unary("Exp", op.getOutput()), s)));
  return success();
}

LogicalResult gradSoftmaxCrossEntropy(ox::SoftmaxCrossEntropyLossOp op, GradientBuilder &g, ArrayRef<Value> dy,
                                      GradientContext &ctx, Grads &out) {
  if (dy[1])
    return unsupported(op, "the log_prob output is used on the gradient path");
  if (!op.getWeights().getType().isa<NoneType>())
    return unsupported(op, "class weights are not supported");
  StringRef reduction = op.getReduction().value_or("mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return unsupported(op, "reduction '" + reduction.str() + "'");
  Value scores = op.getScores(), labels = op.getLabels();
  auto st = g.typeOf(scores);
  // octet::SoftmaxCrossEntropyLossGrad(scores, labels, dY) -> dScores, attributes reduction and
  // ignore_index as the loss has them: (softmax(scores) - onehot(labels)) times dY / count (mean),
  // dY (sum) or dY per sample (none), zero where the label is ignore_index (docs/PLAN.md).
  if (ctx.fusedGrads && st.getElementType().isF32()) {
    OperationState node(op.getLoc(), "onnx.node");
    node.addOperands({scores, labels, dy[0]});
    node.addTypes({st});
    node.addAttribute("op_type", g.b.getStringAttr("SoftmaxCrossEntropyLossGrad"));
    node.addAttribute("domain", g.b.getStringAttr("octet"));
    SmallVector<NamedAttribute> attrs = {g.b.getNamedAttr("reduction", g.b.getStringAttr(reduction))};
    if (auto ii = op.getIgnoreIndex())
      attrs.push_back(g.ox.si64("ignore_index", *ii));
    node.addAttribute("attrs", g.b.getDictionaryAttr(attrs));
    out.append({g.b.create(node)->getResult(0), Value(), Value()});
    return success();
  }
  auto lt = g.typeOf(labels);
  Type elt = st.getElementType();
  int64_t classes = st.getDimSize(1), r = st.getRank();
  Value p = g.ox.op("Softmax", st, {scores}, {g.ox.si64("axis", 1)});
  // One-hot labels: Equal(labels[:, None, ...], arange(C)[None, :, None...]).
  SmallVector<int64_t> lshape(lt.getShape().begin(), lt.getShape().end());
  lshape.insert(lshape.begin() + 1, 1);
  Value lu = g.reshape(labels, lshape);
  SmallVector<int64_t> cshape(r, 1), range;
  cshape[1] = classes;
  for (int64_t c = 0; c < classes; ++c)
    range.push_back(c);
  Value cls = g.ox.constant(DenseElementsAttr::get(RankedTensorType::get(cshape, lt.getElementType()),
                                                   ArrayRef<int64_t>(range)));
  auto bits = RankedTensorType::get(st.getShape(), g.b.getI1Type());
  Value hit = g.ox.op("Equal", bits, {lu, cls});
  Value onehot = g.ox.op("Cast", st, {hit}, {g.ox.si64("to", ox::getOnnxCodeForElementType(elt))});
  Value d = g.sub(p, onehot);
  // Rows whose label is ignore_index get no gradient; mean divides by the other rows.
  Value count;
  if (auto ii = op.getIgnoreIndex()) {
    Value ign = g.ox.constant(DenseElementsAttr::get(RankedTensorType::get({}, lt.getElementType()),
                                                     g.b.getIntegerAttr(lt.getElementType(), *ii)));
    auto lbits = RankedTensorType::get(lt.getShape(), g.b.getI1Type());
    Value keep = g.ox.op("Not", lbits, {g.ox.op("Equal", lbits, {labels, ign})});
    Value mask = g.ox.op("Cast", RankedTensorType::get(lt.getShape(), elt), {keep},
                         {g.ox.si64("to", ox::getOnnxCodeForElementType(elt))});
    d = g.mul(d, g.reshape(mask, lshape));
    SmallVector<int64_t> all;
    for (int64_t i = 0; i < lt.getRank(); ++i)
      all.push_back(i);
    count = g.reduceSum(mask, all, false);
  } else {
    count = g.scalar(double(lt.getNumElements()), elt);
  }
  Value gy = dy[0];
  if (reduction == "mean")
    d = g.mul(d, g.div(gy, count));
  else if (reduction == "sum")
    d = g.mul(d, gy);
  else // none
    d = g.mul(d, g.reshape(gy, lshape));
  out.append({d, Value(), Value()});
  return success();
}

// Reductions ----------------------------------------------------------------------

template <typename OpTy>
LogicalResult gradReduce(OpTy op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out, bool mean) {
  auto xt = g.typeOf(op.getData());
  int64_t r = xt.getRank();
  SmallVector<int64_t> axes;
  if (!op.getAxes().getType().template isa<NoneType>()) {
    auto c = ox::getConstantInts(op.getAxes());
    if (!c)
      return unsupported(op, "the axes are not a constant");
    for (int64_t a : *c)
      axes.push_back(a < 0 ? a + r : a);
  }
  if (axes.empty() && !op.getNoopWithEmptyAxes().value_or(0))
    for (int64_t i = 0; i < r; ++i)
      axes.push_back(i);
  SmallVector<int64_t> kept(xt.getShape().begin(), xt.getShape().end());
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= kept[a];
    kept[a] = 1;
  }
  Value gk = g.reshape(dy[0], kept);
  if (mean)
    gk = g.div(gk, g.scalar(double(count), xt.getElementType()));
  out.push_back(g.ox.op("Expand", xt, {gk, g.ox.i64s(xt.getShape())}));
  out.push_back(Value());
  return success();
}

// Shape and data movement ---------------------------------------------------------------

/// Reshape-like ops: the gradient is the output gradient in the input's shape.
LogicalResult gradReshapeLike(Operation *op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  out.push_back(g.reshape(dy[0], g.typeOf(op->getOperand(0)).getShape()));
  for (unsigned i = 1; i < op->getNumOperands(); ++i)
    out.push_back(Value());
  return success();
}

LogicalResult gradTranspose(ox::TransposeOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &,
                            Grads &out) {
  int64_t r = g.typeOf(op.getData()).getRank();
  SmallVector<int64_t> perm, inv(r);
  if (auto p = op.getPerm())
    perm.assign(p->begin(), p->end());
  else
    for (int64_t i = r - 1; i >= 0; --i)
      perm.push_back(i);
  for (int64_t i = 0; i < r; ++i)
    inv[perm[i]] = i;
  out.push_back(g.transpose(dy[0], inv));
  return success();
}

LogicalResult gradExpand(ox::ExpandOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  out.push_back(g.sumTo(dy[0], g.typeOf(op.getInput())));
  out.push_back(Value());
  return success();
}

LogicalResult gradConcat(ox::ConcatOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx,
                         Grads &out) {
  auto yt = g.typeOf(op.getConcatResult());
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += yt.getRank();
  int64_t off = 0;
  for (auto [i, in] : llvm::enumerate(op.getInputs())) {
    auto it = g.typeOf(in);
    int64_t len = it.getDimSize(axis);
    if (ctx.wants(i))
      out.push_back(g.ox.op("Slice", it, {dy[0], g.ox.i64s({off}), g.ox.i64s({off + len}), g.ox.i64s({axis}), g.ox.none()}));
    else
      out.push_back(Value());
    off += len;
  }
  return success();
}

LogicalResult gradSplit(ox::SplitOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  auto xt = g.typeOf(op.getInput());
  int64_t axis = normAxis(op.getAxis(), 0, xt.getRank());
  SmallVector<Value> parts;
  for (auto [i, r] : llvm::enumerate(op.getOutputs()))
    parts.push_back(dy[i] ? dy[i] : g.zeros(g.typeOf(r)));
  out.push_back(g.ox.op("Concat", xt, parts, {g.ox.si64("axis", axis)}));
  out.push_back(Value());
  return success();
}

LogicalResult gradSlice(ox::SliceOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  auto xt = g.typeOf(op.getData());
  auto yt = g.typeOf(op.getOutput());
  int64_t r = xt.getRank();
  auto starts = ox::getConstantInts(op.getStarts());
  auto ends = ox::getConstantInts(op.getEnds());
  if (!starts || !ends)
    return unsupported(op, "starts and ends are not constants");
  SmallVector<int64_t> axes, steps;
  if (!op.getAxes().getType().isa<NoneType>()) {
    auto a = ox::getConstantInts(op.getAxes());
    if (!a)
      return unsupported(op, "the axes are not a constant");
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(int64_t(i));
  }
  if (!op.getSteps().getType().isa<NoneType>()) {
    auto s = ox::getConstantInts(op.getSteps());
    if (!s)
      return unsupported(op, "the steps are not a constant");
    steps = *s;
  }
  SmallVector<int64_t> before(r, 0), after(r, 0);
  Value grad = dy[0];
  SmallVector<int64_t> shape(yt.getShape().begin(), yt.getShape().end()); // grad's shape
  auto padded = [&](ArrayRef<int64_t> lo, ArrayRef<int64_t> hi, ArrayRef<int64_t> to) {
    SmallVector<int64_t> pads(lo.begin(), lo.end());
    pads.append(hi.begin(), hi.end());
    return g.ox.op("Pad", RankedTensorType::get(to, yt.getElementType()), {grad, g.ox.i64s(pads)});
  };
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step < 1)
      return unsupported(op, "a step below 1");
    int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    int64_t dim = xt.getDimSize(a);
    int64_t s = (*starts)[i];
    s = s < 0 ? std::max<int64_t>(0, s + dim) : std::min(s, dim);
    int64_t n = yt.getDimSize(a);
    if (step == 1) { // the plain case: one Pad for all such axes, below
      before[a] = s;
      after[a] = dim - s - n;
      continue;
    }
    // Step k: each of the n values goes to position s + j k. As [n, 1] padded to [n, k] and merged
    // to n k, then placed at s and cut or padded to the axis's length.
    SmallVector<int64_t> split(shape.begin(), shape.begin() + a + 1);
    split.push_back(1);
    split.append(shape.begin() + a + 1, shape.end());
    grad = g.reshape(grad, split);
    SmallVector<int64_t> lo(size_t(r + 1), 0), hi(size_t(r + 1), 0), wide = split;
    hi[size_t(a + 1)] = step - 1;
    wide[size_t(a + 1)] = step;
    grad = padded(lo, hi, wide);
    shape[size_t(a)] = n * step;
    grad = g.reshape(grad, shape);
    int64_t len = s + n * step; // past the axis by up to k - 1 (the last value's padding)
    SmallVector<int64_t> lo2(size_t(r), 0), hi2(size_t(r), 0), to = shape;
    lo2[size_t(a)] = s;
    hi2[size_t(a)] = std::max<int64_t>(dim - len, 0);
    to[size_t(a)] = std::max(len, dim);
    if (s || len < dim)
      grad = padded(lo2, hi2, to);
    shape[size_t(a)] = to[size_t(a)];
    if (len > dim) {
      SmallVector<int64_t> cut = shape;
      cut[size_t(a)] = dim;
      grad = g.ox.op("Slice", RankedTensorType::get(cut, yt.getElementType()),
                     {grad, g.ox.i64s({0}), g.ox.i64s({dim}), g.ox.i64s({a}), g.ox.i64s({1})});
      shape = cut;
    }
  }
  SmallVector<int64_t> pads(before);
  pads.append(after);
  if (!llvm::all_of(pads, [](int64_t p) { return p == 0; }))
    grad = padded(before, after, xt.getShape());
  out.push_back(grad);
  out.append({Value(), Value(), Value(), Value()});
  return success();
}

LogicalResult gradGather(ox::GatherOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &, Grads &out) {
  auto xt = g.typeOf(op.getData());
  if (normAxis(op.getAxis(), 0, xt.getRank()) != 0)
    return unsupported(op, "Gather on an axis other than 0");
  // Scatter-add the output rows back: ScatterND(zeros, indices[..., None], dY, reduction=add).
  auto it = g.typeOf(op.getIndices());
  SmallVector<int64_t> ishape(it.getShape().begin(), it.getShape().end());
  ishape.push_back(1);
  Value idx = op.getIndices();
  if (!it.getElementType().isInteger(64))
    idx = g.ox.op("Cast", RankedTensorType::get(it.getShape(), g.b.getIntegerType(64)), {idx},
                  {g.ox.si64("to", 7)});
  idx = g.reshape(idx, ishape);
  out.push_back(g.ox.op("ScatterND", xt, {g.zeros(xt), idx, dy[0]},
                        {g.b.getNamedAttr("reduction", g.b.getStringAttr("add"))}));
  out.push_back(Value());
  return success();
}

LogicalResult gradGatherElements(ox::GatherElementsOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &,
                                 Grads &out) {
  auto xt = g.typeOf(op.getData());
  int64_t axis = normAxis(op.getAxis(), 0, xt.getRank());
  out.push_back(g.ox.op("ScatterElements", xt, {g.zeros(xt), op.getIndices(), dy[0]},
                        {g.ox.si64("axis", axis), g.b.getNamedAttr("reduction", g.b.getStringAttr("add"))}));
  out.push_back(Value());
  return success();
}

// Octet's own nodes (onnx.node, domain "octet") ------------------------------------------

/// octet::Attention(Q, K, V) -> (Y, LSE): octet::AttentionGrad(Q, K, V, Y, LSE, dY) -> (dQ, dK, dV),
/// which recomputes the probabilities from LSE (passes/FuseAttention.cpp).
LogicalResult gradAttention(ox::GenericNodeOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &out) {
  if (dy.size() > 1 && dy[1])
    return unsupported(op, "the log-sum-exp output is used on the gradient path");
  OperationState st(op.getLoc(), "onnx.node");
  st.addOperands({op.getOperand(0), op.getOperand(1), op.getOperand(2), op.getResult(0), op.getResult(1), dy[0]});
  st.addTypes({op.getOperand(0).getType(), op.getOperand(1).getType(), op.getOperand(2).getType()});
  st.addAttribute("op_type", g.b.getStringAttr("AttentionGrad"));
  st.addAttribute("domain", g.b.getStringAttr("octet"));
  st.addAttribute("attrs", op.getAttrsAttr());
  Operation *grad = g.b.create(st);
  out.append(grad->getResults().begin(), grad->getResults().end());
  return success();
}

/// octet::RotaryEmbedding(X, cos, sin) -> X cos + rotate_half(X) sin: dX is the node with inverse = 1,
/// dY cos + rotate_half^T(dY sin) (passes/FuseRotary.cpp). cos and sin are position tables; a
/// gradient for them (a trained parameter behind them) is refused by name.
LogicalResult gradRotary(ox::GenericNodeOp op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &ctx,
                         Grads &out) {
  if (ctx.wants(1) || ctx.wants(2))
    return unsupported(op, "its cos or sin depends on a trained parameter (freeze it with --freeze, or compile "
                           "with --fuse-rotary=false)");
  OperationState st(op.getLoc(), "onnx.node");
  st.addOperands({dy[0], op.getOperand(1), op.getOperand(2)});
  st.addTypes({op.getOperand(0).getType()});
  st.addAttribute("op_type", g.b.getStringAttr("RotaryEmbedding"));
  st.addAttribute("domain", g.b.getStringAttr("octet"));
  st.addAttribute("attrs", g.b.getDictionaryAttr({g.b.getNamedAttr(
                               "inverse", g.b.getIntegerAttr(g.b.getIntegerType(64, true), 1))}));
  out.push_back(g.b.create(st)->getResult(0));
  out.push_back(Value());
  out.push_back(Value());
  return success();
}

/// Generic nodes have a rule only when they are one of Octet's (domain "octet"); any other
/// gets autodiff's "no gradient rule" error.
struct GenericNodeGradient
    : octet::GradientOpInterface::ExternalModel<GenericNodeGradient, ox::GenericNodeOp> {
  LogicalResult buildGradient(Operation *op, OpBuilder &b, ArrayRef<Value> dy, GradientContext &ctx,
                              Grads &out) const {
    auto node = cast<ox::GenericNodeOp>(op);
    bool attention = node.getOpType() == "Attention" && node.getNumOperands() == 3 && node.getNumResults() == 2;
    bool rotary = node.getOpType() == "RotaryEmbedding" && node.getNumOperands() == 3 && node.getNumResults() == 1;
    if (node.getDomain() != "octet" || !(attention || rotary))
      return octet::emitNoGradientRule(op);
    if (!GradientBuilder::allStatic(op))
      return unsupported(op, "its shapes are not static");
    GradientBuilder g(b, op->getLoc());
    return attention ? gradAttention(node, g, dy, out) : gradRotary(node, g, dy, ctx, out);
  }
};

// Attaching the rules -----------------------------------------------------------------

template <typename OpTy, auto Rule>
struct GradientModel : octet::GradientOpInterface::ExternalModel<GradientModel<OpTy, Rule>, OpTy> {
  LogicalResult buildGradient(Operation *op, OpBuilder &b, ArrayRef<Value> dy, GradientContext &ctx,
                              Grads &out) const {
    if (!GradientBuilder::allStatic(op))
      return unsupported(op, "its shapes are not static");
    GradientBuilder g(b, op->getLoc());
    if constexpr (std::is_invocable_v<decltype(Rule), Operation *, GradientBuilder &, ArrayRef<Value>,
                                      GradientContext &, Grads &>)
      return Rule(op, g, dy, ctx, out);
    else
      return Rule(cast<OpTy>(op), g, dy, ctx, out);
  }
};

template <typename OpTy, auto Rule> void attach(MLIRContext *ctx) {
  OpTy::template attachInterface<GradientModel<OpTy, Rule>>(*ctx);
}

template <typename OpTy>
LogicalResult gradReduceMean(OpTy op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &c, Grads &out) {
  return gradReduce(op, g, dy, c, out, true);
}
template <typename OpTy>
LogicalResult gradReduceSum(OpTy op, GradientBuilder &g, ArrayRef<Value> dy, GradientContext &c, Grads &out) {
  return gradReduce(op, g, dy, c, out, false);
}

} // namespace

void octet::registerGradientRules(DialectRegistry &registry) {
  registerFp8GradientRules(registry);
  registry.addExtension(+[](MLIRContext *ctx, ox::ONNXDialect *) {
    attach<ox::AddOp, gradAdd>(ctx);
    attach<ox::SubOp, gradSub>(ctx);
    attach<ox::MulOp, gradMul>(ctx);
    attach<ox::DivOp, gradDiv>(ctx);
    attach<ox::PowOp, gradPow>(ctx);
    attach<ox::WhereOp, gradWhere>(ctx);
    attach<ox::NegOp, gradNeg>(ctx);
    attach<ox::IdentityOp, gradIdentity>(ctx);
    attach<ox::SqrtOp, gradSqrt>(ctx);
    attach<ox::ReciprocalOp, gradReciprocal>(ctx);
    attach<ox::TanhOp, gradTanh>(ctx);
    attach<ox::SigmoidOp, gradSigmoid>(ctx);
    attach<ox::ExpOp, gradExp>(ctx);
    attach<ox::LogOp, gradLog>(ctx);
    attach<ox::SinOp, gradSin>(ctx);
    attach<ox::CosOp, gradCos>(ctx);
    attach<ox::ReluOp, gradRelu>(ctx);
    attach<ox::ErfOp, gradErf>(ctx);
    attach<ox::GeluOp, gradGelu>(ctx);
    attach<ox::CastOp, gradCast>(ctx);
    attach<ox::DropoutOp, gradDropout>(ctx);
    attach<ox::MatMulOp, gradMatMul>(ctx);
    attach<ox::GemmOp, gradGemm>(ctx);
    attach<ox::LayerNormalizationOp, gradLayerNorm>(ctx);
    attach<ox::RMSNormalizationOp, gradRMSNorm>(ctx);
    attach<ox::SoftmaxOp, gradSoftmax>(ctx);
    attach<ox::LogSoftmaxOp, gradLogSoftmax>(ctx);
    attach<ox::SoftmaxCrossEntropyLossOp, gradSoftmaxCrossEntropy>(ctx);
    attach<ox::ReduceMeanOp, gradReduceMean<ox::ReduceMeanOp>>(ctx);
    attach<ox::ReduceSumOp, gradReduceSum<ox::ReduceSumOp>>(ctx);
    attach<ox::ReshapeOp, gradReshapeLike>(ctx);
    attach<ox::UnsqueezeOp, gradReshapeLike>(ctx);
    attach<ox::SqueezeOp, gradReshapeLike>(ctx);
    attach<ox::TransposeOp, gradTranspose>(ctx);
    attach<ox::ExpandOp, gradExpand>(ctx);
    attach<ox::ConcatOp, gradConcat>(ctx);
    attach<ox::SplitOp, gradSplit>(ctx);
    attach<ox::SliceOp, gradSlice>(ctx);
    attach<ox::GatherOp, gradGather>(ctx);
    attach<ox::GatherElementsOp, gradGatherElements>(ctx);
    ox::GenericNodeOp::attachInterface<GenericNodeGradient>(*ctx);
  });
}
