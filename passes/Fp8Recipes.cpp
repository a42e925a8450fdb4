//===- Fp8Recipes.cpp - Recipe substitution and FP8 expansion -------------===//
//
// octet-fp8-substitute applies a recipe's policy to nn.linear layers and
// turns the selected ones into fp8.linear; octet-fp8-expand rewrites
// fp8.linear into the primitive fp8 ops the runtime and exporters consume.
//
//===----------------------------------------------------------------------===//
#include "octet/Passes/Passes.h"

#include "OnnxBuilder.h"
#include "StateUtils.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/NN/IR/NN.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Regex.h"

namespace octet {
#define GEN_PASS_DEF_FP8SUBSTITUTE
#define GEN_PASS_DEF_FP8EXPAND
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;
namespace nn = octet::nn;

namespace {

/// One-line option error: names the option and the allowed values.
LogicalResult badOption(Operation *op, StringRef key, StringRef value, StringRef allowed) {
  return op->emitError() << "octet-fp8-substitute: " << key << "='" << value << "' is not valid; use one of: "
                         << allowed;
}

struct SubstitutePass : octet::impl::Fp8SubstituteBase<SubstitutePass> {
  using Fp8SubstituteBase::Fp8SubstituteBase;

  bool overrides[3] = {false, false, false};

  LogicalResult validate() {
    ModuleOp m = getOperation();
    // A quoted option value (module-filter="a b") keeps its quotes in MLIR 16.
    std::string f = moduleFilter;
    octet::unquoteOption(f);
    moduleFilter = f;
    if (recipe != "te" && recipe != "ao" && recipe != "msamp" && recipe != "none")
      return badOption(m, "recipe", recipe, "te, ao, msamp, none");
    if (fp8Format != "E4M3" && fp8Format != "HYBRID")
      return badOption(m, "fp8-format", fp8Format, "E4M3, HYBRID");
    if (amaxHistoryLen < 1)
      return badOption(m, "amax-history-len", std::to_string(amaxHistoryLen), "an integer >= 1");
    if (amaxComputeAlgo != "max" && amaxComputeAlgo != "most_recent")
      return badOption(m, "amax-compute-algo", amaxComputeAlgo, "max, most_recent");
    if (margin < 0)
      return badOption(m, "margin", std::to_string(margin), "an integer >= 0");
    if (interval < 1)
      return badOption(m, "interval", std::to_string(interval), "an integer >= 1");
    if (optLevel != "O1" && optLevel != "O2" && optLevel != "O3")
      return badOption(m, "opt-level", optLevel, "O1, O2, O3");
    if (keptGemmPrecision != "f32" && keptGemmPrecision != "bf16")
      return badOption(m, "kept-gemm-precision", keptGemmPrecision, "f32, bf16");
    if (aoRecipe != "tensorwise" && aoRecipe != "rowwise" && aoRecipe != "rowwise_with_gw_hp")
      return badOption(m, "ao-recipe", aoRecipe, "tensorwise, rowwise, rowwise_with_gw_hp");
    std::string err;
    if (!moduleFilter.empty() && !llvm::Regex(moduleFilter).isValid(err))
      return badOption(m, "module-filter", moduleFilter, "a valid regular expression (" + err + ")");
    // override-linear-precision: names (fprop,dgrad,wgrad) or three booleans.
    std::vector<std::string> v(overrideLinearPrecision.begin(), overrideLinearPrecision.end());
    bool bools = v.size() == 3 && llvm::all_of(v, [](const std::string &s) {
                   return s == "true" || s == "false" || s == "True" || s == "False" || s == "1" || s == "0";
                 });
    for (size_t i = 0; i < v.size(); ++i) {
      if (bools) {
        overrides[i] = v[i] == "true" || v[i] == "True" || v[i] == "1";
        continue;
      }
      if (v[i] == "fprop")
        overrides[0] = true;
      else if (v[i] == "dgrad")
        overrides[1] = true;
      else if (v[i] == "wgrad")
        overrides[2] = true;
      else if (!v[i].empty())
        return badOption(m, "override-linear-precision", v[i], "fprop, dgrad, wgrad (or three booleans)");
    }
    return success();
  }

