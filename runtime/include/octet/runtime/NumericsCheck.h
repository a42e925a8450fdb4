//===- NumericsCheck.h - Per-layer FP8 precision of one step ----*- C++ -*-===//
//
// fp8-run --numerics-check: after a step on the CPU reference (which keeps every value), each FP8
// GEMM against the same GEMM on the high-precision tensors its operands were cast from.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_NUMERICSCHECK_H
#define OCTET_RUNTIME_NUMERICSCHECK_H

#include "octet/runtime/Executor.h"

#include <ostream>
#include <string>
#include <vector>

namespace octet::rt {

struct GemmNumerics {
  std::string node, layer, gemm; // gemm: forward, input grad, weight grad
  double sqnrDb = 0;             // NaN where the operands' sources could not be found
  struct Cast {
    std::string role;             // input, weight, grad_output
    double underflow = 0;         // share of nonzero values cast to zero
    double saturated = 0;         // share beyond the format's largest value after scaling
  } a, b;
};

/// Every fp8.gemm of `ex`'s last run, in plan order. `ex` must keep its values (the CPU Executor).
std::vector<GemmNumerics> gemmNumerics(const Runner &ex);
/// The table and the worst GEMM's line.
int printNumerics(const Plan &plan, const std::vector<GemmNumerics> &gemms, std::ostream &os);

} // namespace octet::rt

#endif
