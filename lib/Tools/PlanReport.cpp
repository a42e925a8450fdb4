//===- PlanReport.cpp - What fp8-opt --report says of a plan's fusions ----===//
#include "octet/Tools/PlanReport.h"

#include "octet/Conversion/PlanExport.h"

#include <map>
#include <set>

using namespace mlir;

void octet::reportPlanFusions(ModuleOp module, llvm::raw_ostream &os) {
  std::map<std::string, std::pair<std::set<int64_t>, int64_t>> groups; // kind -> (groups, ops)
  std::set<int64_t> chunks; // octet-chunk-loss's chunks (octet.loss_chunk)
  int64_t chunkOps = 0, residualAdds = 0;
  std::set<int64_t> castPasses;                   // octet-fuse-cast-sources's passes
  std::map<std::string, int64_t> castPassMembers; // their ops by type
  std::map<std::string, int64_t> biasFolds;       // octet-fold-gemm-bias's, by reader
  module.walk([&](Operation *op) {
    residualAdds += op->hasAttr("octet.residual_add");
    if (auto c = op->getAttrOfType<IntegerAttr>("octet.loss_chunk")) {
      chunks.insert(c.getInt());
      ++chunkOps;
    }
    if (auto f = op->getAttrOfType<StringAttr>("octet.bias_fold"))
      ++biasFolds[f.str()];
    if (auto c = op->getAttrOfType<IntegerAttr>("octet.cast_pass")) {
      castPasses.insert(c.getInt());
      castPassMembers[planOpType(op)] += 1;
    }
    auto kind = op->getAttrOfType<StringAttr>("octet.fusion");
    auto group = op->getAttrOfType<IntegerAttr>("octet.fusion_group");
    if (kind && group) {
      groups[kind.str()].first.insert(group.getInt());
      ++groups[kind.str()].second;
    }
  });
  for (auto &[kind, g] : groups)
    os << "fusion groups: " << g.first.size() << " " << kind << " (" << g.second << " ops)\n";
  if (!castPasses.empty()) {
    os << "cast passes: " << castPasses.size() << " (";
    const char *sep = "";
    for (auto &[type, n] : castPassMembers) {
      os << sep << n << " " << type;
      sep = ", ";
    }
    os << ")\n";
  }
  for (auto &[reader, n] : biasFolds)
    os << "FP8 GEMM biases added by their reader: " << n << " " << reader << "\n";
  if (residualAdds)
    os << "residual Adds folded into FP8 GEMMs: " << residualAdds << "\n";
  if (!chunks.empty())
    os << "output layer and loss over token chunks: " << chunks.size() << " (" << chunkOps
       << " ops)\n";
}
