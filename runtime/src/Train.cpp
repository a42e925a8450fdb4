//===- Train.cpp - fp8-run's training loop ---------------------------------===//
#include "octet/runtime/Train.h"

#include "octet/runtime/Collective.h"
#include "octet/runtime/NumericsCheck.h"
#include "octet/runtime/Weights.h"

#include "Json.h"
#include "LogWriter.h"
#include "ScalingMonitor.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unistd.h>

namespace octet::rt {

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

static std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw Error(path + ": cannot read (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

static bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TokenData readTokens(const std::string &path, const std::string &dtype) { return parseTokens(readFile(path), path, dtype); }

TokenData parseTokens(const std::string &bytes, const std::string &path, const std::string &dtype) {
  TokenData d;
  d.path = path;
  if (endsWith(path, ".npy")) {
    // Token ids as tokenizers and nanoGPT's scripts save them: any little-endian integer type
    // (numpy's uint16 is read as an integer here, not as the BF16 bits Octet's own arrays mean).
    NpyHeader h = decodeNpyHeader(bytes, path);
    const std::string &dt = h.descr;
    bool little = dt.size() == 3 && (dt[0] == '<' || dt[0] == '|' || dt[0] == '=');
    char kind = dt.size() == 3 ? dt[1] : '?';
    int w = dt.size() == 3 ? dt[2] - '0' : 0;
    bool integer = little && (kind == 'u' || kind == 'i') && (w == 1 || w == 2 || w == 4 || w == 8);
    if (h.shape.size() != 1 || !integer) {
      std::string name = !little ? dt + " (big-endian)"
                         : kind == 'f' ? "float" + std::to_string(8 * w)
                         : kind == 'b' ? std::string("bool")
                                       : dt;
      throw Error(path + ": expected a 1-D integer array of token ids, got " + name + " " + shapeString(h.shape));
    }
    int64_t n = h.shape[0];
    if (n < 0 || uint64_t(bytes.size() - h.dataOffset) != uint64_t(n) * uint64_t(w))
      throw Error(path + ": not a valid .npy array (data size does not match the shape)");
    d.tokens.resize(size_t(n));
    const auto *p = reinterpret_cast<const unsigned char *>(bytes.data() + h.dataOffset);
    for (int64_t i = 0; i < n; ++i) {
      uint64_t u = 0;
      for (int k = 0; k < w; ++k)
        u |= uint64_t(p[i * w + k]) << (8 * k);
      int64_t v = kind == 'u' ? int64_t(u) : w == 8 ? int64_t(u) : int64_t(u << (64 - 8 * w)) >> (64 - 8 * w);
      if (v < 0 || (kind == 'u' && w == 8 && u > uint64_t(INT64_MAX)) || v > int64_t(UINT32_MAX))
        throw Error(path + ": token " + std::to_string(i) + " is " +
                    (kind == 'u' ? std::to_string(u) : std::to_string(v)) + ", not a token id");
      d.tokens[size_t(i)] = uint32_t(v);
    }
    return d;
  }
  size_t w = dtype == "uint16" ? 2 : dtype == "uint32" ? 4 : 0;
  if (!w)
    throw Error("--data-dtype: '" + dtype + "' is not valid; use uint16 or uint32");
  if (bytes.size() % w)
    throw Error(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of " + dtype +
                " tokens (is --data-dtype right?)");
  d.tokens.resize(bytes.size() / w);
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    const auto *p = reinterpret_cast<const unsigned char *>(bytes.data() + i * w);
    d.tokens[i] = w == 2 ? uint32_t(p[0] | p[1] << 8) : uint32_t(p[0] | p[1] << 8 | p[2] << 16 | uint32_t(p[3]) << 24);
  }
  return d;
}

/// The model's vocabulary (indexBound: the rows of the embedding the token input's ids index, or
/// the loss's classes). Every token of `d` must be below it, or the step would stop at that Gather
/// (or, in a plan where nothing checks, read past the table); the file and the first such token are
/// named.
static void checkVocabulary(const Plan &p, int tokenInput, const TokenData &d, const std::string &dtype) {
  std::string table;
  int64_t vocab = indexBound(p, tokenInput, &table);
  if (vocab < 0)
    return;
  for (size_t i = 0; i < d.tokens.size(); ++i)
    if (int64_t(d.tokens[i]) >= vocab)
      throw Error(d.path + ": token " + std::to_string(i) + " is " + std::to_string(d.tokens[i]) +
                  ", not below the model's vocabulary of " + std::to_string(vocab) + " (the rows of '" + table +
                  "'); tokenize with the model's tokenizer" +
                  (endsWith(d.path, ".npy") ? "" : " (and check --data-dtype, now " + dtype + ")"));
}

/// splitmix64: the batch positions are a pure function of (seed, step, row),
/// so a resumed run reads exactly the batches the uninterrupted run would.
static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

namespace {

struct Batcher {
  const std::vector<uint32_t> *tokens;
  size_t begin = 0, end = 0; // the range batches come from
  int64_t B = 0, T = 0;
  std::string labels;
  /// Data-parallel ranks read rows [firstRow, firstRow + B) of the combined batch of step `step`
  /// (firstRow = rank * B): together they read what one process over the combined batch would.
  int64_t firstRow = 0;

