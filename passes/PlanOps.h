//===- PlanOps.h - Ops as the plan passes see them -------------*- C++ -*-===//
//
// Predicates and walks the plan-writing passes share: views (Reshape-like ops whose result is
// their operand's bytes), octet Pointwise nodes, fusion groups (FusionGroups.h) and the members of
// a pointwise_chain group, which octet-fuse-pointwise-chains puts next to each other.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_PASSES_PLANOPS_H
#define OCTET_PASSES_PLANOPS_H

#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/runtime/InPlace.h"

#include "mlir/IR/Operation.h"

namespace octet {

/// Whether `op` is a view in a plan: its result is its first operand's bytes (InPlace.h).
inline bool isViewOp(mlir::Operation *op) {
  return op->getNumOperands() >= 1 && op->getNumResults() == 1 && rt::isView(planOpType(op));
}

/// The value `v` is a view of (through any views), or v.
inline mlir::Value viewRoot(mlir::Value v) {
  while (mlir::Operation *d = v.getDefiningOp())
    if (isViewOp(d) && d->getOperand(0) != v)
      v = d->getOperand(0);
    else
      break;
  return v;
}

/// Whether `op` is an octet Pointwise node (octet-fuse-pointwise's programs).
inline bool isPointwiseNode(mlir::Operation *op) {
  auto n = llvm::dyn_cast<onnx_dialect::GenericNodeOp>(op);
  return n && n.getOpType() == "Pointwise" && n.getDomain() == "octet";
}

/// The fusion group kind `op` carries (`octet.fusion`), or "".
inline llvm::StringRef fusionOf(mlir::Operation *op) {
  auto k = op->getAttrOfType<mlir::StringAttr>("octet.fusion");
  return k ? k.getValue() : llvm::StringRef();
}

/// Whether `a` and `b` are members of one fusion group of `kind`.
inline bool sameGroup(mlir::Operation *a, mlir::Operation *b, llvm::StringRef kind) {
  return a && b && fusionOf(a) == kind && fusionOf(b) == kind &&
         a->getAttr("octet.fusion_group") == b->getAttr("octet.fusion_group");
}

/// The op after (before) `op`, constants aside (a plan keeps them as values, not ops).
inline mlir::Operation *nextStep(mlir::Operation *op) {
  do
    op = op->getNextNode();
  while (op && llvm::isa<onnx_dialect::ConstantOp>(op));
  return op;
}
inline mlir::Operation *prevStep(mlir::Operation *op) {
  do
    op = op->getPrevNode();
  while (op && llvm::isa<onnx_dialect::ConstantOp>(op));
  return op;
}

/// The first and last members of the pointwise_chain group `op` is in (`op` twice if none).
inline std::pair<mlir::Operation *, mlir::Operation *> chainOf(mlir::Operation *op) {
  mlir::Operation *first = op, *last = op;
  while (sameGroup(prevStep(first), op, "pointwise_chain"))
    first = prevStep(first);
  while (sameGroup(nextStep(last), op, "pointwise_chain"))
    last = nextStep(last);
  return {first, last};
}

/// A LayerNormalization or RMSNormalization as the plan passes see it: a backend runs both with one
/// row kernel (an RMSNorm takes no mean out and adds no bias). `bias` is null where there is none.
struct RowNorm {
  mlir::Operation *op = nullptr;
  mlir::Value x, scale, bias, y;
  int64_t axis = -1; // normalized dims: [axis, rank), axis >= 0
  bool rms = false;
  explicit operator bool() const { return op; }
  /// Whether it normalizes float32 rows of a static shape over the last axis alone.
  bool lastAxisF32() const {
    auto f32 = [](mlir::Value v) {
      auto t = v.getType().dyn_cast<mlir::RankedTensorType>();
      return t && t.hasStaticShape() && t.getElementType().isF32();
    };
    auto t = x.getType().dyn_cast<mlir::RankedTensorType>();
    return t && t.getRank() >= 1 && axis == t.getRank() - 1 && f32(x) && f32(scale) && f32(y) &&
           (!bias || f32(bias));
  }
};
inline RowNorm rowNorm(mlir::Operation *op) {
  namespace ox = onnx_dialect;
  RowNorm n;
  std::optional<int64_t> axis;
  if (auto ln = llvm::dyn_cast_or_null<ox::LayerNormalizationOp>(op)) {
    n = {op, ln.getX(), ln.getScale(), ln.getB(), ln.getY()};
    if (n.bias.getType().isa<mlir::NoneType>())
      n.bias = nullptr;
    axis = ln.getAxis();
  } else if (auto rn = llvm::dyn_cast_or_null<ox::RMSNormalizationOp>(op)) {
    n = {op, rn.getX(), rn.getScale(), nullptr, rn.getY()};
    n.rms = true;
    axis = rn.getAxis();
  } else {
    return {};
  }
  auto t = n.x.getType().dyn_cast<mlir::RankedTensorType>();
  n.axis = axis.value_or(-1);
  if (n.axis < 0)
    n.axis += t ? t.getRank() : 0;
  return n;
}

} // namespace octet

#endif
