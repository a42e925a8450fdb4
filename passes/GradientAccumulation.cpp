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
// updates they compute) in all but the last.
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

struct MicroBatchPhases : octet::impl::MicroBatchPhasesBase<MicroBatchPhases> {
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
      if (isa<ox::InitializerOp, ox::ConstantOp, ox::NoneOp>(op) || every.contains(&op))
        op.removeAttr(kLastAttr);
      else
        op.setAttr(kLastAttr, unit);
    }
    splitGroups(func);
  }

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
      bool last = ops.front()->hasAttr(kLastAttr);
      return llvm::any_of(ops, [&](Operation *o) { return o->hasAttr(kLastAttr) != last; });
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
      SmallVector<Operation *> ev, last;
      for (Operation *o : ops)
        (o->hasAttr(kLastAttr) ? last : ev).push_back(o);
      bool run = StringRef(key.first).endswith("_list");
      Operation *end = ops.back();
      // A member moves after the run's end only where no op up to there reads it.
      bool movable = llvm::all_of(last, [&](Operation *o) {
        return llvm::all_of(o->getUsers(), [&](Operation *u) { return u == end || end->isBeforeInBlock(u); });
      });
      if (!run || !movable) {
        ungroup(ops);
        continue;
      }
      // The last-phase part goes after the every-phase part, in order (members read none of each
      // other's results: octet-fuse-runs groups none that do).
      Operation *at = ev.back();
      for (Operation *o : last) {
        o->moveAfter(at);
        at = o;
      }
      if (ev.size() < 2)
        ungroup(ev);
      if (last.size() < 2)
        ungroup(last);
      else
        octet::markFusionGroup(last, key.first);
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
