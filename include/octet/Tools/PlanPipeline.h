//===- PlanPipeline.h - The optimization passes of fp8-opt's plans -*- C++ -*-===//
//
// Which of the plan optimization passes (fusion, precision, layout, collectives) a plan runs,
// and in what order: after the recipe and training passes, before export (docs/ARCHITECTURE.md).
// fp8-opt fills the flags from its options (each pass has its flag and lit test).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_TOOLS_PLANPIPELINE_H
#define OCTET_TOOLS_PLANPIPELINE_H

#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>
#include <vector>

namespace octet {

struct PlanPassFlags {
  bool trainPlan = false;      // a training step
  bool attentionFirst = false; // octet-fuse-attention already ran before autodiff
  bool fuseRotary = true, fuseAttention = true, foldHeadTransposes = true, fusePointwise = true,
       fuseCastAmax = true, castTranspose = true, groupCasts = true, rematerializeFp8Casts = true,
       sinkScaleUpdates = true, freeEarly = true, dataParallel = false, overlapCollectives = true, delayWeightGradients = false,
       chunkLoss = true, foldResidualAdds = true, foldWideningCasts = true, fusePointwiseChains = true,
       fuseRuns = true, fuseCastColumnSums = true, fuseGeluRecompute = true, fuseCastSources = true,
       fuseProducerAmax = true, fuseAmaxScale = true, fuseResidualNorms = true, foldGemmBias = true;
  int64_t attentionWorkspaceBytes = 0, lossChunkBytes = 0;
  int64_t checkpointBlocks = 0; // octet-checkpoint-blocks: how many blocks (0: off, -1: all but the last)
  int64_t gatherPrefetch = -1;  // octet-gather-parameters' prefetch (-1: not run: no sharded parameters)
  std::string shardUnit = "layer"; // octet-gather-parameters' unit
  bool fp8AllGather = true;        // octet-fp8-all-gather before it (sharded parameters only)
  std::string activationPrecision = "bf16", attentionPrecision = "auto";
  std::vector<std::string> rematSources; // what octet-rematerialize-fp8-casts recomputes
};

/// Appends a plan's optimization passes to `pm` (the module's pass manager), in their order.
void addPlanPasses(mlir::OpPassManager &pm, const PlanPassFlags &f);

} // namespace octet

#endif // OCTET_TOOLS_PLANPIPELINE_H