  /// Inputs (x) and labels (y) for one step.
  std::pair<TensorPtr, TensorPtr> get(uint64_t seed, int64_t step) const {
    auto x = std::make_shared<Tensor>(DType::I64, Shape{B, T});
    auto y = std::make_shared<Tensor>(DType::I64, Shape{B, T});
    size_t span = end - begin - size_t(T) - 1;
    for (int64_t b = 0; b < B; ++b) {
      uint64_t row = uint64_t(firstRow + b);
      size_t start = begin + size_t(mix(seed ^ mix(uint64_t(step) * 65536 + row)) % (span + 1));
      for (int64_t t = 0; t < T; ++t) {
        x->data<int64_t>()[b * T + t] = (*tokens)[start + size_t(t)];
        y->data<int64_t>()[b * T + t] = (*tokens)[start + size_t(t) + (labels == "same" ? 0 : 1)];
      }
    }
    return {x, y};
  }
};

double scalarOf(const Runner &ex, const std::string &name) {
  TensorPtr t = ex.value(name);
  return t && t->numel() == 1 ? t->getDouble(0) : NAN;
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  std::ostringstream os;
  os << std::setprecision(9) << v;
  return os.str();
}

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0)
    return "--:--";
  int64_t t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60),
                  (long long)(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", (long long)(t / 60), (long long)(t % 60));
  return buf;
}

} // namespace

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

static std::string metaJson(const CheckpointMeta &m, uint32_t crc, size_t count, int rank, size_t shards) {
  JsonOut j = {{"format", "octet-checkpoint"}, {"version", 1},          {"step", m.step},
                      {"seed", m.seed},               {"data", m.data},        {"recipe", m.recipe},
                      {"world_size", m.worldSize},    {"tensors", count},      {"crc32", crc}};
  if (rank >= 0)
    j["rank"] = rank;
  else if (shards)
    j["shard_files"] = m.worldSize;
  return dumpJson(j);
}

std::set<std::string> shardedStates(const Plan &p) {
  std::set<std::string> names;
  for (auto &[id, role] : p.roles)
    if (role == "optimizer_shard" || role == "master_shard")
      names.insert(p.values[size_t(id)].name);
  return names;
}

std::string shardCheckpointPath(const std::string &path, int rank) {
  std::string stem = endsWith(path, ".npz") ? path.substr(0, path.size() - 4) : path;
  return stem + ".rank" + std::to_string(rank) + ".npz";
}