  /// The Linears whose result reaches no other Linear through the function's uses: the output
  /// layers (a GPT's lm_head). One backward sweep over the body: an op reaches a Linear when a user
  /// of one of its results (counted as the body op that holds it) is, holds, or reaches one.
  static llvm::DenseSet<Operation *> outputLayers(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto holdsLinear = [](Operation *op) {
      return op->walk([](nn::LinearOp) { return WalkResult::interrupt(); }).wasInterrupted();
    };
    llvm::DenseSet<Operation *> reaches, outputs;
    for (Operation &op : llvm::reverse(body)) {
      bool any = false;
      op.walk([&](Operation *inner) {
        for (Value r : inner->getResults())
          for (Operation *user : r.getUsers()) {
            Operation *top = body.findAncestorOpInBlock(*user);
            if (top && top != &op && reaches.contains(top))
              any = true;
          }
      });
      if (isa<nn::LinearOp>(op) && !any)
        outputs.insert(&op);
      if (any || holdsLinear(&op))
        reaches.insert(&op);
    }
    return outputs;
  }

  /// `v` with zeros appended along `axis` up to `size` (a Concat with a zero constant).
  static Value padWithZeros(octet::OnnxBuilder &ox, Value v, int64_t axis, int64_t size) {
    auto t = v.getType().cast<RankedTensorType>();
    SmallVector<int64_t> zeros(t.getShape()), whole(t.getShape());
    zeros[size_t(axis)] = size - t.getDimSize(axis);
    whole[size_t(axis)] = size;
    auto zt = RankedTensorType::get(zeros, t.getElementType());
    Value z = ox.constant(DenseElementsAttr::get(zt, ArrayRef<Attribute>{FloatAttr::get(t.getElementType(), 0.0)}));
    return ox.op("Concat", RankedTensorType::get(whole, t.getElementType()), {v, z}, {ox.si64("axis", axis)});
  }

