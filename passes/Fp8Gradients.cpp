//===- Fp8Gradients.cpp - Gradient rule of the FP8 Linear ------------------===//
//
// fp8.linear differentiates into the two backward GEMMs of TransformerEngine
// and torchao, in the layer's recipe:
//   dgrad: dX = dY . W^T   (dY in grad_format, W in weight_format)
//   wgrad: dW = X^T . dY   (X in input_format)
// with split accumulation, each in FP32 instead when the recipe's
// override (dgrad/wgrad_high_precision) asks for it. dY gets its own scaling:
// delayed (a third amax history and scale per layer, updated once per step
// inside the step) or dynamic (tensorwise, or rowwise with power-of-2 scales).
// X and W reuse the forward's scales, so their casts are the forward's casts.
//
//===----------------------------------------------------------------------===//
#include "GradientBuilder.h"

#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Interfaces/GradientOpInterface.h"

#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
namespace fp8 = octet::fp8;

namespace {

struct Linear {
  fp8::LinearOp op;
  octet::GradientBuilder &g;
  octet::GradientContext &ctx;
  Location loc;
  int64_t M, K, N;

  OpBuilder &b() { return g.b; }
  RankedTensorType f32(ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, b().getF32Type()); }
  RankedTensorType scalarT() { return f32({}); }

  /// Results are named as fp8-expand names them ("<layer>.<role>_fp8", ...), so
  /// the backward's casts of X and W are the forward's casts once CSE runs.
  /// The input's codes (and rowwise, X^T's) are named after the layer whose quantization this
  /// one shares, if any: Linears reading one tensor then cast it once.
  std::string roleName(StringRef role) {
    auto shared = op->getAttrOfType<StringAttr>(octet::kFp8InputSharedAttr);
    bool input = role == "input" || role == "input_t";
    return ((input && shared ? shared.getValue() : op.getLayer()) + "." + role).str();
  }

  /// Per-tensor quantization with an existing scale_inv.
  Value castWith(Value v, Value scaleInv, Type format, StringRef role) {
    auto vt = v.getType().cast<RankedTensorType>();
    auto c = b().create<fp8::CastOp>(loc, RankedTensorType::get(vt.getShape(), format), v, scaleInv,
                                     b().getBoolAttr(true));
    octet::setResultNames(c, {roleName(role) + "_fp8"});
    return c;
  }

  /// Dynamic per-tensor or per-row quantization; returns (codes, scale_inv).
  std::pair<Value, Value> dynamic(Value v, Type format, bool rowwise, StringRef role) {
    auto vt = v.getType().cast<RankedTensorType>();
    auto st = rowwise ? f32({vt.getDimSize(0), 1}) : scalarT();
    auto amax = b().create<fp8::AmaxOp>(loc, st, v, b().getBoolAttr(rowwise));
    octet::setResultNames(amax, {roleName(role) + "_amax"});
    auto ds = b().create<fp8::DynamicScaleOp>(loc, st, st, amax, TypeAttr::get(format),
                                              b().getBoolAttr(rowwise || op.getPowerOfTwo()),
                                              b().getF32FloatAttr(1e-12f));
    octet::setResultNames(ds, {roleName(role) + "_scale", roleName(role) + "_scale_inv"});
    return {castWith(v, ds.getScaleInv(), format, role), ds.getScaleInv()};
  }

  /// The forward operand `v` (input or weight) quantized as the forward pass does.
  std::pair<Value, Value> forwardCast(Value v, Type format, unsigned stateBase, StringRef role) {
    if (op.getScaling() == fp8::Scaling::delayed) {
      Value si = op.getState()[stateBase + 2];
      return {castWith(v, si, format, role), si};
    }
    return dynamic(v, format, false, role);
  }

  /// dY in the gradient format, with the layer's scaling.
  std::pair<Value, Value> gradCast(Value dy2) {
    Type format = op.getGradFormat();
    if (op.getScaling() != fp8::Scaling::delayed)
      return dynamic(dy2, format, false, "grad_output");
    std::string base = (op.getLayer() + ".fp8.grad_output.").str();
    int64_t len = op.getState()[0].getType().cast<RankedTensorType>().getDimSize(0);
    Value hist = ctx.stateTensor(base + "amax_history", DenseElementsAttr::get(f32({len}), 0.0f));
    Value scale = ctx.stateTensor(base + "scale", DenseElementsAttr::get(scalarT(), 1.0f));
    Value scaleInv = ctx.stateTensor(base + "scale_inv", DenseElementsAttr::get(scalarT(), 1.0f));
    auto amax = b().create<fp8::AmaxOp>(loc, scalarT(), dy2, b().getBoolAttr(false));
    octet::setResultNames(amax, {roleName("grad_output") + "_amax"});
    Value step = op.getState().size() > 6 ? op.getState()[6] : Value();
    auto ds = b().create<fp8::DelayedScaleOp>(loc, hist.getType(), scalarT(), scalarT(), hist, scale, amax, step,
                                              TypeAttr::get(format), op.getMarginAttr(), op.getAlgoAttr(),
                                              b().getBoolAttr(op.getPowerOfTwo()), op.getIntervalAttr());
    ctx.updateState(hist, ds.getNewHistory());
    ctx.updateState(scale, ds.getScale());
    ctx.updateState(scaleInv, ds.getScaleInv());
    octet::setResultNames(ds, {roleName("grad_output") + "_amax_history.next", roleName("grad_output") + "_scale.next",
              roleName("grad_output") + "_scale_inv.next"});
    return {castWith(dy2, scaleInv, format, "grad_output"), scaleInv};
  }

