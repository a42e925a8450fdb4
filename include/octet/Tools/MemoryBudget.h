//===- MemoryBudget.h - fp8-opt --memory-budget -------------------*- C++ -*-===//
//
// The device bytes a plan is predicted to need (its parameters and state, every initializer at its
// full size, plus the memory plan's arena) and the budget's parsing. fp8-opt compiles the plan with
// more recomputation until the prediction fits the budget, or refuses it naming the bytes.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_TOOLS_MEMORYBUDGET_H
#define OCTET_TOOLS_MEMORYBUDGET_H

#include "octet/Conversion/PlanExport.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

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

/// What a plan recomputes in its backward: the FP8 codes octet-rematerialize-fp8-casts casts again
/// (its sources) and the blocks octet-checkpoint-blocks runs again (0: none, -1: all but the last).
struct Recomputation {
  std::vector<std::string> fp8Sources;
  int64_t blocks = 0;
};

/// A compiled candidate's predicted device bytes: its state plus its arena's peak; `blocksOf`
/// is how many blocks it could checkpoint (octet.checkpointed_blocks).
struct Prediction {
  int64_t arena = 0, state = 0, blocksOf = 0, blocks = 0;
  int64_t total() const { return arena + state; }
};

/// Compiles a copy of the plan with a recomputation; nullopt where that fails.
using CompileCandidate = std::function<std::optional<Prediction>(const Recomputation &)>;

/// --memory-budget's search: the first of `ladder` whose prediction fits `budget`; else, where
/// `searchBlocks`, the last rung with the fewest whole blocks checkpointed that fit (found by
/// bisection: each block more lowers the peak or leaves it). `failed` is set where a candidate
/// did not compile; otherwise an empty result means nothing fits and `smallest` is the least
/// prediction seen.
struct BudgetSearch {
  std::optional<Recomputation> chosen;
  Prediction prediction, smallest;
  bool failed = false;
};
BudgetSearch searchMemoryBudget(int64_t budget, const std::vector<Recomputation> &ladder, bool searchBlocks,
                                const CompileCandidate &compile);

/// What octet-checkpoint-blocks did to `module` (octet.checkpointed_blocks): the blocks it
/// checkpointed and those it could have (zeros where it did not run).
void checkpointedBlocks(mlir::ModuleOp module, int64_t &blocks, int64_t &of);
/// Why it found no blocks ("" where it did).
std::string checkpointedBlocksWhy(mlir::ModuleOp module);
/// --report's line: "activation checkpointing: ..." (`chooser`: the flag that chose it, or "").
std::string checkpointingLine(mlir::ModuleOp module, const std::string &chooser);

/// --report's line: "arena peak: ..." (the bytes alive at the arena's busiest op and the largest
/// of them).
std::string arenaPeakLine(const PlanMemoryFacts &memory);

/// The memory of the CUDA device this process sees first (CUDA_VISIBLE_DEVICES applies), through
/// the driver library loaded at run time; nullopt with `why` where there is none.
std::optional<int64_t> visibleDeviceBytes(std::string &why);

/// What --memory-budget auto leaves a backend beyond the plan: the CUDA context, cuBLASLt's and
/// cuDNN's handles and workspaces, the allocator's rounding.
constexpr int64_t kAutoBudgetReserve = int64_t(3) << 30;

} // namespace octet

#endif
