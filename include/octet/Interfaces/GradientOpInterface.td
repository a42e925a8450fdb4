//===- GradientOpInterface.td - Reverse-mode gradient rules -------------===//
//
// An op that autodiff can differentiate implements this interface; its rule
// lives in one place (passes/GradientRules.cpp attaches the rules of the onnx
// and fp8 ops as external models, so a new op adds one rule there).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_INTERFACES_GRADIENTOPINTERFACE_TD
#define OCTET_INTERFACES_GRADIENTOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::octet";
  let description = [{
    Reverse-mode differentiation of one op. `resultGrads[i]` is d(loss)/d(result i)
    (a null Value when the loss does not depend on that result). The rule
    appends one Value per operand to `operandGrads`: the gradient, or a null
    Value for operands that are not differentiable or not wanted
    (`ctx.wants(i)` is false). Gradients have the operand's shape and a float
    element type. A rule that cannot handle an instance emits an error on the
    op and fails.
  }];
  let methods = [
    InterfaceMethod<"Builds the operands' gradients at the builder's insertion point.",
      "::mlir::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$b, "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::octet::GradientContext &":$ctx, "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif
