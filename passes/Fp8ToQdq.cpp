//===- Fp8ToQdq.cpp - fp8 dialect -> standard ONNX (QDQ) -------------------===//
//
// Every fp8 op becomes opset-19 ONNX ops computing the same values: casts are
// QuantizeLinear (x / scale_inv, round to nearest even, saturate), GEMMs are
// DequantizeLinear + MatMul, scale updates plain arithmetic in the order the
// runtime evaluates them (runtime/src/Fp8Kernels.cpp).
//
//===----------------------------------------------------------------------===//
#include "octet/Passes/Passes.h"

#include "OnnxBuilder.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cfloat>

namespace octet {
#define GEN_PASS_DEF_FP8TOQDQ
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

class Lowering {
public:
  Lowering(OpBuilder &b, Location loc) : b(b), ox(b, loc) {}

  RankedTensorType f32(ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, b.getF32Type()); }
  RankedTensorType boolT(ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, b.getI1Type()); }

  /// A per-row scale [M, 1] as the 1-D [M] QuantizeLinear's axis form takes.
  std::pair<Value, bool> axisScale(Value s) {
    auto t = s.getType().cast<RankedTensorType>();
    if (t.getRank() == 2 && t.getNumElements() > 1)
      return {ox.reshape(s, {t.getDimSize(0)}), true};
    return {s, false};
  }
  Value zeroPoint(Type fmt, Value scale) {
    auto t = scale.getType().cast<RankedTensorType>();
    auto zt = RankedTensorType::get(t.getShape(), fmt);
    return ox.constant(DenseElementsAttr::get(zt, APFloat::getZero(fmt.cast<FloatType>().getFloatSemantics())));
  }
  Value quantize(Value x, Value scaleInv, Type resultType, bool saturate) {
    auto [s, perAxis] = axisScale(scaleInv);
    Type fmt = resultType.cast<ShapedType>().getElementType();
    SmallVector<NamedAttribute> attrs = {ox.si64("saturate", saturate ? 1 : 0)};
    if (perAxis)
      attrs.push_back(ox.si64("axis", 0));
    return ox.op("QuantizeLinear", resultType, {x, s, zeroPoint(fmt, s)}, attrs);
  }
  Value dequantize(Value q, Value scaleInv, Type resultType) {
    auto [s, perAxis] = axisScale(scaleInv);
    SmallVector<NamedAttribute> attrs;
    if (perAxis)
      attrs.push_back(ox.si64("axis", 0));
    Type fmt = q.getType().cast<ShapedType>().getElementType();
    return ox.op("DequantizeLinear", resultType, {q, s, zeroPoint(fmt, s)}, attrs);
  }
  Value amax(Value x, bool rowwise, Type resultType) {
    Value a = ox.op("Abs", x.getType(), {x});
    if (rowwise)
      return ox.op("ReduceMax", resultType, {a, ox.i64s({-1})}, {ox.si64("keepdims", 1)});
    return ox.op("ReduceMax", resultType, {a, ox.none()}, {ox.si64("keepdims", 0)});
  }
  Value generic(StringRef opType, Type result, ValueRange in) {
    OperationState st(ox.loc, "onnx.node");
    st.addOperands(in);
    st.addTypes(result);
    st.addAttribute("op_type", b.getStringAttr(opType));
    return b.create(st)->getResult(0);
  }
  /// 2^floor(log2(s)) for positive finite s, exact: the log estimate is
  /// corrected by one step either way.
  Value pow2Floor(Value s) {
    Type t = s.getType();
    Value e = generic("Floor", t, {ox.op("Div", t, {ox.op("Log", t, {s}), ox.f32(float(M_LN2))})});
    Value p = ox.op("Pow", t, {ox.f32(2.0f), e});
    Value p2 = ox.op("Mul", t, {p, ox.f32(2.0f)});
    auto bt = boolT(t.cast<ShapedType>().getShape());
    p = ox.op("Where", t, {ox.op("LessOrEqual", bt, {p2, s}), p2, p});
    Value half = ox.op("Div", t, {p, ox.f32(2.0f)});
    return ox.op("Where", t, {ox.op("Greater", bt, {p, s}), half, p});
  }

  OpBuilder &b;
  octet::OnnxBuilder ox;
};