  /// A kept layer's float32 MatMuls compute on BF16 operands with float32 accumulation, as
  /// under autocast: Cast both operands to BF16, the MatMul's result back to float32 (the layer's
  /// result type is unchanged). Autodiff then differentiates the casts and the BF16 MatMul, so
  /// the dgrad and wgrad GEMMs run on BF16 too and the backward keeps the BF16 copy of the input.
  ///
  /// With `padN`, a GEMM whose N (the weight's output dimension) is no multiple of 8 computes N
  /// rounded up to one: the float32 weight (and Gemm's bias) gain zero columns before their cast,
  /// the BF16 result is sliced back to N before its cast to float32. A BF16 matrix whose rows are
  /// no multiple of 16 bytes sends cuBLASLt to slow kernels in all three GEMMs (GPT-2's lm_head,
  /// N = 50257); zero columns change no product, and their gradients are cut off (Slice's rule
  /// pads dY with zeros, Concat's drops the padding's part of dW). The layer is marked
  /// `octet.padded_from` = [K, N], as FP8 layers padded by --pad-inner-dim are.
  static void castGemmsToBf16(nn::LinearOp lin, bool padN) {
    SmallVector<Operation *> gemms;
    lin->walk([&](Operation *op) {
      if (isa<ox::MatMulOp, ox::GemmOp>(op))
        gemms.push_back(op);
    });
    auto f32Matrix = [](Value v) {
      auto t = v.getType().dyn_cast<RankedTensorType>();
      return t && t.getElementType().isF32() && t.getRank() >= 2;
    };
    bool any = false;
    for (Operation *op : gemms) {
      Value res = op->getResult(0);
      if (!f32Matrix(op->getOperand(0)) || !f32Matrix(op->getOperand(1)) || !f32Matrix(res))
        continue;
      OpBuilder ob(op);
      auto cast = [&](Value v, Type elt, int64_t code) {
        auto t = v.getType().cast<RankedTensorType>();
        return ob
            .create<ox::CastOp>(op->getLoc(), RankedTensorType::get(t.getShape(), elt), v,
                                ob.getIntegerAttr(ob.getIntegerType(64, true), code), IntegerAttr())
            .getResult();
      };
      // Where N sits in the weight (B) and the bias (Gemm's C), when padding applies: a 2-D B and
      // a C that is absent or a row of N.
      auto rt = res.getType().cast<RankedTensorType>();
      int64_t n = rt.getShape().back(), n8 = (n + 7) / 8 * 8;
      int64_t bAxis = -1;
      bool padC = false;
      if (padN && !ShapedType::isDynamic(n) && n % 8 && rt.hasStaticShape()) {
        auto bt = op->getOperand(1).getType().cast<RankedTensorType>();
        auto gemm = dyn_cast<ox::GemmOp>(op);
        bAxis = bt.getRank() != 2 ? -1 : gemm && gemm.getTransB() ? 0 : 1;
        if (gemm && op->getNumOperands() > 2 && !op->getOperand(2).getType().isa<NoneType>()) {
          auto ct = op->getOperand(2).getType().dyn_cast<RankedTensorType>();
          padC = ct && ct.getRank() == 1 && ct.getDimSize(0) == n;
          if (!padC)
            bAxis = -1;
        }
        if (bAxis >= 0 && bt.getDimSize(bAxis) != n)
          bAxis = -1;
      }
      octet::OnnxBuilder ox(ob, op->getLoc());
      Type bf = ob.getBF16Type();
      // Gemm's C (the bias) joins in BF16 too: ONNX's Gemm has one element type.
      for (unsigned i = 0; i < op->getNumOperands(); ++i) {
        Value v = op->getOperand(i);
        auto t = v.getType().dyn_cast<RankedTensorType>();
        if (!t || !t.getElementType().isF32())
          continue;
        if (bAxis >= 0 && i == 1)
          v = padWithZeros(ox, v, bAxis, n8);
        else if (bAxis >= 0 && i == 2 && padC)
          v = padWithZeros(ox, v, 0, n8);
        op->setOperand(i, cast(v, bf, 16));
      }
      SmallVector<int64_t> shape(rt.getShape());
      if (bAxis >= 0)
        shape.back() = n8;
      res.setType(RankedTensorType::get(shape, bf));
      ob.setInsertionPointAfter(op);
      Value narrow = res;
      if (bAxis >= 0) {
        narrow = ox.op("Slice", RankedTensorType::get(rt.getShape(), bf),
                       {res, ox.i64s({0}), ox.i64s({n}), ox.i64s({rt.getRank() - 1}), ox.none()});
        // octet-pad-loss-classes may let a loss read `res` itself, the padding as -inf.
        narrow.getDefiningOp()->setAttr("octet.pad_slice", ob.getUnitAttr());
        auto [k, ln] = lin.getKN();
        lin->setAttr("octet.padded_from", ob.getDenseI64ArrayAttr({k, ln}));
      }
      Value back = cast(narrow, ob.getF32Type(), 1);
      res.replaceAllUsesExcept(back, bAxis >= 0 ? narrow.getDefiningOp() : back.getDefiningOp());
      any = true;
    }
    if (any)
      lin->setAttr(octet::kGemmPrecisionAttr, StringAttr::get(lin.getContext(), "bf16"));
  }

  /// Why a layer stays in high precision, or "" when it becomes FP8.
  std::string keepReason(nn::LinearOp lin, size_t index, size_t count, llvm::Regex *filter,
                         const llvm::DenseSet<Operation *> &outputs) {
    if (recipe == "none") // no FP8: every Linear computes as autocast (or the model) says
      return "autocast";
    if (evalGraph && !useAutocastDuringEval)
      return "eval";
    if (recipe == "ao" && keepFirstLast && (index == 0 || index + 1 == count))
      return index == 0 ? "first" : "last";
    if (keepOutputLayer && outputs.contains(lin.getOperation()))
      return "output";
    auto [k, n] = lin.getKN();
    auto xt = lin.getX().getType().dyn_cast<RankedTensorType>();
    if (ShapedType::isDynamic(k) || ShapedType::isDynamic(n) || (padInnerDim && (!xt || !xt.hasStaticShape())))
      return "dims";
    if ((k % 16 || n % 16) && !padInnerDim)
      return "dims";
    if (filter && !filter->match(lin.getLayer()))
      return "filter";
    return "";
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(validate()))
      return signalPassFailure();
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    std::string recipeName = recipe;
    if (recipe == "ao")
      recipeName += ":" + aoRecipe;
    else if (recipe == "msamp")
      recipeName += ":" + optLevel;
    module->setAttr(octet::kRecipeAttr, b.getStringAttr(recipeName));
    std::optional<llvm::Regex> filter;
    if (!moduleFilter.empty())
      filter.emplace(moduleFilter);

