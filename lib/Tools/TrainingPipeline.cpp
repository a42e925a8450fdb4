//===- TrainingPipeline.cpp - fp8-opt --train's pass pipeline --------------===//
#include "octet/Tools/TrainingPipeline.h"

#include "octet/Conversion/ONNXImport.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cstdio>

using namespace mlir;

std::string octet::trainingPipeline(ModuleOp module, const TrainingFlags &f) {
  auto quote = [](const std::string &v) { return "\"" + v + "\""; };
  auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  std::string opt = f.optimizer;
  double b1 = f.beta1.first, b2 = f.beta2.first, eps = f.eps.first, wd = f.weightDecay.first,
         mom = f.momentum.first;
  if (auto spec = module->getAttrOfType<DictionaryAttr>(kOnnxTrainingAttr)) {
    auto take = [&](StringRef k, double &dst, bool given) {
      if (auto a = spec.getAs<FloatAttr>(k); a && !given)
        dst = a.getValueAsDouble();
    };
    if (auto o = spec.getAs<StringAttr>("optimizer"); o && !f.optimizerGiven) {
      // ONNX Adam: alpha/beta are the moments' decay rates, norm_coefficient an L2 term in the
      // gradient, norm_coefficient_post a decoupled decay. Momentum: alpha the decay.
      if (o.getValue() == "Adam") {
        bool post = spec.getAs<FloatAttr>("norm_coefficient_post") &&
                    spec.getAs<FloatAttr>("norm_coefficient_post").getValueAsDouble() != 0;
        opt = post ? "adamw" : "adam";
        take("alpha", b1, f.beta1.second);
        take("beta", b2, f.beta2.second);
        take("epsilon", eps, f.eps.second);
        take(post ? "norm_coefficient_post" : "norm_coefficient", wd, f.weightDecay.second);
      } else if (o.getValue() == "Momentum") {
        opt = "sgd";
        take("alpha", mom, f.momentum.second);
        take("norm_coefficient", wd, f.weightDecay.second);
      } else {
        opt = "sgd";
      }
    }
  }
  std::string p = "octet-autodiff{loss=" + quote(f.loss) + " freeze=" + quote(f.freeze) +
                  (f.fusedGrads ? " fused-grads=true" : "") + "}";
  if (f.gradientsOnly)
    return p;
  std::string o = "optimizer=" + opt + " lr=" + num(f.lr) + " beta1=" + num(b1) + " beta2=" + num(b2) +
                  " eps=" + num(eps) + " weight-decay=" + num(wd) + " momentum=" + num(mom) +
                  " clip-grad-norm=" + num(f.clipGradNorm) + " schedule=" + f.schedule +
                  " warmup-steps=" + std::to_string(f.warmupSteps) + " total-steps=" + std::to_string(f.totalSteps) +
                  " min-lr=" + num(f.minLr);
  if (!f.msampLevel.empty())
    o += " msamp-level=" + f.msampLevel + " msamp-grad-format=" + f.fp8AllReduceFormat +
         " msamp-weight-rounding=" + f.msampWeightRounding;
  if (f.msampF32Weights || f.msampF32Grads)
    o += std::string(" msamp-float32=") + (f.msampF32Weights ? "weights" : "") +
         (f.msampF32Weights && f.msampF32Grads ? "," : "") + (f.msampF32Grads ? "gradients" : "");
  if (!f.keepGradients)
    o += " keep-gradients=false";
  if (f.shardParameters)
    o += " shard-parameters=true";
  if (f.shardWorldSize > 1)
    o += " shard-unit=" + f.shardUnit;
  if (f.fuseMsampAdam && (f.msampLevel == "O2" || f.msampLevel == "O3"))
    o += " fuse-msamp-adam=true";
  bool fp8Grads = !f.msampLevel.empty() && f.fp8AllReduce && !f.msampF32Grads;
  // Sharded state with float32 gradients: each micro-batch's gradients are reduce-scattered and
  // the rank accumulates its shards (FSDP's and ZeRO's accumulation), 1/N of the accumulators;
  // else the whole gradients accumulate and are reduced once, after the last micro-batch.
  bool shardedAccum = f.dataParallel && f.shardWorldSize > 1 && !fp8Grads;
  std::string accumulate =
      f.gradAccumSteps > 1 ? ",octet-accumulate-gradients{steps=" + std::to_string(f.gradAccumSteps) + "}" : "";
  if (!shardedAccum)
    p += accumulate;
  if (f.dataParallel)
    p += std::string(",octet-data-parallel{fp8-gradients=") + (fp8Grads ? "true" : "false") +
         " fp8-format=" + f.fp8AllReduceFormat +
         " bucket-bytes=" + std::to_string(f.bucketBytes) + " shard-world-size=" + std::to_string(f.shardWorldSize) +
         (f.shardWorldSize > 1 ? " unit=" + f.shardUnit : "") +
         (f.numProcesses > 1 ? " num-processes=" + std::to_string(f.numProcesses) : "") +
         (f.numMachines > 1 ? " num-machines=" + std::to_string(f.numMachines) : "") +
         (!f.mainProcessIp.empty() ? " main-process-ip=" + f.mainProcessIp : "") +
         (f.mainProcessPort ? " main-process-port=" + std::to_string(f.mainProcessPort) : "") + "}";
  if (shardedAccum)
    p += accumulate;
  return p + ",octet-optimizer{" + o + "}";
}

