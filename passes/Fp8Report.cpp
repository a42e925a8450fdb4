//===- Fp8Report.cpp - What a recipe did to each layer ---------------------===//
#include "octet/Passes/Passes.h"

#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/NN/IR/NN.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

namespace octet {
#define GEN_PASS_DEF_FP8REPORT
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace fp8 = octet::fp8;
namespace nn = octet::nn;

namespace {

std::string formatName(Type t) { return t.isFloat8E4M3FN() ? "E4M3" : t.isFloat8E5M2() ? "E5M2" : "?"; }

/// What each reason for keeping a layer in high precision means, and what converts it.
std::string reasonText(const std::string &reason) {
  if (reason == "output")
    return "the output layer (its result reaches no other Linear): FP8 there costs loss in every recipe "
           "(docs/BENCHMARKS.md, convergence); --keep-output-layer=false converts it";
  if (reason == "first" || reason == "last")
    return "ao keeps the first and last Linear in high precision, as torchao's policy in Accelerate does; "
           "--no-keep-first-last converts them";
  if (reason == "dims")
    return "K or N is not a multiple of 16, which FP8 GEMMs need; --pad-inner-dim converts it";
  if (reason == "filter")
    return "the layer's name does not match --module-filter";
  if (reason == "eval")
    return "an eval graph: FP8 only with --use-autocast-during-eval";
  if (reason == "autocast")
    return "no FP8 recipe: with --activation-precision=bf16 the GEMMs take BF16 operands, as under PyTorch's "
           "BF16 autocast (Accelerate's mixed_precision: bf16)";
  return "no FP8 recipe ran";
}

/// ao tensorwise: whether its scales are rounded to powers of 2 and why ("" for other recipes).
std::string aoScalesText(StringAttr recipe, bool pow2) {
  if (!recipe || recipe.getValue() != "ao:tensorwise")
    return "";
  if (pow2)
    return "scales rounded down to powers of 2 (the default: a tensor's FP8 grid moves only when its amax crosses "
           "one; with it ao's loss stayed within 1% of BF16's at 350M, without it not, docs/BENCHMARKS.md "
           "convergence); --round-scales-to-power-of-2=false computes them as torchao's tensorwise recipe does";
  return "scales not rounded (torchao's tensorwise recipe, --round-scales-to-power-of-2=false)";
}

struct Row {
  std::string layer, precision, reason, formats, scaling, gemms;
  int64_t m = 0, k = 0, n = 0;
  int64_t weightBytes = 0, weightBytesAfter = 0;
  double fwdFlops = 0, trainFp8 = 0, trainHigh = 0;
};

struct Fp8ReportPass : octet::impl::Fp8ReportBase<Fp8ReportPass> {
  using Fp8ReportBase::Fp8ReportBase;

  static void shapeOf(Value x, Value w, bool transposed, Row &r) {
    auto xt = x.getType().cast<ShapedType>();
    auto wt = w.getType().cast<ShapedType>();
    r.k = transposed ? wt.getDimSize(1) : wt.getDimSize(0);
    r.n = transposed ? wt.getDimSize(0) : wt.getDimSize(1);
    r.m = xt.hasStaticShape() && r.k > 0 ? xt.getNumElements() / r.k : 0;
    r.fwdFlops = 2.0 * double(r.m) * double(r.k) * double(r.n);
    r.weightBytes = wt.getNumElements() * int64_t(wt.getElementTypeBitWidth() / 8);
  }

