//===- Checkpoint.cpp - fp8-run's checkpoints, one tensor at a time ---------===//
#include "TrainData.h"

#include "octet/runtime/Npz.h"

#include "Json.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace octet::rt {

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

static std::string metaJson(const CheckpointMeta &m, uint32_t crc, size_t count, int rank, size_t shards) {
  JsonOut j = {{"format", "octet-checkpoint"}, {"version", 1},          {"step", m.step},
                      {"seed", m.seed},               {"data", m.data},        {"recipe", m.recipe},
                      {"world_size", m.worldSize},    {"tensors", count},      {"crc32", crc}};
  if (m.rows > 0) {
    j["rows"] = m.rows;
    j["seq"] = m.seq;
  }
  if (rank >= 0)
    j["rank"] = rank;
  else if (shards)
    j["shard_files"] = m.worldSize;
  return dumpJson(j);
}

std::set<std::string> shardedStates(const Plan &p) {
  std::set<std::string> names;
  for (auto &[id, role] : p.roles)
    if (role == "optimizer_shard" || role == "master_shard" || role == "weight_shard")
      names.insert(p.values[size_t(id)].name);
  return names;
}

std::string shardCheckpointPath(const std::string &path, int rank) {
  std::string stem = endsWith(path, ".npz") ? path.substr(0, path.size() - 4) : path;
  return stem + ".rank" + std::to_string(rank) + ".npz";
}

/// The state a checkpoint file holds, sorted by name (the checksum's order): all of it, or with
/// `rank` >= 0 a rank's sharded part, or with -1 the rest. Gradient accumulators (role
/// grad_accum) are left out: between optimizer steps they hold nothing a run reads (the next
/// step's first micro-batch overwrites them), and they are as large as the parameters.
static std::vector<int> checkpointStates(const Plan &p, int rank) {
  std::set<std::string> sharded = shardedStates(p);
  std::vector<int> ids;
  for (auto &[id, kind] : p.constantKinds)
    if (kind == ConstantKind::State && sharded.count(p.values[size_t(id)].name) == size_t(rank >= 0) &&
        !(p.roles.count(id) && p.roles.at(id) == "grad_accum"))
      ids.push_back(id);
  std::sort(ids.begin(), ids.end(), [&](int a, int b) { return p.values[size_t(a)].name < p.values[size_t(b)].name; });
  return ids;
}

/// Each tensor is taken off the runner when the archive writer reaches it, and its bytes enter the
/// checksum then; octet.meta, written last, carries the checksum (its JSON padded with spaces to
/// the length of the longest checksum's, the size announced before the tensors are read).
void writeCheckpoint(const std::string &path, const Runner &ex, const CheckpointMeta &meta, int rank) {
  const Plan &p = ex.plan();
  std::vector<int> ids = checkpointStates(p, rank);
  size_t shards = shardedStates(p).size();
  uint32_t crc = 0;
  size_t next = 0; // entries must be fetched in order for the checksum
  std::vector<TensorSource> entries;
  for (size_t k = 0; k < ids.size(); ++k) {
    const PlanValue &v = p.values[size_t(ids[k])];
    entries.push_back({v.name, v.dtype, v.shape, [&, k, name = v.name]() -> TensorPtr {
                         if (next++ != k)
                           throw Error("the archive writer took '" + name + "' out of order");
                         TensorPtr t = ex.stateTensor(name);
                         if (t) {
                           crc = crc32Of(crc, name.data(), name.size());
                           crc = crc32Of(crc, t->bytes.data(), t->bytes.size());
                         }
                         return t;
                       }});
  }
  size_t width = metaJson(meta, UINT32_MAX, ids.size(), rank, shards).size();
  entries.push_back({"octet.meta", DType::U8, Shape{int64_t(width)}, [&]() -> TensorPtr {
                       if (next != ids.size())
                         throw Error("octet.meta was reached before every tensor was written");
                       std::string json = metaJson(meta, crc, ids.size(), rank, shards);
                       json.resize(width, ' ');
                       auto m = std::make_shared<Tensor>(DType::U8, Shape{int64_t(width)});
                       std::memcpy(m->bytes.data(), json.data(), width);
                       return m;
                     }});
  writeNpzStreamed(path, entries);
}

/// Two passes over the file, one tensor in memory at a time: the first checks octet.meta, the
/// names, types and shapes against the plan and the checksum; only then does the second hand the
/// tensors to the runner (a corrupt file changes nothing).
using TensorListing = std::vector<std::pair<std::string, std::pair<DType, Shape>>>;

static CheckpointMeta loadCheckpointFile(const std::string &path, Runner &ex, int rank, TensorListing *listing);

CheckpointMeta loadCheckpoint(const std::string &path, Runner &ex, int rank) {
  return loadCheckpointFile(path, ex, rank, nullptr);
}

