//===- GradientOpInterface.h - Reverse-mode gradient rules ------*- C++ -*-===//
#ifndef OCTET_INTERFACES_GRADIENTOPINTERFACE_H
#define OCTET_INTERFACES_GRADIENTOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallBitVector.h"

namespace mlir {
class DialectRegistry;
}

namespace octet {

/// What a gradient rule may ask of the autodiff pass.
class GradientContext {
public:
  virtual ~GradientContext() = default;
  /// Whether operand `i` needs a gradient (it depends on a trainable parameter).
  bool wants(unsigned i) const { return i < wanted.size() && wanted.test(i); }
  /// A runtime state tensor (a state initializer at the top of the function),
  /// created once per name with `init` as its first value.
  virtual mlir::Value stateTensor(llvm::StringRef name, mlir::DenseElementsAttr init) = 0;
  /// Records the value `state` takes for the next step.
  virtual void updateState(mlir::Value state, mlir::Value next) = 0;

  llvm::SmallBitVector wanted;
  /// LayerNormalization's and SoftmaxCrossEntropyLoss's gradients as one octet node each
  /// (octet::LayerNormalizationGrad, octet::SoftmaxCrossEntropyLossGrad: a runtime kernel)
  /// instead of the ONNX ops that spell them out (octet-autodiff fused-grads).
  bool fusedGrads = false;
};

/// Attaches the gradient rules of the onnx and fp8 ops (passes/GradientRules.cpp).
void registerGradientRules(mlir::DialectRegistry &registry);
/// The FP8 Linear's rule (passes/Fp8Gradients.cpp); registerGradientRules calls it.
void registerFp8GradientRules(mlir::DialectRegistry &registry);

} // namespace octet

#include "octet/Interfaces/GradientOpInterface.h.inc"

#endif
