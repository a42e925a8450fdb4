//===- ModelSummary.cpp - What a model holds, for people ------------------===//
#include "octet/Passes/Passes.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace octet {
#define GEN_PASS_DEF_MODELSUMMARY
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

struct Candidate {
  std::string kind; // Linear, LayerNorm, RMSNorm
  std::string name; // node name (the user's layer name where the exporter kept it)
  std::string weight;
  SmallVector<int64_t> shape;
};

/// The initializer behind a value, looking through a Transpose.
ox::InitializerOp weightOf(Value v, bool &transposed) {
  transposed = false;
  if (auto t = v.getDefiningOp<ox::TransposeOp>()) {
    transposed = true;
    v = t.getData();
  }
  return v.getDefiningOp<ox::InitializerOp>();
}

/// x * 1/sqrt(mean(x^2) + eps), the RMSNorm the Llama export spells out:
/// matched at the Reciprocal/Div whose input is Sqrt(Add(ReduceMean(Pow(x, 2)), eps)).
bool isRmsNormCore(Operation *op) {
  Value root;
  if (auto r = dyn_cast<ox::ReciprocalOp>(op))
    root = r.getX();
  else
    return false;
  auto sqrt = root.getDefiningOp<ox::SqrtOp>();
  if (!sqrt)
    return false;
  auto add = sqrt.getX().getDefiningOp<ox::AddOp>();
  if (!add)
    return false;
  auto mean = add.getA().getDefiningOp<ox::ReduceMeanOp>();
  if (!mean)
    mean = add.getB().getDefiningOp<ox::ReduceMeanOp>();
  return mean && mean.getData().getDefiningOp<ox::PowOp>();
}

struct ModelSummaryPass : public octet::impl::ModelSummaryBase<ModelSummaryPass> {
  using ModelSummaryBase::ModelSummaryBase;

  void runOnOperation() override {
    if (format != "text" && format != "json") {
      getOperation().emitError() << "octet-model-summary: format must be 'text' or 'json', got '"
                                 << format << "'";
      return signalPassFailure();
    }
    std::string errorMessage;
    auto out = openOutputFile(outputFile, &errorMessage);
    if (!out) {
      getOperation().emitError() << "octet-model-summary: " << errorMessage;
      return signalPassFailure();
    }
    llvm::json::Array funcs;
    for (auto func : getOperation().getOps<func::FuncOp>())
      funcs.push_back(summarize(func, format == "text" ? &out->os() : nullptr));
    if (format == "json")
      out->os() << llvm::formatv("{0:2}", llvm::json::Value(std::move(funcs))) << "\n";
    out->keep();
    markAllAnalysesPreserved();
  }

  llvm::json::Object summarize(func::FuncOp func, llvm::raw_ostream *os) {
    std::map<std::string, int64_t> opCounts;
    int64_t numInits = 0, numParams = 0, paramBytes = 0;
    std::vector<Candidate> cands;
    func.walk([&](Operation *op) {
      if (auto init = dyn_cast<ox::InitializerOp>(op)) {
        ++numInits;
        auto t = init.getOutput().getType().cast<ShapedType>();
        if (t.getElementType().isa<FloatType>()) {
          numParams += t.getNumElements();
          paramBytes += t.getNumElements() * t.getElementTypeBitWidth() / 8;
        }
        return;
      }
      StringRef type = ox::ONNXDialect::getOnnxOpType(op);
      if (!type.empty())
        ++opCounts[type.str()];
      bool transposed;
      if (auto mm = dyn_cast<ox::MatMulOp>(op)) {
        if (auto w = weightOf(mm.getB(), transposed))
          addLinear(cands, op, w, transposed);
      } else if (auto gemm = dyn_cast<ox::GemmOp>(op)) {
        if (auto w = weightOf(gemm.getB(), transposed))
          addLinear(cands, op, w, transposed != (gemm.getTransB().value_or(0) != 0));
      } else if (auto ln = dyn_cast<ox::LayerNormalizationOp>(op)) {
        Candidate c{"LayerNorm", ox::getNodeName(op), "", {}};
        if (auto s = weightOf(ln.getScale(), transposed))
          c.weight = s.getName().str();
        if (auto t = ln.getScale().getType().dyn_cast<RankedTensorType>())
          c.shape.assign(t.getShape().begin(), t.getShape().end());
        cands.push_back(c);
      } else if (isRmsNormCore(op)) {
        cands.push_back({"RMSNorm", ox::getNodeName(op), "", {}});
      }
    });

    llvm::json::Object ops;
    for (auto &[k, v] : opCounts)
      ops[k] = v;
    llvm::json::Array layers;
    for (auto &c : cands)
      layers.push_back(llvm::json::Object{{"kind", c.kind}, {"name", c.name}, {"weight", c.weight},
                                          {"shape", llvm::json::Array(c.shape)}});
    int64_t numLinear = llvm::count_if(cands, [](auto &c) { return c.kind == "Linear"; });
    int64_t numNorm = cands.size() - numLinear;
    if (os) {
      *os << "model @" << func.getSymName() << ": " << func.getNumArguments() << " inputs, "
          << func.getNumResults() << " outputs, " << numInits << " initializers, " << numParams
          << " float parameters (" << llvm::format("%.2f", paramBytes / 1048576.0) << " MiB)\n";
      *os << "ops:";
      for (auto &[k, v] : opCounts)
        *os << " " << k << "=" << v;
      *os << "\n";
      *os << "linear candidates: " << numLinear << "\n";
      for (auto &c : cands)
        if (c.kind == "Linear")
          *os << "  " << c.name << "  weight=" << c.weight << "  [K,N]=["
              << (c.shape.size() == 2 ? std::to_string(c.shape[0]) + "," + std::to_string(c.shape[1])
                                      : std::string("?"))
              << "]\n";
      *os << "norm candidates: " << numNorm << "\n";
      for (auto &c : cands)
        if (c.kind != "Linear")
          *os << "  " << c.kind << "  " << c.name << (c.weight.empty() ? "" : "  scale=" + c.weight)
              << "\n";
    }
    return llvm::json::Object{{"function", func.getSymName().str()},
                              {"inputs", (int64_t)func.getNumArguments()},
                              {"outputs", (int64_t)func.getNumResults()},
                              {"initializers", numInits},
                              {"parameters", numParams},
                              {"ops", std::move(ops)},
                              {"candidates", std::move(layers)}};
  }

  static void addLinear(std::vector<Candidate> &cands, Operation *op, ox::InitializerOp w,
                        bool transposed) {
    Candidate c{"Linear", ox::getNodeName(op), w.getName().str(), {}};
    auto t = w.getOutput().getType().cast<ShapedType>();
    if (t.hasRank() && t.getRank() == 2) {
      // Report [K, N]: the weight as the GEMM consumes it.
      int64_t a = t.getDimSize(0), b = t.getDimSize(1);
      c.shape = transposed ? SmallVector<int64_t>{b, a} : SmallVector<int64_t>{a, b};
    }
    cands.push_back(c);
  }
};

} // namespace
