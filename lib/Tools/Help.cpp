//===- Help.cpp - fp8-opt --help in a newcomer's order --------------------===//
#include "octet/Tools/Help.h"

#include <algorithm>
#include <map>
#include <cctype>
#include <vector>

using namespace llvm;

namespace octet {

namespace {

/// --help's line for each of Octet's visible options; the whole description stays the option's
/// cl::desc, which --help-hidden prints. An option missing here shows its whole description, wrapped.
struct ShortHelp {
  const char *value; // the value's name in --name=<value>, "" for the option's own
  const char *text;
};

const std::map<std::string, ShortHelp> &shortHelp() {
  static const std::map<std::string, ShortHelp> table = {
      // Basics
      {"config", {"", "The Accelerate config file `accelerate config` wrote"}},
      {"emit", {"mlir|onnx|plan", "Output: mlir, onnx or plan (default: from the -o extension)"}},
      {"eval", {"", "An eval graph (FP8 only with --use-autocast-during-eval)"}},
      {"list-recipes", {"", "List the recipes and exit"}},
      {"o", {"", "Output file: .plan (fp8-run), .onnx or .mlir ('-': stdout)"}},
      {"recipe", {"", "te, msamp[:O1|O2|O3], ao[:rowwise], te+msamp:O2 (--list-recipes)"}},
      {"report", {"", "Print what the compiler chose: FP8 per layer, fusion, memory"}},
      {"train", {"", "Compile a training step: gradients and the optimizer"}},
      // Recipes
      {"amax-compute-algo", {"max|most_recent", "te: max (default) or most_recent"}},
      {"amax-history-len", {"N", "te: amax history length (default 1024)"}},
      {"ao-recipe", {"name", "ao: tensorwise (default), rowwise or rowwise_with_gw_hp"}},
      {"fp8-format", {"HYBRID|E4M3", "te: HYBRID (default: E5M2 gradients) or E4M3"}},
      {"interval", {"N", "te: recompute scales every N steps (default 1)"}},
      {"keep-first-last", {"", "ao: the first and last Linear stay high precision (default on)"}},
      {"keep-output-layer", {"", "The output layer (lm_head) stays high precision (default on)"}},
      {"kept-gemm-precision", {"", "GEMMs of kept layers: bf16 (plans' default) or f32"}},
      {"margin", {"N", "te: scaling margin in powers of 2 (default 0)"}},
      {"module-filter", {"", "Only layers whose name matches REGEX go FP8"}},
      {"msamp-float32", {"parts", "msamp: kept float32: weights (default), gradients (O1's too) or none"}},
      {"msamp-weight-rounding", {"mode", "msamp: FP16 weight rounding: nearest (default) or stochastic"}},
      {"opt-level", {"O1|O2|O3", "msamp: O1, O2 (default) or O3"}},
      {"override-linear-precision", {"gemms", "te: GEMMs kept high precision: any of fprop,dgrad,wgrad"}},
      {"pad-inner-dim", {"", "Zero-pad layers whose dims are not multiples of 16 into FP8"}},
      {"round-scales-to-power-of-2", {"", "ao tensorwise: scales rounded down to powers of 2 (default on)"}},
      {"use-autocast-during-eval", {"", "FP8 in eval graphs too"}},
      // Training
      {"adam-eps", {"x", "Adam epsilon (default 1e-8)"}},
      {"beta1", {"x", "Adam beta1 (default 0.9)"}},
      {"beta2", {"x", "Adam beta2 (default 0.999)"}},
      {"clip-grad-norm", {"x", "Clip the global gradient norm (default 0: off)"}},
      {"freeze", {"", "Do not train parameters matching REGEX"}},
      {"grad-accum-steps", {"", "Micro-batches per optimizer step (default 1)"}},
      {"loss", {"", "The loss output (default: the only scalar output)"}},
      {"lr", {"x", "Peak learning rate (default 3e-4)"}},
      {"lr-schedule", {"name", "constant (default) or cosine (linear warmup, then cosine)"}},
      {"min-lr", {"x", "cosine: final learning rate (default 0)"}},
      {"momentum", {"x", "SGD momentum (default 0)"}},
      {"optimizer", {"name", "sgd, adam or adamw (default adamw)"}},
      {"reuse-weight-casts", {"", "Accumulation: weights cast once per optimizer step (default on)"}},
      {"total-steps", {"N", "cosine: steps to reach --min-lr"}},
      {"warmup-steps", {"N", "Linear warmup steps (default 0)"}},
      {"weight-decay", {"x", "Weight decay (default 0)"}},
      // Data parallelism
      {"data-parallel", {"", "Train on several ranks; the world size is chosen at run time"}},
      {"fp8-all-reduce", {"", "MS-AMP: weight gradients all-reduced as FP8 (default on)"}},
      {"fp8-all-reduce-format", {"e4m3|e5m2", "MS-AMP: FP8 gradient format, e4m3 (default) or e5m2"}},
      {"gradient-bucket-bytes", {"bytes", "Small gradients share all-reduces up to this size (default 4 MiB)"}},
      {"overlap-collectives", {"", "All-reduces run beside the backward pass (default on)"}},
      {"gather-prefetch", {"", "Sharded parameters: gathers issued P gathers early (default 1)"}},
      {"shard-optimizer", {"", "ZeRO-2 over exactly N ranks (default 0: replicated state)"}},
      {"shard-parameters", {"", "ZeRO-3 / FSDP over exactly N ranks: parameters sharded too"}},
      {"fp8-all-gather", {"", "Sharded parameters: FP8 weights gathered as codes (default on)"}},
      {"shard-unit", {"layer|parameter", "Sharded plans: one gather and reduce-scatter a layer (default) or a parameter"}},
      // Plan optimizations
      {"activation-precision", {"bf16|f32", "Activation storage: bf16 (FP8 recipes' default) or f32"}},
      {"attention-precision", {"mode", "Fused attention operands: auto (default), bf16 or tf32"}},
      {"attention-workspace-bytes", {"bytes", "Most scratch one attention op may take (default 512 MiB)"}},
      {"cast-transpose", {"", "FP8 casts also write the transposed codes a GEMM reads"}},
      {"checkpoint-blocks", {"", "Recompute the first N blocks (or all) in the backward"}},
      {"chunk-loss", {"", "The output layer and loss run over chunks of tokens"}},
      {"fold-head-transposes", {"", "Attention reads and writes the heads' layout in place"}},
      {"fold-widening-casts", {"", "FP8 casts of widened FP16/BF16 tensors read the narrow ones"}},
      {"fuse-amax-scale", {"", "Dynamic scaling's amax and scale in one launch"}},
      {"fuse-attention", {"", "Scaled dot-product attention becomes one fused op"}},
      {"fuse-cast-amax", {"", "An FP8 cast and its amax in one pass"}},
      {"fuse-cast-sources", {"", "FP8 casts computed in the pass of the op that makes the tensor"}},
      {"fuse-msamp-adam", {"", "msamp O2/O3: one fused FP8 Adam step per weight"}},
      {"fuse-pointwise", {"", "Chains of elementwise ops become one Pointwise program"}},
      {"fuse-pointwise-chains", {"", "Consecutive Pointwise programs run as one kernel"}},
      {"fuse-producer-amax", {"", "Dynamic scaling's amax in its producer's pass"}},
      {"fuse-residual-norms", {"", "A residual Add and the LayerNorm after it in one pass"}},
      {"fuse-runs", {"", "Runs of small ops of one kind in one launch"}},
      {"group-casts", {"", "The FP8 casts of one tensor share one read of it"}},
      {"in-place-updates", {"", "New parameters and state overwrite the old in place"}},
      {"keep-gradients", {"", "Keep gradients as plan outputs for fp8-run --dump-gradients"}},
      {"loss-chunk-bytes", {"bytes", "Most bytes of logits in one --chunk-loss chunk (default 256 MiB)"}},
      {"memory-budget", {"", "Device bytes the plan may need; recompute until it fits or refuse"}},
      {"qdq-gemm", {"matmul|gemm-float8", "FP8 GEMMs in exported ONNX: matmul (QDQ) or gemm-float8"}},
      {"rematerialize-fp8-casts", {"", "The backward casts FP8 codes again instead of keeping them"}},
      {"rematerialize-fp8-sources", {"list", "What that recomputes: weight, activation, gelu, layernorm"}},
      {"report-format", {"text|json", "--report as text (default) or json"}},
      {"share-input-scaling", {"", "Linears reading one tensor share its FP8 cast (fused QKV)"}},
      {"sink-scale-updates", {"", "Delayed-scaling updates run together at the step's end"}},
      // Import and testing
      {"absent-weights", {"error|zeros", "error (default), or zeros for weights whose data file is missing"}},
      {"allow-custom-ops", {"", "Compile ONNX ops the runtime does not run (for pass pipelines)"}},
      {"input-format", {"mlir|onnx", "mlir or onnx (default: from the extension, else sniffed)"}},
      {"input-shape", {"", "Shapes for symbolic dims: NAME=AxB[,NAME=AxB...]"}},
      {"split-input-file", {"", "Split MLIR input at '// -----' and process each chunk"}},
      {"verify-diagnostics", {"", "Check diagnostics against expected-* comments (lit)"}},
  };
  return table;
}

} // namespace

std::string helpSummary(StringRef name, StringRef desc) {
  auto it = shortHelp().find(name.str());
  return it == shortHelp().end() ? desc.str() : it->second.text;
}

namespace {

/// Words of `text` after `lead` (already printed, `col` columns wide) wrapped at `width`,
/// continuation lines indented by `indent`.
void wrap(raw_ostream &os, StringRef text, unsigned col, unsigned indent, unsigned width) {
  SmallVector<StringRef> words;
  text.split(words, ' ', -1, false);
  bool first = true;
  for (StringRef w : words) {
    if (!first && col + 1 + w.size() > width) {
      os << "\n" << std::string(indent, ' ');
      col = indent;
      first = true;
    }
    if (!first) {
      os << ' ';
      ++col;
    }
    os << w;
    col += unsigned(w.size());
    first = false;
  }
  os << "\n";
}

std::string flagText(const cl::Option &o) {
  std::string name = (o.ArgStr.size() == 1 ? "-" : "--") + o.ArgStr.str();
  bool takesValue = o.getValueExpectedFlag() == cl::ValueRequired;
  if (!takesValue)
    return name;
  auto it = shortHelp().find(o.ArgStr.str());
  std::string value = it != shortHelp().end() && *it->second.value ? it->second.value
                      : o.ValueStr.empty()                          ? "value"
                                                                    : o.ValueStr.str();
  return name + (o.ArgStr.size() == 1 ? " <" : "=<") + value + ">";
}

} // namespace

void printGroupedHelp(raw_ostream &os, StringRef overview, ArrayRef<const cl::OptionCategory *> order,
                      unsigned width) {
  const unsigned nameCol = 34;
  os << "OVERVIEW: " << overview << "\n";
  auto &options = cl::getRegisteredOptions();
  for (const cl::OptionCategory *cat : order) {
    std::vector<const cl::Option *> list;
    for (auto &entry : options) {
      const cl::Option *o = entry.second;
      if (o->ArgStr.empty() || o->getOptionHiddenFlag() != cl::NotHidden || entry.first() != o->ArgStr)
        continue;
      if (std::find(o->Categories.begin(), o->Categories.end(), cat) != o->Categories.end())
        list.push_back(o);
    }
    if (list.empty())
      continue;
    std::sort(list.begin(), list.end(), [](const cl::Option *a, const cl::Option *b) { return a->ArgStr < b->ArgStr; });
    os << "\n" << cat->getName() << ":\n";
    for (const cl::Option *o : list) {
      std::string flag = "  " + flagText(*o);
      os << flag;
      unsigned col = unsigned(flag.size());
      if (col + 2 > nameCol) {
        os << "\n" << std::string(nameCol, ' ');
      } else {
        os << std::string(nameCol - col, ' ');
      }
      wrap(os, helpSummary(o->ArgStr, o->HelpStr), nameCol, nameCol, width);
    }
  }
  os << "\n--help-hidden: each option's whole description, and LLVM's and MLIR's options and passes.\n";
}

} // namespace octet