  void runOnOperation() override {
    if (format != "text" && format != "json") {
      getOperation().emitError() << "octet-fp8-report: format must be 'text' or 'json', got '" << format << "'";
      return signalPassFailure();
    }
    std::vector<Row> rows;
    getOperation().walk([&](Operation *op) {
      Row r;
      if (auto l = dyn_cast<fp8::LinearOp>(op)) {
        shapeOf(l.getInput(), l.getWeight(), l.getTransposeWeight(), r);
        r.layer = l.getLayer().str();
        r.precision = "fp8";
        if (auto from = l->getAttrOfType<DenseI64ArrayAttr>("octet.padded_from"); from && from.size() == 2) {
          // --pad-inner-dim: the layer's own K x N (the model's weight bytes; the FP8 copy is padded)
          r.reason = llvm::formatv("pad {0}x{1}", from[0], from[1]).str();
          auto wt = l.getWeight().getType().cast<ShapedType>();
          r.weightBytes = from[0] * from[1] * int64_t(wt.getElementTypeBitWidth() / 8);
        }
        r.formats = formatName(l.getInputFormat()) + "/" + formatName(l.getWeightFormat()) + "/" +
                    formatName(l.getGradFormat());
        if (l.getScaling() == fp8::Scaling::delayed)
          r.scaling = llvm::formatv("delayed per-tensor (history {0}, {1}, margin {2}{3})",
                                    l.getState()[0].getType().cast<ShapedType>().getDimSize(0),
                                    fp8::stringifyAmaxComputeAlgo(l.getAlgo()), l.getMargin(),
                                    l.getInterval() > 1 ? ", interval " + std::to_string(l.getInterval()) : "")
                          .str();
        else
          r.scaling = std::string("dynamic ") + (l.getRowwise() ? "rowwise" : "per-tensor") +
                      (l.getPowerOfTwo() ? " pow2" : "");
        if (auto shared = l->getAttrOfType<StringAttr>(octet::kFp8InputSharedAttr))
          r.scaling += ", input as " + shared.str();
        bool hp[3] = {l.getFpropHighPrecision(), l.getDgradHighPrecision(), l.getWgradHighPrecision()};
        const char *names[3] = {"fprop", "dgrad", "wgrad"};
        for (int i = 0; i < 3; ++i) {
          r.gemms += std::string(i ? " " : "") + names[i] + "=" + (hp[i] ? "hp" : "fp8");
          (hp[i] ? r.trainHigh : r.trainFp8) += r.fwdFlops;
        }
        auto wt = l.getWeight().getType().cast<ShapedType>();
        r.weightBytesAfter = wt.getNumElements() + (l.getRowwise() ? 4 * r.n : 4);
      } else if (auto l = dyn_cast<nn::LinearOp>(op)) {
        shapeOf(l.getX(), l.getWeight(), l.getTransposeWeight(), r);
        r.layer = l.getLayer().str();
        r.precision = "high";
        auto reason = l->getAttrOfType<StringAttr>(octet::kFp8KeptAttr);
        r.reason = reason ? reason.str() : "no recipe";
        auto gp = l->getAttrOfType<StringAttr>(octet::kGemmPrecisionAttr);
        std::string hp = gp ? gp.str() : "hp";
        r.gemms = "fprop=" + hp + " dgrad=" + hp + " wgrad=" + hp;
        if (gp)
          r.formats = "BF16/BF16/BF16";
        if (auto from = l->getAttrOfType<DenseI64ArrayAttr>("octet.padded_from"); from && from.size() == 2)
          r.scaling = llvm::formatv("N {0} padded to {1} (pad-kept-gemms)", from[1], (from[1] + 7) / 8 * 8).str();
        r.trainHigh = 3 * r.fwdFlops;
        r.weightBytesAfter = r.weightBytes;
      } else {
        return;
      }
      rows.push_back(r);
    });

    std::string errorMessage;
    auto out = openOutputFile(outputFile, &errorMessage);
    if (!out) {
      getOperation().emitError() << "octet-fp8-report: " << errorMessage;
      return signalPassFailure();
    }
    double fwdFp8 = 0, fwdHigh = 0, trainFp8 = 0, trainHigh = 0;
    int64_t before = 0, after = 0, nFp8 = 0;
    bool pow2 = false;
    getOperation().walk([&](fp8::LinearOp l) { pow2 |= l.getPowerOfTwo(); });
    for (const Row &r : rows) {
      (r.precision == "fp8" ? fwdFp8 : fwdHigh) += r.fwdFlops;
      trainFp8 += r.trainFp8;
      trainHigh += r.trainHigh;
      before += r.weightBytes;
      after += r.weightBytesAfter;
      nFp8 += r.precision == "fp8";
    }
    auto recipe = getOperation()->getAttrOfType<StringAttr>(octet::kRecipeAttr);
    std::string scales = nFp8 ? aoScalesText(recipe, pow2) : "";
    llvm::raw_ostream &os = out->os();
    if (format == "json") {
      llvm::json::Array layers;
      for (const Row &r : rows)
        layers.push_back(llvm::json::Object{{"layer", r.layer},
                                            {"m", r.m},
                                            {"k", r.k},
                                            {"n", r.n},
                                            {"precision", r.precision},
                                            {"reason", r.reason},
                                            {"formats", r.formats},
                                            {"scaling", r.scaling},
                                            {"gemms", r.gemms},
                                            {"forward_flops", r.fwdFlops},
                                            {"weight_bytes", r.weightBytes},
                                            {"weight_bytes_fp8", r.weightBytesAfter}});
      llvm::json::Object why;
      for (const Row &r : rows)
        if (r.precision != "fp8")
          why[r.reason] = reasonText(r.reason);
      llvm::json::Object root{{"recipe", recipe ? recipe.str() : "none"},
                              {"layers", std::move(layers)},
                              {"kept_because", std::move(why)},
                              {"totals", llvm::json::Object{{"linear_layers", int64_t(rows.size())},
                                                            {"fp8_layers", nFp8},
                                                            {"forward_flops_fp8", fwdFp8},
                                                            {"forward_flops_high", fwdHigh},
                                                            {"training_flops_fp8", trainFp8},
                                                            {"training_flops_high", trainHigh},
                                                            {"weight_bytes_before", before},
                                                            {"weight_bytes_after", after}}}};
      if (!scales.empty()) // ao tensorwise only
        root["scales"] = scales;
      os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
    } else {
      os << "FP8 report (recipe " << (recipe ? recipe.getValue() : "none") << "): " << nFp8 << " of " << rows.size()
         << " Linear layers in FP8\n";
      os << llvm::formatv("{0,-48} {1,-16} {2,-6} {3,-10} {4,-15} {5}\n", "layer", "MxKxN", "prec", "reason",
                          "fmt in/w/grad", "scaling");
      for (const Row &r : rows)
        os << llvm::formatv("{0,-48} {1,-16} {2,-6} {3,-10} {4,-15} {5}\n", r.layer,
                            llvm::formatv("{0}x{1}x{2}", r.m, r.k, r.n).str(), r.precision,
                            r.reason.empty() ? "-" : r.reason, r.formats.empty() ? "-" : r.formats,
                            r.scaling.empty() ? "-" : r.scaling);
      // Why layers were kept, one line per explanation (ao's 'first' and 'last' share one).
      std::vector<std::pair<std::string, std::string>> why; // explanation, reasons
      for (const Row &r : rows) {
        if (r.precision == "fp8")
          continue;
        std::string text = reasonText(r.reason), quoted = "'" + r.reason + "'";
        auto it = llvm::find_if(why, [&](const auto &w) { return w.first == text; });
        if (it == why.end())
          why.push_back({text, quoted});
        else if (it->second.find(quoted) == std::string::npos)
          it->second += ", " + quoted;
      }
      for (const auto &[text, reasons] : why)
        os << "kept " << reasons << ": " << text << "\n";
      if (!scales.empty())
        os << "ao " << scales << "\n";
      double fwd = fwdFp8 + fwdHigh, train = trainFp8 + trainHigh;
      os << llvm::formatv("forward GEMM FLOPs: {0:e3} in FP8, {1:e3} in high precision ({2:f1}% FP8)\n", fwdFp8,
                          fwdHigh, fwd > 0 ? 100.0 * fwdFp8 / fwd : 0.0);
      os << llvm::formatv("training GEMM FLOPs (fprop+dgrad+wgrad): {0:e3} in FP8, {1:e3} in high precision "
                          "({2:f1}% FP8)\n",
                          trainFp8, trainHigh, train > 0 ? 100.0 * trainFp8 / train : 0.0);
      os << llvm::formatv("Linear weight bytes: {0} before, {1} after ({2:f2}x smaller)\n", before, after,
                          after > 0 ? double(before) / double(after) : 0.0);
    }
    out->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace
