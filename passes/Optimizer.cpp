//===- Optimizer.cpp - The optimizer step inside the training function ---===//
//
// octet-optimizer: after octet-autodiff, parameters, optimizer moments and a
// step counter become runtime state, and the function computes their next
// values: one call of the function is one training step. The update is
// plain onnx arithmetic (PyTorch's rules), so an ONNX export of the step runs
// anywhere; MS-AMP storage levels add fp8 casts around the stored tensors.
//
//===----------------------------------------------------------------------===//
#include "octet/Passes/Passes.h"

#include "GradientBuilder.h"
#include "StateUtils.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace octet {
#define GEN_PASS_DEF_OPTIMIZER
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

LogicalResult badOption(Operation *op, StringRef key, const Twine &value, StringRef allowed) {
  return op->emitError() << "octet-optimizer: " << key << "='" << value << "' is not valid; use " << allowed;
}

void setRole(Value v, StringRef role) {
  if (Operation *def = v.getDefiningOp())
    def->setAttr(octet::kRoleAttr, StringAttr::get(v.getContext(), role));
}

struct OptimizerPass : octet::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  LogicalResult validate(Operation *m) {
    if (optimizer != "sgd" && optimizer != "adam" && optimizer != "adamw")
      return badOption(m, "optimizer", optimizer, "sgd, adam or adamw");
    if (shardUnit != "layer" && shardUnit != "parameter")
      return badOption(m, "shard-unit", shardUnit, "layer or parameter");
    // Every number finite (an infinite or NaN rate, decay or bound trains NaN weights).
    auto num = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v); // inf, nan as Python and PyTorch print them
      return std::string(buf);
    };
    if (!(lr > 0) || !std::isfinite(lr))
      return badOption(m, "lr", num(lr), "a finite number > 0");
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
      return badOption(m, "beta1/beta2", num(beta1) + "/" + num(beta2), "numbers in [0, 1)");
    if (!(eps > 0) || !std::isfinite(eps))
      return badOption(m, "eps", num(eps), "a finite number > 0");
    for (auto [key, v] : {std::pair<StringRef, double>{"weight-decay", weightDecay}, {"momentum", momentum},
                          {"clip-grad-norm", clipGradNorm}, {"min-lr", minLr}})
      if (!(v >= 0) || !std::isfinite(v))
        return badOption(m, key, num(v), "a finite number >= 0");
    if (schedule != "constant" && schedule != "cosine")
      return badOption(m, "schedule", schedule, "constant or cosine");
    if (warmupSteps < 0)
      return badOption(m, "warmup-steps", std::to_string(warmupSteps), "an integer >= 0");
    if (schedule == "cosine" && totalSteps <= warmupSteps)
      return badOption(m, "total-steps", std::to_string(totalSteps), "an integer > warmup-steps with schedule=cosine");
    if (!msampLevel.empty() && msampLevel != "O1" && msampLevel != "O2" && msampLevel != "O3")
      return badOption(m, "msamp-level", msampLevel, "O1, O2 or O3 (or empty)");
    if (msampGradFormat != "e4m3" && msampGradFormat != "e5m2")
      return badOption(m, "msamp-grad-format", msampGradFormat, "e4m3 or e5m2");
    if (msampWeightRounding != "nearest" && msampWeightRounding != "stochastic")
      return badOption(m, "msamp-weight-rounding", msampWeightRounding, "nearest or stochastic");
    for (const std::string &part : msampFloat32) {
      if (part != "weights" && part != "gradients")
        return badOption(m, "msamp-float32", part, "weights and/or gradients");
      (part == "weights" ? f32Weights : f32Grads) = true;
    }
    if (!msampFloat32.empty() && msampLevel.empty())
      return m->emitError("octet-optimizer: msamp-float32 needs an msamp-level (O1, O2 or O3)");
    if (f32Weights && msampWeightRounding == "stochastic")
      return m->emitError("octet-optimizer: msamp-weight-rounding=stochastic rounds FP16 weights; with "
                          "msamp-float32=weights there are none");
    return success();
  }

  bool f32Weights = false, f32Grads = false; // msamp-float32

  struct Param {
    ox::InitializerOp init;
    Value grad;
    bool fp8Weight = false; // the weight of an FP8 Linear (MS-AMP storage applies)
    bool gradInFp8 = false; // octet-data-parallel all-reduced it as FP8 codes already
    int64_t shards = 0;     // octet-data-parallel reduce-scattered it over this many ranks: grad is a shard
    bool masterShard = false; // MS-AMP O3, sharded: the state is this rank's shard of the FP16 master
    bool weightShard = false; // shard-parameters (ZeRO-3): the state is this rank's shard of the weight
  };

  /// Learning rate at `s` (f32 scalar: the 0-based step).
  Value learningRate(octet::GradientBuilder &g, Value s) {
    Type f32 = g.b.getF32Type();
    auto c = [&](double v) { return g.scalar(v, f32); };
    Value peak = c(lr);
    Value warm = peak;
    if (warmupSteps > 0) // lr * min(1, (s + 1) / warmup)
      warm = g.mul(peak, g.binary("Min", c(1.0), g.div(g.add(s, c(1.0)), c(double(warmupSteps))),
                                  RankedTensorType::get({}, f32)));
    if (schedule == "constant")
      return warm;
    // min + (peak - min) / 2 * (1 + cos(pi * clamp((s - warmup) / (total - warmup), 0, 1)))
    Value prog = g.div(g.sub(s, c(double(warmupSteps))), c(double(totalSteps - warmupSteps)));
    prog = g.ox.op("Clip", prog.getType(), {prog, c(0.0), c(1.0)});
    Value cosv = g.unary("Cos", g.mul(prog, c(M_PI)));
    Value decayed = g.add(c(minLr), g.mul(c(0.5 * (lr - minLr)), g.add(c(1.0), cosv)));
    if (warmupSteps == 0)
      return decayed;
    auto cond = RankedTensorType::get({}, g.b.getI1Type());
    return g.ox.op("Where", s.getType(), {g.ox.op("Less", cond, {s, c(double(warmupSteps))}), warm, decayed});
  }

  /// Emulates storing `v` in FP8 with a power-of-2 per-tensor scale; returns
  /// (codes, scale_inv, the dequantized value).
  std::tuple<Value, Value, Value> fp8RoundTrip(OpBuilder &b, Location loc, Value v, Type format) {
    auto vt = v.getType().cast<RankedTensorType>();
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    Value amax = b.create<fp8::AmaxOp>(loc, scalar, v, b.getBoolAttr(false));
    Value scaleInv = octet::msampScale(b, loc, amax, format).second;
    Value q = b.create<fp8::CastOp>(loc, RankedTensorType::get(vt.getShape(), format), v, scaleInv,
                                    b.getBoolAttr(true));
    Value d = b.create<fp8::DequantizeOp>(loc, vt, q, scaleInv);
    return {q, scaleInv, d};
  }

  DenseElementsAttr zerosOf(RankedTensorType t) {
    return DenseElementsAttr::get(t, ArrayRef<Attribute>{FloatAttr::get(t.getElementType(), 0.0)});
  }

  /// Converts a float initializer's value to another float type.
  /// An FP32 initializer's value (dense or dense_resource) as another float
  /// type, rounded to nearest even.
  FailureOr<DenseElementsAttr> convert(ox::InitializerOp init, FloatType to) {
    auto t0 = init.getType().cast<RankedTensorType>();
    if (auto splat = init.getValue().dyn_cast<DenseElementsAttr>(); splat && splat.isSplat() &&
                                                                   t0.getElementType().isF32()) {
      APFloat c = splat.getSplatValue<APFloat>();
      bool lost;
      c.convert(to.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      return DenseElementsAttr::get(RankedTensorType::get(t0.getShape(), to), c);
    }
    std::string raw;
    if (failed(ox::getRawTensorBytes(init.getValue(), raw)))
      return init.emitError("octet-optimizer: cannot read the value of '") << init.getName() << "'";
    auto t = init.getType().cast<RankedTensorType>();
    SmallVector<APFloat> values;
    values.reserve(size_t(t.getNumElements()));
    for (int64_t i = 0; i < t.getNumElements(); ++i) {
      float f;
      std::memcpy(&f, raw.data() + i * 4, 4);
      APFloat c(f);
      bool lost;
      c.convert(to.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(c);
    }
    return DenseElementsAttr::get(RankedTensorType::get(t.getShape(), to), values);
  }

  /// shard-parameters (ZeRO-3): `p`'s state becomes this rank's 1-D shard of the flattened,
  /// zero-padded weight (the plan carries the whole, each rank slices its part at load), in the
  /// weight's own type or, for MS-AMP O1/O2's FP8 weights, FP16. The step reads the weight through
  /// an all-gather at `b`'s point (the step's start; octet-gather-parameters places it), and
  /// `master` becomes the shard (widened to float32) that the update reads and writes.
  LogicalResult shardParameter(OpBuilder &b, octet::GradientBuilder &g, Param &p, Value &master) {
    auto t = p.init.getType().cast<RankedTensorType>();
    bool f16 = p.fp8Weight && !f32Weights;
    Type stored = f16 ? Type(b.getF16Type()) : t.getElementType();
    ElementsAttr whole = p.init.getValue().dyn_cast<ElementsAttr>();
    if (f16) {
      FailureOr<DenseElementsAttr> c = convert(p.init, b.getF16Type());
      if (failed(c))
        return failure();
      whole = *c;
    }
    if (!whole)
      return p.init.emitError("octet-optimizer: cannot shard '") << p.init.getName() << "': its value is not a tensor";
    int64_t shard = (t.getNumElements() + p.shards - 1) / p.shards;
    auto st = RankedTensorType::get({shard}, stored);
    OpBuilder ib(p.init);
    auto ws = ib.create<ox::InitializerOp>(p.init.getLoc(), st, p.init.getNameAttr(), zerosOf(st));
    ws->setAttr(octet::kShardInitAttr, whole);
    ws->setAttr(octet::kShardCountAttr, b.getI64IntegerAttr(p.shards));
    Location loc = p.init.getLoc();
    auto gather = b.create<fp8::AllGatherOp>(loc, RankedTensorType::get({shard * p.shards}, stored), ws.getResult(),
                                             b.getI64IntegerAttr(p.shards));
    gather->setAttr(octet::kParameterGatherAttr, b.getUnitAttr());
    Value weight = octet::unpadded(b, loc, gather, RankedTensorType::get(t.getShape(), stored));
    if (f16)
      weight = g.ox.op("Cast", t, {weight}, {g.ox.si64("to", 1)});
    p.init.getResult().replaceAllUsesWith(weight);
    p.init->erase();
    p.init = ws;
    master = f16 ? g.ox.op("Cast", RankedTensorType::get({shard}, b.getF32Type()), {ws}, {g.ox.si64("to", 1)})
                 : ws.getResult();
    p.masterShard = p.weightShard = true;
    return success();
  }

  /// ZeRO-2's gathers of the updated shards (parameter name, gather), made in the optimizer's order.
  std::vector<std::pair<std::string, Operation *>> updatedGathers;
  /// MS-AMP O3 under shard-optimizer: the FP8 weights gathered at the step's start, by name.
  std::vector<std::pair<std::string, Operation *>> startGathers;

  /// shard-unit=layer: the updated shards of one layer's parameters (octet::layerOf) gathered in one
  /// collective, after the last of them is updated; what read the members' results (cutting the
  /// padding off, for the state update) moves after it.
  static void gatherUpdatedByLayer(Block &body, ArrayRef<std::pair<std::string, Operation *>> gathers) {
    std::vector<std::pair<std::string, SmallVector<Operation *>>> layers;
    for (const auto &[name, g] : gathers) {
      std::string layer = octet::layerOf(name);
      if (layer.empty())
        continue;
      auto it = llvm::find_if(layers, [&](const auto &l) {
        return l.first == layer && l.second.front()->getOperand(0).getType().template cast<RankedTensorType>().getElementType() ==
                                       g->getOperand(0).getType().cast<RankedTensorType>().getElementType();
      });
      if (it == layers.end())
        layers.push_back({layer, {}}), it = std::prev(layers.end());
      it->second.push_back(g);
    }
    for (auto &[layer, members] : layers) {
      if (members.size() < 2)
        continue;
      Operation *last = members.front();
      for (Operation *g : members)
        if (last->isBeforeInBlock(g))
          last = g;
      OpBuilder b(last->getContext());
      b.setInsertionPointAfter(last);
      octet::GatheredTogether t = octet::gatherTogether(b, last->getLoc(), members);
      // Users of the parts placed before them (each member's own unpadding), in order, after them.
      Operation *end = t.unpack.back();
      llvm::SetVector<Operation *> later;
      SmallVector<Value> work;
      for (Operation *op : t.unpack)
        work.append(op->result_begin(), op->result_end());
      while (!work.empty()) {
        Value v = work.pop_back_val();
        for (Operation *u : v.getUsers())
          if (Operation *in = body.findAncestorOpInBlock(*u); in && in->isBeforeInBlock(end) &&
                                                               !llvm::is_contained(t.unpack, in) && later.insert(in))
            work.append(in->result_begin(), in->result_end());
      }
      SmallVector<Operation *> down(later.begin(), later.end());
      llvm::sort(down, [](Operation *a, Operation *c) { return a->isBeforeInBlock(c); });
      for (Operation *op : down) {
        op->moveAfter(end);
        end = op;
      }
    }
  }

  LogicalResult run(func::FuncOp func) {
    updatedGathers.clear();
    startGathers.clear();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::StringMap<ox::InitializerOp> inits;
    for (auto i : body.getOps<ox::InitializerOp>())
      inits[i.getName()] = i;
    SmallVector<Param> params;
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      auto of = func.getResultAttrOfType<StringAttr>(r, octet::kGradOfAttr);
      if (!of)
        continue;
      auto it = inits.find(of.getValue());
      if (it == inits.end())
        return func.emitError() << "octet-optimizer: gradient of unknown parameter '" << of.getValue() << "'";
      auto shards = func.getResultAttrOfType<IntegerAttr>(r, octet::kGradShardsAttr);
      params.push_back({it->second, ret.getOperand(r), false, bool(func.getResultAttr(r, octet::kGradStorageAttr)),
                        shards ? shards.getInt() : 0});
    }
    if (params.empty())
      return func.emitError() << "octet-optimizer: the function has no gradients; run octet-autodiff first";
    llvm::DenseSet<Value> fp8Weights;
    func.walk([&](fp8::LinearOp l) { fp8Weights.insert(octet::linearWeightSource(l)); });
    for (Param &p : params)
      p.fp8Weight = !msampLevel.empty() && fp8Weights.contains(p.init.getResult()) &&
                    p.init.getType().cast<RankedTensorType>().getElementType().isF32();

    Location loc = func.getLoc();
    OpBuilder b(ret);
    octet::GradientBuilder g(b, loc);
    Type f32 = b.getF32Type();
    auto scalarF32 = RankedTensorType::get({}, f32);
    auto c = [&](double v) { return g.scalar(v, f32); };
    SmallVector<std::pair<std::string, Value>> updates;
    auto state = [&](const std::string &name, DenseElementsAttr init, StringRef role) {
      Value v = octet::getOrCreateState(func, loc, name, init);
      setRole(v, role);
      return v;
    };

    // MS-AMP storage of FP8 Linear weights: FP16 (O1, O2) or an FP16 master with an FP8 copy the
    // forward pass uses (O3); with msamp-float32=weights, float32 weights (O1, O2: nothing to do)
    // or float32 masters (O3: the same FP8 copy, cast from a float32 master).
    for (Operation &op : body)
      if (!isa<ox::InitializerOp>(op)) {
        b.setInsertionPoint(&op);
        break;
      }
    SmallVector<Value> master(params.size());
    SmallVector<size_t> gatheredMasters; // O3 with a sharded optimizer: built below
    for (auto [i, p] : llvm::enumerate(params)) {
      master[i] = p.init.getResult();
      if (shardParameters && p.shards > 1 && !(p.fp8Weight && msampLevel == "O3")) {
        if (failed(shardParameter(b, g, p, master[i])))
          return failure();
        continue;
      }
      if (!p.fp8Weight || (f32Weights && msampLevel != "O3"))
        continue;
      auto t = p.init.getType().cast<RankedTensorType>();
      // The stored weight's (O3: master's) element type: FP16 (MS-AMP's) or float32
      // (msamp-float32=weights, which needs no new state unless sharded).
      FloatType storedType = f32Weights ? b.getF32Type() : b.getF16Type();
      OpBuilder ib(p.init);
      FailureOr<DenseElementsAttr> stored;
      if (!f32Weights || p.shards > 1) {
        stored = convert(p.init, storedType);
        if (failed(stored))
          return failure();
      }
      if (msampLevel == "O3" && p.shards > 1) {
        // The rank's shard of the flattened, zero-padded master is its state; the plan carries the
        // whole weight, which each rank slices at load.
        int64_t shard = (t.getNumElements() + p.shards - 1) / p.shards;
        auto st = RankedTensorType::get({shard}, storedType);
        auto ws = ib.create<ox::InitializerOp>(p.init.getLoc(), st, p.init.getNameAttr(), zerosOf(st));
        ws->setAttr(octet::kShardInitAttr, *stored);
        ws->setAttr(octet::kShardCountAttr, b.getI64IntegerAttr(p.shards));
        master[i] = f32Weights ? ws.getResult()
                               : g.ox.op("Cast", RankedTensorType::get({shard}, f32), {ws}, {g.ox.si64("to", 1)});
        p.masterShard = true;
        gatheredMasters.push_back(i);
        continue;
      }
      // The weight's readers (the forward pass) read the FP16 weight widened, or (O3) the FP8 copy
      // of the master; the optimizer, built below, reads master[i].
      SmallVector<OpOperand *> readers;
      for (OpOperand &u : p.init.getResult().getUses())
        readers.push_back(&u);
      ox::InitializerOp w16;
      if (!f32Weights) {
        w16 = ib.create<ox::InitializerOp>(p.init.getLoc(), RankedTensorType::get(t.getShape(), b.getF16Type()),
                                           p.init.getNameAttr(), *stored);
        master[i] = g.ox.op("Cast", t, {w16}, {g.ox.si64("to", 1)});
      }
      Value forwardWeight = master[i];
      if (msampLevel == "O3")
        forwardWeight = std::get<2>(fp8RoundTrip(b, loc, master[i], b.getFloat8E4M3FNType()));
      for (OpOperand *u : readers)
        u->set(forwardWeight);
      if (w16) {
        p.init->erase();
        p.init = w16;
      }
    }
    // O3 sharded: the step starts by gathering each weight as FP8 codes. The shards' amaxes travel
    // in one all-reduce (max): each weight's power-of-2 scale is the one its whole master gives, so
    // the gathered codes are those the replicated O3 plan casts. Each shard is cast and all-gathered
    // (a quarter of float32's bytes); octet-overlap-collectives waits for each where the forward
    // pass first reads it.
    if (!gatheredMasters.empty()) {
      SmallVector<Value> amaxes;
      for (size_t i : gatheredMasters)
        amaxes.push_back(b.create<fp8::AmaxOp>(loc, scalarF32, master[i], b.getBoolAttr(false)));
      SmallVector<Value> reduced = octet::maxOverRanks(b, loc, amaxes);
      for (auto [j, i] : llvm::enumerate(gatheredMasters)) {
        Param &p = params[i];
        Value amax = reduced[j];
        Value scaleInv = octet::msampScale(b, loc, amax, b.getFloat8E4M3FNType()).second;
        auto shardType = master[i].getType().cast<RankedTensorType>();
        Type e4m3 = b.getFloat8E4M3FNType();
        Value codes = b.create<fp8::CastOp>(loc, RankedTensorType::get(shardType.getShape(), e4m3), master[i], scaleInv,
                                            b.getBoolAttr(true));
        auto gather = b.create<fp8::AllGatherOp>(
            loc, RankedTensorType::get({shardType.getDimSize(0) * p.shards}, e4m3), codes, b.getI64IntegerAttr(p.shards));
        if (shardParameters)
          gather->setAttr(octet::kParameterGatherAttr, b.getUnitAttr());
        else // ZeRO-2: the step's start gathers a layer's codes in one (octet-gather-parameters does ZeRO-3's)
          startGathers.push_back({p.init.getName().str(), gather});
        Value whole = gather;
        auto wt = p.init.getType().cast<RankedTensorType>();
        whole = octet::unpadded(b, loc, whole, RankedTensorType::get(wt.getShape(), e4m3));
        Value forwardWeight = b.create<fp8::DequantizeOp>(loc, wt, whole, scaleInv);
        ox::InitializerOp shard = f32Weights ? master[i].getDefiningOp<ox::InitializerOp>()
                                             : master[i].getDefiningOp()->getOperand(0).getDefiningOp<ox::InitializerOp>();
        p.init.getResult().replaceAllUsesWith(forwardWeight);
        p.init->erase();
        p.init = shard;
      }
    }
    b.setInsertionPoint(ret);

    // Step counter, learning rate.
    auto i64 = RankedTensorType::get({}, b.getIntegerType(64));
    Value step = state("octet.train.step", DenseElementsAttr::get(i64, int64_t(0)), "step");
    Value one64 = g.ox.constant(DenseElementsAttr::get(i64, int64_t(1)));
    Value nextStep = g.ox.op("Add", i64, {step, one64});
    updates.push_back({"octet.train.step", nextStep});
    Value s = g.ox.op("Cast", scalarF32, {step}, {g.ox.si64("to", 1)});
    Value t = g.add(s, c(1.0)); // 1-based step for bias correction
    Value lrNow = learningRate(g, s);

    // MS-AMP O1+: weight gradients are held in FP8 with a power-of-2 scale, E4M3 as MS-AMP holds and
    // all-reduces them (msamp-grad-format; octet-data-parallel's FP8 all-reduce has already put
    // them in its own format), unless msamp-float32 keeps them float32.
    for (Param &p : params)
      if (f32Grads && p.gradInFp8)
        return p.init.emitError() << "octet-optimizer: msamp-float32=gradients, but the gradient of '"
                                  << p.init.getName() << "' arrives as FP8 codes (octet-data-parallel fp8-gradients)";
    Type gradFormat = msampGradFormat == "e5m2" ? Type(b.getFloat8E5M2Type()) : Type(b.getFloat8E4M3FNType());
    for (unsigned r = 0; r < func.getNumResults(); ++r)
      for (Param &p : params)
        if (p.fp8Weight && !p.gradInFp8 && !f32Grads &&
            func.getResultAttrOfType<StringAttr>(r, octet::kGradOfAttr) == p.init.getNameAttr())
          func.setResultAttr(r, octet::kGradStorageAttr, TypeAttr::get(gradFormat));
    for (Param &p : params)
      if (p.fp8Weight && !p.gradInFp8 && !f32Grads)
        p.grad = std::get<2>(fp8RoundTrip(b, loc, p.grad, gradFormat));

    // Global gradient norm and clipping. Every gradient's sum of squares first, then their sum
    // (in parameter order): the reductions sit side by side, so a backend runs them as one launch.
    SmallVector<Value> squares;
    for (Param &p : params) {
      int64_t r = p.grad.getType().cast<RankedTensorType>().getRank();
      // One read of the gradient: ReduceSumSquare over every axis (no axes operand, so the
      // node means the same in every opset).
      squares.push_back(r ? g.ox.op("ReduceSumSquare", scalarF32, {p.grad}, {g.ox.si64("keepdims", 0)})
                          : g.mul(p.grad, p.grad));
    }
    // Sharded gradients' squares are this rank's part: summed over the ranks by one all-reduce.
    Value sumsq, shardSumsq;
    for (auto [p, s2] : llvm::zip(params, squares)) {
      Value &acc = p.shards ? shardSumsq : sumsq;
      acc = acc ? g.add(acc, s2) : s2;
    }
    if (shardSumsq) {
      Value all = b.create<fp8::AllReduceOp>(loc, scalarF32, shardSumsq, Value(),
                                             fp8::ReductionAttr::get(b.getContext(), fp8::Reduction::sum));
      sumsq = sumsq ? g.add(sumsq, all) : all;
    }
    Value gnorm = g.unary("Sqrt", sumsq);
    // MS-AMP O2/O3 moments of an FP8 weight updated by one fp8.adam_step (fuse-msamp-adam): it
    // takes the unclipped gradient and the clipping coefficient (Adam's L2 term, which needs the
    // float32 weight in the gradient, keeps the ops).
    auto fusedStep = [&](const Param &p) {
      return fuseMsampAdam && p.fp8Weight && (msampLevel == "O2" || msampLevel == "O3") && optimizer != "sgd" &&
             !(optimizer == "adam" && weightDecay > 0);
    };
    Value clipCoef;
    if (clipGradNorm > 0) { // PyTorch: coef = min(1, max_norm / (norm + 1e-6))
      clipCoef = g.binary("Min", c(1.0), g.div(c(clipGradNorm), g.add(gnorm, c(1e-6))), scalarF32);
      for (Param &p : params)
        if (!fusedStep(p))
          p.grad = g.mul(p.grad, clipCoef);
    }

    Value bc1, bc2sqrt;
    if (optimizer != "sgd") {
      bc1 = g.sub(c(1.0), g.binary("Pow", c(beta1), t, scalarF32));
      bc2sqrt = g.unary("Sqrt", g.sub(c(1.0), g.binary("Pow", c(beta2), t, scalarF32)));
    }
    // The updates run smallest parameter first, parameters of one size side by side (a backend runs
    // consecutive elementwise programs over one size as one kernel: the biases and norm weights
    // together, not one kernel each between the matrices); results keep the parameters' order.
    SmallVector<size_t> order(params.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    auto numel = [&](size_t i) { return master[i].getType().cast<RankedTensorType>().getNumElements(); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return numel(a) < numel(b); });
    std::vector<SmallVector<std::pair<std::string, Value>>> own(params.size());
    for (size_t i : order) {
      Param &p = params[i];
      auto &updates = own[i];
      std::string name = p.init.getName().str();
      auto pt = master[i].getType().cast<RankedTensorType>();
      Value w = master[i], grad = p.grad;
      // Sharded (ZeRO-2): this rank updates its shard of the flattened, padded weight, with moments
      // of the shard's size; the updated shards are gathered back whole (replicated weights).
      auto toShard = [&](Value full) {
        Value flat = octet::flatPadded(b, loc, full, p.shards);
        auto ft = flat.getType().cast<RankedTensorType>();
        return Value(b.create<fp8::ShardOp>(loc, RankedTensorType::get({ft.getDimSize(0) / p.shards}, ft.getElementType()),
                                            flat, b.getI64IntegerAttr(p.shards)));
      };
      auto gathered = [&](Value shard, RankedTensorType whole) {
        auto st = shard.getType().cast<RankedTensorType>();
        auto all = b.create<fp8::AllGatherOp>(loc, RankedTensorType::get({st.getDimSize(0) * p.shards}, st.getElementType()),
                                              shard, b.getI64IntegerAttr(p.shards));
        updatedGathers.push_back({name, all});
        return octet::unpadded(b, loc, all, whole);
      };
      StringRef momentRole = p.shards ? "optimizer_shard" : "optimizer";
      // The FP16 weight (O3: master) rounded stochastically, with the parameter's index as salt.
      bool stochastic = p.fp8Weight && msampWeightRounding == "stochastic";
      if (p.shards && !p.masterShard) {
        w = toShard(w);
        pt = w.getType().cast<RankedTensorType>();
      }
      if (grad.getType() != pt)
        return p.init.emitError() << "octet-optimizer: the gradient of '" << name << "' has type " << grad.getType()
                                  << ", the parameter " << pt;
      Value next;
      if (optimizer == "sgd") {
        if (weightDecay > 0)
          grad = g.add(grad, g.mul(w, c(weightDecay)));
        Value upd = grad;
        if (momentum > 0) {
          Value buf = state(name + ".momentum_buffer", zerosOf(pt), momentRole);
          upd = g.add(g.mul(buf, c(momentum)), grad);
          updates.push_back({name + ".momentum_buffer", upd});
        }
        next = g.sub(w, g.mul(upd, lrNow));
      } else {
        if (fusedStep(p)) {
          auto t8 = RankedTensorType::get(pt.getShape(), b.getFloat8E4M3FNType());
          auto t16 = RankedTensorType::get(pt.getShape(), b.getF16Type());
          Value m8 = state(name + ".exp_avg", zerosOf(t8), momentRole);
          Value ms = state(name + ".exp_avg.scale_inv", DenseElementsAttr::get(scalarF32, 1.0f), momentRole);
          Value v16 = state(name + ".exp_avg_sq", zerosOf(t16), momentRole);
          Value vs = state(name + ".exp_avg_sq.scale_inv", DenseElementsAttr::get(scalarF32, 1.0f), momentRole);
          Value decay = optimizer == "adamw" && weightDecay > 0 ? g.sub(c(1.0), g.mul(lrNow, c(weightDecay))) : c(1.0);
          auto f = [&](StringRef n, double v) { return b.getNamedAttr(n, b.getF32FloatAttr(float(v))); };
          Value wt = p.shards && !p.masterShard ? toShard(p.init.getResult()) : p.init.getResult();
          // An FP8-held gradient (MS-AMP) is read as its codes: a quarter of float32's bytes.
          Value gradSi = c(1.0);
          if (auto dq = grad.getDefiningOp<fp8::DequantizeOp>();
              dq && dq.getScaleInv().getType().cast<RankedTensorType>().getRank() == 0) {
            grad = dq.getInput();
            gradSi = dq.getScaleInv();
          }
          SmallVector<Value> operands{wt, grad, gradSi, m8, ms, v16, vs, clipCoef ? clipCoef : c(1.0), decay,
                                      g.div(lrNow, bc1), bc2sqrt};
          SmallVector<NamedAttribute> attrs{f("beta1", beta1), f("one_minus_beta1", 1.0 - beta1), f("beta2", beta2),
                                            f("one_minus_beta2", 1.0 - beta2), f("eps", eps)};
          if (stochastic) {
            operands.push_back(step);
            attrs.push_back(b.getNamedAttr("rounding_salt", b.getI64IntegerAttr(int64_t(i))));
          }
          auto adam = b.create<fp8::AdamStepOp>(loc, TypeRange{wt.getType(), t8, scalarF32, t16, scalarF32}, operands,
                                                attrs);
          updates.push_back({name + ".exp_avg", adam.getNewExpAvg()});
          updates.push_back({name + ".exp_avg.scale_inv", adam.getNewExpAvgScaleInv()});
          updates.push_back({name + ".exp_avg_sq.scale_inv", adam.getNewExpAvgSqScaleInv()});
          updates.push_back({name + ".exp_avg_sq", adam.getNewExpAvgSq()});
          p.init->setAttr(octet::kFp8StateAttr, b.getUnitAttr());
          setRole(p.init.getResult(), p.weightShard   ? "weight_shard"
                                      : p.masterShard ? "master_shard"
                                      : msampLevel == "O3" ? "master_weight"
                                                           : "weight");
          updates.push_back({name, p.shards && !p.masterShard ? gathered(adam.getNewWeight(), p.init.getType().cast<RankedTensorType>())
                                            : adam.getNewWeight()});
          continue;
        }
        if (optimizer == "adam" && weightDecay > 0)
          grad = g.add(grad, g.mul(w, c(weightDecay)));
        if (optimizer == "adamw" && weightDecay > 0)
          w = g.mul(w, g.sub(c(1.0), g.mul(lrNow, c(weightDecay))));
        bool o2 = p.fp8Weight && (msampLevel == "O2" || msampLevel == "O3");
        Value m, v, mScaleInv, vScaleInv;
        if (o2) {
          auto t8 = RankedTensorType::get(pt.getShape(), b.getFloat8E4M3FNType());
          auto t16 = RankedTensorType::get(pt.getShape(), b.getF16Type());
          Value m8 = state(name + ".exp_avg", zerosOf(t8), momentRole);
          mScaleInv = state(name + ".exp_avg.scale_inv", DenseElementsAttr::get(scalarF32, 1.0f), momentRole);
          m = b.create<fp8::DequantizeOp>(loc, pt, m8, mScaleInv);
          Value v16 = state(name + ".exp_avg_sq", zerosOf(t16), momentRole);
          vScaleInv = state(name + ".exp_avg_sq.scale_inv", DenseElementsAttr::get(scalarF32, 1.0f), momentRole);
          v = g.mul(g.ox.op("Cast", pt, {v16}, {g.ox.si64("to", 1)}), vScaleInv);
        } else {
          m = state(name + ".exp_avg", zerosOf(pt), momentRole);
          v = state(name + ".exp_avg_sq", zerosOf(pt), momentRole);
        }
        Value m2 = g.add(g.mul(m, c(beta1)), g.mul(grad, c(1.0 - beta1)));
        Value v2 = g.add(g.mul(v, c(beta2)), g.mul(g.mul(grad, grad), c(1.0 - beta2)));
        Value denom = g.add(g.div(g.unary("Sqrt", v2), bc2sqrt), c(eps));
        next = g.sub(w, g.mul(g.div(m2, denom), g.div(lrNow, bc1)));
        if (o2) {
          auto [q, si, d] = fp8RoundTrip(b, loc, m2, b.getFloat8E4M3FNType());
          (void)d;
          updates.push_back({name + ".exp_avg", q});
          updates.push_back({name + ".exp_avg.scale_inv", si});
          // The second moment (g^2 / (1 - beta2), often below FP16's smallest
          // subnormal) is held as FP16 with its own power-of-2 scale: the
          // largest element lands in [2^13, 2^15) (Log rounding may add one; fp8.adam_step
          // takes the exact floor(log2), [2^13, 2^14)).
          Value amax = b.create<fp8::AmaxOp>(loc, scalarF32, v2, b.getBoolAttr(false));
          Value e = g.unary("Floor", g.div(g.unary("Log", amax), c(std::log(2.0))));
          Value vsi = g.binary("Pow", c(2.0), g.sub(e, c(13.0)), scalarF32);
          auto cond = RankedTensorType::get({}, b.getI1Type());
          Value ok = g.ox.op("Greater", cond, {amax, c(0.0)});
          // At least 2^-126: a smaller power of two would underflow (fp8.adam_step's rule too).
          vsi = g.binary("Max", vsi, c(std::ldexp(1.0, -126)), scalarF32);
          vsi = g.ox.op("Where", scalarF32, {ok, vsi, c(1.0)});
          updates.push_back({name + ".exp_avg_sq.scale_inv", vsi});
          updates.push_back({name + ".exp_avg_sq",
                             g.ox.op("Cast", RankedTensorType::get(pt.getShape(), b.getF16Type()), {g.div(v2, vsi)},
                                     {g.ox.si64("to", 10)})});
        } else {
          updates.push_back({name + ".exp_avg", m2});
          updates.push_back({name + ".exp_avg_sq", v2});
        }
      }
      if (p.fp8Weight && stochastic)
        next = b.create<fp8::StochasticRoundOp>(loc, RankedTensorType::get(pt.getShape(), b.getF16Type()), next, step,
                                                b.getI64IntegerAttr(int64_t(i)));
      else if (p.fp8Weight && !f32Weights)
        next = g.ox.op("Cast", RankedTensorType::get(pt.getShape(), b.getF16Type()), {next}, {g.ox.si64("to", 10)});
      if (p.shards && !p.masterShard)
        next = gathered(next, p.init.getType().cast<RankedTensorType>());
      p.init->setAttr(octet::kFp8StateAttr, b.getUnitAttr());
      setRole(p.init.getResult(), p.weightShard                        ? "weight_shard"
                                  : p.masterShard                      ? "master_shard"
                                  : p.fp8Weight && msampLevel == "O3" ? "master_weight"
                                                                       : "weight");
      updates.push_back({name, next});
    }
    for (auto &u : own)
      updates.append(u.begin(), u.end());
    octet::appendResult(func, lrNow, "octet.lr");
    octet::appendResult(func, gnorm, "octet.grad_norm");
    octet::appendStateUpdates(func, updates);
    if (shardUnit == "layer") { // after the results read the gathers: a member may be its own result
      gatherUpdatedByLayer(body, updatedGathers);
      gatherUpdatedByLayer(body, startGathers);
    }
    {
      // The gradients die in the update that reads them instead of living to the end of the step.
      // A sharded one is only this rank's part: never a plan output.
      llvm::BitVector drop(func.getNumResults());
      for (unsigned r = 0; r < func.getNumResults(); ++r)
        if (func.getResultAttrOfType<StringAttr>(r, octet::kGradOfAttr) &&
            (!keepGradients || func.getResultAttr(r, octet::kGradShardsAttr)))
          drop.set(r);
      ret = cast<func::ReturnOp>(body.getTerminator());
      ret->eraseOperands(drop);
      func.eraseResults(drop);
    }
    ModuleOp module = func->getParentOfType<ModuleOp>();
    octet::setTrainingKeys(module, {{"optimizer", optimizer.getValue()}, {"msamp_level", msampLevel.getValue()}});
    return success();
  }

  void runOnOperation() override {
    ModuleOp m = getOperation();
    if (failed(validate(m)))
      return signalPassFailure();
    for (auto f : m.getOps<func::FuncOp>())
      if (!f.isExternal() && failed(run(f)))
        return signalPassFailure();
  }
};

} // namespace
