//===- GradientAccumulation.cpp - Micro-batches of one optimizer step ------===//
//
// octet-accumulate-gradients: the plan's step becomes one micro-batch of `steps`. Each gradient is
// the running mean of the step's micro-batches in a state of its own, which the first micro-batch
// overwrites and the optimizer reads after the last (Accelerate's gradient_accumulation_steps,
// whose `accelerator.backward` divides the loss by that number).
//
// octet-micro-batch-phases: which ops run in every micro-batch and which only in the last, decided
// from what each function result is for, and written on the ops (`octet.last_micro_batch`) for the
// runtime, which runs the plan `steps` times per optimizer step and skips those ops (and the state
// updates they compute) in all but the last. With reuse-invariants, what stays the same through
// the step (a weight's casts) runs in its first micro-batch only (`octet.first_micro_batch`).
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/ONNXImport.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "FusionGroups.h"
#include "OnnxBuilder.h"
#include "StateUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

#include <map>

namespace octet {
#define GEN_PASS_DEF_ACCUMULATEGRADIENTS
#define GEN_PASS_DEF_MICROBATCHPHASES
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

constexpr llvm::StringLiteral kLastAttr = "octet.last_micro_batch";
constexpr llvm::StringLiteral kFirstAttr = "octet.first_micro_batch";

struct AccumulateGradients : octet::impl::AccumulateGradientsBase<AccumulateGradients> {
  using AccumulateGradientsBase::AccumulateGradientsBase;

  LogicalResult run(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Builder attrs(func.getContext());
    auto flagType = RankedTensorType::get({}, attrs.getI1Type());
    func.insertArgument(func.getNumArguments(), flagType,
                        attrs.getDictionaryAttr({attrs.getNamedAttr(ox::kNameAttr,
                                                                attrs.getStringAttr("octet.first_micro_batch"))}),
                        func.getLoc());
    Value first = func.getArgument(func.getNumArguments() - 1);
    SmallVector<std::pair<std::string, Value>> updates;
    bool any = false;
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      auto of = func.getResultAttrOfType<StringAttr>(r, octet::kGradOfAttr);
      if (!of)
        continue;
      any = true;
      Value g = ret.getOperand(r);
      Operation *def = g.getDefiningOp();
      if (def && isa<ox::ConstantOp>(def)) // a parameter the loss does not use: its gradient is 0
        continue;
      auto t = octet::staticF32(g);
      if (!t)
        return func.emitError() << "octet-accumulate-gradients: the gradient of '" << of.getValue() << "' is "
                                << g.getType() << "; gradients are accumulated in float32 only";
      std::string name = (of.getValue() + ".grad_accum").str();
      Value acc = octet::getOrCreateState(func, g.getLoc(), name, DenseElementsAttr::get(t, 0.0f));
      acc.getDefiningOp()->setAttr(octet::kRoleAttr, attrs.getStringAttr("grad_accum"));
      // Right where the gradient is complete (a data-parallel all-reduce then starts after it).
      OpBuilder b(func.getContext());
      if (def)
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPoint(ret);
      octet::OnnxBuilder ox(b, g.getLoc());
      Value part = ox.op("Mul", t, {g, ox.f32(float(1.0 / double(int64_t(steps))))});
      Value sum = ox.op("Add", t, {acc, part});
      Operation *mean = ox.create("Where", t, {first, part, sum});
      octet::setResultNames(mean, {(of.getValue() + ".grad_mean").str()});
      ret.setOperand(r, mean->getResult(0));
      updates.push_back({name, mean->getResult(0)});
    }
    if (!any)
      return func.emitError() << "octet-accumulate-gradients: the function has no gradients; run octet-autodiff first";
    octet::appendStateUpdates(func, updates);
    return success();
  }

  void runOnOperation() override {
    ModuleOp m = getOperation();
    if (steps < 1 || steps > (int64_t(1) << 20)) {
      m.emitError() << "octet-accumulate-gradients: steps=" << int64_t(steps) << " is not valid; use 1 to 1048576";
      return signalPassFailure();
    }
    if (steps == 1)
      return;
    for (auto f : m.getOps<func::FuncOp>())
      if (!f.isExternal() && failed(run(f)))
        return signalPassFailure();
    octet::setTrainingKeys(m, {{"grad_accum_steps", std::to_string(int64_t(steps))}});
  }
};