    bool delayed = recipe == "te";
    bool rowwise = recipe == "ao" && aoRecipe != "tensorwise";
    Type e4m3 = b.getFloat8E4M3FNType(), e5m2 = b.getFloat8E5M2Type();
    Type gradFormat = recipe == "te" && fp8Format == "E4M3" ? e4m3 : rowwise ? e4m3 : e5m2;

    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<nn::LinearOp> linears;
      func.walk([&](nn::LinearOp l) { linears.push_back(l); });
      llvm::DenseSet<Operation *> outputs = outputLayers(func);
      Value step;
      // Linears that read one tensor (the Q, K and V projections of a norm's output) quantize it
      // alike: the first one's input scaling serves them all (one cast, one set of codes kept
      // for the backward), as one fused QKV Linear would. Under delayed scaling their separate
      // states would hold the same amaxes and scales every step (the same tensor, the same
      // initial state), so sharing one changes no bits.
      llvm::DenseMap<Value, std::pair<StringAttr, SmallVector<Value, 3>>> inputScaling;
      for (auto [i, lin] : llvm::enumerate(linears)) {
        std::string reason = keepReason(lin, i, linears.size(), filter ? &*filter : nullptr, outputs);
        if (!reason.empty()) {
          lin->setAttr(octet::kFp8KeptAttr, b.getStringAttr(reason));
          if (keptGemmPrecision == "bf16" && reason != "eval")
            castGemmsToBf16(lin, padKeptGemms);
          continue;
        }
        OpBuilder ob(lin);
        SmallVector<Value> state;
        StringAttr sharedWith;
        std::pair<StringAttr, SmallVector<Value, 3>> *group = nullptr; // this input's entry
        auto [k, n] = lin.getKN();
        bool padK = padInnerDim && k % 16, padN = padInnerDim && n % 16;
        if (shareInputScaling && !padK) {
          auto [it, inserted] = inputScaling.try_emplace(lin.getX());
          if (inserted)
            it->second.first = lin.getLayerAttr();
          else
            sharedWith = it->second.first;
          group = &it->second;
        }
        if (delayed) {
          auto makeState = [&](const std::string &name, DenseElementsAttr value) {
            return octet::getOrCreateState(func, lin.getLoc(), name, value);
          };
          auto addState = [&](const std::string &name, DenseElementsAttr value) {
            state.push_back(makeState(name, value));
          };
          auto hist = RankedTensorType::get({amaxHistoryLen}, b.getF32Type());
          auto scalar = RankedTensorType::get({}, b.getF32Type());
          for (const char *role : {"input", "weight"}) {
            if (sharedWith && role == StringRef("input")) {
              state.append(group->second);
              continue;
            }
            std::string base = (lin.getLayer() + ".fp8." + role + ".").str();
            addState(base + "amax_history", DenseElementsAttr::get(hist, 0.0f));
            addState(base + "scale", DenseElementsAttr::get(scalar, 1.0f));
            addState(base + "scale_inv", DenseElementsAttr::get(scalar, 1.0f));
            if (role == StringRef("weight"))
              for (Value v : ArrayRef<Value>(state).take_back(3))
                v.getDefiningOp()->setAttr(octet::kFp8WeightScalingAttr, b.getUnitAttr());
            if (group && role == StringRef("input"))
              group->second.assign(state.end() - 3, state.end());
          }
          if (interval > 1) {
            if (!step) // one step counter for the whole function
              step = makeState("octet.fp8.step",
                               DenseElementsAttr::get(RankedTensorType::get({}, b.getIntegerType(64)), int64_t(0)));
            state.push_back(step);
          }
        }
        // --pad-inner-dim: K and N zero-padded to multiples of 16, what FP8 GEMMs need. Zeros add
        // nothing to any product (nor to an amax); the output's padded columns are cut off, and
        // autodiff drops the padding's gradients (Concat's rule slices them away).
        Value x = lin.getX(), w = lin.getWeight(), bias = lin.getBias();
        Type yType = lin.getOutput().getType();
        if (padK || padN) {
          octet::OnnxBuilder ox(ob, lin.getLoc());
          auto padTo = [&](Value v, int64_t axis, int64_t size) { return padWithZeros(ox, v, axis, size); };
          int64_t k16 = (k + 15) / 16 * 16, n16 = (n + 15) / 16 * 16;
          bool tw = lin.getTransposeWeight(); // weight [N, K] rather than [K, N]
          if (padK) {
            x = padTo(x, x.getType().cast<RankedTensorType>().getRank() - 1, k16);
            w = padTo(w, tw ? 1 : 0, k16);
          }
          if (padN) {
            w = padTo(w, tw ? 0 : 1, n16);
            if (bias)
              bias = padTo(bias, 0, n16);
            auto yt = yType.cast<RankedTensorType>();
            SmallVector<int64_t> shape(yt.getShape());
            shape.back() = n16;
            yType = RankedTensorType::get(shape, yt.getElementType());
          }
        }
        SmallVector<Value> operands = {x, w};
        if (bias)
          operands.push_back(bias);
        operands.append(state);
        OperationState st(lin.getLoc(), fp8::LinearOp::getOperationName());
        st.addOperands(operands);
        st.addTypes(yType);
        st.addAttribute("operand_segment_sizes",
                        b.getDenseI32ArrayAttr({1, 1, lin.getBias() ? 1 : 0, int32_t(state.size())}));
        st.addAttribute("layer", lin.getLayerAttr());
        st.addAttribute("recipe", b.getStringAttr(recipeName));
        st.addAttribute("transpose_weight", b.getBoolAttr(lin.getTransposeWeight()));
        st.addAttribute("scaling", fp8::ScalingAttr::get(ctx, delayed ? fp8::Scaling::delayed : fp8::Scaling::dynamic));
        st.addAttribute("rowwise", b.getBoolAttr(rowwise));
        st.addAttribute("power_of_two", b.getBoolAttr(rowwise || recipe == "msamp" ||
                                                         (recipe == "ao" && roundScalesToPowerOf2)));
        st.addAttribute("input_format", TypeAttr::get(e4m3));
        st.addAttribute("weight_format", TypeAttr::get(e4m3));
        st.addAttribute("grad_format", TypeAttr::get(gradFormat));
        st.addAttribute("margin", b.getIntegerAttr(b.getIntegerType(64, true), delayed ? margin : 0));
        st.addAttribute("algo", fp8::AmaxComputeAlgoAttr::get(ctx, amaxComputeAlgo == "max"
                                                                       ? fp8::AmaxComputeAlgo::max
                                                                       : fp8::AmaxComputeAlgo::most_recent));
        st.addAttribute("interval", b.getIntegerAttr(b.getIntegerType(64, true), delayed ? interval : 1));
        st.addAttribute("fprop_high_precision", b.getBoolAttr(overrides[0]));
        st.addAttribute("dgrad_high_precision", b.getBoolAttr(overrides[1]));
        st.addAttribute("wgrad_high_precision", b.getBoolAttr(overrides[2] || aoRecipe == "rowwise_with_gw_hp"));
        if (sharedWith)
          st.addAttribute(octet::kFp8InputSharedAttr, sharedWith);
        if (padK || padN) // what the report shows: the layer's own K x N
          st.addAttribute("octet.padded_from", b.getDenseI64ArrayAttr({k, n}));
        Operation *f = ob.create(st);
        Value y = f->getResult(0);
        if (padN) {
          octet::OnnxBuilder ox(ob, lin.getLoc());
          auto yt = lin.getOutput().getType().cast<RankedTensorType>();
          y = ox.op("Slice", yt, {y, ox.i64s({0}), ox.i64s({n}), ox.i64s({yt.getRank() - 1}), ox.none()});
        }
        lin.getOutput().replaceAllUsesWith(y);
        lin->erase();
      }
    }
  }
};