std::string octet::resolveMsampFloat32(const std::vector<std::string> &parts, bool given, bool train,
                                       TrainingFlags &f) {
  bool none = false;
  f.msampF32Weights = f.msampF32Grads = false;
  for (const std::string &part : parts) {
    if (part != "weights" && part != "gradients" && part != "none")
      return "--msamp-float32: '" + part + "' is not valid; use any of: weights, gradients, none";
    (part == "none" ? none : part == "weights" ? f.msampF32Weights : f.msampF32Grads) = true;
  }
  if (none && parts.size() > 1)
    return "--msamp-float32=none keeps MS-AMP's own storage (FP16 weights, FP8 gradients); give it alone";
  if (given && (f.msampLevel.empty() || !train))
    return "--msamp-float32 applies to training plans with MS-AMP storage (--recipe msamp or te+msamp, --train)";
  if (f.msampF32Weights && f.msampWeightRounding == "stochastic")
    return "--msamp-weight-rounding=stochastic rounds FP16 weights; --msamp-float32=weights keeps none";
  if (!given && train && !f.msampLevel.empty()) {
    if (f.msampWeightRounding == "stochastic")
      return "--msamp-weight-rounding=stochastic rounds FP16 weights (O3: masters), which MS-AMP keeps only with "
             "--msamp-float32=none (MS-AMP's storage; float32 weights are the default); add it";
    f.msampF32Weights = true;
    // O1 (float32 moments) over FP8 weight gradients trained above BF16 at 125M on every seed; with
    // float32 weight gradients within bounds (docs/BENCHMARKS.md convergence). O2 and O3 keep FP8 ones.
    f.msampF32Grads = f.msampLevel == "O1";
  }
  return "";
}

std::string octet::msampStorageLine(const TrainingFlags &f, bool given) {
  if (f.msampLevel.empty())
    return "";
  std::string w = f.msampLevel == "O3" ? std::string("FP8, ") + (f.msampF32Weights ? "float32" : "FP16") + " master weights"
                  : f.msampF32Weights ? "float32"
                                      : "FP16";
  std::string line = "MS-AMP " + f.msampLevel + " storage: FP8 Linear weights " + w + ", weight gradients " +
                     (f.msampF32Grads ? std::string("float32") : "FP8 " + f.fp8AllReduceFormat);
  if (!given && f.msampLevel == "O1")
    line += " (float32 weights and weight gradients are O1's default: FP16 weights and FP8 weight gradients cost "
            "loss, docs/BENCHMARKS.md convergence; --msamp-float32=none keeps MS-AMP's FP16 and FP8)";
  else if (!given)
    line += " (float32 weights are the default: FP16 weights cost loss, docs/BENCHMARKS.md convergence; "
            "--msamp-float32=none keeps MS-AMP's FP16)";
  else
    line += " (--msamp-float32)";
  return line;
}
