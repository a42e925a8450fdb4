//===- Plan.h - The compiler/runtime artifact (plan file) -------*- C++ -*-===//
//
// A plan is what `fp8-opt --emit=plan` writes and `fp8-run` executes: a
// fixed binary header, a JSON description of values and ops, and a data
// blob with every constant, parameter and FP8 state tensor. The format is
// documented in docs/PLAN.md; bump kPlanVersion on any incompatible change.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_PLAN_H
#define OCTET_RUNTIME_PLAN_H

#include "octet/runtime/Tensor.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <istream>
#include <string>
#include <vector>

namespace octet::rt {

constexpr char kPlanMagic[8] = {'O', 'C', 'T', 'P', 'L', 'A', 'N', '\0'};
constexpr uint32_t kPlanVersion = 1;
constexpr size_t kPlanHeaderBytes = 48; // fixed part before the JSON
constexpr size_t kPlanDataAlign = 64;

/// An op attribute. Exactly one member is meaningful, chosen by `kind`.
struct Attr {
  enum Kind { Int, Float, String, Ints, Floats, Strings, Tensor_ } kind = Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  TensorPtr tensor;
};

struct PlanValue {
  std::string name;
  DType dtype = DType::F32;
  bool isSequence = false;
  bool hasShape = false;
  Shape shape;
};

struct PlanOp {
  std::string type; // ONNX op type ("Gemm") or a runtime op ("fp8.gemm")
  std::string name; // the node name, for messages
  std::vector<int> inputs, outputs; // value ids; -1 is a missing optional
  std::map<std::string, Attr> attrs;
  /// Gradient accumulation: runs in an optimizer step's last micro-batch only (attribute
  /// `last_micro_batch`, octet-micro-batch-phases): the gradient reductions, the optimizer, the
  /// weights' FP8 scale updates.
  bool lastMicroBatch = false;
  /// Gradient accumulation: computes what stays the same through an optimizer step (a weight's
  /// FP8 codes and casts: attribute `first_micro_batch`, octet-micro-batch-phases
  /// reuse-invariants), so it runs in the step's first micro-batch and its results are kept for
  /// the others (TransformerEngine's is_first_microbatch). A runner runs it again whenever the
  /// parameters may have changed (Plan::keptAcrossRuns).
  bool firstMicroBatch = false;
};

enum class ConstantKind { Const, Param, State };

struct Plan {
  uint32_t version = kPlanVersion;
  std::string name; // the file it was read from, for messages
  std::string producer, recipe;
  std::vector<PlanValue> values;
  std::vector<int> inputs, outputs;
  std::vector<PlanOp> ops;
  std::map<int, TensorPtr> constants;
  std::map<int, ConstantKind> constantKinds;
  /// State (FP8 scaling, parameters, moments): after each run, value `second` becomes state value `first`.
  std::vector<std::pair<int, int>> stateUpdates;
  /// New values (of stateUpdates) the compiler placed over their state: the op computing one
  /// writes the state's bytes, so no copy follows the step (checked by loadPlan).
  std::set<int> inPlace;
  /// What a state constant holds (weight, master_weight, optimizer, step), by value id.
  std::map<int, std::string> roles;
  /// Training plans: (parameter name, value id of d(loss)/d(parameter)).
  std::vector<std::pair<std::string, int>> gradients;
  /// Where a gradient is held in a lower precision than its value (MS-AMP: FP8).
  std::map<std::string, DType> gradStorage;
  /// One rank's shard of a whole tensor (MS-AMP O3's sharded masters, role master_shard; fully
  /// sharded parameters, weight_shard): the
  /// constant is rank r's 1/shards of the flattened, zero-padded `whole` tensor. `data` holds the
  /// whole tensor from the file until selectShards; the constant starts as rank 0's shard. A
  /// deferred one (LoadOptions::deferBytes) has no `data`: its Deferred entry reads the rank's
  /// bytes of the whole alone, so a rank never holds more than its shard.
  struct ShardedConstant {
    int64_t shards = 0;
    Shape whole;
    TensorPtr data;
  };
  std::map<int, ShardedConstant> sharded;
  /// Training plans: optimizer settings (optimizer, msamp_level).
  std::map<std::string, std::string> training;
  /// Micro-batches per optimizer step (training's grad_accum_steps; 1: none). A runner's run()
  /// with lastMicroBatch false skips the ops marked lastMicroBatch and the state updates whose
  /// values they compute (stateUpdateLast, parallel to stateUpdates).
  int64_t gradAccumSteps = 1;
  std::vector<char> stateUpdateLast;

  /// Parameters and state whose bytes stay in the plan file (loadPlan with LoadOptions::defer):
  /// `constants` has no entry for them (constantKinds, roles do). A device backend streams each one
  /// to the device (forEachChunk), the CPU reference reads them all (materializeDeferred), so a
  /// model's weights and optimizer state never sit whole in host memory on the way to a GPU.
  struct Deferred {
    uint64_t offset = 0, bytes = 0; // in the data blob: the tensor's bytes, or a splat's one element
    std::vector<uint8_t> splat;     // a splat constant's element (read at load), repeated
    /// A sharded constant's part of the whole (selectShards): the tensor's first `valid` bytes are
    /// the whole's from byte `from` on, the rest zeros (the last rank's padding).
    uint64_t from = 0, valid = UINT64_MAX;
  };
  std::map<int, Deferred> deferred;
  /// The open plan file (the checksum was verified on these bytes) and where its data blob starts.
  std::shared_ptr<std::istream> source;
  uint64_t dataOffset = 0;