//===----------------------------------------------------------------------===//
// Expansion
//===----------------------------------------------------------------------===//

bool isNormLayer(Operation *op) { return isa_and_nonnull<nn::LayerNormOp, nn::RMSNormOp>(op); }

class Expander {
public:
  Expander(func::FuncOp func, bool fuseNorms) : func(func), fuseNorms(fuseNorms), b(func.getContext()) {}

  void run() {
    SmallVector<fp8::LinearOp> linears;
    func.walk([&](fp8::LinearOp l) { linears.push_back(l); });
    Value step;
    for (fp8::LinearOp l : linears) {
      if (l.getState().size() > 6)
        step = l.getState()[6];
      expand(l);
    }
    if (step) { // the step counter advances once per step
      auto ret = func.getBody().front().getTerminator();
      OpBuilder ob(ret);
      octet::OnnxBuilder ox(ob, step.getLoc());
      Value one = ox.constant(DenseElementsAttr::get(step.getType().cast<ShapedType>(), int64_t(1)));
      updates.push_back({octet::stateName(step), ox.op("Add", step.getType(), {step, one})});
    }
    octet::appendStateUpdates(func, updates);
  }

private:


  struct Quantized {
    Value q, scaleInv, amax;
  };

  /// amax + (delayed or dynamic) scale + cast of `v` at the builder's point.
  Quantized quantizeHere(OpBuilder &ob, Location loc, Value v, Type format, fp8::LinearOp lin, ArrayRef<Value> st,
                         const std::string &base, bool emitCast) {
    auto vt = v.getType().cast<RankedTensorType>();
    auto scalar = RankedTensorType::get({}, ob.getF32Type());
    Quantized r;
    auto amax = ob.create<fp8::AmaxOp>(loc, scalar, v, ob.getBoolAttr(false));
    octet::setResultNames(amax, {base + "_amax"});
    r.amax = amax;
    if (lin.getScaling() == fp8::Scaling::delayed) {
      r.scaleInv = st[2];
    } else {
      auto ds = ob.create<fp8::DynamicScaleOp>(loc, scalar, scalar, r.amax, TypeAttr::get(format),
                                               ob.getBoolAttr(lin.getPowerOfTwo()), ob.getF32FloatAttr(1e-12f));
      octet::setResultNames(ds, {base + "_scale", base + "_scale_inv"});
      r.scaleInv = ds.getScaleInv();
    }
    if (emitCast) {
      auto cast = ob.create<fp8::CastOp>(loc, RankedTensorType::get(vt.getShape(), format), v, r.scaleInv,
                                         ob.getBoolAttr(true));
      octet::setResultNames(cast, {base + "_fp8"});
      r.q = cast;
    }
    return r;
  }

  /// Rebuilds a norm layer with extra results yielded from its body.
  Operation *addNormResults(Operation *norm, ArrayRef<Value> extra) {
    Block &body = norm->getRegion(0).front();
    Operation *yield = body.getTerminator();
    yield->insertOperands(yield->getNumOperands(), extra);
    OperationState st(norm->getLoc(), norm->getName());
    st.addOperands(norm->getOperands());
    st.addAttributes(norm->getAttrs());
    st.addTypes(norm->getResultTypes());
    for (Value v : extra)
      st.addTypes(v.getType());
    st.addRegion();
    OpBuilder ob(norm);
    Operation *n2 = ob.create(st);
    n2->getRegion(0).takeBody(norm->getRegion(0));
    for (auto [o, n] : llvm::zip(norm->getResults(), n2->getResults()))
      o.replaceAllUsesWith(n);
    // Shared quantizations of the old norm's output, or that the old norm produced.
    auto remap = [&](Value v) {
      return v && v.getDefiningOp() == norm ? n2->getResult(v.cast<OpResult>().getResultNumber()) : v;
    };
    llvm::DenseMap<Value, Quantized> remapped;
    for (auto &[x, q] : quantizedInputs)
      remapped[remap(x)] = {remap(q.q), remap(q.scaleInv), remap(q.amax)};
    quantizedInputs = std::move(remapped);
    norm->erase();
    return n2;
  }

