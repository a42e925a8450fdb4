//===- StateUtils.h - Runtime state in functions ---------------*- C++ -*-===//
//
// Runtime state (FP8 scaling state, trainable parameters, optimizer moments)
// is an onnx.initializer marked `octet.fp8_state`; its next value is a function
// result marked `octet.state_update = "<name>"` (see docs/PLAN.md).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_PASSES_STATEUTILS_H
#define OCTET_PASSES_STATEUTILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>

namespace octet {

/// A state initializer named `name` at the top of `func` (an existing one of
/// that name is returned as is).
mlir::Value getOrCreateState(mlir::func::FuncOp func, mlir::Location loc, llvm::StringRef name,
                             mlir::DenseElementsAttr init);

/// The name of the state initializer defining `v`, or "".
std::string stateName(mlir::Value v);

/// Appends one result per (state name, next value), named "<name>.next".
void appendStateUpdates(mlir::func::FuncOp func, llvm::ArrayRef<std::pair<std::string, mlir::Value>> updates);

/// Appends a result named `name` with extra result attributes.
void appendResult(mlir::func::FuncOp func, mlir::Value v, llvm::StringRef name,
                  llvm::ArrayRef<mlir::NamedAttribute> attrs = {});

/// MS-AMP's per-tensor scale of an amax for an FP8 format: the power of two at or below
/// fp8_max / max(amax, 1e-12); returns (scale, scale_inv). octet-optimizer's FP8 storage and
/// octet-data-parallel's FP8 gradient all-reduce both scale with it.
std::pair<mlir::Value, mlir::Value> msampScale(mlir::OpBuilder &b, mlir::Location loc, mlir::Value amax,
                                               mlir::Type format);

/// The weight an fp8.linear trains: its weight operand, or under --pad-inner-dim (octet.padded_from)
/// the tensor the zero-padding Concats extend.
mlir::Value linearWeightSource(mlir::Operation *fp8Linear);

/// Sets `keys` in the module's `octet.training` (the plan's training strings), keeping what earlier
/// passes recorded there.
void setTrainingKeys(mlir::ModuleOp m, llvm::ArrayRef<std::pair<llvm::StringRef, std::string>> keys);

/// `v` flattened and zero-padded to a multiple of `worldSize` elements (1-D): what a sharding
/// collective splits into equal shards, rank r's at r * length / worldSize.
mlir::Value flatPadded(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, int64_t worldSize);

/// The inverse for a gathered 1-D tensor: its first elements in `whole`'s shape.
mlir::Value unpadded(mlir::OpBuilder &b, mlir::Location loc, mlir::Value gathered, mlir::RankedTensorType whole);

} // namespace octet

#endif
