//===- FP8.h - The fp8 dialect --------------------------------------------===//
#ifndef OCTET_DIALECT_FP8_IR_FP8_H
#define OCTET_DIALECT_FP8_IR_FP8_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "octet/Dialect/FP8/IR/FP8OpsDialect.h.inc"
#include "octet/Dialect/FP8/IR/FP8OpsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "octet/Dialect/FP8/IR/FP8OpsAttributes.h.inc"

#define GET_OP_CLASSES
#include "octet/Dialect/FP8/IR/FP8Ops.h.inc"

namespace octet::fp8 {
/// Largest finite value of an FP8 format: 448 (E4M3FN) or 57344 (E5M2).
double getFormatMax(mlir::Type fp8Type);
} // namespace octet::fp8

#endif // OCTET_DIALECT_FP8_IR_FP8_H
