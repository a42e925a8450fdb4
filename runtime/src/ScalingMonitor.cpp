//===- ScalingMonitor.cpp - What delayed scaling clipped ------------------===//
#include "ScalingMonitor.h"

#include <algorithm>
#include <cmath>

namespace octet::rt {

ScalingMonitor::ScalingMonitor(const Plan &p) {
  for (const PlanOp &op : p.ops) {
    if (op.type != "fp8.delayed_scale" || op.inputs.size() < 2 || op.inputs[1] < 0)
      continue;
    std::string fmt = attrStr(op, "format", "");
    if (attrInt(op, "interval", 1) != 1 || (fmt != "float8e4m3fn" && fmt != "float8e5m2"))
      continue;
    DelayedScaling r;
    r.format = fmt == "float8e5m2" ? Fp8Format::E5M2 : Fp8Format::E4M3FN;
    r.margin = int(attrInt(op, "margin", 0));
    r.mostRecent = attrStr(op, "algo", "max") == "most_recent";
    r.powerOfTwo = attrInt(op, "power_of_two", 0) != 0;
    rules_[p.values[size_t(op.inputs[1])].name] = r;
  }
}

std::optional<ClipReport> ScalingMonitor::sample(const std::string &scale, int64_t step, const Tensor &history,
                                                 float nextScale) {
  auto rule = rules_.find(scale);
  if (rule == rules_.end() || history.dtype != DType::F32 || history.numel() < 1)
    return std::nullopt;
  const float *now = history.data<float>();
  int64_t L = history.numel();
  std::vector<float> cur(now, now + L);
  std::optional<ClipReport> report;
  auto prev = previous_.find(scale);
  int64_t n = prev == previous_.end() ? 0 : step - prev->second.step;
  if (n >= 1 && n <= L && int64_t(prev->second.history.size()) == L) {
    // amax(s) for s from (earlier step) - L + 1 to `step`: the earlier history, then the new
    // entries; the history at the end of step j is the L values ending at j.
    std::vector<float> a(prev->second.history.rbegin(), prev->second.history.rend());
    for (int64_t k = n - 1; k >= 0; --k)
      a.push_back(cur[size_t(k)]);
    ClipReport r;
    float s = prev->second.scale; // the scale the first replayed step used
    float fmax = fp8Max(rule->second.format);
    std::vector<float> rolled(static_cast<size_t>(L));
    for (int64_t j = 1; j <= n; ++j) {
      size_t at = size_t(L - 1 + j); // step j's amax in `a`
      double used = double(a[at]) * double(s) / double(fmax);
      r.rangeUsed = std::max(r.rangeUsed, used);
      r.clipped += used > 1.0;
      ++r.steps;
      for (int64_t i = 0; i < L; ++i) // the history after step j, newest first
        rolled[size_t(i)] = a[at - size_t(i)];
      s = delayedScale(rolled.data(), L, s, rule->second);
    }
    if (s == nextScale) // else the replay did not reproduce the plan's own scale: no report
      report = r;
  }
  previous_[scale] = {step, std::move(cur), nextScale};
  return report;
}

} // namespace octet::rt
