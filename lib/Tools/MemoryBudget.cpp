//===- MemoryBudget.cpp - fp8-opt --memory-budget ---------------------------===//
#include "octet/Tools/MemoryBudget.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cctype>
#include <dlfcn.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
namespace ox = octet::onnx_dialect;

int64_t octet::stateBytes(ModuleOp module) {
  int64_t total = 0;
  module.walk([&](ox::InitializerOp init) {
    auto t = init.getType().dyn_cast<RankedTensorType>();
    if (!t || !t.hasStaticShape())
      return;
    unsigned bits = t.getElementType().isIntOrFloat() ? t.getElementType().getIntOrFloatBitWidth() : 8;
    total += t.getNumElements() * int64_t((bits + 7) / 8);
  });
  return total;
}

bool octet::parseByteCount(const std::string &text, int64_t &bytes) {
  const char *s = text.c_str();
  char *end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || !std::isfinite(v) || v <= 0)
    return false;
  std::string unit(end);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b'))
    unit.pop_back();
  double scale = 1;
  if (!unit.empty()) {
    bool binary = unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I');
    if (unit.size() > 2 || (unit.size() == 2 && !binary))
      return false;
    int power = 0;
    switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
    case 'K': power = 1; break;
    case 'M': power = 2; break;
    case 'G': power = 3; break;
    case 'T': power = 4; break;
    default: return false;
    }
    scale = std::pow(binary ? 1024.0 : 1000.0, power);
  }
  double b = v * scale;
  if (b < 1 || b > 9.0e18)
    return false;
  bytes = int64_t(b);
  return true;
}

std::string octet::describeBytes(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld bytes (%.2f GiB)", (long long)bytes, double(bytes) / double(int64_t(1) << 30));
  return buf;
}

octet::BudgetSearch octet::searchMemoryBudget(int64_t budget, const std::vector<Recomputation> &ladder, bool searchBlocks,
                                       const CompileCandidate &compile) {
  BudgetSearch s;
  bool seen = false;
  auto fits = [&](const Recomputation &r) -> std::optional<bool> {
    std::optional<Prediction> p = compile(r);
    if (!p) {
      s.failed = true;
      return std::nullopt;
    }
    if (!seen || p->total() < s.smallest.total())
      s.smallest = *p;
    seen = true;
    if (p->total() > budget)
      return false;
    s.chosen = r;
    s.prediction = *p;
    return true;
  };
  for (const Recomputation &r : ladder) {
    std::optional<bool> ok = fits(r);
    if (!ok || *ok)
      return s;
  }
  if (!searchBlocks || ladder.empty())
    return s;
  // Every block first: where that does not fit, nothing does.
  Recomputation r = ladder.back();
  r.blocks = -1;
  std::optional<bool> all = fits(r);
  if (!all || !*all || s.prediction.blocksOf <= 1)
    return s;
  Recomputation best = *s.chosen;
  Prediction bestPrediction = s.prediction;
  best.blocks = s.prediction.blocks; // -1 as the count it stood for
  int64_t lo = 1, hi = best.blocks;  // the answer lies in [lo, hi]; hi fits
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    r.blocks = mid;
    std::optional<bool> ok = fits(r);
    if (!ok)
      return s;
    if (*ok) {
      hi = mid;
      best = r;
      bestPrediction = s.prediction;
    } else {
      lo = mid + 1;
    }
  }
  s.chosen = best;
  s.prediction = bestPrediction;
  return s;
}

std::optional<int64_t> octet::visibleDeviceBytes(std::string &why) {
  // The driver API's C entry points (cuda.h), loaded here so that fp8-opt needs no CUDA to build or run.
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why = "no CUDA driver here (libcuda.so.1 not found)";
    return std::nullopt;
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int *);
  using GetFn = int (*)(int *, int);
  using TotalFn = int (*)(size_t *, int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
  auto total = reinterpret_cast<TotalFn>(dlsym(lib, "cuDeviceTotalMem_v2"));
  int n = 0, dev = 0;
  size_t bytes = 0;
  std::optional<int64_t> result;
  if (!init || !count || !get || !total)
    why = "the CUDA driver library lacks cuDeviceTotalMem_v2";
  else if (init(0) != 0 || count(&n) != 0 || n < 1)
    why = "no CUDA device visible";
  else if (get(&dev, 0) != 0 || total(&bytes, dev) != 0)
    why = "the CUDA driver did not give device 0's memory";
  else
    result = int64_t(bytes); // the library stays loaded: the driver keeps threads after cuInit
  return result;
}

void octet::checkpointedBlocks(ModuleOp module, int64_t &blocks, int64_t &of) {
  blocks = of = 0;
  auto d = module->getAttrOfType<DictionaryAttr>("octet.checkpointed_blocks");
  if (!d)
    return;
  if (auto b = d.getAs<IntegerAttr>("blocks"))
    blocks = b.getInt();
  if (auto o = d.getAs<IntegerAttr>("of"))
    of = o.getInt();
}

std::string octet::checkpointedBlocksWhy(ModuleOp module) {
  auto d = module->getAttrOfType<DictionaryAttr>("octet.checkpointed_blocks");
  auto why = d ? d.getAs<StringAttr>("why") : StringAttr();
  return why ? why.getValue().str() : (d ? "every block holds a random op or a subgraph" : "the pass did not run");
}

std::string octet::checkpointingLine(ModuleOp module, const std::string &chooser) {
  int64_t blocks = 0, of = 0;
  checkpointedBlocks(module, blocks, of);
  if (blocks == 0)
    return "activation checkpointing: none (--checkpoint-blocks N or --memory-budget turn it on)";
  auto d = module->getAttrOfType<DictionaryAttr>("octet.checkpointed_blocks");
  std::string prefix = d.getAs<StringAttr>("prefix").getValue().str();
  auto num = [&](const char *k) { return std::to_string(d.getAs<IntegerAttr>(k).getInt()); };
  std::string line = "activation checkpointing: " + std::to_string(blocks) + " of the " + std::to_string(of) +
                     " blocks that can be (" + prefix + "." + num("first") + " to " + prefix + "." + num("last") +
                     ") run their forward again in the backward";
  if (!chooser.empty())
    line += " (" + chooser + ")";
  return line;
}

std::string octet::arenaPeakLine(const PlanMemoryFacts &m) {
  auto gib = [](int64_t b) { // in the largest binary unit it reaches
    const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = double(b);
    int u = 0;
    for (; u < 4 && v >= 1024; ++u)
      v /= 1024;
    char buf[32];
    std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
    return std::string(buf);
  };
  std::string line = "arena peak: " + gib(m.livePeakBytes) + " alive in " + std::to_string(m.aliveBuffers) +
                     " buffers at " + m.peakOp + " (the arena is " + gib(m.arenaBytes) + "); largest:";
  for (size_t i = 0; i < m.largest.size(); ++i)
    line += (i ? ", " : " ") + m.largest[i].first + " " + gib(m.largest[i].second);
  return line;
}
