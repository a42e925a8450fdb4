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
  if (f.fuseMsampAdam && (f.msampLevel == "O2" || f.msampLevel == "O3"))
    o += " fuse-msamp-adam=true";
  if (f.dataParallel)
    p += std::string(",octet-data-parallel{fp8-gradients=") +
         (!f.msampLevel.empty() && f.fp8AllReduce && !f.msampF32Grads ? "true" : "false") + " fp8-format=" + f.fp8AllReduceFormat +
         " bucket-bytes=" + std::to_string(f.bucketBytes) + " shard-world-size=" + std::to_string(f.shardWorldSize) +
         (f.numProcesses > 1 ? " num-processes=" + std::to_string(f.numProcesses) : "") + "}";
  return p + ",octet-optimizer{" + o + "}";
}