  /// The compiler's activation arena: one offset per non-constant tensor
  /// (docs/PLAN.md); loadPlan checks that buffers alive at once never overlap.
  struct Buffer {
    int value;
    int64_t offset, bytes;
  };
  int64_t arenaBytes = 0, arenaAlignment = 0;
  std::vector<Buffer> buffers;
  /// (view, operand): a Reshape-like op's result that shares its operand's buffer.
  std::vector<std::pair<int, int>> views;
  /// (result, operand): the op defining `result` writes it over `operand`'s buffer, being the last
  /// reader of that buffer (memory.in_place, InPlace.h resultTakesOperand).
  std::vector<std::pair<int, int>> inPlaceResults;

  int findValue(const std::string &name) const; // -1 when absent
  /// Results of firstMicroBatch ops that later micro-batches read (another op, an output): the
  /// memory plan keeps their bytes through the whole run, from before its first op to its end.
  std::set<int> keptAcrossRuns;

  /// Whether stateUpdates[i] is applied in an optimizer step's last micro-batch only.
  bool updateInLastOnly(size_t i) const { return i < stateUpdateLast.size() && stateUpdateLast[i]; }
};

/// A plan op's attribute `n`, or `d` where it has none (an Int read as a Float and back as given).
inline int64_t attrInt(const PlanOp &op, const std::string &n, int64_t d) {
  auto it = op.attrs.find(n);
  if (it == op.attrs.end())
    return d;
  return it->second.kind == Attr::Float ? int64_t(it->second.f) : it->second.i;
}
inline double attrFloat(const PlanOp &op, const std::string &n, double d) {
  auto it = op.attrs.find(n);
  if (it == op.attrs.end())
    return d;
  return it->second.kind == Attr::Int ? double(it->second.i) : it->second.f;
}
inline std::string attrStr(const PlanOp &op, const std::string &n, const std::string &d) {
  auto it = op.attrs.find(n);
  return it == op.attrs.end() ? d : it->second.s;
}
inline std::vector<int64_t> attrInts(const PlanOp &op, const std::string &n) {
  auto it = op.attrs.find(n);
  if (it == op.attrs.end())
    return {};
  return it->second.kind == Attr::Int ? std::vector<int64_t>{it->second.i} : it->second.ints;
}

/// What bounds the ids of integer value `id` (a token or label input): the rows of an embedding
/// table that a Gather (axis 0) takes them as indices of, or the classes of a
/// SoftmaxCrossEntropyLoss they are the labels of, followed through the ops that only move them
/// (Reshape, Flatten, Squeeze, Unsqueeze, Slice, Identity, Cast); the smallest such bound, and in
/// `what` the table or scores it comes from. -1 when nothing bounds them.
int64_t indexBound(const Plan &p, int id, std::string *what = nullptr);

/// Whether a state role holds one of the model's weights: `weight`, MS-AMP O3's `master_weight`,
/// or a rank's shard of one, `master_shard` (MS-AMP O3) or `weight_shard` (--shard-parameters).
inline bool isWeightRole(const std::string &role) {
  return role == "weight" || role == "master_weight" || role == "master_shard" || role == "weight_shard";
}

/// An arena buffer (Plan::buffers, views and in-place results joined to the buffer they share) and
/// the ops it is alive over: from the op defining it to its last reader (the op count: alive at the
/// end). Bytes [offset, offset + bytes) are free during any op outside [from, to].
struct ArenaUse {
  int64_t offset, bytes;
  int from, to;
};
std::vector<ArenaUse> arenaUses(const Plan &plan);

/// Rank `rank`'s elements of a whole tensor cut into `shard.numel()`-element parts: its part of the
/// flattened tensor, zero-padded past the end.
void copyShard(const Tensor &whole, int64_t rank, Tensor &shard);
/// Each sharded constant becomes rank `rank`'s shard; the whole tensors are dropped.
void selectShards(Plan &plan, int64_t rank);

struct LoadOptions {
  /// Leave parameters and state of at least `deferBytes` bytes in the file (Plan::deferred); 0: none.
  uint64_t deferBytes = 0;
};
/// What fp8-run defers: every parameter or state tensor of 1 MiB or more.
constexpr uint64_t kDeferBytes = uint64_t(1) << 20;

/// Reads and validates a plan file; throws Error with a one-line message.
Plan loadPlan(const std::string &path, const LoadOptions &o = {});
/// The same from any seekable stream (`name` in errors): the fuzz target's entry. With
/// `o.deferBytes`, `in` stays the plan's source and must outlive it.
Plan readPlan(std::istream &in, const std::string &name, const LoadOptions &o = {});

/// The bytes of deferred constant `id`, in order, in pieces of at most 64 MiB: `put(offset, data,
/// n)`. Throws Error naming the plan if the file cannot be read.
void forEachChunk(const Plan &plan, int id,
                  const std::function<void(uint64_t offset, const uint8_t *data, size_t n)> &put);
/// Every deferred constant read into `constants` (the CPU reference's way in).
void materializeDeferred(Plan &plan);
/// The bytes a constant (deferred or not) holds.
uint64_t constantBytes(const Plan &plan, int id);

} // namespace octet::rt

#endif
