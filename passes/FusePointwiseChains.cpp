//===- FusePointwiseChains.cpp - Consecutive Pointwise programs as one group ===//
//
// octet-fuse-pointwise-chains: consecutive elementwise programs over one
// shape (octet Pointwise nodes, and the float elementwise ops a backend runs
// as a program of one instruction) become one fusion group, which a backend
// runs as one kernel evaluating the programs in order per element. The
// decision is written on the ops (`octet.fusion = "pointwise_chain"`,
// `octet.fusion_group = N`); the plan keeps it as their `fusion` and
// `fusion_group` attributes, and the CPU runs the members one by one, so the
// arithmetic is the same. A member reads an earlier member's result only with
// that result's shape, so each element's work stays in one thread.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"
#include "octet/runtime/Pointwise.h"

#include "OnnxBuilder.h"

#include "FusionGroups.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace octet {
#define GEN_PASS_DEF_FUSEPOINTWISECHAINS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

using octet::staticTensor;

bool isFloat(Type t) { return t.isF32() || t.isBF16(); }

/// Whether a backend runs `op` as an elementwise program: an octet Pointwise node, or a float
/// ONNX elementwise op of the programs' table other than Add (which runs on the broadcasting
/// kernel, where a GEMM's bias may fold into it) with float operands (Where: a boolean condition)
/// of at most its result's rank.
bool isProgram(Operation &op) {
  if (op.getNumResults() != 1 || op.getNumRegions() || !isa<ox::ONNXDialect>(op.getDialect()))
    return false;
  auto rt = staticTensor(op.getResult(0).getType());
  if (!rt || !isFloat(rt.getElementType()))
    return false;
  if (auto n = dyn_cast<ox::GenericNodeOp>(op))
    return n.getOpType() == "Pointwise" && n.getDomain() == "octet";
  StringRef type = ox::ONNXDialect::getOnnxOpType(&op);
  const octet::rt::PwOpInfo *info = octet::rt::lookupPointwiseOp(std::string_view(type.data(), type.size()));
  if (!info || info->op == octet::rt::PwOp::Add || int(op.getNumOperands()) != info->arity)
    return false;
  for (auto [i, v] : llvm::enumerate(op.getOperands())) {
    auto t = staticTensor(v.getType());
    bool cond = info->op == octet::rt::PwOp::Where && i == 0;
    if (!t || t.getRank() > rt.getRank() || !(cond ? t.getElementType().isInteger(1) : isFloat(t.getElementType())))
      return false;
  }
  return true;
}

/// Ops that are no step of their own in a plan (values, not launches).
bool isValue(Operation &op) { return isa<ox::InitializerOp, ox::ConstantOp, ox::NoneOp>(op); }

struct FusePointwiseChains : octet::impl::FusePointwiseChainsBase<FusePointwiseChains> {
  using FusePointwiseChainsBase::FusePointwiseChainsBase;

  void flush(SmallVectorImpl<Operation *> &chain) {
    if (chain.size() >= 2)
      octet::markFusionGroup(chain, "pointwise_chain");
    chain.clear();
  }

  /// Whether `op` may join `chain` (programs over the same shape, in order).
  bool joins(ArrayRef<Operation *> chain, Operation &op) {
    auto shape = op.getResult(0).getType().cast<RankedTensorType>();
    auto first = chain.front()->getResult(0).getType().cast<RankedTensorType>();
    if (shape.getShape() != first.getShape())
      return false;
    int64_t limit = first.getNumElements() <= smallElements ? maxSmallOps : maxOps;
    if (int64_t(chain.size()) >= limit)
      return false;
    for (Value v : op.getOperands()) // an earlier member's result, element for element only
      if (llvm::is_contained(chain, v.getDefiningOp()) &&
          v.getType().cast<RankedTensorType>().getShape() != shape.getShape())
        return false;
    return true;
  }

  void runOnOperation() override {
    bool bad = maxOps < 1 || maxSmallOps < 1 || smallElements < 0;
    getOperation().walk([&](func::FuncOp f) {
      if (bad) {
        f.emitError() << "octet-fuse-pointwise-chains: max-ops=" << int64_t(maxOps) << " max-small-ops="
                      << int64_t(maxSmallOps) << " small-elements=" << int64_t(smallElements)
                      << ": the limits must be positive";
        return signalPassFailure();
      }
      if (f.getBody().empty())
        return;
      SmallVector<Operation *> chain;
      for (Operation &op : f.getBody().front()) {
        if (isValue(op))
          continue;
        if (!isProgram(op)) {
          flush(chain);
          continue;
        }
        if (!chain.empty() && !joins(chain, op))
          flush(chain);
        chain.push_back(&op);
      }
      flush(chain);
    });
  }
};

} // namespace
