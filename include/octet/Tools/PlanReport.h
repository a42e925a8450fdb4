//===- PlanReport.h - What fp8-opt --report says of a plan's fusions -*- C++ -*-===//
#ifndef OCTET_TOOLS_PLANREPORT_H
#define OCTET_TOOLS_PLANREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace octet {
/// Prints, one line each, what the compiler's plan passes decided in `module`: the fusion groups
/// by kind (FusionGroups.h), the cast passes by member op type (octet-fuse-cast-sources), the FP8
/// GEMM biases added by their reader (octet-fold-gemm-bias), the residual Adds folded into GEMMs
/// and the output layer's token chunks.
void reportPlanFusions(mlir::ModuleOp module, llvm::raw_ostream &os);
/// Gradient accumulation's line (nothing without it): micro-batches, ops by phase, accumulators.
void reportGradientAccumulation(mlir::ModuleOp module, llvm::raw_ostream &os);

/// --report-format=json with a plan: octet-fp8-report writes the layer report's JSON object to a
/// temporary file (path()), and print() adds the plan's facts (the lines the text report prints
/// after the layers) as "plan", one string a line, and prints one JSON document. The file goes
/// with this object.
class JsonPlanReport {
public:
  /// Creates the file: "" or a message naming what failed.
  std::string create();
  const std::string &path() const { return path_; }
  std::string print(llvm::StringRef facts, llvm::raw_ostream &os) const;
  ~JsonPlanReport();

private:
  std::string path_;
};
} // namespace octet

#endif // OCTET_TOOLS_PLANREPORT_H
