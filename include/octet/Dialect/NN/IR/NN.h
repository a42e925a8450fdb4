//===- NN.h - The nn dialect: recognized layers ---------------------------===//
#ifndef OCTET_DIALECT_NN_IR_NN_H
#define OCTET_DIALECT_NN_IR_NN_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "octet/Dialect/NN/IR/NNOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "octet/Dialect/NN/IR/NNOps.h.inc"

namespace octet::nn {
/// Replaces a layer op by the ops of its body (the inverse of recognition).
void inlineLayer(mlir::Operation *layer);
} // namespace octet::nn

#endif
