//===- ScalingMonitor.h - What delayed scaling clipped, from the amax histories -*- C++ -*-===//
//
// Delayed scaling casts step j's tensor with a scale made from the amaxes of the steps before it,
// so a tensor whose amax grows past them is clipped at the FP8 format's largest value that step
// (TransformerEngine's trade; Accelerate's default, the most recent amax, clips whenever an amax
// grows by any amount). fp8-run's JSONL log samples each FP8 tensor's amax history and scale every
// --log-every steps; from two samples in a row the monitor replays the scales the step used
// (delayedScale, the CPU kernel's own rule, from the earlier sample's scale and the histories'
// amaxes) and reports, for the steps between them, how many were clipped and the largest share
// of the format's range a step's amax took (amax x scale / fp8 max: above 1, clipped by that
// factor; below 1, the headroom). Only tensors of an fp8.delayed_scale op with interval 1, and
// only when the samples are at most one history length apart; the first sample has no fields.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_SRC_SCALINGMONITOR_H
#define OCTET_RUNTIME_SRC_SCALINGMONITOR_H

#include "octet/runtime/Fp8.h"
#include "octet/runtime/Plan.h"
#include "octet/runtime/Tensor.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace octet::rt {

struct ClipReport {
  int64_t steps = 0;   // steps replayed: those since the previous sample
  int64_t clipped = 0; // of them, the steps whose amax exceeded what their scale could hold
  double rangeUsed = 0; // the largest amax x scale / fp8 max among them
};

class ScalingMonitor {
public:
  /// The delayed-scaling rules of the plan's fp8.delayed_scale ops, by their scale state's name.
  explicit ScalingMonitor(const Plan &p);
  /// Takes the sample of the scale named `scale` at training step `step` (its history and scale
  /// after that step); the report of the steps since the previous sample, if it can be made.
  std::optional<ClipReport> sample(const std::string &scale, int64_t step, const Tensor &history, float nextScale);

private:
  struct Previous {
    int64_t step;
    std::vector<float> history;
    float scale;
  };
  std::map<std::string, DelayedScaling> rules_;
  std::map<std::string, Previous> previous_;
};

} // namespace octet::rt

#endif
