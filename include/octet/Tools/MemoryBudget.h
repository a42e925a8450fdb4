//===- MemoryBudget.h - fp8-opt --memory-budget -------------------*- C++ -*-===//
//
// The device bytes a plan is predicted to need (its parameters and state, every initializer at its
// full size, plus the memory plan's arena) and the budget's parsing. fp8-opt compiles the plan with
// more recomputation until the prediction fits the budget, or refuses it naming the bytes.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_TOOLS_MEMORYBUDGET_H
#define OCTET_TOOLS_MEMORYBUDGET_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>

namespace octet {

/// Bytes of every initializer (parameters, optimizer and FP8 state, gradient accumulators,
/// constants) of `module`'s functions, splats at their full size: what a backend places besides
/// the arena.
int64_t stateBytes(mlir::ModuleOp module);

/// "123", "80GiB", "1.5GB", "512MiB" (K, M, G, T: powers of 1000; Ki, Mi, Gi, Ti: of 1024; an
/// optional B) into bytes; false when `text` is none of these or is not positive.
bool parseByteCount(const std::string &text, int64_t &bytes);

/// `bytes` as "N bytes (X.XX GiB)".
std::string describeBytes(int64_t bytes);

} // namespace octet

#endif
