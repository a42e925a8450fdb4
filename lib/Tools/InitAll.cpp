//===- InitAll.cpp - Register everything Octet provides -------------------===//
#include "octet/InitAll.h"

#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/NN/IR/NN.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Interfaces/GradientOpInterface.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void octet::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<onnx_dialect::ONNXDialect, fp8::FP8Dialect, nn::NNDialect, mlir::func::FuncDialect>();
  registerGradientRules(registry);
}

void octet::registerAllPasses() {
  static bool done = false;
  if (done)
    return;
  done = true;
  registerOctetPasses();
  registerRecipePipelines();
  mlir::registerTransformsPasses(); // canonicalize, cse, symbol-dce, ...
}