  /// Quantizes a Linear's input or weight; per-tensor casts of a norm's output
  /// are placed in the norm's body.
  Quantized quantize(fp8::LinearOp lin, Value v, Type format, ArrayRef<Value> st, const std::string &base) {
    Location loc = lin.getLoc();
    OpBuilder ob(lin);
    Value src = v;
    ox::ReshapeOp reshape = v.getDefiningOp<ox::ReshapeOp>();
    if (reshape)
      src = reshape.getData();
    Operation *norm = src.getDefiningOp();
    if (!fuseNorms || lin.getRowwise() || !isNormLayer(norm) || src != norm->getResult(0)) {
      return quantizeHere(ob, loc, v, format, lin, st, base, true);
    }
    Operation *yield = norm->getRegion(0).front().getTerminator();
    OpBuilder ib(yield);
    Quantized in = quantizeHere(ib, loc, yield->getOperand(0), format, lin, st, reshape ? base + "_unshaped" : base, true);
    SmallVector<Value> extra = {in.q, in.amax};
    bool dynamic = lin.getScaling() == fp8::Scaling::dynamic;
    if (dynamic)
      extra.push_back(in.scaleInv);
    unsigned first = norm->getNumResults();
    Operation *n2 = addNormResults(norm, extra);
    Quantized r;
    r.q = n2->getResult(first);
    r.amax = n2->getResult(first + 1);
    r.scaleInv = dynamic ? n2->getResult(first + 2) : in.scaleInv;
    if (reshape) {
      octet::OnnxBuilder ox(ob, loc);
      auto vt = v.getType().cast<RankedTensorType>();
      Operation *rq = ox.create("Reshape", RankedTensorType::get(vt.getShape(), format),
                                {r.q, reshape.getShape()}, reshape->getAttrs());
      octet::setResultNames(rq, {base + "_fp8"});
      r.q = rq->getResult(0);
    }
    return r;
  }

  /// Updates a delayed-scaling state once: a state Linears share (their input's) is updated by
  /// the first of them, from the tensor's one amax.
  void updateState(OpBuilder &ob, fp8::LinearOp lin, ArrayRef<Value> st, Value amax, Type format,
                   const std::string &base) {
    if (!updatedStates.insert(st[0]).second)
      return;
    auto scalar = RankedTensorType::get({}, ob.getF32Type());
    Value step = st.size() > 3 ? st[3] : Value();
    auto ds = ob.create<fp8::DelayedScaleOp>(
        lin.getLoc(), st[0].getType(), scalar, scalar, st[0], st[1], amax, step, TypeAttr::get(format),
        lin.getMarginAttr(), lin.getAlgoAttr(), ob.getBoolAttr(lin.getPowerOfTwo()), lin.getIntervalAttr());
    octet::setResultNames(ds, {base + "_amax_history.next", base + "_scale.next", base + "_scale_inv.next"});
    updates.push_back({octet::stateName(st[0]), ds.getNewHistory()});
    updates.push_back({octet::stateName(st[1]), ds.getScale()});
    updates.push_back({octet::stateName(st[2]), ds.getScaleInv()});
  }