/// Whether function result `r` is needed in every micro-batch (else in the last one only).
bool everyMicroBatch(func::FuncOp func, unsigned r, const llvm::StringMap<ox::InitializerOp> &inits) {
  if (func.getResultAttr(r, octet::kLossAttr))
    return true;
  if (func.getResultAttr(r, octet::kGradOfAttr))
    return false;
  if (auto st = func.getResultAttrOfType<StringAttr>(r, octet::kStateUpdateAttr)) {
    auto it = inits.find(st.getValue());
    if (it == inits.end())
      return true;
    Operation *init = it->second;
    if (auto role = init->getAttrOfType<StringAttr>(octet::kRoleAttr))
      return role.getValue() == "grad_accum"; // parameters, masters, moments, the step: last
    return !init->hasAttr(octet::kFp8WeightScalingAttr); // activations' and gradients' FP8 state
  }
  auto name = func.getResultAttrOfType<StringAttr>(r, ox::kNameAttr);
  return !(name && (name.getValue() == "octet.lr" || name.getValue() == "octet.grad_norm"));
}

/// Ops whose copy would not compute the same values, or that talk to other ranks: never made
/// once for a whole optimizer step.
bool keepsRunning(Operation *op) {
  if (op->getNumRegions() || isa<octet::fp8::AllReduceOp, octet::fp8::AllReduceStartOp, octet::fp8::AllReduceDoneOp,
                                 octet::fp8::ReduceScatterOp, octet::fp8::ReduceScatterStartOp, octet::fp8::AllGatherOp,
                                 octet::fp8::AllGatherStartOp, octet::fp8::ShardOp, octet::fp8::WorldSizeOp,
                                 octet::fp8::StochasticRoundOp>(op))
    return true;
  StringRef type = ox::ONNXDialect::getOnnxOpType(op);
  if (auto n = dyn_cast<ox::GenericNodeOp>(op))
    type = n.getOpType();
  return type == "Dropout" || type.startswith("Random") || type == "Bernoulli" || type == "Multinomial";
}

/// Attributes that name or group an op without changing what it computes.
bool bookkeeping(StringRef name) {
  return name == octet::kResultNamesAttr || name == ox::kNameAttr || name == "octet.fusion" ||
         name == "octet.fusion_group" || name == "octet.cast_pass" || name == kLastAttr || name == kFirstAttr;
}

/// Whether `a` and `b` compute the same results from the same operands.
bool sameComputation(Operation *a, Operation *b) {
  if (a->getName() != b->getName() || a->getOperands() != b->getOperands() ||
      a->getResultTypes() != b->getResultTypes())
    return false;
  SmallVector<NamedAttribute> x, y;
  for (NamedAttribute n : a->getAttrs())
    if (!bookkeeping(n.getName().getValue()))
      x.push_back(n);
  for (NamedAttribute n : b->getAttrs())
    if (!bookkeeping(n.getName().getValue()))
      y.push_back(n);
  return x == y;
}

struct MicroBatchPhases : octet::impl::MicroBatchPhasesBase<MicroBatchPhases> {
  using MicroBatchPhasesBase::MicroBatchPhasesBase;

