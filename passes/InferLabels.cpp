//===- InferLabels.cpp - How the labels relate to the tokens --------------===//
//
// octet-infer-labels: the training graph's labels followed to its loss. A Slice from 1 on the
// sequence axis on the way (Hugging Face's causal LMs shift inside the model) means the labels are
// fed equal to the tokens; none, in a causal model, means they are fed shifted. The decision and
// its reason go into the module's `octet.training` (labels, labels_reason) for fp8-run's
// `--labels auto`.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "StateUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

namespace octet {
#define GEN_PASS_DEF_INFERLABELS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

bool isIntegerTensor(Type t) {
  auto r = t.dyn_cast<RankedTensorType>();
  return r && r.getElementType().isa<IntegerType>() && !r.getElementType().isInteger(1);
}

std::string nodeName(Operation *op) {
  std::string n = ox::getNodeName(op);
  return "'" + (n.empty() ? ox::ONNXDialect::getOnnxOpType(op).str() : n) + "'";
}

/// Whether `op` (a Slice) starts at 1 on the sequence axis (axis 1 of [batch, seq], or the last).
bool shiftsByOne(Operation *op) {
  auto slice = dyn_cast<ox::SliceOp>(op);
  if (!slice)
    return false;
  auto rank = slice.getData().getType().cast<ShapedType>();
  if (!rank.hasRank())
    return false;
  auto starts = ox::getConstantInts(slice.getStarts());
  if (!starts)
    return false;
  SmallVector<int64_t> axes;
  if (slice.getAxes().getType().isa<NoneType>()) {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(int64_t(i));
  } else if (auto a = ox::getConstantInts(slice.getAxes())) {
    axes = *a;
  } else {
    return false;
  }
  if (axes.size() != starts->size())
    return false;
  int64_t r = rank.getRank();
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + r : axes[i];
    bool sequence = axis == r - 1 || (r == 2 && axis == 1);
    if ((*starts)[i] != 0 && !(sequence && (*starts)[i] == 1))
      return false; // another cut: not the shift this pass knows
    if (sequence && (*starts)[i] == 1)
      return true;
  }
  return false;
}

bool isLoss(Operation *op) {
  StringRef t = ox::ONNXDialect::getOnnxOpType(op);
  return t == "SoftmaxCrossEntropyLoss" || t == "NegativeLogLikelihoodLoss";
}

bool isCausalAttention(Operation *op) {
  auto node = dyn_cast<ox::GenericNodeOp>(op);
  if (!node || node.getOpType() != "Attention")
    return false;
  auto c = node.getAttrs().getAs<IntegerAttr>("is_causal");
  return c && c.getInt() == 1;
}

struct Verdict {
  std::string labels, reason;
};

Verdict infer(func::FuncOp func) {
  SmallVector<BlockArgument> ints;
  for (BlockArgument a : func.getArguments())
    if (isIntegerTensor(a.getType()))
      ints.push_back(a);
  auto argName = [&](BlockArgument a) {
    auto n = func.getArgAttrOfType<StringAttr>(a.getArgNumber(), ox::kNameAttr);
    return "'" + (n ? n.getValue().str() : "argument " + std::to_string(a.getArgNumber())) + "'";
  };
  std::string labels = argName(ints[1]);
  // Every path from the labels to a loss's labels operand, each with the Slice that shifts it.
  static const llvm::StringSet<> moves = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity",
                                           "Cast",    "Pad",     "Slice"};
  SmallVector<std::pair<Value, Operation *>> work{{ints[1], nullptr}};
  llvm::DenseSet<std::pair<Value, Operation *>> seen;
  SmallVector<std::pair<Operation *, Operation *>> losses; // (loss, its shift or null)
  std::string other;
  while (!work.empty()) {
    auto [v, shift] = work.pop_back_val();
    if (!seen.insert({v, shift}).second)
      continue;
    for (OpOperand &use : v.getUses()) {
      Operation *u = use.getOwner();
      StringRef t = ox::ONNXDialect::getOnnxOpType(u);
      if (isLoss(u) && use.getOperandNumber() == 1) {
        losses.push_back({u, shift});
      } else if (moves.contains(t) && use.getOperandNumber() == 0) {
        Operation *s = shift;
        if (t == "Slice" && shiftsByOne(u)) {
          if (shift) { // shifted twice
            other = "it is shifted twice (" + nodeName(shift) + ", " + nodeName(u) + ")";
            continue;
          }
          s = u;
        }
        work.push_back({u->getResult(0), s});
      }
    }
  }
  if (!other.empty())
    return {"unknown", "on the way from " + labels + " to the loss " + other};
  if (losses.empty())
    return {"unknown", "the labels " + labels + " reach no SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss "
                       "through ops that only move them"};
  bool all = llvm::all_of(losses, [](auto &l) { return l.second != nullptr; });
  bool none = llvm::all_of(losses, [](auto &l) { return l.second == nullptr; });
  if (all)
    return {"same", "the graph shifts its labels " + labels + " itself (" + nodeName(losses.front().second) +
                        ", a Slice from 1 on the sequence axis, before " + nodeName(losses.front().first) +
                        "): the labels are fed equal to the tokens"};
  if (!none)
    return {"unknown", "the labels " + labels + " reach the loss both shifted and not"};
  Operation *causal = nullptr;
  func.walk([&](Operation *op) {
    if (!causal && isCausalAttention(op))
      causal = op;
  });
  if (!causal)
    return {"unknown", "the labels " + labels + " reach " + nodeName(losses.front().first) +
                           " unshifted and no causal attention was found (a masked language model's labels?)"};
  return {"shifted", "the labels " + labels + " reach " + nodeName(losses.front().first) +
                         " unshifted in a causal model (a causal attention at " + nodeName(causal) +
                         "): the labels are fed as the next tokens"};
}

struct InferLabels : octet::impl::InferLabelsBase<InferLabels> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    for (auto f : m.getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      if (llvm::count_if(f.getArgumentTypes(), isIntegerTensor) < 2)
        return;
      Verdict v = infer(f);
      octet::setTrainingKeys(m, {{"labels", v.labels}, {"labels_reason", v.reason}});
      return; // the first function: the model
    }
  }
};

} // namespace
