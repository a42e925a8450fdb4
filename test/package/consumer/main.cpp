// Registers Octet's dialects and passes the way an embedding compiler would,
// then runs octet-model-summary on a one-Linear model.
#include "octet/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

int main() {
  mlir::DialectRegistry registry;
  octet::registerAllDialects(registry);
  octet::registerAllPasses();
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @main_graph(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
      %w = onnx.initializer "fc.weight" = dense<1.0> : tensor<4x8xf32>
      %y = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
      return %y : tensor<2x8xf32>
    })mlir", &ctx);
  if (!module)
    return 1;
  mlir::PassManager pm(&ctx);
  if (mlir::failed(mlir::parsePassPipeline("octet-model-summary", pm)) ||
      mlir::failed(pm.run(*module)))
    return 1;
  return 0;
}