  /// reuse-invariants: the ops of `every` whose results stay the same through an optimizer step
  /// get kFirstAttr; duplicates among them (a weight's cast made again for the backward) are
  /// merged into the first, which the kept result then serves.
  void markInvariants(func::FuncOp func, llvm::DenseSet<Operation *> &every) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // States whose value changes between micro-batches: updated by an op of every micro-batch
    // (or by no op), as the runtime reads the phases.
    llvm::StringMap<bool> changing;
    llvm::DenseSet<Operation *> returned;
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      Operation *d = ret.getOperand(r).getDefiningOp();
      if (d)
        returned.insert(d);
      if (auto st = func.getResultAttrOfType<StringAttr>(r, octet::kStateUpdateAttr))
        changing[st.getValue()] =
            !d || isa<ox::InitializerOp, ox::ConstantOp, ox::NoneOp>(d) || every.contains(d);
    }
    llvm::DenseSet<Operation *> same; // ops whose results are the same in every micro-batch
    SmallVector<Operation *> hoisted;
    for (Operation &op : body.without_terminator()) {
      if (auto i = dyn_cast<ox::InitializerOp>(op)) {
        if (!changing.lookup(i.getName()))
          same.insert(&op);
        continue;
      }
      if (isa<ox::ConstantOp, ox::NoneOp>(op)) {
        same.insert(&op);
        continue;
      }
      if (!every.contains(&op) || op.getNumOperands() == 0 || keepsRunning(&op) || returned.contains(&op))
        continue;
      if (llvm::all_of(op.getOperands(), [&](Value v) {
            Operation *d = v.getDefiningOp();
            return d && same.contains(d);
          })) {
        same.insert(&op);
        hoisted.push_back(&op);
      }
    }
    // One op per computation: a later copy's results are the first's (which comes before it).
    SmallVector<Operation *> kept;
    for (Operation *op : hoisted) {
      auto twin = llvm::find_if(kept, [&](Operation *k) { return sameComputation(k, op); });
      if (twin != kept.end()) {
        op->replaceAllUsesWith(*twin);
        every.erase(op);
        op->erase();
        continue;
      }
      kept.push_back(op);
      op->setAttr(kFirstAttr, UnitAttr::get(op->getContext()));
    }
  }

  void run(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::StringMap<ox::InitializerOp> inits;
    for (auto i : body.getOps<ox::InitializerOp>())
      inits[i.getName()] = i;
    // Every op some every-micro-batch result needs, walking back from those results.
    llvm::DenseSet<Operation *> every;
    SmallVector<Value> work;
    for (unsigned r = 0; r < func.getNumResults(); ++r)
      if (everyMicroBatch(func, r, inits))
        work.push_back(ret.getOperand(r));
    while (!work.empty()) {
      Operation *d = work.pop_back_val().getDefiningOp();
      if (!d || !every.insert(d).second)
        continue;
      for (Value v : d->getOperands())
        work.push_back(v);
    }
    UnitAttr unit = UnitAttr::get(func.getContext());
    for (Operation &op : body.without_terminator()) {
      op.removeAttr(kFirstAttr);
      if (isa<ox::InitializerOp, ox::ConstantOp, ox::NoneOp>(op) || every.contains(&op))
        op.removeAttr(kLastAttr);
      else
        op.setAttr(kLastAttr, unit);
    }
    if (reuseInvariants)
      markInvariants(func, every);
    splitGroups(func);
  }

  /// 0: the first micro-batch only, 1: every micro-batch, 2: the last only.
  static int phase(Operation *op) { return op->hasAttr(kFirstAttr) ? 0 : op->hasAttr(kLastAttr) ? 2 : 1; }

  /// Fusion groups are launched as one: a group's members must all run or all be skipped. A run of
  /// side-by-side updates (octet-fuse-runs) is split in two, each phase's members moved together
  /// where nothing between reads them; any other group with members in both phases is dissolved
  /// (its ops run one by one, the same arithmetic).
  void splitGroups(func::FuncOp func) {
    std::map<std::pair<std::string, int64_t>, SmallVector<Operation *>> groups;
    std::map<int64_t, SmallVector<Operation *>> castPasses;
    func.walk([&](Operation *op) {
      auto k = op->getAttrOfType<StringAttr>("octet.fusion");
      auto g = op->getAttrOfType<IntegerAttr>("octet.fusion_group");
      if (k && g)
        groups[{k.str(), g.getInt()}].push_back(op);
      if (auto c = op->getAttrOfType<IntegerAttr>("octet.cast_pass"))
        castPasses[c.getInt()].push_back(op);
    });
    auto mixed = [](ArrayRef<Operation *> ops) {
      int p = phase(ops.front());
      return llvm::any_of(ops, [&](Operation *o) { return phase(o) != p; });
    };
    auto ungroup = [](ArrayRef<Operation *> ops) {
      for (Operation *o : ops) {
        o->removeAttr("octet.fusion");
        o->removeAttr("octet.fusion_group");
      }
    };
    for (auto &[key, ops] : groups) {
      if (!mixed(ops))
        continue;
      // Each phase's members, the every-micro-batch ones first, then the first's, then the last's.
      SmallVector<Operation *> byPhase[3];
      for (Operation *o : ops)
        byPhase[(phase(o) + 2) % 3].push_back(o);
      SmallVector<ArrayRef<Operation *>> parts;
      for (auto &p : byPhase)
        if (!p.empty())
          parts.push_back(p);
      bool run = StringRef(key.first).endswith("_list");
      Operation *end = ops.back();
      // A member moves after the run's end only where no op up to there reads it.
      bool movable = llvm::all_of(ArrayRef(parts).drop_front(), [&](ArrayRef<Operation *> part) {
        return llvm::all_of(part, [&](Operation *o) {
          return llvm::all_of(o->getUsers(), [&](Operation *u) { return u == end || end->isBeforeInBlock(u); });
        });
      });
      if (!run || !movable) {
        ungroup(ops);
        continue;
      }
      // The other phases' parts go after the first part, in order (members read none of each
      // other's results: octet-fuse-runs groups none that do).
      Operation *at = parts.front().back();
      for (ArrayRef<Operation *> part : ArrayRef(parts).drop_front())
        for (Operation *o : part) {
          o->moveAfter(at);
          at = o;
        }
      if (parts.front().size() < 2)
        ungroup(parts.front());
      for (ArrayRef<Operation *> part : ArrayRef(parts).drop_front()) {
        if (part.size() < 2)
          ungroup(part);
        else
          octet::markFusionGroup(part, key.first);
      }
    }
    for (auto &[pass, ops] : castPasses)
      if (mixed(ops))
        for (Operation *o : ops)
          o->removeAttr("octet.cast_pass");
  }

  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto training = m->getAttrOfType<DictionaryAttr>(octet::kTrainingAttr);
    auto steps = training ? training.getAs<StringAttr>("grad_accum_steps") : StringAttr();
    if (!steps || steps.getValue() == "1")
      return;
    for (auto f : m.getOps<func::FuncOp>())
      if (!f.isExternal())
        run(f);
  }
};

} // namespace
