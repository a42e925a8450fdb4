//===- PlanPipeline.cpp - The optimization passes of fp8-opt's plans ------===//
//
// The order matters: casts fuse with their amaxes before they are grouped or recomputed, the
// collectives are placed once the gradients are final, precision is assigned before the fusions
// that read element types, and the fusion groups form last (each reads the ops the earlier ones
// left). docs/ARCHITECTURE.md describes each pass.
//
//===----------------------------------------------------------------------===//
#include "octet/Tools/PlanPipeline.h"

#include "octet/Passes/Passes.h"

using namespace mlir;

void octet::addPlanPasses(OpPassManager &pm, const PlanPassFlags &f) {
  if (f.trainPlan && f.checkpointBlocks != 0) // first: the copies then fuse like the forward
    pm.addPass(createCheckpointBlocks(CheckpointBlocksOptions{f.checkpointBlocks}));
  if (f.trainPlan && f.freeEarly)
    pm.addPass(createFreeEarly());
  pm.addPass(createRematerializeCasts());
  if (f.fuseRotary && !f.trainPlan)
    pm.addPass(createFuseRotary());
  if (f.fuseAttention && !f.attentionFirst) {
    FuseAttentionOptions fa;
    fa.foldHeadTransposes = f.foldHeadTransposes;
    fa.maxWorkspaceBytes = f.attentionWorkspaceBytes;
    pm.addPass(createFuseAttention(fa));
  }
  if (f.trainPlan) // after attention is fused: a causal one tells a model whose labels come shifted
    pm.addPass(createInferLabels());
  if (f.fusePointwise)
    pm.addPass(createFusePointwise());
  if (f.fuseCastAmax)
    pm.addPass(createFuseCastAmax());
  if (f.fuseCastAmax && f.castTranspose)
    pm.addPass(createCastTranspose());
  if (f.fuseCastAmax && f.groupCasts)
    pm.addPass(createGroupCasts());
  if (f.rematerializeFp8Casts)
    pm.addPass(createRematerializeFp8Casts(RematerializeFp8CastsOptions{16, f.rematSources}));
  if (f.sinkScaleUpdates)
    pm.addPass(createSinkScaleUpdates());
  if (f.dataParallel && f.gatherPrefetch >= 0 && f.fp8AllGather) // the casts to FP8 go to the shards
    pm.addPass(createFp8AllGather());
  if (f.dataParallel && f.gatherPrefetch >= 0) // before the collectives are split into starts and waits
    pm.addPass(createGatherParameters(GatherParametersOptions{f.gatherPrefetch, f.shardUnit}));
  if (f.dataParallel)
    pm.addPass(createReduceAmaxes());
  if (f.dataParallel && f.overlapCollectives)
    pm.addPass(createOverlapCollectives());
  if (f.dataParallel && f.overlapCollectives && f.delayWeightGradients)
    pm.addPass(createDelayWeightGradients());
  if (f.activationPrecision == "bf16") {
    AssignPrecisionOptions ap;
    ap.activations = f.activationPrecision;
    pm.addPass(createAssignPrecision(ap));
  }
  if (f.chunkLoss) {
    ChunkLossOptions cl;
    cl.maxChunkBytes = f.lossChunkBytes;
    pm.addPass(createChunkLoss(cl));
  }
  if (f.foldResidualAdds)
    pm.addPass(createFoldResidualAdds());
  if (f.foldWideningCasts)
    pm.addPass(createFoldWideningCasts());
  if (f.fusePointwiseChains)
    pm.addPass(createFusePointwiseChains());
  if (f.fuseRuns)
    pm.addPass(createFuseRuns());
  if (f.fuseCastColumnSums)
    pm.addPass(createFuseCastColumnSums());
  if (f.fuseGeluRecompute)
    pm.addPass(createFuseGeluRecompute());
  if (f.fuseCastSources)
    pm.addPass(createFuseCastSources());
  if (f.fuseProducerAmax)
    pm.addPass(createFuseProducerAmax());
  if (f.fuseAmaxScale)
    pm.addPass(createFuseAmaxScale());
  if (f.fuseResidualNorms)
    pm.addPass(createFuseResidualNorms());
  AttentionPrecisionOptions ap;
  ap.precision = f.attentionPrecision;
  pm.addPass(createAttentionPrecision(ap));
  if (f.foldGemmBias)
    pm.addPass(createFoldGemmBias());
}
