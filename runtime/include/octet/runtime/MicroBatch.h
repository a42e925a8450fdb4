//===- MicroBatch.h - What the first micro-batch keeps for the others -*- C++ -*-===//
//
// Gradient accumulation's first_micro_batch ops (docs/PLAN.md): the values they compute that the
// step's later runs read (an op of another phase, an output, a state update) stay alive through the
// whole run. The plan writer (lib/Conversion/PlanExport.cpp) plans the arena with this set and the
// loader (runtime/src/Plan.cpp) checks the arena against it: one definition for both.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_MICROBATCH_H
#define OCTET_RUNTIME_MICROBATCH_H

#include <cstddef>
#include <vector>

namespace octet::rt {

/// `forEachOp(visit)` calls visit(bool first, inputs, outputs) for every op in order (value ids,
/// -1 for none); `alsoRead` are the plan's outputs and state-update values. Returns, by value id,
/// whether the value is kept across runs.
template <typename ForEachOp, typename Ids>
std::vector<char> keptAcrossRuns(size_t values, const ForEachOp &forEachOp, const Ids &alsoRead) {
  std::vector<char> byFirst(values, 0), kept(values, 0);
  forEachOp([&](bool first, const auto &, const auto &outs) {
    if (first)
      for (auto id : outs)
        if (id >= 0)
          byFirst[size_t(id)] = 1;
  });
  auto keep = [&](auto id) {
    if (id >= 0 && byFirst[size_t(id)])
      kept[size_t(id)] = 1;
  };
  forEachOp([&](bool first, const auto &ins, const auto &) {
    if (!first)
      for (auto id : ins)
        keep(id);
  });
  for (auto id : alsoRead)
    keep(id);
  return kept;
}

} // namespace octet::rt

#endif
