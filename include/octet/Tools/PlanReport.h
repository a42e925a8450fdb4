//===- PlanReport.h - What fp8-opt --report says of a plan's fusions -*- C++ -*-===//
#ifndef OCTET_TOOLS_PLANREPORT_H
#define OCTET_TOOLS_PLANREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace octet {
/// Prints, one line each, what the compiler's plan passes decided in `module`: the fusion groups
/// by kind (FusionGroups.h), the cast passes by member op type (octet-fuse-cast-sources), the FP8
/// GEMM biases added by their reader (octet-fold-gemm-bias), the residual Adds folded into GEMMs
/// and the output layer's token chunks.
void reportPlanFusions(mlir::ModuleOp module, llvm::raw_ostream &os);
} // namespace octet

#endif // OCTET_TOOLS_PLANREPORT_H
