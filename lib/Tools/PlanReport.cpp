//===- PlanReport.cpp - What fp8-opt --report says of a plan's fusions ----===//
#include "octet/Tools/PlanReport.h"

#include "octet/Conversion/PlanExport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

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
  int64_t attention = 0, causal = 0, headsInPlace = 0, grouped = 0, softmax = 0; // octet-fuse-attention's
  int64_t rotary = 0;                                                              // octet-fuse-rotary's
  std::map<std::string, int64_t>
      norms; // LayerNormalization / RMSNormalization and their gradient nodes
  module.walk([&](Operation *op) {
    std::string type = planOpType(op);
    softmax += type == "Softmax";
    if (type == "LayerNormalization" || type == "RMSNormalization" ||
        type == "octet::LayerNormalizationGrad" || type == "octet::RMSNormalizationGrad")
      ++norms[type];
    if (type == "octet::RotaryEmbedding") { // the forward's nodes (the gradient's have `inverse`)
      auto attrs = op->getAttrOfType<DictionaryAttr>("attrs");
      rotary += !(attrs && attrs.get("inverse"));
    }
    if (type == "octet::Attention") {
      ++attention;
      auto attrs = op->getAttrOfType<DictionaryAttr>("attrs");
      auto flag = [&](StringRef n) {
        auto a = attrs ? attrs.getAs<IntegerAttr>(n) : IntegerAttr();
        return a && a.getInt() != 0;
      };
      causal += flag("is_causal");
      headsInPlace += flag("q_num_heads");
      // Grouped-query: K has fewer heads than Q (kv_num_heads, or the 4-D form's head axis).
      auto q = op->getOperand(0).getType().dyn_cast<RankedTensorType>();
      auto k = op->getOperand(1).getType().dyn_cast<RankedTensorType>();
      auto kvHeads = attrs ? attrs.getAs<IntegerAttr>("kv_num_heads") : IntegerAttr();
      auto qHeads = attrs ? attrs.getAs<IntegerAttr>("q_num_heads") : IntegerAttr();
      grouped += qHeads && kvHeads ? kvHeads.getInt() < qHeads.getInt()
                                   : q && k && q.getRank() >= 3 && k.getRank() == q.getRank() &&
                                         k.getDimSize(k.getRank() - 3) < q.getDimSize(q.getRank() - 3);
    }
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
  if (attention || softmax) {
    os << "attention: " << attention << " fused into octet::Attention (" << causal << " causal, " << headsInPlace
       << " reading the heads in place";
    if (grouped)
      os << ", " << grouped << " grouped-query: K and V heads shared, not repeated";
    os << ")";
    if (softmax)
      os << "; " << softmax << " Softmax left unfused (a mask neither causal nor absent, or another reader of the "
         << "probabilities)";
    os << "\n";
  }
  if (rotary)
    os << "rotary embedding: " << rotary << " fused into octet::RotaryEmbedding\n";
  if (!norms.empty()) { // one op each (--norm-ops: also the decomposed ones a model spells out)
    os << "norms:";
    const char *sep = " ";
    for (auto &[type, n] : norms) {
      os << sep << n << " " << type;
      sep = ", ";
    }
    os << "\n";
  }
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
  reportGradientAccumulation(module, os);
}

/// octet-accumulate-gradients and octet-micro-batch-phases: the micro-batches, what the last one
/// alone runs, and the accumulators' bytes.
void octet::reportGradientAccumulation(ModuleOp module, llvm::raw_ostream &os) {
  auto training = module->getAttrOfType<DictionaryAttr>(kTrainingAttr);
  auto steps = training ? training.getAs<StringAttr>("grad_accum_steps") : StringAttr();
  if (!steps)
    return;
  int64_t last = 0, every = 0, first = 0, accumulators = 0, bytes = 0, kept = 0;
  module.walk([&](Operation *op) {
    if (op->hasAttr("octet.first_micro_batch")) {
      ++first;
      for (Value r : op->getResults()) // read by the step's other runs: kept through it
        if (llvm::any_of(r.getUsers(), [](Operation *u) { return !u->hasAttr("octet.first_micro_batch"); }))
          if (auto t = r.getType().dyn_cast<RankedTensorType>();
              t && t.hasStaticShape() && t.getElementType().isIntOrFloat())
            kept += t.getNumElements() * int64_t((t.getElementTypeBitWidth() + 7) / 8);
      return;
    }
    if (auto role = op->getAttrOfType<StringAttr>(kRoleAttr); role && role.getValue() == "grad_accum") {
      ++accumulators;
      if (auto t = op->getResult(0).getType().dyn_cast<RankedTensorType>(); t && t.hasStaticShape())
        bytes += t.getNumElements() * 4;
      return;
    }
    StringRef name = op->getName().getStringRef();
    if (name == "builtin.module" || name == "func.func" || name == "func.return" || name == "onnx.initializer" ||
        name == "onnx.Constant" || name == "onnx.none")
      return;
    (op->hasAttr("octet.last_micro_batch") ? last : every) += 1;
  });
  os << "gradient accumulation: " << steps.getValue() << " micro-batches per optimizer step; " << every
     << " ops run in each, " << last << " in the last only (gradient reductions, optimizer, weight scale updates); "
     << accumulators << " float32 accumulators, " << bytes << " bytes\n";
  if (first)
    os << "made once per optimizer step (--reuse-weight-casts): " << first
       << " ops in the first micro-batch only (weights' casts), their results kept through the step: " << kept
       << " bytes\n";
}

std::string octet::JsonPlanReport::create() {
  llvm::SmallString<128> p;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("fp8-opt-report", "json", p))
    return "--report: cannot create a temporary file: " + ec.message();
  path_ = p.str().str();
  return "";
}

octet::JsonPlanReport::~JsonPlanReport() {
  if (!path_.empty())
    llvm::sys::fs::remove(path_);
}

std::string octet::JsonPlanReport::print(llvm::StringRef facts, llvm::raw_ostream &os) const {
  auto buf = llvm::MemoryBuffer::getFile(path_);
  if (!buf)
    return "--report: cannot read the layer report back from " + path_ + ": " + buf.getError().message();
  llvm::Expected<llvm::json::Value> v = llvm::json::parse((*buf)->getBuffer());
  if (!v)
    return "--report: the layer report is no JSON: " + llvm::toString(v.takeError());
  llvm::json::Object *root = v->getAsObject();
  if (!root)
    return "--report: the layer report is no JSON object";
  llvm::json::Array lines;
  llvm::SmallVector<llvm::StringRef> parts;
  facts.split(parts, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef l : parts)
    lines.push_back(l.str());
  (*root)["plan"] = std::move(lines);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(*root))) << "\n";
  return "";
}