/// Checks `path` (octet.meta, the checksum, the rank) and, without `listing`, hands its tensors to
/// the runner after checking them against the plan; with `listing`, returns what it holds instead.
static CheckpointMeta loadCheckpointFile(const std::string &path, Runner &ex, int rank, TensorListing *listing) {
  auto bad = [&](const std::string &m) { return Error(path + ": " + m + "; resume from an intact checkpoint"); };
  const Plan &p = ex.plan();
  TensorPtr meta;
  TensorListing tensors;
  uint32_t sum = 0;
  forEachNpzEntry(path, [&](const std::string &name, TensorPtr t) {
    if (name == "octet.meta") {
      meta = t;
      return;
    }
    if (!tensors.empty() && !(tensors.back().first < name))
      throw bad("its tensors are not in the order Octet writes them");
    sum = crc32Of(sum, name.data(), name.size());
    sum = crc32Of(sum, t->bytes.data(), t->bytes.size());
    tensors.push_back({name, {t->dtype, t->shape}});
  });
  if (!meta)
    throw bad("not an Octet checkpoint (no octet.meta entry)");
  nlohmann::json json = nlohmann::json::parse(meta->bytes.begin(), meta->bytes.end(), nullptr, false);
  if (json.is_discarded())
    throw bad("octet.meta is not valid JSON");
  // Every field is checked as any input is: a wrong type or an impossible value is a corrupt file.
  auto field = [&](const char *key, auto fallback) {
    using T = decltype(fallback);
    auto it = json.find(key);
    if (it == json.end())
      return fallback;
    bool ok = std::is_same_v<T, std::string> ? it->is_string() : it->is_number_integer();
    if (!ok)
      throw bad(std::string("octet.meta field '") + key + "' has the wrong type");
    return it->template get<T>();
  };
  if (!json.is_object() || field("format", std::string()) != "octet-checkpoint" || field("version", int64_t(0)) != 1)
    throw bad("unknown checkpoint format");
  CheckpointMeta m;
  m.step = field("step", int64_t(0));
  m.seed = field("seed", uint64_t(0));
  m.data = field("data", std::string());
  m.recipe = field("recipe", std::string());
  m.worldSize = field("world_size", int64_t(1));
  m.rows = field("rows", int64_t(0));
  m.seq = field("seq", int64_t(0));
  int64_t crc = field("crc32", int64_t(-1));
  if (m.step < 0 || m.worldSize < 1 || m.rows < 0 || m.seq < 0 || crc < 0 || crc > int64_t(UINT32_MAX) ||
      field("tensors", int64_t(-1)) != int64_t(tensors.size()))
    throw bad("octet.meta has an impossible step, world size, tensor count or checksum");
  std::set<std::string> sharded = shardedStates(ex.plan());
  if (field("rank", int64_t(-1)) != rank)
    throw bad(rank >= 0 ? "not rank " + std::to_string(rank) + "'s file of a sharded checkpoint"
                        : "a rank's file of a sharded checkpoint; resume from the file the run was given");
  if (rank < 0 && field("shard_files", int64_t(0)) != (sharded.empty() ? 0 : m.worldSize))
    throw Error(path + (sharded.empty() ? ": a sharded run's checkpoint; this plan's optimizer is not sharded"
                                        : ": not a sharded run's checkpoint; this plan shards its optimizer") +
                " (compile the plan as the run that wrote it was)");
  if (sum != uint32_t(crc))
    throw bad("checksum mismatch (the file is corrupt)");
  if (listing) { // loadReshardedCheckpoint's first pass: the file is sound; it checks the rest
    *listing = tensors;
    return m;
  }
  std::map<std::string, const PlanValue *> state;
  for (int id : checkpointStates(p, rank))
    state.emplace(p.values[size_t(id)].name, &p.values[size_t(id)]);
  std::set<std::string> seen;
  // FP8 input scaling that Linears reading one tensor share (fp8-opt --share-input-scaling, on by
  // default) is one state, named after the first Linear: plans compiled with and without it differ.
  auto hint = [](const std::string &name) {
    return name.find(".fp8.input.") != std::string::npos
               ? " (a checkpoint of a plan compiled with another --share-input-scaling? compile with the other "
                 "setting to resume it)"
               : " (a checkpoint of another model or recipe?)";
  };
  for (auto &[name, ts] : tensors) {
    auto it = state.find(name);
    if (it == state.end())
      throw Error(path + ": tensor '" + name + "' is not state of this plan" + hint(name));
    DType dt = ts.first == DType::U8 && isFp8(it->second->dtype) ? it->second->dtype : ts.first; // FP8 codes
    if (it->second->dtype != dt || it->second->shape != ts.second)
      throw Error(path + ": tensor '" + name + "' is " + dtypeName(dt) + " " + shapeString(ts.second) +
                  ", the plan expects " + dtypeName(it->second->dtype) + " " + shapeString(it->second->shape));
    seen.insert(name);
  }
  for (auto &[name, v] : state)
    if (!seen.count(name))
      throw Error(path + ": no tensor '" + name + "'" + hint(name));
  forEachNpzEntry(path, [&](const std::string &name, TensorPtr t) {
    if (name == "octet.meta")
      return;
    adoptFp8Codes(*t, state.at(name)->dtype); // MS-AMP O2's FP8 first moments
    ex.setState(name, std::move(t));
  });
  return m;
}

