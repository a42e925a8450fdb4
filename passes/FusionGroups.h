//===- FusionGroups.h - The fusion groups passes write into plans -*- C++ -*-===//
//
// A fusion group is ops the compiler decided a backend runs as one kernel or launch: each member
// carries `octet.fusion` (the kind) and `octet.fusion_group` (a number per group of that kind),
// which the plan keeps as the ops' `fusion` and `fusion_group` attributes (docs/PLAN.md).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_PASSES_FUSIONGROUPS_H
#define OCTET_PASSES_FUSIONGROUPS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace octet {

/// The number the next group of `kind` in `module` takes (one more than its largest so far).
inline int64_t nextFusionGroup(mlir::Operation *module, llvm::StringRef kind) {
  int64_t next = 0;
  module->walk([&](mlir::Operation *op) {
    auto k = op->getAttrOfType<mlir::StringAttr>("octet.fusion");
    auto g = op->getAttrOfType<mlir::IntegerAttr>("octet.fusion_group");
    if (k && g && k.getValue() == kind)
      next = std::max(next, g.getInt() + 1);
  });
  return next;
}

/// Marks `ops` as group `group` of `kind`.
inline void markFusionGroup(llvm::ArrayRef<mlir::Operation *> ops, llvm::StringRef kind, int64_t group) {
  mlir::Builder b(ops.front()->getContext());
  for (mlir::Operation *op : ops) {
    op->setAttr("octet.fusion", b.getStringAttr(kind));
    op->setAttr("octet.fusion_group", b.getI64IntegerAttr(group));
  }
}

/// Marks `ops` as the next group of `kind` in their module (numbered after the module's existing
/// groups of that kind).
inline void markFusionGroup(llvm::ArrayRef<mlir::Operation *> ops, llvm::StringRef kind) {
  markFusionGroup(ops, kind, nextFusionGroup(ops.front()->getParentOfType<mlir::ModuleOp>(), kind));
}

} // namespace octet

#endif