struct Fp8ToQdqPass : octet::impl::Fp8ToQdqBase<Fp8ToQdqPass> {
  using Fp8ToQdqBase::Fp8ToQdqBase;

  LogicalResult lower(Operation *op) {
    OpBuilder b(op);
    Lowering L(b, op->getLoc());
    auto &ox = L.ox;
    auto finish = [&](ArrayRef<Value> values) {
      // The exported tensors keep the names the plan gives them.
      auto names = op->getAttrOfType<ArrayAttr>(octet::kResultNamesAttr);
      for (auto [i, v] : llvm::enumerate(values)) {
        op->getResult(i).replaceAllUsesWith(v);
        Operation *d = v.getDefiningOp();
        if (names && i < names.size() && d && d->getNumResults() == 1)
          d->setAttr(octet::kResultNamesAttr, b.getArrayAttr(ArrayRef<Attribute>{names[i]}));
      }
      op->erase();
      return success();
    };
    if (auto c = dyn_cast<fp8::CastOp>(op))
      return finish({L.quantize(c.getInput(), c.getScaleInv(), c.getType(), c.getSaturate())});
    if (auto d = dyn_cast<fp8::DequantizeOp>(op))
      return finish({L.dequantize(d.getInput(), d.getScaleInv(), d.getType())});
    if (auto a = dyn_cast<fp8::AmaxOp>(op))
      return finish({L.amax(a.getInput(), a.getRowwise(), a.getType())});
    if (auto ca = dyn_cast<fp8::CastAmaxOp>(op)) {
      Value q = L.quantize(ca.getInput(), ca.getScaleInv(), ca.getOutput().getType(), ca.getSaturate());
      SmallVector<Value, 3> results = {q, L.amax(ca.getInput(), false, ca.getAmax().getType())};
      if (Value t = ca.getTransposed()) { // the codes as 2-D [rows, cols], transposed
        results.push_back(ox.transposedCodes(q, t.getType().cast<RankedTensorType>()));
      }
      return finish(results);
    }
    if (auto ds = dyn_cast<fp8::DynamicScaleOp>(op)) {
      Type t = ds.getAmax().getType();
      float fmax = float(fp8::getFormatMax(ds.getFormat()));
      Value s = ox.op("Div", t, {ox.f32(fmax), ox.op("Max", t, {ds.getAmax(), ox.f32(ds.getEps().convertToFloat())})});
      if (ds.getPowerOfTwo())
        s = L.pow2Floor(s);
      return finish({s, ox.op("Reciprocal", t, {s})});
    }
    if (auto ds = dyn_cast<fp8::DelayedScaleOp>(op)) {
      auto ht = ds.getHistory().getType().cast<RankedTensorType>();
      int64_t len = ht.getDimSize(0);
      Type st = ds.getPrevScale().getType();
      Value a1 = ox.reshape(ds.getNewAmax(), {1});
      Value hist = len == 1 ? a1
                            : ox.op("Concat", ht,
                                    {a1, ox.op("Slice", L.f32({len - 1}), {ds.getHistory(), ox.i64s({0}), ox.i64s({len - 1}), ox.none(), ox.none()})},
                                    {ox.si64("axis", 0)});
      Value amax = ds.getAlgo() == fp8::AmaxComputeAlgo::most_recent
                       ? ds.getNewAmax()
                       : ox.op("ReduceMax", st, {hist, ox.none()}, {ox.si64("keepdims", 0)});
      float fmax = float(fp8::getFormatMax(ds.getFormat()));
      Value ratio = ox.op("Div", st, {ox.f32(fmax), amax});
      Value s;
      if (ds.getPowerOfTwo())
        s = ox.op("Mul", st, {L.pow2Floor(ox.op("Min", st, {ratio, ox.f32(FLT_MAX)})),
                              ox.f32(std::ldexp(1.0f, -int(ds.getMargin())))});
      else
        s = ox.op("Div", st, {ratio, ox.f32(std::ldexp(1.0f, int(ds.getMargin())))});
      s = ox.op("Min", st, {s, ox.f32(FLT_MAX)});
      auto bt = L.boolT({});
      Value valid = ox.op("And", bt,
                          {ox.op("Greater", bt, {amax, ox.f32(0.0f)}), ox.op("Less", bt, {amax, ox.f32(INFINITY)})});
      if (ds.getStep() && ds.getInterval() > 1) {
        auto it = ds.getStep().getType();
        Value iv = ox.constant(DenseElementsAttr::get(RankedTensorType::get({}, b.getIntegerType(64)),
                                                      int64_t(ds.getInterval())));
        Value mod = L.generic("Mod", it, {ds.getStep(), iv});
        Value zero = ox.constant(DenseElementsAttr::get(RankedTensorType::get({}, b.getIntegerType(64)), int64_t(0)));
        valid = ox.op("And", bt, {valid, ox.op("Equal", bt, {mod, zero})});
      }
      s = ox.op("Where", st, {valid, s, ds.getPrevScale()});
      return finish({hist, s, ox.op("Reciprocal", st, {s})});
    }
    if (auto g = dyn_cast<fp8::GemmOp>(op)) {
      if (g.getDScale() || g.getWithAmax() || g.getAccumulate())
        return g.emitError("an FP8 GEMM with an FP8 output, amax or accumulate has no QDQ form");
      auto at = g.getA().getType().cast<RankedTensorType>();
      auto bt = g.getB().getType().cast<RankedTensorType>();
      Type outT = g.getD().getType();
      if (gemm == "gemm-float8" && !g.getTransposeA()) {
        if (L.axisScale(g.getAScaleInv()).second || L.axisScale(g.getBScaleInv()).second)
          return g.emitError("com.microsoft.GemmFloat8 takes per-tensor scales only; use gemm=matmul");
        OperationState st(op->getLoc(), "onnx.node");
        st.addOperands({g.getA(), g.getB(), g.getBias() ? g.getBias() : ox.none(), g.getAScaleInv(),
                        g.getBScaleInv()});
        st.addTypes(outT);
        st.addAttribute("op_type", b.getStringAttr("GemmFloat8"));
        st.addAttribute("domain", b.getStringAttr("com.microsoft"));
        st.addAttribute("attrs", b.getDictionaryAttr({ox.si64("transA", 0),
                                                      ox.si64("transB", g.getTransposeB() ? 1 : 0),
                                                      b.getNamedAttr("alpha", b.getF32FloatAttr(1.0f)),
                                                      ox.si64("dtype", 1)}));
        Operation *n = b.create(st);
        auto mod = op->getParentOfType<ModuleOp>();
        auto opsets = mod->getAttrOfType<DictionaryAttr>(ox::kOpsetImportAttr);
        NamedAttrList list(opsets ? opsets.getValue() : ArrayRef<NamedAttribute>{});
        list.set("com.microsoft", b.getI64IntegerAttr(1));
        mod->setAttr(ox::kOpsetImportAttr, list.getDictionary(&getContext()));
        return finish({n->getResult(0)});
      }
      Value a = L.dequantize(g.getA(), g.getAScaleInv(), L.f32(at.getShape()));
      if (g.getTransposeA()) // wgrad: A is [M, K] stored, used as [K, M]
        a = ox.op("Transpose", L.f32({at.getDimSize(1), at.getDimSize(0)}), {a},
                  {b.getNamedAttr("perm", b.getDenseI64ArrayAttr({1, 0}))});
      Value bm = L.dequantize(g.getB(), g.getBScaleInv(), L.f32(bt.getShape()));
      if (g.getTransposeB())
        bm = ox.op("Transpose", L.f32({bt.getDimSize(1), bt.getDimSize(0)}), {bm},
                   {b.getNamedAttr("perm", b.getDenseI64ArrayAttr({1, 0}))});
      Value y = ox.op("MatMul", outT, {a, bm});
      if (g.getBias())
        y = ox.op("Add", outT, {y, g.getBias()});
      return finish({y});
    }
    if (isa<fp8::StochasticRoundOp>(op))
      return op->emitError("stochastic rounding (--msamp-weight-rounding=stochastic) has no ONNX form: write a plan "
                           "(-o model.plan) or round to nearest");
    return op->emitError("op has no QDQ lowering");
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (gemm != "matmul" && gemm != "gemm-float8") {
      module.emitError() << "octet-fp8-to-qdq: gemm='" << gemm << "' is not valid; use one of: matmul, gemm-float8";
      return signalPassFailure();
    }
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<fp8::FP8Dialect>(op->getDialect()))
        ops.push_back(op);
    });
    for (Operation *op : ops)
      if (failed(lower(op)))
        return signalPassFailure();
    // onnxruntime has no float8 Reshape: quantize after reshaping instead
    // (a per-tensor QuantizeLinear commutes with Reshape).
    SmallVector<ox::ReshapeOp> reshapes;
    module.walk([&](ox::ReshapeOp r) {
      auto q = r.getData().getDefiningOp<ox::QuantizeLinearOp>();
      if (q && q.getYScale().getType().cast<ShapedType>().getNumElements() == 1)
        reshapes.push_back(r);
    });
    for (ox::ReshapeOp r : reshapes) {
      auto q = r.getData().getDefiningOp<ox::QuantizeLinearOp>();
      OpBuilder b(r);
      octet::OnnxBuilder ox(b, r.getLoc());
      auto rt = r.getType().cast<ShapedType>();
      auto xt = q.getX().getType().cast<ShapedType>();
      Value shaped = ox.op("Reshape", RankedTensorType::get(rt.getShape(), xt.getElementType()), {q.getX(), r.getShape()},
                           r->getAttrs());
      Operation *nq = b.clone(*q);
      nq->setOperand(0, shaped);
      nq->getResult(0).setType(rt);
      if (auto names = r->getAttr(octet::kResultNamesAttr))
        nq->setAttr(octet::kResultNamesAttr, names);
      r.getResult().replaceAllUsesWith(nq->getResult(0));
      r->erase();
      if (q->use_empty()) // the FP8 tensor may have other users (a backward GEMM reshapes the forward's cast)
        q->erase();
    }
    // QuantizeLinear with float8 needs opset 19.
    Builder b(&getContext());
    auto opsets = module->getAttrOfType<DictionaryAttr>(ox::kOpsetImportAttr);
    NamedAttrList list(opsets ? opsets.getValue() : ArrayRef<NamedAttribute>{});
    auto cur = list.get("ai.onnx").dyn_cast_or_null<IntegerAttr>();
    if (!ops.empty() && (!cur || cur.getInt() < 19))
      list.set("ai.onnx", b.getI64IntegerAttr(19));
    module->setAttr(ox::kOpsetImportAttr, list.getDictionary(&getContext()));
    // FP8 state initializers become graph inputs with defaults.
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<ox::InitializerOp> state;
      func.walk([&](ox::InitializerOp i) {
        if (i->hasAttr(octet::kFp8StateAttr))
          state.push_back(i);
      });
      for (ox::InitializerOp i : state) {
        unsigned idx = func.getNumArguments();
        NamedAttrList attrs;
        attrs.set(ox::kNameAttr, i.getNameAttr());
        attrs.set(ox::kDefaultAttr, i.getValue());
        func.insertArgument(idx, i.getType(), attrs.getDictionary(&getContext()), i.getLoc());
        i.getResult().replaceAllUsesWith(func.getArgument(idx));
        i->erase();
      }
    }
  }
};

} // namespace