/// The state a checkpoint file holds, sorted by name (the checksum's order): all of it, or with
/// `rank` >= 0 a rank's sharded part, or with -1 the rest.
static std::vector<int> checkpointStates(const Plan &p, int rank) {
  std::set<std::string> sharded = shardedStates(p);
  std::vector<int> ids;
  for (auto &[id, kind] : p.constantKinds)
    if (kind == ConstantKind::State && sharded.count(p.values[size_t(id)].name) == size_t(rank >= 0))
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
CheckpointMeta loadCheckpoint(const std::string &path, Runner &ex, int rank) {
  auto bad = [&](const std::string &m) { return Error(path + ": " + m + "; resume from an intact checkpoint"); };
  const Plan &p = ex.plan();
  TensorPtr meta;
  std::vector<std::pair<std::string, std::pair<DType, Shape>>> tensors;
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
  int64_t crc = field("crc32", int64_t(-1));
  if (m.step < 0 || m.worldSize < 1 || crc < 0 || crc > int64_t(UINT32_MAX) ||
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

//===----------------------------------------------------------------------===//
// Memory report
//===----------------------------------------------------------------------===//

void printMemoryReport(const Plan &p, std::ostream &os) {
  // The trained parameters: those with gradients, or (plans compiled with --keep-gradients=false)
  // the state the optimizer updates as weights.
  // the state the optimizer updates as weights (a sharded gradient is no plan output either).
  std::set<std::string> params;
  for (auto &[param, gradId] : p.gradients)
    params.insert(param);
  for (auto &[id, role] : p.roles)
    if (isWeightRole(role))
      params.insert(p.values[size_t(id)].name);
  if (params.empty())
    throw Error("--report-memory needs a training plan (fp8-opt --train)");
  struct Held { // what a constant holds: its type, elements and bytes
    DType dtype;
    int64_t n;
    double bytes;
    int64_t numel() const { return n; }
  };
  std::map<std::string, Held> byName;
  std::map<std::string, std::string> roleOf;
  std::map<std::string, int64_t> wholeOf; // a rank's shard: the whole tensor's elements
  for (auto &[id, sh] : p.sharded)
    wholeOf[p.values[size_t(id)].name] = checkedBytes(sh.whole, 1);
  for (auto &[id, kind] : p.constantKinds) {
    const PlanValue &pv = p.values[size_t(id)];
    byName[pv.name] = {pv.dtype, numElements(pv.shape), double(constantBytes(p, id))};
    auto r = p.roles.find(id);
    auto k = p.constantKinds.find(id);
    roleOf[p.values[size_t(id)].name] =
        r != p.roles.end() ? r->second : (k != p.constantKinds.end() && k->second == ConstantKind::State ? "fp8" : "");
  }
  struct Group {
    int64_t params = 0;
    double weights = 0, grads = 0, optim = 0;
  } fp8Lin, other;
  double fp8State = 0;
  int64_t total = 0;
  for (auto &[name, role] : roleOf)
    if (role == "fp8")
      fp8State += byName[name].bytes;
  for (const std::string &param : params) {
    auto it = byName.find(param);
    if (it == byName.end())
      continue;
    const Held *w = &it->second;
    // O3 (master_weight): the master (float32, or MS-AMP's FP16) and the FP8 copy the forward
    // pass reads; sharded (master_shard): this rank's part of the master and the whole FP8 copy
    // it gathers.
    bool master = roleOf[param] == "master_weight" || roleOf[param] == "master_shard";
    // MS-AMP storage: a low-precision weight, or (--msamp-float32 keeping the weight float32) an
    // FP8-held gradient or moments stored below float32.
    bool low = master || w->dtype == DType::F16 || w->dtype == DType::BF16 || p.gradStorage.count(param);
    for (auto &[name, role] : roleOf)
      if (!low && (role == "optimizer" || role == "optimizer_shard") &&
          name.compare(0, param.size() + 1, param + ".") == 0)
        low = byName[name].dtype != DType::F32;
    Group &g = low ? fp8Lin : other;
    int64_t n = wholeOf.count(param) ? wholeOf[param] : w->numel();
    g.params += n;
    total += n;
    g.weights += w->bytes + (master ? double(n) : 0.0); // O3: + the FP8 copy
    auto gs = p.gradStorage.find(param);
    auto gi = std::find_if(p.gradients.begin(), p.gradients.end(), [&](auto &g) { return g.first == param; });
    DType gd = gs != p.gradStorage.end() ? gs->second
               : gi != p.gradients.end() ? p.values[size_t(gi->second)].dtype
                                         : DType::F32; // freed gradients (--keep-gradients=false): float32

    g.grads += double(n) * double(dtypeSize(gd));
    for (auto &[name, role] : roleOf)
      if ((role == "optimizer" || role == "optimizer_shard") && name.compare(0, param.size() + 1, param + ".") == 0)
        g.optim += byName[name].bytes;
  }
  auto row = [&](const char *label, const Group &g) {
    if (!g.params)
      return;
    double n = double(g.params);
    char buf[200];
    std::snprintf(buf, sizeof buf, "%-18s %12lld %8.2f %8.2f %10.2f %8.2f\n", label, (long long)g.params,
                  g.weights / n, g.grads / n, g.optim / n, (g.weights + g.grads + g.optim) / n);
    os << buf;
  };
  auto it = p.training.find("optimizer");
  auto lvl = p.training.find("msamp_level");
  os << "memory per parameter (bytes), recipe '" << (p.recipe.empty() ? "none" : p.recipe) << "', optimizer "
     << (it == p.training.end() ? "?" : it->second)
     << (lvl != p.training.end() && !lvl->second.empty() ? ", MS-AMP " + lvl->second + " storage" : "");
  if (auto sh = p.training.find("shard_world_size"); sh != p.training.end())
    os << ", optimizer sharded over " << sh->second << " ranks (one rank's bytes)";
  os << "\n";
  os << "group                    params  weights    grads  optimizer    total\n";
  row("FP8 Linear (low)", fp8Lin);
  row(fp8Lin.params ? "other (FP32)" : "all (FP32)", other);
  Group all{fp8Lin.params + other.params, fp8Lin.weights + other.weights, fp8Lin.grads + other.grads,
            fp8Lin.optim + other.optim};
  if (fp8Lin.params)
    row("all", all);
  char buf[160];
  std::snprintf(buf, sizeof buf, "FP8 scaling state: %.0f bytes (%.4f bytes/param)\n", fp8State,
                total ? fp8State / double(total) : 0.0);
  os << buf;
}

//===----------------------------------------------------------------------===//
// Loss-curve PNG
//===----------------------------------------------------------------------===//

void writeLossPng(const std::string &path, const std::vector<double> &train,
                  const std::vector<std::pair<int64_t, double>> &eval) {
  const int W = 800, H = 480, L = 50, R = 20, Tp = 20, Bt = 40;
  std::vector<uint8_t> img(size_t(W) * H * 3, 255);
  auto px = [&](int x, int y, uint8_t r, uint8_t g, uint8_t b) {
    if (x < 0 || y < 0 || x >= W || y >= H)
      return;
    uint8_t *q = &img[(size_t(y) * W + size_t(x)) * 3];
    q[0] = r, q[1] = g, q[2] = b;
  };
  double lo = INFINITY, hi = -INFINITY;
  for (double v : train)
    if (std::isfinite(v))
      lo = std::min(lo, v), hi = std::max(hi, v);
  for (auto &[s, v] : eval)
    if (std::isfinite(v))
      lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(hi > lo))
    hi = lo + 1;
  size_t n = std::max<size_t>(train.size(), 2);
  auto X = [&](double step) { return L + int(step / double(n - 1) * (W - L - R)); };
  auto Y = [&](double v) { return Tp + int((hi - v) / (hi - lo) * (H - Tp - Bt)); };
  for (int x = L; x < W - R; ++x) // axes and quarter grid lines
    px(x, H - Bt, 0, 0, 0);
  for (int y = Tp; y <= H - Bt; ++y)
    px(L, y, 0, 0, 0);
  for (int q = 1; q < 4; ++q)
    for (int x = L; x < W - R; x += 4)
      px(x, Tp + q * (H - Tp - Bt) / 4, 200, 200, 200);
  auto line = [&](int x0, int y0, int x1, int y1, uint8_t r, uint8_t g, uint8_t b) {
    int steps = std::max(std::abs(x1 - x0), std::abs(y1 - y0)) + 1;
    for (int i = 0; i <= steps; ++i)
      px(x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps, r, g, b);
  };
  for (size_t i = 1; i < train.size(); ++i)
    if (std::isfinite(train[i - 1]) && std::isfinite(train[i]))
      line(X(double(i - 1)), Y(train[i - 1]), X(double(i)), Y(train[i]), 31, 119, 180);
  for (size_t i = 1; i < eval.size(); ++i)
    line(X(double(eval[i - 1].first)), Y(eval[i - 1].second), X(double(eval[i].first)), Y(eval[i].second), 214, 39,
         40);
  // PNG: signature, IHDR, one zlib-compressed IDAT (filter 0 per row), IEND.
  std::string raw;
  for (int y = 0; y < H; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char *>(&img[size_t(y) * W * 3]), size_t(W) * 3);
  }
  uLongf zlen = compressBound(uLong(raw.size()));
  std::string z(zlen, '\0');
  if (compress2(reinterpret_cast<Bytef *>(&z[0]), &zlen, reinterpret_cast<const Bytef *>(raw.data()),
                uLong(raw.size()), 9) != Z_OK)
    throw Error(path + ": cannot compress the image");
  z.resize(zlen);
  std::string png("\x89PNG\r\n\x1a\n", 8);
  auto be32 = [](std::string &s, uint32_t v) {
    for (int i = 3; i >= 0; --i)
      s.push_back(char((v >> (8 * i)) & 0xff));
  };
  auto chunk = [&](const char *type, const std::string &data) {
    be32(png, uint32_t(data.size()));
    std::string td = std::string(type, 4) + data;
    png += td;
    be32(png, uint32_t(crc32(0, reinterpret_cast<const Bytef *>(td.data()), uInt(td.size()))));
  };
  std::string ihdr;
  be32(ihdr, W);
  be32(ihdr, H);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5); // 8-bit RGB
  chunk("IHDR", ihdr);
  chunk("IDAT", z);
  chunk("IEND", "");
  writeFileAtomically(path, png);
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

int trainMain(Runner &ex, const TrainOptions &o) {
  const Plan &p = ex.plan();
  if (p.findValue("octet.lr") < 0 || p.findValue("octet.grad_norm") < 0)
    throw Error("--data/--steps train a training plan; compile one with fp8-opt --train (this plan has no "
                "optimizer step)");
  // The plan's token inputs: [B, T] integers; the first gets x, the second the labels.
  std::vector<int> tokenInputs;
  for (int id : p.inputs) {
    const PlanValue &v = p.values[size_t(id)];
    if (v.dtype == DType::I64 || v.dtype == DType::I32)
      tokenInputs.push_back(id);
    else
      throw Error("the plan's input '" + v.name + "' is not token ids; --data feeds integer [batch, seq] inputs only");
  }
  if (tokenInputs.empty() || tokenInputs.size() > 2)
    throw Error("--data needs a plan with one or two integer inputs (tokens, labels), this one has " +
                std::to_string(tokenInputs.size()));
  const PlanValue &in0 = p.values[size_t(tokenInputs[0])];
  if (!in0.hasShape || in0.shape.size() != 2)
    throw Error("input '" + in0.name + "' must be [batch, seq]");
  int64_t B = in0.shape[0], T = in0.shape[1];
  if ((o.batch && o.batch != B) || (o.seq && o.seq != T))
    throw Error("the plan was compiled for --batch " + std::to_string(B) + " --seq " + std::to_string(T) +
                "; re-export the model with that batch and sequence or pass those values");
  if (o.labels != "shifted" && o.labels != "same")
    throw Error("--labels: '" + o.labels + "' is not valid; use shifted or same");

  TokenData data = readTokens(o.data, o.dataDtype);
  checkVocabulary(p, tokenInputs[0], data, o.dataDtype);
  TokenData evalData;
  // Data parallelism: this rank's rows of the combined batch; rank 0 alone logs, evaluates and writes.
  Communicator *comm = communicator();
  int rank = comm ? comm->rank() : 0, ranks = worldSize();
  bool lead = rank == 0;
  Batcher train{&data.tokens, 0, data.tokens.size(), B, T, o.labels, int64_t(rank) * B}, eval = train;
  eval.firstRow = 0;
  if (!o.evalData.empty()) {
    evalData = readTokens(o.evalData, o.dataDtype);
    checkVocabulary(p, tokenInputs[0], evalData, o.dataDtype);
    eval = Batcher{&evalData.tokens, 0, evalData.tokens.size(), B, T, o.labels, 0};
  } else { // hold out the last 10% of the data (always, so batches do not depend on --eval-every)
    size_t cut = data.tokens.size() - data.tokens.size() / 10;
    train.end = cut;
    eval.begin = cut;
  }
  auto need = size_t(T) + 2;
  if (train.end - train.begin < need || (o.evalEvery && eval.end - eval.begin < need))
    throw Error(o.data + ": " + std::to_string(data.tokens.size()) + " tokens are too few for sequences of " +
                std::to_string(T));
  std::unique_ptr<Runner> evalEx;
  std::vector<std::string> evalShared; // the training state the eval plan reads (its parameters)
  if (o.evalEvery && lead) {
    if (o.evalPlan.empty())
      throw Error("--eval-every needs --eval-plan (the forward graph: fp8-opt model.onnx [--recipe R --eval] -o "
                  "eval.plan)");
    evalEx = makeRunner(loadPlan(o.evalPlan), ex.device()); // the training plan's device
    if (!evalEx->plan().gradients.empty() || !evalEx->plan().training.empty())
      throw Error("--eval-plan " + o.evalPlan + " is a training plan (evaluating would train the model); compile "
                  "the forward graph without --train: fp8-opt model.onnx -o eval.plan");
    // The eval plan shares the parameters by name: each must have the training plan's shape, and
    // at least one must be shared (else it is another model's plan).
    const Plan &ep = evalEx->plan();
    for (auto &[tid, kind] : p.constantKinds) {
      const PlanValue &tv = p.values[size_t(tid)];
      int id = ep.findValue(tv.name);
      if (kind != ConstantKind::State || id < 0 || !ep.constantKinds.count(id))
        continue;
      if (ep.values[size_t(id)].shape != tv.shape)
        throw Error("--eval-plan " + o.evalPlan + ": '" + tv.name + "' is " + shapeString(ep.values[size_t(id)].shape) +
                    ", in the training plan " + shapeString(tv.shape) + "; compile both plans from one model");
      evalShared.push_back(tv.name);
    }
    if (evalShared.empty())
      throw Error("--eval-plan " + o.evalPlan + ": shares no parameter with the training plan (another model's "
                  "plan?); compile both plans from one model");
  }

  CheckpointMeta meta{0, o.seed, o.data, p.recipe, ranks};
  bool shardedRun = !shardedStates(p).empty();
  if (!o.resume.empty()) {
    CheckpointMeta m = loadCheckpoint(o.resume, ex);
    if (shardedRun && m.worldSize == ranks) { // this rank's part, written at the same step
      std::string own = shardCheckpointPath(o.resume, rank);
      if (loadCheckpoint(own, ex, rank).step != m.step)
        throw Error(own + ": written at another step than " + o.resume + " (an interrupted write); resume from "
                          "an earlier checkpoint");
    }
    if (m.worldSize != ranks) // another world size reads other batches: the run would not continue
      throw Error(o.resume + ": written by " + std::to_string(m.worldSize) + " rank(s), this run has " +
                  std::to_string(ranks) + "; resume with --nproc-per-node " + std::to_string(m.worldSize) +
                  " (resharding to another world size is not supported)");
    if (m.seed != o.seed)
      throw Error(o.resume + ": written with --seed " + std::to_string(m.seed) + ", not " + std::to_string(o.seed) +
                  "; pass --seed " + std::to_string(m.seed) + " to continue that run");
    meta.step = m.step;
    if (!o.quiet && lead)
      std::cerr << "resumed from " << o.resume << " at step " << m.step << "\n";
  }

  std::ofstream log;
  bool csv = endsWith(o.log, ".csv");
  if (o.numericsEvery && (o.log.empty() || csv || ex.device() != "cpu"))
    throw Error("--numerics-every writes per-layer FP8 figures into a JSONL --log on the CPU reference (it reads "
                "every value of a step); add --log run.jsonl and --device cpu");
  if (!o.log.empty() && lead) {
    log.open(o.log, meta.step ? std::ios::app : std::ios::trunc);
    if (!log)
      throw Error(o.log + ": cannot write (" + std::strerror(errno) + ")");
    if (csv && !meta.step)
      log << "step,loss,lr,grad_norm,tokens_per_s,eval_loss,comm_bytes\n";
  }
  std::vector<std::string> fp8Scales;
  for (auto &[id, kind] : p.constantKinds) { // the names alone (state() would copy every tensor off the device)
    const std::string &name = p.values[size_t(id)].name;
    if (kind == ConstantKind::State && (endsWith(name, ".fp8.input.scale") || endsWith(name, ".fp8.weight.scale") ||
                                        endsWith(name, ".fp8.grad_output.scale")))
      fp8Scales.push_back(name);
  }
  std::vector<std::string> fp8Sampled; // each scale's amax history, then the scale
  for (const std::string &s : fp8Scales) {
    fp8Sampled.push_back(s.substr(0, s.size() - 5) + "amax_history");
    fp8Sampled.push_back(s);
  }
  ScalingMonitor clips(p); // what delayed scaling clipped between samples (the writer's thread alone)
  // The log's lines are made and written on the writer's thread while the next step runs (declared
  // after what its records read by reference: fp8Scales, clips; destroyed first, every record written).
  std::optional<LogWriter> writer;
  if (log.is_open()) // the lead rank's, when --log is given
    writer.emplace(log, 64, o.log);

  auto evaluate = [&]() {
    for (const std::string &name : evalShared) { // by name; only these leave the device
      TensorPtr t = ex.stateTensor(name);
      int id = evalEx->plan().findValue(name);
      DType want = evalEx->plan().values[size_t(id)].dtype; // FP16-stored weights (MS-AMP) upcast
      evalEx->setState(name, t->dtype == want ? t : std::make_shared<Tensor>(t->castTo(want)));
    }
    double sum = 0;
    for (int64_t i = 0; i < o.evalBatches; ++i) {
      auto [x, y] = eval.get(o.seed ^ 0xE7A1ull, i);
      std::map<std::string, TensorPtr> in{{in0.name, x}};
      if (tokenInputs.size() > 1)
        in[p.values[size_t(tokenInputs[1])].name] = y;
      evalEx->run(in, false);
      TensorPtr l = evalEx->value("loss");
      if (!l)
        l = evalEx->value(evalEx->plan().outputs[0]);
      sum += l->getDouble(0);
    }
    return sum / double(o.evalBatches);
  };

  std::vector<double> losses;
  std::vector<std::pair<int64_t, double>> evals;
  bool quiet = o.quiet || !lead;
  bool tty = !quiet && ::isatty(2);
  auto t0 = std::chrono::steady_clock::now();
  int64_t first = meta.step;
  for (int64_t step = meta.step; step < o.steps; ++step) {
    auto [x, y] = train.get(o.seed, step);
    std::map<std::string, TensorPtr> in{{in0.name, x}};
    if (tokenInputs.size() > 1)
      in[p.values[size_t(tokenInputs[1])].name] = y;
    if (comm)
      comm->resetCounters();
    ex.run(in, true);
    uint64_t commBytes = 0; // payload this rank all-reduced in the step, counted by the communicator
    JsonOut commByType = JsonOut::object();
    if (comm)
      for (auto &[type, n] : comm->bytesReduced()) {
        commBytes += n;
        commByType[type] = n;
      }
    double loss = scalarOf(ex, "loss");
    if (std::isnan(loss))
      loss = ex.value(p.outputs[0])->getDouble(0);
    double lr = scalarOf(ex, "octet.lr"), gnorm = scalarOf(ex, "octet.grad_norm");
    if (!std::isfinite(loss))
      throw Error("step " + std::to_string(step + 1) + ": the loss is " + jsonNumber(loss) +
                  "; lower --lr or clip gradients (fp8-opt --clip-grad-norm)");
    losses.push_back(loss);
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double tps = double((step + 1 - first) * B * T * ranks) / std::max(elapsed, 1e-9);
    double eta = elapsed / double(step + 1 - first) * double(o.steps - step - 1);
    double evalLoss = NAN;
    if (evalEx && ((step + 1) % o.evalEvery == 0 || step + 1 == o.steps)) {
      evalLoss = evaluate();
      evals.push_back({step, evalLoss});
    }
    if (writer) {
      if (csv) {
        std::ostringstream line;
        line << step + 1 << "," << jsonNumber(loss) << "," << jsonNumber(lr) << "," << jsonNumber(gnorm) << ","
             << jsonNumber(tps) << "," << (std::isnan(evalLoss) ? "" : jsonNumber(evalLoss)) << ","
             << (comm ? std::to_string(commBytes) : "");
        writer->push([text = line.str()] { return text; });
      } else {
        // One object per line (Json.h: strings escaped, non-finite numbers null).
        JsonOut j = {{"step", step + 1}, {"loss", loss}, {"lr", lr}, {"grad_norm", gnorm}, {"tokens_per_s", tps}};
        if (!std::isnan(evalLoss))
          j["eval_loss"] = evalLoss;
        if (comm) {
          j["world_size"] = ranks;
          j["comm_bytes"] = commByType;
        }
        std::vector<TensorPtr> sampled; // copies this loop owns; reduced and formatted by the writer
        if (!fp8Scales.empty() && ((step + 1) % o.logEvery == 0 || step + 1 == o.steps)) {
          j["fp8"] = JsonOut::object(); // its place among the keys; filled in on the writer's thread
          sampled = ex.stateTensors(fp8Sampled); // only these leave the device
        }
        if (o.numericsEvery && (step + 1) % o.numericsEvery == 0) {
          JsonOut &num = j["numerics"] = JsonOut::array();
          for (const GemmNumerics &g : gemmNumerics(ex)) {
            auto cast = [](const GemmNumerics::Cast &c) {
              return JsonOut{{"role", c.role}, {"underflow", c.underflow}, {"saturated", c.saturated}};
            };
            num.push_back({{"layer", g.layer}, {"gemm", g.gemm}, {"sqnr_db", g.sqnrDb}, {"a", cast(g.a)}, {"b", cast(g.b)}});
          }
        }
        writer->push([j = std::move(j), sampled = std::move(sampled), &fp8Scales, &clips, at = step + 1]() mutable {
          for (size_t i = 0; i < fp8Scales.size() && !sampled.empty(); ++i) {
            const std::string &s = fp8Scales[i];
            std::string base = s.substr(0, s.size() - 5); // "...fp8.input."
            double amax = 0, last = NAN;
            TensorPtr h = sampled[2 * i], scale = sampled[2 * i + 1];
            if (h) {
              for (int64_t k = 0; k < h->numel(); ++k)
                amax = std::max(amax, h->getDouble(k));
              last = h->numel() ? h->getDouble(0) : NAN;
            }
            JsonOut &e = j["fp8"][base.substr(0, base.size() - 1)] = {
                {"amax", amax}, {"amax_last", last}, {"scale", scale ? scale->getDouble(0) : NAN}};
            if (h && scale && scale->numel() == 1)
              if (auto r = clips.sample(s, at, *h, float(scale->getDouble(0)))) {
                e["clipped"] = r->clipped;
                e["range_used"] = r->rangeUsed;
              }
          }
          return dumpJson(j);
        });
      }
    }
    if (!quiet && (tty || (step + 1) % o.logEvery == 0 || step + 1 == o.steps)) {
      int width = 24, filled = int(double(step + 1) / double(o.steps) * width);
      char buf[256];
      std::snprintf(buf, sizeof buf, "step %lld/%lld [%s%s] loss %.4f%s | %.0f tok/s | ETA %s", (long long)(step + 1),
                    (long long)o.steps, std::string(size_t(filled), '=').c_str(),
                    std::string(size_t(width - filled), ' ').c_str(), loss,
                    std::isnan(evalLoss) ? "" : (" | eval " + std::to_string(evalLoss).substr(0, 6)).c_str(), tps,
                    hms(eta).c_str());
      std::cerr << (tty ? "\r" : "") << buf << (tty && step + 1 < o.steps ? "" : "\n") << std::flush;
    }
    if (!o.checkpoint.empty() && ((o.checkpointEvery && (step + 1) % o.checkpointEvery == 0) || step + 1 == o.steps)) {
      meta.step = step + 1;
      if (writer) // every line up to the checkpoint's step on disk first: a run killed later resumes here
        writer->drain();
      if (shardedRun) { // every rank its part; rank 0 the rest last, once every part is written
        writeCheckpoint(shardCheckpointPath(o.checkpoint, rank), ex, meta, rank);
        comm->barrier();
      }
      if (lead)
        writeCheckpoint(o.checkpoint, ex, meta);
    }
    if (!o.saveWeights.empty() && lead &&
        (step + 1 == o.steps || (!o.checkpoint.empty() && o.checkpointEvery && (step + 1) % o.checkpointEvery == 0)))
      writeSafetensors(o.saveWeights, trainedWeights(ex),
                       {{"format", "pt"}, {"producer", "fp8-run"}, {"step", std::to_string(step + 1)}});
  }
  if (writer) // the last lines on disk, or the run fails naming the log
    writer->drain();
  if (!o.lossPng.empty() && lead)
    writeLossPng(o.lossPng, losses, evals);
  return 0;
}

} // namespace octet::rt
