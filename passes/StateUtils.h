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

/// The layer a parameter belongs to, FSDP's wrapped unit, which shards gather and reduce-scatter
/// together: its name up to the first all-digit component ("model.layers.3.mlp.up_proj.weight" ->
/// "model.layers.3"); empty for the parameters outside the repeated blocks (embeddings, the final
/// norm), which go alone.
std::string layerOf(llvm::StringRef name);

/// All-gathers of 1-D shards (one element type, one world size N) made one: their inputs
/// concatenated, gathered, and each member's part taken back out of every rank's slice (FSDP2's
/// copy-in and copy-out), at `b`'s point, which must follow every member's input. Each member's
/// result is replaced by its part and the member erased; `unpack` are the ops after the new gather
/// (rows, then each member's slice and flattening), in order; constants go to the block's top.
struct GatheredTogether {
  mlir::Operation *pack = nullptr;
  mlir::Operation *gather = nullptr;
  llvm::SmallVector<mlir::Operation *> unpack;
};
GatheredTogether gatherTogether(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<mlir::Operation *> members);

/// The maxima over the ranks of 0-d float32 `scalars` (amaxes), at `b`'s point: one all-reduce (max)
/// of them concatenated (exact: the values one all-reduce each would give), each result taken back
/// out by a Gather; a single scalar is all-reduced alone.
llvm::SmallVector<mlir::Value> maxOverRanks(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<mlir::Value> scalars);

/// The inverse for a gathered 1-D tensor: its first elements in `whole`'s shape.
mlir::Value unpadded(mlir::OpBuilder &b, mlir::Location loc, mlir::Value gathered, mlir::RankedTensorType whole);

} // namespace octet

#endif
