//===- BlockOrder.h - Where values are available in a block ----*- C++ -*-===//
//
// Scheduling passes (octet-fuse-cast-amax, octet-group-casts) move ops within
// a function body; an op may move before `point` only where its operands are
// available there.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_PASSES_BLOCKORDER_H
#define OCTET_PASSES_BLOCKORDER_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"

namespace octet {

/// Whether `v` is available before `point` (an argument of `body`, or defined by an earlier op).
inline bool definedBefore(mlir::Block &body, mlir::Value v, mlir::Operation *point) {
  if (auto arg = v.dyn_cast<mlir::BlockArgument>())
    return arg.getOwner() == &body;
  mlir::Operation *def = body.findAncestorOpInBlock(*v.getDefiningOp());
  return def && def->isBeforeInBlock(point);
}

} // namespace octet

#endif
