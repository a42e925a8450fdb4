//===- Passes.td - Octet's pass library -----------------------------------===//
#ifndef OCTET_PASSES_TD
#define OCTET_PASSES_TD

include "mlir/Pass/PassBase.td"

def ModelSummary : Pass<"octet-model-summary", "mlir::ModuleOp"> {
  let summary = "Print what a model holds: op counts, parameters, Linear and LayerNorm candidates";
  let description = [{
    An analysis that leaves the IR unchanged and prints, for every function:
    the count of each ONNX op type, the number of initializers and their
    float parameters, and the layers the FP8 recipes will look at: Linear
    candidates (MatMul/Gemm whose weight is an initializer, possibly through
    a Transpose) with their [K, N] shape, and LayerNorm/RMSNorm candidates.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "Output format: text or json">,
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the summary ('-' is stdout)">,
  ];
}

#endif // OCTET_PASSES_TD