  Value gemm(Value a, Value c, Value sa, Value sc, bool ta, bool tb, ArrayRef<int64_t> shape) {
    return b().create<fp8::GemmOp>(loc, f32(shape), TypeRange{}, a, c, sa, sc, Value(), Value(), Value(), ta, tb,
                                   fp8::Accumulation::split, false)
        .getD();
  }

  LogicalResult build(Value dy, SmallVectorImpl<Value> &out) {
    Value x = op.getInput(), w = op.getWeight();
    bool tw = op.getTransposeWeight(); // W is [N, K] (else [K, N])
    Value x2 = g.reshape(x, {M, K});
    Value dy2 = g.reshape(dy, {M, N});
    bool wantX = ctx.wants(0), wantW = ctx.wants(1), wantB = op.getBias() && ctx.wants(2);
    Value dx, dw, db;
    if (op.getRowwise()) {
      Type e4m3 = op.getInputFormat();
      auto [gq, gs] = dynamic(dy2, op.getGradFormat(), true, "grad_output");
      if (wantX && !op.getDgradHighPrecision()) { // dX[M,K] = dY[M,N] . (W as [K,N] rows)^T
        Value wkn = tw ? g.transpose(w, {1, 0}) : w;
        auto [wq, ws] = dynamic(wkn, op.getWeightFormat(), true, "weight_kn");
        dx = gemm(gq, wq, gs, ws, false, true, {M, K});
      }
      if (wantW && !op.getWgradHighPrecision()) { // dW = (rows of X^T or dY^T) . (rows of dY^T or X^T)^T
        auto [xtq, xts] = dynamic(g.transpose(x2, {1, 0}), e4m3, true, "input_t");
        auto [gtq, gts] = dynamic(g.transpose(dy2, {1, 0}), op.getGradFormat(), true, "grad_output_t");
        dw = tw ? gemm(gtq, xtq, gts, xts, false, true, {N, K}) : gemm(xtq, gtq, xts, gts, false, true, {K, N});
      }
    } else {
      auto [gq, gs] = gradCast(dy2);
      if (wantX && !op.getDgradHighPrecision()) {
        auto [wq, ws] = forwardCast(w, op.getWeightFormat(), 3, "weight");
        dx = gemm(gq, wq, gs, ws, false, !tw, {M, K});
      }
      if (wantW && !op.getWgradHighPrecision()) {
        auto [xq, xs] = forwardCast(x, op.getInputFormat(), 0, "input");
        Value xq2 = g.reshape(xq, {M, K});
        dw = tw ? gemm(gq, xq2, gs, xs, true, false, {N, K}) : gemm(xq2, gq, xs, gs, true, false, {K, N});
      }
    }
    // Overrides: the GEMM in the layer's own precision.
    if (wantX && !dx)
      dx = tw ? g.matmul(dy2, w) : g.matmul(dy2, g.transpose(w, {1, 0}));
    if (wantW && !dw)
      dw = tw ? g.matmul(g.transpose(dy2, {1, 0}), x2) : g.matmul(g.transpose(x2, {1, 0}), dy2);
    if (wantB)
      db = g.reduceSum(dy2, {0}, false);
    out.push_back(dx ? g.reshape(dx, x.getType().cast<RankedTensorType>().getShape()) : Value());
    out.push_back(dw);
    if (op.getBias())
      out.push_back(db);
    for (size_t i = 0; i < op.getState().size(); ++i)
      out.push_back(Value());
    return success();
  }
};

struct LinearGradient : octet::GradientOpInterface::ExternalModel<LinearGradient, fp8::LinearOp> {
  LogicalResult buildGradient(Operation *o, OpBuilder &b, ArrayRef<Value> dy, octet::GradientContext &ctx,
                              SmallVectorImpl<Value> &out) const {
    auto op = cast<fp8::LinearOp>(o);
    if (!octet::GradientBuilder::allStatic(o))
      return o->emitError() << "octet-autodiff: cannot differentiate FP8 Linear '" << op.getLayer()
                            << "': its shapes are not static";
    auto xt = op.getInput().getType().cast<RankedTensorType>();
    auto wt = op.getWeight().getType().cast<RankedTensorType>();
    if (!xt.getElementType().isF32() || !wt.getElementType().isF32())
      return o->emitError() << "octet-autodiff: FP8 Linear '" << op.getLayer()
                            << "': training supports FP32 activations and weights";
    octet::GradientBuilder g(b, o->getLoc());
    int64_t K = xt.getShape().back();
    int64_t N = op.getTransposeWeight() ? wt.getDimSize(0) : wt.getDimSize(1);
    Linear l{op, g, ctx, o->getLoc(), xt.getNumElements() / K, K, N};
    return l.build(dy[0], out);
  }
};

} // namespace

namespace octet {
void registerFp8GradientRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, fp8::FP8Dialect *) {
    fp8::LinearOp::attachInterface<LinearGradient>(*ctx);
  });
}
} // namespace octet