/// The elements of the whole tensor a sharded state is a part of: a sharded weight's (whole_shape),
/// or for a moment the parameter's it belongs to (named by its prefix); -1 when there is none.
static int64_t wholeElements(const Plan &p, int id) {
  if (auto s = p.sharded.find(id); s != p.sharded.end())
    return numElements(s->second.whole);
  const std::string &name = p.values[size_t(id)].name;
  int best = -1;
  for (auto &[pid, role] : p.roles) {
    const std::string &pn = p.values[size_t(pid)].name;
    if (isWeightRole(role) && name.size() > pn.size() && name.compare(0, pn.size() + 1, pn + ".") == 0 &&
        (best < 0 || pn.size() > p.values[size_t(best)].name.size()))
      best = pid;
  }
  if (best < 0)
    return -1;
  auto s = p.sharded.find(best);
  return s != p.sharded.end() ? numElements(s->second.whole) : numElements(p.values[size_t(best)].shape);
}

void loadReshardedCheckpoint(const std::string &path, Runner &ex, int rank, const CheckpointMeta &m) {
  const Plan &p = ex.plan();
  int64_t oldRanks = m.worldSize;
  struct Target {
    int64_t whole, shard, oldShard;
    TensorPtr t;
    int64_t pieces = 0;
  };
  std::map<std::string, Target> targets;
  auto ws = p.training.find("shard_world_size");
  int64_t newRanks = ws == p.training.end() ? 0 : std::atoll(ws->second.c_str());
  for (int id : checkpointStates(p, rank)) {
    const PlanValue &v = p.values[size_t(id)];
    int64_t n = wholeElements(p, id);
    if (v.shape.size() != 1 || n < 1 || newRanks < 1 || v.shape[0] != (n + newRanks - 1) / newRanks)
      throw Error(path + ": '" + v.name + "' is held as one value per shard (MS-AMP's FP8 and FP16 moments keep a "
                         "scale each), which cannot be split anew; resume with --nproc-per-node " +
                  std::to_string(oldRanks));
    targets[v.name] = {n, v.shape[0], (n + oldRanks - 1) / oldRanks, std::make_shared<Tensor>(v.dtype, v.shape)};
  }
  for (int64_t r = 0; r < oldRanks; ++r) {
    std::string file = shardCheckpointPath(path, int(r));
    TensorListing listing;
    if (loadCheckpointFile(file, ex, int(r), &listing).step != m.step)
      throw Error(file + ": written at another step than " + path + " (an interrupted write); resume from an "
                         "earlier checkpoint");
    for (auto &[name, ts] : listing) {
      auto it = targets.find(name);
      if (it == targets.end())
        throw Error(file + ": tensor '" + name + "' is not sharded state of this plan (a checkpoint of another "
                           "model or recipe?)");
      Target &tg = it->second;
      DType dt = ts.first == DType::U8 && isFp8(tg.t->dtype) ? tg.t->dtype : ts.first;
      if (dt != tg.t->dtype || ts.second != Shape{tg.oldShard})
        throw Error(file + ": tensor '" + name + "' is " + dtypeName(dt) + " " + shapeString(ts.second) + ", 1/" +
                    std::to_string(oldRanks) + " of this plan's " + std::to_string(tg.whole) + " elements is " +
                    dtypeName(tg.t->dtype) + " [" + std::to_string(tg.oldShard) + "]");
    }
    forEachNpzEntry(file, [&](const std::string &name, TensorPtr t) {
      if (name == "octet.meta")
        return;
      Target &tg = targets.at(name);
      // The old shard holds elements [r * oldShard, (r + 1) * oldShard) of the flattened whole, this
      // rank's [rank * shard, (rank + 1) * shard); both end at the whole's last (the rest is padding).
      int64_t lo = std::max(r * tg.oldShard, int64_t(rank) * tg.shard);
      int64_t hi = std::min({(r + 1) * tg.oldShard, (int64_t(rank) + 1) * tg.shard, tg.whole});
      size_t es = dtypeSize(tg.t->dtype);
      if (hi > lo)
        std::memcpy(tg.t->bytes.data() + size_t(lo - int64_t(rank) * tg.shard) * es,
                    t->bytes.data() + size_t(lo - r * tg.oldShard) * es, size_t(hi - lo) * es);
      ++tg.pieces;
    });
  }
  for (auto &[name, tg] : targets) {
    if (tg.pieces != oldRanks)
      throw Error(path + ": the rank files hold " + std::to_string(tg.pieces) + " of " + std::to_string(oldRanks) +
                  " shards of '" + name + "'; resume from an intact checkpoint");
    ex.setState(name, tg.t);
  }
}

} // namespace octet::rt