  void expand(fp8::LinearOp lin) {
    Location loc = lin.getLoc();
    OpBuilder ob(lin);
    octet::OnnxBuilder ox(ob, loc);
    std::string layer = lin.getLayer().str();
    Value x = lin.getInput(), w = lin.getWeight();
    auto xt = x.getType().cast<RankedTensorType>();
    auto wt = w.getType().cast<RankedTensorType>();
    Type fx = lin.getInputFormat(), fw = lin.getWeightFormat();
    ValueRange state = lin.getState();
    bool delayed = lin.getScaling() == fp8::Scaling::delayed;
    SmallVector<Value> sx, sw;
    if (delayed) {
      sx = {state[0], state[1], state[2]};
      sw = {state[3], state[4], state[5]};
      if (state.size() > 6) {
        sx.push_back(state[6]);
        sw.push_back(state[6]);
      }
    }
    Value y;
    if (lin.getRowwise()) {
      int64_t K = xt.getShape().back(), M = xt.getNumElements() / K;
      int64_t N = lin.getTransposeWeight() ? wt.getDimSize(0) : wt.getDimSize(1);
      Value x2 = xt.getRank() == 2 ? x : ox.reshape(x, {M, K});
      Value wnk = lin.getTransposeWeight()
                      ? w
                      : ox.op("Transpose", RankedTensorType::get({N, K}, wt.getElementType()), {w},
                              {ob.getNamedAttr("perm", ob.getDenseI64ArrayAttr({1, 0}))});
      auto rowQuant = [&](Value v, int64_t rows, Type format, const std::string &base) {
        auto vt = v.getType().cast<RankedTensorType>();
        auto st = RankedTensorType::get({rows, 1}, ob.getF32Type());
        auto amax = ob.create<fp8::AmaxOp>(loc, st, v, ob.getBoolAttr(true));
        octet::setResultNames(amax, {base + "_amax"});
        auto ds = ob.create<fp8::DynamicScaleOp>(loc, st, st, amax, TypeAttr::get(format), ob.getBoolAttr(true),
                                                 ob.getF32FloatAttr(1e-12f));
        octet::setResultNames(ds, {base + "_scale", base + "_scale_inv"});
        auto cast = ob.create<fp8::CastOp>(loc, RankedTensorType::get(vt.getShape(), format), v, ds.getScaleInv(),
                                           ob.getBoolAttr(true));
        octet::setResultNames(cast, {base + "_fp8"});
        return std::make_pair(cast.getResult(), ds.getScaleInv());
      };
      // A Linear sharing its input's quantization names it after the first Linear that read the
      // tensor: the same ops on the same tensor, which CSE merges (rowwise scales are x's own rows').
      auto sharedWith = lin->getAttrOfType<StringAttr>(octet::kFp8InputSharedAttr);
      auto [qx, six] = rowQuant(x2, M, fx, (sharedWith ? sharedWith.str() : layer) + ".input");
      auto [qw, siw] = rowQuant(wnk, N, fw, layer + ".weight");
      auto g = ob.create<fp8::GemmOp>(loc, RankedTensorType::get({M, N}, xt.getElementType()), TypeRange{}, qx, qw,
                                      six, siw, lin.getBias(), Value(), Value(), false, true, fp8::Accumulation::fast, false);
      y = g.getD();
      if (xt.getRank() != 2) {
        SmallVector<int64_t> shape(xt.getShape().drop_back());
        shape.push_back(N);
        y = ox.reshape(y, shape);
      }
    } else {
      // A Linear sharing its input's quantization (octet.fp8_input_shared_with) takes the
      // codes, scale and amax of the first Linear that read the tensor.
      auto known = quantizedInputs.find(x);
      bool shared = lin->hasAttr(octet::kFp8InputSharedAttr) && known != quantizedInputs.end();
      Quantized qx = shared ? known->second : quantize(lin, x, fx, sx, layer + ".input");
      if (!shared) // lin.getInput(), not x: quantizing may have rebuilt the norm that defines x
        quantizedInputs[lin.getInput()] = qx;
      Quantized qw = quantize(lin, w, fw, sw, layer + ".weight");
      if (delayed) {
        updateState(ob, lin, sx, qx.amax, fx, layer + ".input");
        updateState(ob, lin, sw, qw.amax, fw, layer + ".weight");
      }
      if (lin.getFpropHighPrecision()) {
        Value wk = lin.getTransposeWeight()
                       ? ox.op("Transpose",
                               RankedTensorType::get({wt.getDimSize(1), wt.getDimSize(0)}, wt.getElementType()), {w},
                               {ob.getNamedAttr("perm", ob.getDenseI64ArrayAttr({1, 0}))})
                       : w;
        y = ox.op("MatMul", lin.getType(), {lin.getInput(), wk}); // the input may have been re-made by a fused norm
        if (lin.getBias())
          y = ox.op("Add", lin.getType(), {y, lin.getBias()});
      } else {
        auto g = ob.create<fp8::GemmOp>(loc, lin.getType(), TypeRange{}, qx.q, qw.q, qx.scaleInv, qw.scaleInv,
                                        lin.getBias(), Value(), Value(), false, lin.getTransposeWeight(),
                                        fp8::Accumulation::fast, false);
        y = g.getD();
      }
    }
    lin.getOutput().replaceAllUsesWith(y);
    lin->erase();
  }

  func::FuncOp func;
  bool fuseNorms;
  OpBuilder b;
  SmallVector<std::pair<std::string, Value>> updates;
  llvm::DenseMap<Value, Quantized> quantizedInputs; ///< per-tensor quantization of each Linear input
  llvm::DenseSet<Value> updatedStates;             ///< amax histories given their update
};

struct ExpandPass : octet::impl::Fp8ExpandBase<ExpandPass> {
  using Fp8ExpandBase::Fp8ExpandBase;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      Expander(func, fuseNorms).run();
  }
};

} // namespace
