//===- RaiseLayers.cpp - Recognize layers in imported ONNX graphs ---------===//
#include "octet/Passes/Passes.h"

#include "octet/Dialect/NN/IR/NN.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <optional>

namespace octet {
#define GEN_PASS_DEF_RAISELAYERS
#define GEN_PASS_DEF_LOWERLAYERS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace nn = octet::nn;

namespace {

/// The value of a one-element constant or initializer.
std::optional<double> constScalar(Value v) {
  DenseElementsAttr dense = ox::getConstantValue(v);
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  Type t = dense.getElementType();
  if (t.isa<FloatType>())
    return (*dense.getValues<APFloat>().begin()).convertToDouble();
  if (t.isa<IntegerType>())
    return double((*dense.getValues<APInt>().begin()).getSExtValue());
  return std::nullopt;
}

bool isConst(Value v, double want, double tol = 1e-6) {
  auto c = constScalar(v);
  return c && std::fabs(*c - want) <= tol * std::max(1.0, std::fabs(want));
}

/// A float initializer (a trainable parameter) of the given rank.
ox::InitializerOp floatInit(Value v, int64_t rank) {
  auto init = v.getDefiningOp<ox::InitializerOp>();
  if (!init)
    return {};
  auto t = init.getType().dyn_cast<RankedTensorType>();
  if (!t || t.getRank() != rank || !t.getElementType().isa<FloatType>())
    return {};
  return init;
}

template <typename OpTy> OpTy def(Value v) { return v ? v.getDefiningOp<OpTy>() : OpTy(); }

/// For a commutative binary op, calls f(a, b) and f(b, a) until one succeeds.
template <typename F> bool eitherOrder(Operation *op, F f) {
  return f(op->getOperand(0), op->getOperand(1)) || f(op->getOperand(1), op->getOperand(0));
}

/// A ReduceMean over the last axis only (checked on the static types).
bool isLastAxisMean(Value v, Value &input) {
  auto rm = def<ox::ReduceMeanOp>(v);
  if (!rm)
    return false;
  auto in = rm.getData().getType().dyn_cast<RankedTensorType>();
  auto out = rm.getType().dyn_cast<RankedTensorType>();
  if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape() || in.getRank() != out.getRank() ||
      in.getRank() == 0 || out.getShape().back() != 1 || in.getShape().back() == 1)
    return false;
  if (in.getShape().drop_back() != out.getShape().drop_back())
    return false;
  input = rm.getData();
  return true;
}

std::string stripSuffix(StringRef name) {
  for (StringRef suffix : {".weight", ".scale", ".gamma"})
    if (name.ends_with(suffix))
      return name.drop_back(suffix.size()).str();
  return name.str();
}

struct Match {
  SmallVector<Operation *> ops; // every op of the pattern, the output's producer included
  SmallVector<Value> inputs;
  Value output;
  std::string name;
  NamedAttrList attrs;
};

class Raiser {
public:
  explicit Raiser(func::FuncOp f) : func(f) {}

  template <typename OpTy> void raise(StringRef kind, function_ref<std::optional<Match>(Operation *)> match) {
    SmallVector<Operation *> candidates;
    // Ops of the function body only: those already inside a layer are taken.
    for (Operation &op : func.getBody().front())
      candidates.push_back(&op);
    for (Operation *op : candidates) {
      if (erased.contains(op))
        continue;
      if (std::optional<Match> m = match(op))
        build<OpTy>(kind, *m);
    }
  }

private:
  std::string uniqueName(StringRef kind, std::string name) {
    if (name.empty())
      name = (kind + "_" + std::to_string(counter++)).str();
    std::string n = name;
    for (unsigned i = 2; !names.insert(n).second; ++i)
      n = name + "#" + std::to_string(i);
    return n;
  }

  template <typename OpTy> void build(StringRef kind, Match &m) {
    llvm::sort(m.ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    m.ops.erase(std::unique(m.ops.begin(), m.ops.end()), m.ops.end());
    Operation *last = m.ops.back();
    OpBuilder b(func.getContext());
    b.setInsertionPointAfter(last);
    // A dynamo export says which module traced each node: the layer takes that module's path, so a
    // tied weight (an lm_head sharing the embedding's) or one the exporter renamed (optimize=True's
    // val_N) still names the layer as the model does.
    std::string module = m.output.getDefiningOp() ? ox::getModulePath(m.output.getDefiningOp()) : "";
    for (Operation *o : m.ops)
      if (module.empty())
        module = ox::getModulePath(o);
    if (!module.empty())
      m.name = module;
    m.attrs.set("layer", b.getStringAttr(uniqueName(kind, m.name)));
    OperationState st(last->getLoc(), OpTy::getOperationName());
    st.addOperands(m.inputs);
    st.addTypes(m.output.getType());
    st.addAttributes(m.attrs);
    Region *region = st.addRegion();
    Block *body = new Block();
    region->push_back(body);
    IRMapping map;
    for (Value in : m.inputs)
      map.map(in, body->addArgument(in.getType(), in.getLoc()));
    OpBuilder inner(func.getContext());
    inner.setInsertionPointToEnd(body);
    for (Operation *op : m.ops)
      inner.clone(*op, map);
    inner.create<nn::YieldOp>(last->getLoc(), ValueRange{map.lookup(m.output)});
    Operation *layer = b.create(st);
    m.output.replaceAllUsesWith(layer->getResult(0));
    // Ops still used outside (shared subexpressions) stay; the rest go.
    for (Operation *op : llvm::reverse(m.ops))
      if (op->use_empty()) {
        erased.insert(op);
        op->erase();
      }
  }

  func::FuncOp func;
  llvm::DenseSet<Operation *> erased;
  llvm::StringSet<> names;
  unsigned counter = 0;
};

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

std::optional<Match> matchLinear(Operation *op) {
  Match m;
  Value x, w;
  bool transposed = false;
  OpBuilder b(op->getContext());
  if (auto mm = dyn_cast<ox::MatMulOp>(op)) {
    x = mm.getA();
    w = mm.getB();
    if (auto t = def<ox::TransposeOp>(w)) {
      auto perm = t.getPerm();
      if (perm && !(perm->size() == 2 && (*perm)[0] == 1 && (*perm)[1] == 0))
        return std::nullopt;
      w = t.getData();
      transposed = true;
      m.ops.push_back(t);
    }
  } else if (auto g = dyn_cast<ox::GemmOp>(op)) {
    if (g.getTransA().value_or(0) != 0 || g.getAlpha().value_or(APFloat(1.0f)).convertToDouble() != 1.0)
      return std::nullopt;
    bool hasC = !g.getC().getType().isa<NoneType>();
    if (hasC && g.getBeta().value_or(APFloat(1.0f)).convertToDouble() != 1.0)
      return std::nullopt;
    x = g.getA();
    w = g.getB();
    transposed = g.getTransB().value_or(0) != 0;
  } else {
    return std::nullopt;
  }
  ox::InitializerOp init = floatInit(w, 2);
  auto xt = x.getType().dyn_cast<RankedTensorType>();
  if (!init || !xt || xt.getRank() < 2 || !xt.getElementType().isa<FloatType>())
    return std::nullopt;
  m.inputs = {x, w};
  m.ops.push_back(op);
  m.output = op->getResult(0);
  auto wt = init.getType().cast<RankedTensorType>();
  int64_t n = transposed ? wt.getDimSize(0) : wt.getDimSize(1);
  auto isBias = [&](Value v) {
    auto bi = floatInit(v, 1);
    return bi && bi.getType().cast<RankedTensorType>().getDimSize(0) == n;
  };
  if (auto g = dyn_cast<ox::GemmOp>(op)) {
    if (!g.getC().getType().isa<NoneType>()) {
      if (!isBias(g.getC()))
        return std::nullopt;
      m.inputs.push_back(g.getC());
    }
  } else if (op->getResult(0).hasOneUse()) {
    Operation *user = *op->getResult(0).getUsers().begin();
    if (auto add = dyn_cast<ox::AddOp>(user)) {
      Value other = add.getA() == op->getResult(0) ? add.getB() : add.getA();
      if (isBias(other) && add.getType() == op->getResult(0).getType()) {
        m.inputs.push_back(other);
        m.ops.push_back(add);
        m.output = add.getResult();
      }
    }
  }
  m.name = stripSuffix(init.getName());
  m.attrs.set("transpose_weight", b.getBoolAttr(transposed));
  return m;
}

/// sqrt's argument as mean(p) + eps over the last axis: returns eps and sets
/// `p` (the averaged value) and `meanOp`.
std::optional<double> meanPlusEps(ox::AddOp add, Value &p, Operation *&meanOp) {
  std::optional<double> eps;
  Value mean;
  eitherOrder(add, [&](Value a, Value b) {
    eps = constScalar(b);
    mean = a;
    return eps.has_value();
  });
  if (!eps || !isLastAxisMean(mean, p))
    return std::nullopt;
  meanOp = mean.getDefiningOp();
  return eps;
}

std::optional<Match> matchLayerNormOp(Operation *op) {
  auto ln = dyn_cast<ox::LayerNormalizationOp>(op);
  if (!ln || !ln.getMean().use_empty() || !ln.getInvStdDev().use_empty())
    return std::nullopt;
  auto xt = ln.getX().getType().dyn_cast<RankedTensorType>();
  int64_t axis = ln.getAxis().value_or(-1);
  if (!xt || (axis != -1 && axis != xt.getRank() - 1))
    return std::nullopt;
  Match m;
  m.ops = {op};
  m.inputs = {ln.getX(), ln.getScale()};
  if (!ln.getB().getType().isa<NoneType>())
    m.inputs.push_back(ln.getB());
  m.output = ln.getY();
  auto init = ln.getScale().getDefiningOp<ox::InitializerOp>();
  m.name = init ? stripSuffix(init.getName()) : ox::getNodeName(op);
  m.attrs.set("epsilon", Builder(op->getContext()).getF32FloatAttr(ln.getEpsilon().value_or(APFloat(1e-5f)).convertToFloat()));
  return m;
}

/// d / sqrt(mean(d^2) + eps) where d = x - mean(x), rooted at the Div.
std::optional<Match> matchLayerNormDecomposed(Operation *op) {
  auto div = dyn_cast<ox::DivOp>(op);
  if (!div)
    return std::nullopt;
  Match m;
  auto sub = def<ox::SubOp>(div.getA());
  auto sq = def<ox::SqrtOp>(div.getB());
  if (!sub || !sq)
    return std::nullopt;
  Value x = sub.getA(), meanIn, varIn;
  if (!isLastAxisMean(sub.getB(), meanIn) || meanIn != x)
    return std::nullopt;
  auto add = def<ox::AddOp>(sq.getX());
  Operation *varOp = nullptr;
  std::optional<double> eps = add ? meanPlusEps(add, varIn, varOp) : std::nullopt;
  if (!eps)
    return std::nullopt;
  auto pow = def<ox::PowOp>(varIn);
  if (!pow || pow.getA() != sub.getResult() || !isConst(pow.getB(), 2.0))
    return std::nullopt;
  m.ops = {sub.getB().getDefiningOp(), sub, pow, varOp, add, sq, div};
  // gamma (required) and beta (optional) as initializers.
  Value out = div.getResult();
  if (!out.hasOneUse())
    return std::nullopt;
  auto mul = dyn_cast<ox::MulOp>(*out.getUsers().begin());
  Value gamma;
  if (!mul || !eitherOrder(mul, [&](Value a, Value b) {
        gamma = b;
        return a == out && floatInit(b, 1);
      }))
    return std::nullopt;
  m.ops.push_back(mul);
  m.inputs = {x, gamma};
  m.output = mul.getResult();
  if (m.output.hasOneUse())
    if (auto badd = dyn_cast<ox::AddOp>(*m.output.getUsers().begin())) {
      Value beta;
      if (eitherOrder(badd, [&](Value a, Value b) {
            beta = b;
            return a == m.output && floatInit(b, 1);
          })) {
        m.ops.push_back(badd);
        m.inputs.push_back(beta);
        m.output = badd.getResult();
      }
    }
  m.name = stripSuffix(gamma.getDefiningOp<ox::InitializerOp>().getName());
  m.attrs.set("epsilon", Builder(op->getContext()).getF32FloatAttr(float(*eps)));
  return m;
}

/// A copy of another value with one reader: an Identity, or a Cast to its operand's own type (the
/// importer makes those Identity; MLIR input may still hold them). Null if `v` is none.
Operation *identityCopy(Value v) {
  Operation *d = v ? v.getDefiningOp() : nullptr;
  if (!d || !v.hasOneUse() || d->getNumOperands() != 1 || d->getOperand(0).getType() != v.getType())
    return nullptr;
  return isa<ox::IdentityOp, ox::CastOp>(d) ? d : nullptr;
}

/// An RMSNorm's scale: a float initializer of rank 1, or Gemma's (1 + w) of one (an Add of it and
/// the constant 1 that only the norm reads); the initializer, or null.
ox::InitializerOp rmsScale(Value v) {
  if (auto w = floatInit(v, 1))
    return w;
  auto add = def<ox::AddOp>(v);
  ox::InitializerOp w;
  if (add && v.hasOneUse() && eitherOrder(add, [&](Value a, Value b) {
        w = floatInit(a, 1);
        return w && isConst(b, 1.0) && a.getType() == v.getType();
      }))
    return w;
  return {};
}

/// gamma * (x * 1/sqrt(mean(x^2) + eps)), rooted at the outer Mul: 1/sqrt as Reciprocal(Sqrt) (the
/// dynamo exporter's rsqrt) or Div(1, Sqrt) (TorchScript's), the normalized x possibly through a
/// copy (HF's `.to(input_dtype)` of a float32 model), gamma a weight or Gemma's (1 + weight) (the
/// layer's scale input is then the Add's result, which stays outside the layer).
std::optional<Match> matchRMSNorm(Operation *op) {
  auto outer = dyn_cast<ox::MulOp>(op);
  if (!outer)
    return std::nullopt;
  Match m;
  Value gamma, normed;
  Operation *cast = nullptr;
  ox::InitializerOp weight;
  if (!eitherOrder(outer, [&](Value a, Value b) {
        gamma = a;
        cast = identityCopy(b);
        normed = cast ? cast->getOperand(0) : b;
        weight = rmsScale(a);
        return weight && (def<ox::MulOp>(normed) || def<ox::DivOp>(normed)) && (!cast || normed.hasOneUse());
      }))
    return std::nullopt;
  SmallVector<Operation *> ops;
  if (cast)
    ops.push_back(cast);
  Value x, sqrtV;
  if (auto mul = def<ox::MulOp>(normed)) {
    if (!eitherOrder(mul, [&](Value a, Value b) {
          if (auto rec = def<ox::ReciprocalOp>(b)) {
            x = a;
            sqrtV = rec.getX();
            ops.append({mul, rec});
            return true;
          }
          auto div = def<ox::DivOp>(b);
          if (!div || !isConst(div.getA(), 1.0) || !b.hasOneUse())
            return false;
          x = a;
          sqrtV = div.getB();
          ops.append({mul, div});
          return true;
        }))
      return std::nullopt;
  } else {
    auto div = def<ox::DivOp>(normed);
    x = div.getA();
    sqrtV = div.getB();
    ops.push_back(div);
  }
  auto sq = def<ox::SqrtOp>(sqrtV);
  auto add = sq ? def<ox::AddOp>(sq.getX()) : ox::AddOp();
  Value meanIn;
  Operation *meanOp = nullptr;
  std::optional<double> eps = add ? meanPlusEps(add, meanIn, meanOp) : std::nullopt;
  if (!eps)
    return std::nullopt;
  auto pow = def<ox::PowOp>(meanIn);
  if (!pow || pow.getA() != x || !isConst(pow.getB(), 2.0))
    return std::nullopt;
  // x - mean(x) would make this a LayerNorm without its mean: not an RMSNorm.
  if (auto sub = def<ox::SubOp>(x); sub && isLastAxisMean(sub.getB(), meanIn) && meanIn == sub.getA())
    return std::nullopt;
  m.ops = {pow, meanOp, add, sq, outer};
  m.ops.append(ops.begin(), ops.end());
  m.inputs = {x, gamma};
  m.output = outer.getResult();
  m.name = stripSuffix(weight.getName());
  m.attrs.set("epsilon", Builder(op->getContext()).getF32FloatAttr(float(*eps)));
  return m;
}

/// Flattens a tree of single-use Muls rooted at `root` into its factors.
void mulFactors(Value v, bool isRoot, SmallVectorImpl<Value> &factors, SmallVectorImpl<Operation *> &ops) {
  auto mul = def<ox::MulOp>(v);
  if (mul && (isRoot || v.hasOneUse())) {
    ops.push_back(mul);
    mulFactors(mul.getA(), false, factors, ops);
    mulFactors(mul.getB(), false, factors, ops);
    return;
  }
  factors.push_back(v);
}

std::optional<Match> matchGelu(Operation *op) {
  Match m;
  Builder b(op->getContext());
  if (auto g = dyn_cast<ox::GeluOp>(op)) {
    m.ops = {op};
    m.inputs = {g.getX()};
    m.output = g.getY();
    m.attrs.set("approximate", b.getStringAttr(g.getApproximate().value_or("none")));
    m.name = ox::getNodeName(op);
    return m;
  }
  if (!isa<ox::MulOp>(op))
    return std::nullopt;
  // Factors {x, 0.5, 1 + f(...)} with f = erf(x / sqrt 2) or tanh(sqrt(2/pi) (x + 0.044715 x^3)).
  SmallVector<Value> factors;
  mulFactors(op->getResult(0), true, factors, m.ops);
  if (factors.size() != 3)
    return std::nullopt;
  Value x, half, onePlus;
  for (Value f : factors) {
    if (isConst(f, 0.5))
      half = f;
    else if (auto add = def<ox::AddOp>(f); add && (isConst(add.getA(), 1.0) || isConst(add.getB(), 1.0)) &&
                                            (def<ox::ErfOp>(add.getA()) || def<ox::ErfOp>(add.getB()) ||
                                             def<ox::TanhOp>(add.getA()) || def<ox::TanhOp>(add.getB())))
      onePlus = f;
    else
      x = f;
  }
  if (!x || !half || !onePlus || !onePlus.hasOneUse())
    return std::nullopt;
  auto add1 = def<ox::AddOp>(onePlus);
  Value fn = isConst(add1.getA(), 1.0) ? add1.getB() : add1.getA();
  m.ops.push_back(add1);
  if (auto erf = def<ox::ErfOp>(fn)) {
    m.ops.push_back(erf);
    Value arg = erf.getX();
    if (auto d = def<ox::DivOp>(arg); d && d.getA() == x && isConst(d.getB(), std::sqrt(2.0), 1e-5))
      m.ops.push_back(d);
    else if (auto mu = def<ox::MulOp>(arg); mu && eitherOrder(mu, [&](Value a, Value c) {
                                                return a == x && isConst(c, 1.0 / std::sqrt(2.0), 1e-5);
                                              }))
      m.ops.push_back(mu);
    else
      return std::nullopt;
    m.attrs.set("approximate", b.getStringAttr("none"));
  } else if (auto th = def<ox::TanhOp>(fn)) {
    m.ops.push_back(th);
    // sqrt(2/pi) * (x + 0.044715 * x^3)
    auto outer = def<ox::MulOp>(th.getX());
    Value inner;
    if (!outer || !eitherOrder(outer, [&](Value a, Value c) {
          inner = a;
          return isConst(c, std::sqrt(2.0 / M_PI), 1e-5);
        }))
      return std::nullopt;
    auto sum = def<ox::AddOp>(inner);
    Value cubic;
    if (!sum || !eitherOrder(sum, [&](Value a, Value c) {
          cubic = c;
          return a == x;
        }))
      return std::nullopt;
    // 0.044715 * x^3, the cube as Pow(x, 3) (HF's NewGELU) or as x * x * x, in any order.
    SmallVector<Value> cubeFactors;
    SmallVector<Operation *> cubeOps;
    mulFactors(cubic, true, cubeFactors, cubeOps);
    int xs = 0, coefficients = 0;
    for (Value f : cubeFactors) {
      if (f == x) {
        ++xs;
      } else if (isConst(f, 0.044715, 1e-5)) {
        ++coefficients;
      } else if (auto pw = def<ox::PowOp>(f); pw && pw.getA() == x && isConst(pw.getB(), 3.0) && f.hasOneUse()) {
        xs += 3;
        cubeOps.push_back(pw);
      } else {
        return std::nullopt;
      }
    }
    if (xs != 3 || coefficients != 1)
      return std::nullopt;
    m.ops.append({outer, sum});
    m.ops.append(cubeOps);
    m.attrs.set("approximate", b.getStringAttr("tanh"));
  } else {
    return std::nullopt;
  }
  m.inputs = {x};
  m.output = op->getResult(0);
  m.name = ox::getNodeName(op);
  return m;
}

std::optional<Match> matchSilu(Operation *op) {
  auto mul = dyn_cast<ox::MulOp>(op);
  if (!mul)
    return std::nullopt;
  Match m;
  Value x;
  ox::SigmoidOp sig;
  if (!eitherOrder(mul, [&](Value a, Value b) {
        sig = def<ox::SigmoidOp>(b);
        x = a;
        return sig && sig.getX() == a;
      }))
    return std::nullopt;
  m.ops = {sig, mul};
  m.inputs = {x};
  m.output = mul.getResult();
  m.name = ox::getNodeName(op);
  return m;
}

struct RaiseLayersPass : octet::impl::RaiseLayersBase<RaiseLayersPass> {
  using RaiseLayersBase::RaiseLayersBase;
  void runOnOperation() override {
    static const char *kKinds[] = {"linear", "layer_norm", "rms_norm", "gelu", "silu"};
    llvm::StringSet<> want;
    for (const std::string &k : layers) {
      if (!llvm::is_contained(llvm::ArrayRef<const char *>(kKinds), StringRef(k))) {
        emitError(getOperation().getLoc()) << "octet-raise-layers: unknown layer kind '" << k
                                           << "' (layers=); known: linear, layer_norm, rms_norm, gelu, silu";
        return signalPassFailure();
      }
      want.insert(k);
    }
    auto on = [&](StringRef k) { return want.empty() || want.contains(k); };
    for (auto func : getOperation().getOps<func::FuncOp>())
      raiseIn(func, on);
  }

  void raiseIn(func::FuncOp func, function_ref<bool(StringRef)> on) {
    Raiser r(func);
    // Activations and norms first: their ops never overlap a Linear's.
    if (on("gelu"))
      r.raise<nn::GeluOp>("gelu", matchGelu);
    if (on("silu"))
      r.raise<nn::SiluOp>("silu", matchSilu);
    // LayerNorm before RMSNorm: a decomposed LayerNorm contains an RMSNorm of x - mean(x).
    if (on("layer_norm")) {
      r.raise<nn::LayerNormOp>("layer_norm", matchLayerNormOp);
      r.raise<nn::LayerNormOp>("layer_norm", matchLayerNormDecomposed);
    }
    if (on("rms_norm"))
      r.raise<nn::RMSNormOp>("rms_norm", matchRMSNorm);
    if (on("linear"))
      r.raise<nn::LinearOp>("linear", matchLinear);
  }
};

struct LowerLayersPass : octet::impl::LowerLayersBase<LowerLayersPass> {
  using LowerLayersBase::LowerLayersBase;

  void runOnOperation() override {
    SmallVector<Operation *> layers;
    getOperation().walk([&](Operation *op) {
      if (isa<nn::NNDialect>(op->getDialect()) && !isa<nn::YieldOp>(op))
        layers.push_back(op);
    });
    for (Operation *op : layers) {
      auto gelu = dyn_cast<nn::GeluOp>(op);
      if (geluOp && gelu && gelu->getNumResults() == 1 && gelu.getX().getType() == gelu.getOutput().getType()) {
        // One Gelu op: its gradient reads only x, so the backward keeps no GELU intermediates.
        OpBuilder b(op);
        Value y = b.create<ox::GeluOp>(op->getLoc(), gelu.getOutput().getType(), gelu.getX(),
                                       b.getStringAttr(gelu.getApproximate()))
                      .getResult();
        gelu.getOutput().replaceAllUsesWith(y);
        op->erase();
        continue;
      }
      if (normOps && lowerNorm(op))
        continue;
      nn::inlineLayer(op);
    }
  }

