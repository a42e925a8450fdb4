//===- TrainingPipeline.h - fp8-opt --train's pass pipeline -----*- C++ -*-===//
#ifndef OCTET_TOOLS_TRAININGPIPELINE_H
#define OCTET_TOOLS_TRAININGPIPELINE_H

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace octet {

/// fp8-opt's training flags as the pipeline needs them. The optimizer's hyperparameters carry
/// whether the user gave them: a model's TrainingInfoProto supplies those not given.
struct TrainingFlags {
  std::string loss, freeze;
  bool fusedGrads = false, gradientsOnly = false;
  std::string optimizer = "adamw";
  bool optimizerGiven = false;
  double lr = 3e-4;
  std::pair<double, bool> beta1{0.9, false}, beta2{0.999, false}, eps{1e-8, false}, weightDecay{0, false},
      momentum{0, false};
  double clipGradNorm = 0, minLr = 0;
  std::string schedule = "constant";
  int64_t warmupSteps = 0, totalSteps = 0;
  std::string msampLevel;
  bool keepGradients = true, fuseMsampAdam = false;
  bool msampF32Weights = false, msampF32Grads = false; // --msamp-float32
  bool dataParallel = false, fp8AllReduce = false, shardParameters = false;
  std::string fp8AllReduceFormat = "e4m3", msampWeightRounding = "nearest";
  int64_t bucketBytes = 0, shardWorldSize = 0, numProcesses = 1;
  int64_t numMachines = 1, mainProcessPort = 0; // an Accelerate config's machines and rendezvous
  std::string mainProcessIp;
  std::string shardUnit = "layer"; // octet-data-parallel's unit of reduce-scatters
  int64_t gradAccumSteps = 1; // micro-batches per optimizer step (octet-accumulate-gradients)
};

/// The passes of a training step (octet-autodiff, then octet-data-parallel and octet-optimizer
/// unless gradients only) as pipeline text, with the optimizer of `module`'s TrainingInfoProto
/// (ONNX Adam or Momentum) where the flags leave it.
std::string trainingPipeline(mlir::ModuleOp module, const TrainingFlags &f);

/// --msamp-float32's parts (weights, gradients, none) into `f.msampF32Weights/Grads` for MS-AMP
/// storage level `f.msampLevel`. Not given, O1 and O2 keep their weights float32: FP16 weights cost
/// loss (docs/BENCHMARKS.md, convergence); none is MS-AMP's own storage. Returns an error message
/// naming the flag, or "" when the flags agree.
std::string resolveMsampFloat32(const std::vector<std::string> &parts, bool given, bool train, TrainingFlags &f);

/// One line for fp8-opt --report: where an MS-AMP level stores FP8 Linear weights and weight
/// gradients, and which flag chose it.
std::string msampStorageLine(const TrainingFlags &f, bool given);

} // namespace octet

#endif // OCTET_TOOLS_TRAININGPIPELINE_H
