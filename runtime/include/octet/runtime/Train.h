//===- Train.h - Training loop, data, checkpoints --------------*- C++ -*-===//
//
// fp8-run's training mode: a training plan (fp8-opt --train) computes one
// step; the loop feeds it batches, logs, evaluates and checkpoints.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_TRAIN_H
#define OCTET_RUNTIME_TRAIN_H

#include "octet/runtime/Executor.h"
#include "octet/runtime/Npz.h"

#include <cstdint>
#include <set>
#include <memory>
#include <string>
#include <vector>

namespace octet::rt {

/// A token stream: nanoGPT's .bin (little-endian uint16 or uint32) or a 1-D integer .npy, read in
/// place: the ids stay in the file's memory mapping (shared by every rank on a host through the page
/// cache), `width` bytes each, little-endian. Every id was checked to be in [0, 2^32) when read, so
/// its low four bytes are its value.
struct TokenData {
  std::string path;
  std::shared_ptr<const void> owner; // the mapping (or the parsed bytes), released with the last copy
  const unsigned char *ids = nullptr;
  size_t count = 0;
  int width = 2;
  size_t size() const { return count; }
  uint32_t operator[](size_t i) const {
    const unsigned char *p = ids + i * size_t(width);
    uint32_t v = p[0];
    for (int k = 1; k < (width < 4 ? width : 4); ++k)
      v |= uint32_t(p[k]) << (8 * k);
    return v;
  }
};
/// `dtype` is "uint16" or "uint32" for .bin files (ignored for .npy). Memory-maps the file.
TokenData readTokens(const std::string &path, const std::string &dtype);
/// The same from the file's bytes (`path` picks .npy or .bin and names it in errors).
TokenData parseTokens(const std::string &bytes, const std::string &path, const std::string &dtype);

/// The labels fp8-run feeds a training plan, "same" or "shifted": `flag` itself when it is one of
/// them, else (auto) the plan's `labels` (training section), with its reason in `why`. Refuses an
/// unknown choice, a plan that does not say, and a flag that is none of auto, same and shifted.
std::string resolveLabels(const Plan &p, const std::string &flag, std::string *why);

struct TrainOptions {
  std::string data, dataDtype = "uint16", evalData, evalPlan, log, checkpoint, resume;
  std::string saveWeights; // .safetensors of the trained weights at each checkpoint and at the end
  /// "auto" (as the plan says: fp8-opt's octet-infer-labels), "shifted" (the next tokens) or "same"
  /// (the tokens themselves: models that shift, HF style).
  std::string labels = "auto";
  int64_t steps = 0, batch = 0, seq = 0, evalEvery = 0, evalBatches = 4, checkpointEvery = 0, logEvery = 10;
  int64_t numericsEvery = 0; // every N steps the JSONL log carries --numerics-check's figures (CPU only)
  /// Seconds the other ranks wait at a barrier for rank 0's evaluation and checkpoint writes (and
  /// every rank's shard of a sharded checkpoint), instead of the collectives' --comm-timeout.
  int64_t rank0Timeout = 1800;
  uint64_t seed = 1234;
  bool quiet = false;
};

/// Runs the training loop; returns the exit status.
int trainMain(Runner &ex, const TrainOptions &o);

/// Gradient accumulation (Plan::gradAccumSteps): the plan's flag input, true in an optimizer step's
/// first micro-batch (its gradients overwrite the accumulators instead of adding to them).
constexpr const char *kFirstMicroBatchInput = "octet.first_micro_batch";
/// Sets that input in `inputs` where the plan has it.
void setFirstMicroBatch(const Plan &p, std::map<std::string, TensorPtr> &inputs, bool first);
/// One optimizer step of `ex`'s plan on the same inputs: its gradAccumSteps micro-batches.
void runOptimizerStep(Runner &ex, std::map<std::string, TensorPtr> &inputs);

/// Prints bytes per parameter for weights, gradients, optimizer state and
/// FP8 scaling state of a training plan.
void printMemoryReport(const Plan &p, std::ostream &os);

/// Checkpoints: every state tensor plus "octet.meta" (step, seed, data file,
/// CRC-32 of the tensors), written atomically. Loading checks the checksum
/// and that every tensor matches the plan.
struct CheckpointMeta {
  int64_t step = 0;
  uint64_t seed = 0;
  std::string data, recipe;
  int64_t worldSize = 1; // ranks that trained it
  /// Rows of tokens an optimizer step reads (ranks x batch x micro-batches) and their length: a run
  /// with other ranks resumes it where it reads the same rows (0: not recorded, older checkpoints).
  int64_t rows = 0, seq = 0;
};
///
/// A plan whose optimizer is sharded (fp8-opt --shard-optimizer) holds state that differs by rank
/// (role optimizer_shard): `rank` >= 0 reads or writes only that state, in the rank's own file
/// (shardCheckpointPath), with the rank in its metadata; rank -1 the rest (every other state), the
/// file rank 0 writes last, naming the number of shard files: the manifest of the set.
void writeCheckpoint(const std::string &path, const Runner &ex, const CheckpointMeta &meta, int rank = -1);
CheckpointMeta loadCheckpoint(const std::string &path, Runner &ex, int rank = -1);
/// A sharded checkpoint written by `m.worldSize` ranks, read by rank `rank` of a plan sharded over
/// another number (the plan compiled for it): each sharded state is joined from the old ranks'
/// files (`path`'s rank files, each checked as loadCheckpoint checks) as the flattened whole and
/// this rank's part of it taken, padding cut and added (ZeRO's resharding, as
/// torch.distributed.checkpoint loads onto another world size). A state held as one value per
/// shard (MS-AMP's moment scales) has no whole to take parts of: refused, naming it.
void loadReshardedCheckpoint(const std::string &path, Runner &ex, int rank, const CheckpointMeta &m);
/// Rank r's file of a sharded checkpoint: c.npz -> c.rank1.npz.
std::string shardCheckpointPath(const std::string &path, int rank);
/// The state names that differ by rank in a sharded plan (empty for any other plan).
std::set<std::string> shardedStates(const Plan &p);

} // namespace octet::rt

#endif
