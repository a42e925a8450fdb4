//===- TrainReport.cpp - fp8-run --report-memory ---------------------------===//
#include "TrainData.h"

#include "octet/runtime/Npz.h"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

namespace octet::rt {

//===----------------------------------------------------------------------===//
// Memory report
//===----------------------------------------------------------------------===//

void printMemoryReport(const Plan &p, std::ostream &os) {
  // The trained parameters: those with gradients, or (plans compiled with --keep-gradients=false)
  // the state the optimizer updates as weights.
  // the state the optimizer updates as weights (a sharded gradient is no plan output either).
  std::set<std::string> params;
  for (auto &[param, gradId] : p.gradients)
    params.insert(param);
  for (auto &[id, role] : p.roles)
    if (isWeightRole(role))
      params.insert(p.values[size_t(id)].name);
  if (params.empty())
    throw Error("--report-memory needs a training plan (fp8-opt --train)");
  struct Held { // what a constant holds: its type, elements and bytes
    DType dtype;
    int64_t n;
    double bytes;
    int64_t numel() const { return n; }
  };
  std::map<std::string, Held> byName;
  std::map<std::string, std::string> roleOf;
  std::map<std::string, int64_t> wholeOf; // a rank's shard: the whole tensor's elements
  for (auto &[id, sh] : p.sharded)
    wholeOf[p.values[size_t(id)].name] = checkedBytes(sh.whole, 1);
  for (auto &[id, kind] : p.constantKinds) {
    const PlanValue &pv = p.values[size_t(id)];
    byName[pv.name] = {pv.dtype, numElements(pv.shape), double(constantBytes(p, id))};
    auto r = p.roles.find(id);
    auto k = p.constantKinds.find(id);
    roleOf[p.values[size_t(id)].name] =
        r != p.roles.end() ? r->second : (k != p.constantKinds.end() && k->second == ConstantKind::State ? "fp8" : "");
  }
  struct Group {
    int64_t params = 0;
    double weights = 0, grads = 0, optim = 0;
  } fp8Lin, other;
  double fp8State = 0;
  int64_t total = 0;
  for (auto &[name, role] : roleOf)
    if (role == "fp8")
      fp8State += byName[name].bytes;
  for (const std::string &param : params) {
    auto it = byName.find(param);
    if (it == byName.end())
      continue;
    const Held *w = &it->second;
    // O3 (master_weight): the master (float32, or MS-AMP's FP16) and the FP8 copy the forward
    // pass reads; sharded (master_shard): this rank's part of the master and the whole FP8 copy
    // it gathers.
    bool master = roleOf[param] == "master_weight" || roleOf[param] == "master_shard";
    // MS-AMP storage: a low-precision weight, or (--msamp-float32 keeping the weight float32) an
    // FP8-held gradient or moments stored below float32.
    bool low = master || w->dtype == DType::F16 || w->dtype == DType::BF16 || p.gradStorage.count(param);
    for (auto &[name, role] : roleOf)
      if (!low && (role == "optimizer" || role == "optimizer_shard") &&
          name.compare(0, param.size() + 1, param + ".") == 0)
        low = byName[name].dtype != DType::F32;
    Group &g = low ? fp8Lin : other;
    int64_t n = wholeOf.count(param) ? wholeOf[param] : w->numel();
    g.params += n;
    total += n;
    g.weights += w->bytes + (master ? double(n) : 0.0); // O3: + the FP8 copy
    auto gs = p.gradStorage.find(param);
    auto gi = std::find_if(p.gradients.begin(), p.gradients.end(), [&](auto &g) { return g.first == param; });
    DType gd = gs != p.gradStorage.end() ? gs->second
               : gi != p.gradients.end() ? p.values[size_t(gi->second)].dtype
                                         : DType::F32; // freed gradients (--keep-gradients=false): float32

    g.grads += double(n) * double(dtypeSize(gd));
    for (auto &[name, role] : roleOf)
      if ((role == "optimizer" || role == "optimizer_shard") && name.compare(0, param.size() + 1, param + ".") == 0)
        g.optim += byName[name].bytes;
  }
  auto row = [&](const char *label, const Group &g) {
    if (!g.params)
      return;
    double n = double(g.params);
    char buf[200];
    std::snprintf(buf, sizeof buf, "%-18s %12lld %8.2f %8.2f %10.2f %8.2f\n", label, (long long)g.params,
                  g.weights / n, g.grads / n, g.optim / n, (g.weights + g.grads + g.optim) / n);
    os << buf;
  };
  auto it = p.training.find("optimizer");
  auto lvl = p.training.find("msamp_level");
  os << "memory per parameter (bytes), recipe '" << (p.recipe.empty() ? "none" : p.recipe) << "', optimizer "
     << (it == p.training.end() ? "?" : it->second)
     << (lvl != p.training.end() && !lvl->second.empty() ? ", MS-AMP " + lvl->second + " storage" : "");
  if (auto sh = p.training.find("shard_world_size"); sh != p.training.end())
    os << ", optimizer sharded over " << sh->second << " ranks (one rank's bytes)";
  os << "\n";
  os << "group                    params  weights    grads  optimizer    total\n";
  row("FP8 Linear (low)", fp8Lin);
  row(fp8Lin.params ? "other (FP32)" : "all (FP32)", other);
  Group all{fp8Lin.params + other.params, fp8Lin.weights + other.weights, fp8Lin.grads + other.grads,
            fp8Lin.optim + other.optim};
  if (fp8Lin.params)
    row("all", all);
  char buf[160];
  std::snprintf(buf, sizeof buf, "FP8 scaling state: %.0f bytes (%.4f bytes/param)\n", fp8State,
                total ? fp8State / double(total) : 0.0);
  os << buf;
}

} // namespace octet::rt