  /// norm-ops: a float32 nn.layer_norm or nn.rms_norm (its one output of x's type, a scale and a
  /// bias of the last axis's n elements) as one onnx.LayerNormalization or onnx.RMSNormalization
  /// over the last axis with the layer's epsilon; false leaves the layer to be inlined.
  static bool lowerNorm(Operation *op) {
    bool ln = isa<nn::LayerNormOp>(op), rms = isa<nn::RMSNormOp>(op);
    if (!(ln || rms) || op->getNumResults() != 1 || op->getNumOperands() < 2 ||
        op->getNumOperands() > (ln ? 3u : 2u))
      return false;
    Value x = op->getOperand(0);
    auto xt = x.getType().dyn_cast<RankedTensorType>();
    if (!xt || xt.getRank() < 1 || !xt.getElementType().isF32() || op->getResult(0).getType() != xt)
      return false;
    int64_t n = xt.getShape().back();
    for (Value p : op->getOperands().drop_front()) {
      auto pt = p.getType().dyn_cast<RankedTensorType>();
      if (!pt || !pt.getElementType().isF32() || !pt.hasStaticShape() || ShapedType::isDynamic(n) ||
          pt.getNumElements() != n || (pt.getRank() && pt.getShape().back() != n))
        return false;
    }
    OpBuilder b(op);
    // The node is named after the layer (`model.layers.0.input_layernorm`).
    Location loc = NameLoc::get(op->getAttrOfType<StringAttr>("layer"), op->getLoc());
    auto eps = op->getAttrOfType<FloatAttr>("epsilon");
    auto epsAttr = b.getF32FloatAttr(eps ? float(eps.getValueAsDouble()) : 1e-5f);
    auto axis = b.getIntegerAttr(b.getIntegerType(64, true), -1);
    Operation *norm;
    if (ln) {
      Type none = b.getNoneType();
      Value bias = op->getNumOperands() > 2
                       ? op->getOperand(2)
                       : b.create<ox::NoneOp>(loc, b.getNoneType()).getResult();
      norm = b.create<ox::LayerNormalizationOp>(
          loc, TypeRange{xt, none, none}, x, op->getOperand(1), bias, axis, epsAttr, IntegerAttr());
    } else {
      norm = b.create<ox::RMSNormalizationOp>(loc, xt, x, op->getOperand(1), axis, epsAttr,
                                              IntegerAttr());
    }
    op->getResult(0).replaceAllUsesWith(norm->getResult(0));
    op->erase();
    return true;
  }
};

} // namespace
