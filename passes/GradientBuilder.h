//===- GradientBuilder.h - Helpers for gradient rules -------------*- C++ -*-===//
#ifndef OCTET_PASSES_GRADIENTBUILDER_H
#define OCTET_PASSES_GRADIENTBUILDER_H

#include "OnnxBuilder.h"

namespace octet {

/// Builds the onnx ops gradient rules are made of; every helper works on
/// static shapes and infers its result type (numpy broadcasting).
struct GradientBuilder {
  GradientBuilder(mlir::OpBuilder &b, mlir::Location loc) : b(b), ox(b, loc) {}

  static mlir::RankedTensorType typeOf(mlir::Value v);
  static mlir::RankedTensorType like(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  static mlir::RankedTensorType broadcastType(mlir::Value a, mlir::Value c);
  /// Whether every operand and result of `op` has a static shape (or is none).
  static bool allStatic(mlir::Operation *op);

  mlir::Value scalar(double v, mlir::Type elt);
  mlir::Value zeros(mlir::RankedTensorType t);
  mlir::Value binary(llvm::StringRef op, mlir::Value a, mlir::Value c, mlir::RankedTensorType result);
  mlir::Value add(mlir::Value a, mlir::Value c);
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value div(mlir::Value a, mlir::Value c);
  mlir::Value unary(llvm::StringRef op, mlir::Value a);
  mlir::Value reduceSum(mlir::Value x, llvm::ArrayRef<int64_t> axes, bool keepdims);
  mlir::Value reduceMean(mlir::Value x, llvm::ArrayRef<int64_t> axes); // keepdims
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> perm);
  mlir::Value swapLastTwo(mlir::Value x);
  /// MatMul with numpy batch broadcasting.
  mlir::Value matmul(mlir::Value a, mlir::Value c);
  /// Sums a broadcast gradient back to `target`'s shape.
  mlir::Value sumTo(mlir::Value g, mlir::RankedTensorType target);

  mlir::OpBuilder &b;
  OnnxBuilder ox;
};

/// The error for an op on the gradient path that has no gradient rule (Autodiff.cpp).
mlir::LogicalResult emitNoGradientRule(mlir::Operation *op);

} // namespace octet

#endif
