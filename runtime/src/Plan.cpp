//===- Plan.cpp - Reading plan files --------------------------------------===//
#include "octet/runtime/Plan.h"
#include "octet/runtime/InPlace.h"
#include "octet/runtime/MicroBatch.h"
#include "octet/runtime/Npz.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace octet::rt {

int Plan::findValue(const std::string &name) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == name)
      return int(i);
  return -1;
}

int64_t indexBound(const Plan &p, int id, std::string *what) {
  static const std::set<std::string> moves = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Identity", "Cast"};
  int64_t bound = -1;
  std::vector<int> work = {id};
  std::set<int> seen = {id};
  auto take = [&](int64_t b, const PlanValue &from) {
    if (b > 0 && (bound < 0 || b < bound)) {
      bound = b;
      if (what)
        *what = from.name;
    }
  };
  while (!work.empty()) {
    int v = work.back();
    work.pop_back();
    for (const PlanOp &op : p.ops) {
      if (op.inputs.empty())
        continue;
      if (op.type == "Gather" && op.inputs.size() > 1 && op.inputs[1] == v && attrInt(op, "axis", 0) == 0) {
        const PlanValue &table = p.values[size_t(op.inputs[0])];
        if (table.hasShape && !table.shape.empty())
          take(table.shape[0], table);
      } else if (op.type == "SoftmaxCrossEntropyLoss" && op.inputs.size() > 1 && op.inputs[1] == v) {
        const PlanValue &scores = p.values[size_t(op.inputs[0])];
        if (scores.hasShape && scores.shape.size() >= 2)
          take(scores.shape[1], scores);
      } else if (moves.count(op.type) && op.inputs[0] == v) {
        for (int r : op.outputs)
          if (r >= 0 && seen.insert(r).second)
            work.push_back(r);
      }
    }
  }
  return bound;
}

namespace {

template <typename T> T readLE(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

struct Reader {
  const std::string &path;
  [[noreturn]] void fail(const std::string &msg) const {
    throw Error(path + ": " + msg + "; re-create it with `fp8-opt --emit=plan`");
  }
};

using Json = nlohmann::json;

/// A float of the header: a JSON number, or "nan" / "inf" / "-inf" (JSON has no literal for them).
double jsonFloat(const Json &v, const Reader &r, const std::string &where) {
  if (v.is_number())
    return v.get<double>();
  if (v.is_string()) {
    const std::string &s = v.get_ref<const std::string &>();
    if (s == "nan")
      return NAN;
    if (s == "inf")
      return INFINITY;
    if (s == "-inf")
      return -INFINITY;
    char *end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size())
      return d;
  }
  r.fail(where + " is not a number");
}

/// An integer of the header: a JSON integer (not a float, a string or a bool).
int64_t jsonInt(const Json &v, const Reader &r, const std::string &where) {
  if (!v.is_number_integer())
    r.fail(where + " is not an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    r.fail(where + " is out of range");
  return v.get<int64_t>();
}

/// A dimension list: integers >= 0 whose element count (times `elementBytes`) fits in int64.
Shape jsonShape(const Json &v, const Reader &r, const std::string &where, size_t elementBytes) {
  if (!v.is_array())
    r.fail(where + " is not a list of dimensions");
  Shape s;
  for (const Json &d : v)
    s.push_back(jsonInt(d, r, where));
  if (checkedBytes(s, elementBytes) < 0)
    r.fail(where + " " + shapeString(s) + " has a negative dimension or more bytes than fit in 64 bits");
  return s;
}

Attr parseAttr(const Json &n, const Reader &r, const std::string &where) {
  Attr a;
  if (!n.is_object() || n.size() != 1)
    r.fail("attribute " + where + " is not a one-key map");
  const std::string &k = n.begin().key();
  const Json &v = n.begin().value();
  auto list = [&](auto each) {
    if (!v.is_array())
      r.fail("attribute " + where + " is not a list");
    for (const Json &e : v)
      each(e);
  };
  if (k == "i") {
    a.kind = Attr::Int;
    a.i = v.is_boolean() ? int64_t(v.get<bool>()) : jsonInt(v, r, "attribute " + where);
  } else if (k == "f") {
    a.kind = Attr::Float;
    a.f = jsonFloat(v, r, "attribute " + where);
  } else if (k == "s") {
    a.kind = Attr::String;
    a.s = v.get<std::string>();
  } else if (k == "ints") {
    a.kind = Attr::Ints;
    list([&](const Json &e) { a.ints.push_back(jsonInt(e, r, "attribute " + where)); });
  } else if (k == "floats") {
    a.kind = Attr::Floats;
    list([&](const Json &e) { a.floats.push_back(jsonFloat(e, r, "attribute " + where)); });
  } else if (k == "strings") {
    a.kind = Attr::Strings;
    list([&](const Json &e) { a.strings.push_back(e.get<std::string>()); });
  } else if (k == "tensor") {
    a.kind = Attr::Tensor_;
    DType t = dtypeFromName(v.at("dtype").get<std::string>());
    if (t == DType::Invalid)
      r.fail("attribute " + where + " has an unknown dtype");
    Shape shape = jsonShape(v.at("shape"), r, "attribute " + where + " shape", dtypeSize(t));
    const Json &data = v.at("data");
    if (!data.is_array() || int64_t(data.size()) != numElements(shape))
      r.fail("attribute " + where + " has the wrong number of elements");
    bool fl = t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16 || isFp8(t);
    Tensor src(fl ? DType::F64 : DType::I64, shape); // integers stay exact past 2^53
    int64_t i = 0;
    for (const Json &e : data) {
      if (fl)
        src.data<double>()[i++] = jsonFloat(e, r, "attribute " + where);
      else
        src.data<int64_t>()[i++] = e.is_boolean() ? int64_t(e.get<bool>()) : jsonInt(e, r, "attribute " + where);
    }
    auto tensor = std::make_shared<Tensor>(src.castTo(t));
    a.tensor = tensor;
  } else {
    r.fail("attribute " + where + " has unknown kind '" + k + "'");
  }
  return a;
}

} // namespace

/// Per value, the op that defines it and the last op that reads it (-1: none; outputs and next
/// states are read at the end, op count).
static std::pair<std::vector<int>, std::vector<int>> lifetimes(const Plan &plan) {
  int n = int(plan.ops.size());
  std::vector<int> first(plan.values.size(), -1), last(plan.values.size(), -1);
  for (int k = 0; k < n; ++k) {
    for (int id : plan.ops[size_t(k)].inputs)
      if (id >= 0)
        last[size_t(id)] = std::max(last[size_t(id)], k);
    for (int id : plan.ops[size_t(k)].outputs)
      if (id >= 0)
        first[size_t(id)] = k;
  }
  for (int id : plan.outputs)
    last[size_t(id)] = n;
  for (auto &[state, value] : plan.stateUpdates)
    last[size_t(value)] = n;
  for (int id : plan.keptAcrossRuns) { // alive through the whole run (the next ones read them)
    first[size_t(id)] = 0;
    last[size_t(id)] = n;
  }
  return {std::move(first), std::move(last)};
}

/// Plan::keptAcrossRuns: what firstMicroBatch ops compute that the other ops, the outputs or the
/// state updates read.
static void markKeptAcrossRuns(Plan &plan) {
  std::vector<int> alsoRead = plan.outputs;
  for (auto &[state, value] : plan.stateUpdates)
    alsoRead.push_back(value);
  std::vector<char> kept = keptAcrossRuns(
      plan.values.size(),
      [&](const auto &visit) {
        for (const PlanOp &op : plan.ops)
          visit(op.firstMicroBatch, op.inputs, op.outputs);
      },
      alsoRead);
  plan.keptAcrossRuns.clear();
  for (size_t id = 0; id < kept.size(); ++id)
    if (kept[id])
      plan.keptAcrossRuns.insert(int(id));
}

namespace {
/// Gradient accumulation (docs/PLAN.md): the number of micro-batches, the flag input, and no op of
/// every micro-batch reading what only the last one computes.
void checkMicroBatchPhases(Plan &plan, const Reader &r) {
  auto it = plan.training.find("grad_accum_steps");
  if (it != plan.training.end()) {
    char *end = nullptr;
    long long n = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end || n < 1 || n > (1ll << 20))
      r.fail("training grad_accum_steps '" + it->second + "' is not 1 to 1048576");
    plan.gradAccumSteps = n;
  }
  std::vector<int> definedBy(plan.values.size(), -1);
  for (size_t k = 0; k < plan.ops.size(); ++k)
    for (int id : plan.ops[k].outputs)
      if (id >= 0)
        definedBy[size_t(id)] = int(k);
  auto lastOnly = [&](int id) { return definedBy[size_t(id)] >= 0 && plan.ops[size_t(definedBy[size_t(id)])].lastMicroBatch; };
  plan.stateUpdateLast.clear();
  for (auto &[state, value] : plan.stateUpdates)
    plan.stateUpdateLast.push_back(lastOnly(value));
  // What a firstMicroBatch op may read: constants, parameters and state that only the last
  // micro-batch updates (or nothing does), and what other such ops compute.
  std::vector<char> sameThroughStep(plan.values.size(), 0);
  for (auto &[id, kind] : plan.constantKinds)
    sameThroughStep[size_t(id)] = 1;
  for (size_t i = 0; i < plan.stateUpdates.size(); ++i)
    if (!plan.stateUpdateLast[i])
      sameThroughStep[size_t(plan.stateUpdates[i].first)] = 0;
  bool anyFirst = false;
  for (const PlanOp &op : plan.ops) {
    if (!op.firstMicroBatch)
      continue;
    anyFirst = true;
    if (op.lastMicroBatch)
      r.fail("op '" + op.name + "' is marked for both the first and the last micro-batch only");
    for (int id : op.inputs)
      if (id >= 0 && !sameThroughStep[size_t(id)])
        r.fail("op '" + op.name + "' runs in the first micro-batch only but reads '" + plan.values[size_t(id)].name +
               "', which changes from one micro-batch to the next");
    for (int id : op.outputs)
      if (id >= 0)
        sameThroughStep[size_t(id)] = 1;
  }
  if (anyFirst && plan.gradAccumSteps < 2)
    r.fail("ops are marked first_micro_batch in a plan without gradient accumulation");
  for (auto &[state, value] : plan.stateUpdates)
    if (plan.keptAcrossRuns.count(value))
      r.fail("the new value of '" + plan.values[size_t(state)].name +
             "' is computed in the first micro-batch only; a state's update runs in every micro-batch or the last");
  bool any = false;
  for (const PlanOp &op : plan.ops) {
    any |= op.lastMicroBatch;
    if (!op.lastMicroBatch)
      for (int id : op.inputs)
        if (id >= 0 && lastOnly(id))
          r.fail("op '" + op.name + "' runs in every micro-batch but reads '" + plan.values[size_t(id)].name +
                 "', which only the last micro-batch computes");
  }
  if (any && plan.gradAccumSteps < 2)
    r.fail("ops are marked last_micro_batch in a plan without gradient accumulation");
  if (plan.gradAccumSteps > 1 && plan.findValue("octet.first_micro_batch") < 0)
    r.fail("a plan with grad_accum_steps has no input 'octet.first_micro_batch'");
}

/// The arena's buffers joined as the memory plan means them: a view and its operand are one buffer,
/// and so are an in-place result and the operand whose buffer it takes; each group is alive from
/// the first definition to the last read of any member (Plan::Buffer values, by root).
struct BufferGroups {
  std::vector<int> root, from, to;
};
BufferGroups joinBuffers(const Plan &plan) {
  auto [first, last] = lifetimes(plan);
  BufferGroups g;
  g.root.resize(plan.values.size());
  for (size_t id = 0; id < g.root.size(); ++id)
    g.root[id] = int(id);
  for (auto [view, of] : plan.views)
    g.root[size_t(view)] = g.root[size_t(of)];
  for (auto [res, of] : plan.inPlaceResults) {
    int r = g.root[size_t(of)];
    for (size_t id = 0; id < g.root.size(); ++id)
      if (g.root[id] == res)
        g.root[id] = r;
  }
  g.from = first;
  g.to.resize(plan.values.size());
  for (size_t id = 0; id < g.to.size(); ++id)
    g.to[id] = std::max(last[id], first[id]);
  for (size_t id = 0; id < g.root.size(); ++id) { // views follow their operands in the ops' order
    size_t r = size_t(g.root[id]);
    g.from[r] = std::min(g.from[r], first[id]);
    g.to[r] = std::max(g.to[r], std::max(last[id], first[id]));
  }
  return g;
}
} // namespace

std::vector<ArenaUse> arenaUses(const Plan &plan) {
  BufferGroups g = joinBuffers(plan);
  std::vector<ArenaUse> uses;
  for (const Plan::Buffer &b : plan.buffers) {
    size_t r = size_t(g.root[size_t(b.value)]);
    uses.push_back({b.offset, b.bytes, g.from[r], g.to[r]});
  }
  return uses;
}

/// The memory plan against lifetimes recomputed from the ops: sizes match the
/// values, buffers fit the arena, and no two buffers alive at once overlap.
template <typename Reporter> static void checkMemoryPlan(const Plan &plan, Reporter &r) {
  if (plan.buffers.empty())
    return;
  auto [first, last] = lifetimes(plan);
  std::vector<Plan::Buffer> bs = plan.buffers;
  std::vector<const Plan::Buffer *> bufferOf(plan.values.size(), nullptr);
  for (const Plan::Buffer &b : plan.buffers)
    bufferOf[size_t(b.value)] = &b;
  for (const Plan::Buffer &b : bs) {
    const PlanValue &v = plan.values[size_t(b.value)];
    int64_t want = v.hasShape ? numElements(v.shape) * int64_t(dtypeSize(v.dtype)) : -1;
    if (b.bytes != want || b.offset < 0 || b.offset + b.bytes > plan.arenaBytes ||
        (plan.arenaAlignment > 0 && b.offset % plan.arenaAlignment))
      r.fail("memory plan: the buffer of '" + v.name + "' does not fit its value or the arena");
  }
  // Views share their operand's buffer: each must be the result of a view op (InPlace.h) of that
  // operand, at its offset and size. A view and its operand are then one buffer, alive from the
  // first definition to the last read of either.
  std::vector<int> root(plan.values.size());
  for (size_t id = 0; id < root.size(); ++id)
    root[id] = int(id);
  std::vector<int> definedBy(plan.values.size(), -1);
  for (size_t k = 0; k < plan.ops.size(); ++k)
    for (int id : plan.ops[k].outputs)
      if (id >= 0)
        definedBy[size_t(id)] = int(k);
  for (auto [view, of] : plan.views) {
    int k = definedBy[size_t(view)];
    const Plan::Buffer *bv = bufferOf[size_t(view)], *bo = bufferOf[size_t(of)];
    if (k < 0 || !sharesOperandBuffer(plan.ops[size_t(k)].type) || plan.ops[size_t(k)].inputs.empty() ||
        plan.ops[size_t(k)].inputs[0] != of || plan.ops[size_t(k)].outputs[0] != view || !bv || !bo ||
        bv->offset != bo->offset || bv->bytes != bo->bytes)
      r.fail("memory plan: '" + plan.values[size_t(view)].name + "' is not a view of '" +
             plan.values[size_t(of)].name + "' (a Reshape-like op's result in its operand's buffer)");
    root[size_t(view)] = root[size_t(of)];
  }
  // In-place results: the op defining the result may take that operand's buffer (InPlace.h) and
  // reads it there; no op after it reads the operand's buffer (its views included).
  for (auto [res, of] : plan.inPlaceResults) {
    int k = definedBy[size_t(res)];
    const Plan::Buffer *bv = bufferOf[size_t(res)], *bo = bufferOf[size_t(of)];
    int at = k < 0 ? -1 : resultTakesOperand(plan.ops[size_t(k)].type);
    bool ok = at >= 0 && size_t(at) < plan.ops[size_t(k)].inputs.size() && plan.ops[size_t(k)].inputs[size_t(at)] == of &&
              plan.ops[size_t(k)].outputs[0] == res && bv && bo && bv->offset == bo->offset && bv->bytes == bo->bytes;
    for (size_t id = 0; ok && id < root.size(); ++id)
      if (root[id] == root[size_t(of)] && std::max(last[id], first[id]) > k)
        ok = false;
    if (!ok)
      r.fail("memory plan: '" + plan.values[size_t(res)].name + "' cannot take the buffer of '" +
             plan.values[size_t(of)].name + "' (only an op that may write its result over that operand, as its "
             "last reader)");
    int g = root[size_t(of)];
    for (size_t id = 0; id < root.size(); ++id)
      if (root[id] == res)
        root[id] = g;
  }
  BufferGroups g = joinBuffers(plan); // the same roots, now checked
  std::sort(bs.begin(), bs.end(), [](auto &a, auto &b) { return a.offset < b.offset; });
  for (size_t i = 0; i < bs.size(); ++i)
    for (size_t j = i + 1; j < bs.size() && bs[j].offset < bs[i].offset + bs[i].bytes; ++j) {
      size_t a = size_t(g.root[size_t(bs[i].value)]), b = size_t(g.root[size_t(bs[j].value)]);
      if (a != b && g.from[a] <= g.to[b] && g.from[b] <= g.to[a])
        r.fail("memory plan: '" + plan.values[size_t(bs[i].value)].name + "' and '" +
               plan.values[size_t(bs[j].value)].name + "' share arena bytes while both are alive");
    }
}

/// In-place state updates: the new value has its state's type, no arena buffer, and is computed
/// by the old value's last reader (an elementwise op) or after it; one update per state.
template <typename Reporter> static void checkInPlace(const Plan &plan, Reporter &r) {
  if (plan.inPlace.empty())
    return;
  auto [first, last] = lifetimes(plan);
  std::set<int> buffered, seen;
  for (const Plan::Buffer &b : plan.buffers)
    buffered.insert(b.value);
  for (auto &[st, v] : plan.stateUpdates) {
    if (!plan.inPlace.count(v))
      continue;
    const PlanValue &sv = plan.values[size_t(st)], &vv = plan.values[size_t(v)];
    std::string what = "in-place update of '" + sv.name + "' by '" + vv.name + "': ";
    if (!seen.insert(v).second)
      r.fail(what + "the value updates two states");
    if (sv.dtype != vv.dtype || sv.shape != vv.shape || !vv.hasShape)
      r.fail(what + "types differ");
    if (buffered.count(v))
      r.fail(what + "the value also has an arena buffer");
    int def = first[size_t(v)];
    if (def < 0 || last[size_t(st)] > def ||
        (last[size_t(st)] == def && !readsElementForElement(plan.ops[size_t(def)].type)))
      r.fail(what + "the old value is read after the new one is written; recompile the plan");
  }
}

namespace {

/// Where a constant's bytes lie in the data blob, to be copied while the blob streams by.
struct Fill {
  uint64_t offset, bytes;
  TensorPtr tensor;
  bool splat; // one element at `offset`, repeated over the tensor
};

/// The JSON header into `plan`; constants are allocated, and `fills` says where their bytes are.
void parseHeader(const std::string &header, Plan &plan, const Reader &r, uint64_t dataSize,
                 std::vector<Fill> &fills, const LoadOptions &o, std::map<int, TensorPtr> &splats) {
  Json root;
  try {
    root = Json::parse(header);
  } catch (const Json::exception &e) {
    r.fail(std::string("header is not valid JSON: ") + e.what());
  }
  try {
    if (!root.is_object() || root.value("format", "") != "octet-plan")
      r.fail("header format is not 'octet-plan'");
    plan.producer = root.value("producer", "");
    plan.recipe = root.value("recipe", "");
    auto list = [&](const Json &o, const char *key) -> const Json & { // absent: empty
      static const Json empty = Json::array();
      auto it = o.find(key);
      if (it == o.end())
        return empty;
      if (!it->is_array())
        r.fail(std::string("'") + key + "' is not a list");
      return *it;
    };
    for (const Json &v : list(root, "values")) {
      PlanValue pv;
      pv.name = v.at("name").get<std::string>();
      std::string dt = v.at("dtype").get<std::string>();
      pv.dtype = dtypeFromName(dt);
      if (pv.dtype == DType::Invalid)
        r.fail("value '" + pv.name + "' has unknown dtype '" + dt + "'");
      pv.isSequence = v.value("sequence", false);
      if (v.contains("shape")) {
        pv.hasShape = true;
        pv.shape = jsonShape(v["shape"], r, "the shape of value '" + pv.name + "'", dtypeSize(pv.dtype));
      }
      plan.values.push_back(pv);
    }
    int nValues = int(plan.values.size());
    auto checkId = [&](const Json &v, const std::string &where) {
      int64_t id = jsonInt(v, r, where);
      if (id < -1 || id >= nValues)
        r.fail(where + " refers to value " + std::to_string(id) + ", which does not exist");
      return int(id);
    };
    auto pair = [&](const Json &v, const std::string &where) {
      if (!v.is_array() || v.size() != 2)
        r.fail(where + " entry is not a pair of values");
      return std::make_pair(checkId(v[0], where), checkId(v[1], where));
    };
    for (const Json &v : list(root, "inputs"))
      plan.inputs.push_back(checkId(v, "inputs"));
    for (const Json &v : list(root, "outputs"))
      plan.outputs.push_back(checkId(v, "outputs"));
    for (const Json &c : list(root, "constants")) {
      int id = checkId(c.at("value"), "constants");
      if (id < 0)
        r.fail("a constant refers to no value");
      const PlanValue &pv = plan.values[size_t(id)];
      int64_t off = jsonInt(c.at("offset"), r, "constant offset"), size = jsonInt(c.at("bytes"), r, "constant size");
      if (!pv.hasShape)
        r.fail("constant '" + pv.name + "' has no shape");
      if (plan.constants.count(id))
        r.fail("constant '" + pv.name + "' is listed twice");
      bool splat = c.value("splat", false); // one element, repeated
      size_t es = dtypeSize(pv.dtype);
      // A rank's shard of a whole tensor: the bytes are the whole tensor's.
      Plan::ShardedConstant sh;
      if (c.contains("shards")) {
        sh.shards = jsonInt(c.at("shards"), r, "constant shards");
        sh.whole = jsonShape(c.at("whole_shape"), r, "constant '" + pv.name + "' whole_shape", es);
        int64_t n = checkedBytes(sh.whole, 1);
        if (sh.shards < 2 || pv.shape.size() != 1 || pv.shape[0] != (n + sh.shards - 1) / sh.shards)
          r.fail("constant '" + pv.name + "': a shard's shape is not 1/shards of whole_shape");
      }
      const Shape &stored = sh.shards ? sh.whole : pv.shape;
      int64_t want = splat ? int64_t(es) : checkedBytes(stored, es);
      if (off < 0 || size != want || uint64_t(size) > dataSize || uint64_t(off) > dataSize - uint64_t(size))
        r.fail("constant '" + pv.name + "' lies outside the data blob or has the wrong size");
      std::string kind = c.value("kind", "const");
      plan.constantKinds[id] = kind == "param" ? ConstantKind::Param
                               : kind == "state" ? ConstantKind::State
                                                 : ConstantKind::Const;
      if (c.contains("role"))
        plan.roles[id] = c["role"].get<std::string>();
      if (o.deferBytes && kind != "const" && uint64_t(checkedBytes(pv.shape, es)) >= o.deferBytes) {
        plan.deferred[id] = {uint64_t(off), uint64_t(size), {}};
        if (sh.shards) { // rank 0's part until selectShards
          plan.deferred[id].valid = std::min(uint64_t(checkedBytes(pv.shape, es)), uint64_t(checkedBytes(sh.whole, es)));
          plan.sharded[id] = std::move(sh);
        }
        if (splat) { // its one element, read with the blob
          auto one = std::make_shared<Tensor>(pv.dtype, Shape{});
          fills.push_back({uint64_t(off), uint64_t(size), one, false});
          splats[id] = one;
        }
        continue;
      }
      TensorPtr t, data;
      try {
        t = std::make_shared<Tensor>(pv.dtype, pv.shape);
        data = sh.shards ? std::make_shared<Tensor>(pv.dtype, sh.whole) : t;
      } catch (const std::bad_alloc &) {
        r.fail("constant '" + pv.name + "' (" + std::to_string(checkedBytes(stored, es)) +
               " bytes) does not fit in this machine's memory");
      }
      if (!data->bytes.empty()) // an empty tensor's bytes have no storage to copy into
        fills.push_back({uint64_t(off), uint64_t(size), data, splat});
      if (sh.shards) {
        sh.data = data;
        plan.sharded[id] = std::move(sh);
      }
      plan.constants[id] = t;
    }
    for (const Json &g : list(root, "gradients")) {
      plan.gradients.emplace_back(g.at("param").get<std::string>(), checkId(g.at("value"), "gradients"));
      if (g.contains("storage")) {
        DType d = dtypeFromName(g["storage"].get<std::string>());
        if (d == DType::Invalid)
          r.fail("gradient of '" + plan.gradients.back().first + "' has unknown storage dtype");
        plan.gradStorage[plan.gradients.back().first] = d;
      }
    }
    if (root.contains("training"))
      for (auto &[k, v] : root["training"].items())
        plan.training[k] = v.get<std::string>();
    for (const Json &u : list(root, "state_updates")) {
      plan.stateUpdates.emplace_back(checkId(u.at("state"), "state_updates"), checkId(u.at("value"), "state_updates"));
      if (u.value("in_place", false))
        plan.inPlace.insert(plan.stateUpdates.back().second);
    }
    if (root.contains("memory")) {
      const Json &m = root["memory"];
      plan.arenaBytes = jsonInt(m.at("arena_bytes"), r, "memory arena_bytes");
      plan.arenaAlignment = jsonInt(m.at("alignment"), r, "memory alignment");
      if (plan.arenaBytes < 0 || plan.arenaAlignment < 0)
        r.fail("memory plan: negative arena size or alignment");
      for (const Json &b : list(m, "buffers")) {
        if (!b.is_array() || b.size() != 3)
          r.fail("memory buffers entry is not [value, offset, bytes]");
        plan.buffers.push_back({checkId(b[0], "memory"), jsonInt(b[1], r, "memory"), jsonInt(b[2], r, "memory")});
        if (plan.buffers.back().value < 0)
          r.fail("memory buffers entry refers to no value");
      }
      for (const Json &v : list(m, "views"))
        plan.views.push_back(pair(v, "memory views"));
      for (const Json &v : list(m, "in_place"))
        plan.inPlaceResults.push_back(pair(v, "memory in_place"));
    }
    for (const Json &o : list(root, "ops")) {
      PlanOp op;
      op.type = o.at("type").get<std::string>();
      op.name = o.value("name", "");
      for (const Json &v : list(o, "in"))
        op.inputs.push_back(checkId(v, "op '" + op.name + "'"));
      for (const Json &v : list(o, "out"))
        op.outputs.push_back(checkId(v, "op '" + op.name + "'"));
      if (o.contains("attrs")) {
        if (!o["attrs"].is_object())
          r.fail("the attributes of op '" + op.name + "' are not a map");
        for (auto &[an, av] : o["attrs"].items())
          op.attrs[an] = parseAttr(av, r, "'" + an + "' of op '" + op.name + "'");
      }
      op.lastMicroBatch = attrInt(op, "last_micro_batch", 0) != 0;
      op.firstMicroBatch = attrInt(op, "first_micro_batch", 0) != 0;
      plan.ops.push_back(std::move(op));
    }
  } catch (const Json::exception &e) {
    r.fail(std::string("header is missing a field or has a wrong type: ") + e.what());
  }
  markKeptAcrossRuns(plan);
  checkMicroBatchPhases(plan, r); // first: the memory plan's lifetimes follow the phases
  checkMemoryPlan(plan, r);
  checkInPlace(plan, r);
}

} // namespace

/// The file is read once, in order: the fixed part, the header, then the data blob in chunks that
/// are checksummed and copied into the constants they hold (no second copy of the file in memory).
/// Nothing the header says counts until the checksum over header and data matches: for a corrupt
/// file the checksum is the error reported, whatever else is wrong with it.
Plan loadPlan(const std::string &path, const LoadOptions &o) {
  auto in = std::make_shared<std::ifstream>(path, std::ios::binary);
  if (!*in)
    throw Error(path + ": cannot open the plan file (does it exist?)");
  Plan plan = readPlan(*in, path, o);
  if (!plan.deferred.empty())
    plan.source = in; // the same open file: a plan replaced on disk meanwhile is not read
  return plan;
}

Plan readPlan(std::istream &in, const std::string &path, const LoadOptions &o) {
  Reader r{path};
  in.seekg(0, std::ios::end);
  uint64_t fileSize = uint64_t(in.tellg());
  in.seekg(0);
  uint8_t p[kPlanHeaderBytes];
  if (fileSize < kPlanHeaderBytes || !in.read(reinterpret_cast<char *>(p), kPlanHeaderBytes) ||
      std::memcmp(p, kPlanMagic, 8) != 0)
    r.fail("not an Octet plan (bad magic)");
  Plan plan;
  plan.version = readLE<uint32_t>(p + 8);
  if (plan.version != kPlanVersion)
    throw Error(path + ": plan version " + std::to_string(plan.version) + " is not supported (this runtime reads " +
                std::to_string(kPlanVersion) + "); re-create it with this release's fp8-opt");
  uint64_t headerSize = readLE<uint64_t>(p + 16), dataOffset = readLE<uint64_t>(p + 24),
           dataSize = readLE<uint64_t>(p + 32);
  uint32_t crc = readLE<uint32_t>(p + 40);
  if (headerSize > fileSize - kPlanHeaderBytes || dataOffset < kPlanHeaderBytes + headerSize ||
      dataOffset > fileSize || dataSize != fileSize - dataOffset)
    r.fail("truncated or malformed (sizes do not match the file)");
  std::string header(size_t(headerSize), '\0');
  if (!in.read(header.data(), std::streamsize(headerSize)))
    r.fail("truncated or malformed (cannot read the header)");
  uint32_t c = crc32Of(0, header.data(), header.size());

  std::string headerError;
  std::vector<Fill> fills;
  std::map<int, TensorPtr> splats;
  try {
    parseHeader(header, plan, r, dataSize, fills, o, splats);
  } catch (const Error &e) {
    headerError = e.what();
    fills.clear();
  }
  plan.dataOffset = dataOffset;
  std::sort(fills.begin(), fills.end(), [](const Fill &a, const Fill &b) { return a.offset < b.offset; });
  in.seekg(std::streamoff(dataOffset));
  std::vector<uint8_t> chunk(size_t(std::min<uint64_t>(dataSize, 64 << 20)));
  size_t first = 0;
  for (uint64_t pos = 0; pos < dataSize;) {
    size_t k = size_t(std::min<uint64_t>(chunk.size(), dataSize - pos));
    if (!in.read(reinterpret_cast<char *>(chunk.data()), std::streamsize(k)))
      r.fail("truncated or malformed (cannot read the data)");
    c = crc32Of(c, chunk.data(), k);
    uint64_t end = pos + k;
    while (first < fills.size() && fills[first].offset + fills[first].bytes <= pos)
      ++first;
    for (size_t i = first; i < fills.size() && fills[i].offset < end; ++i) {
      const Fill &f = fills[i];
      uint64_t lo = std::max(pos, f.offset), hi = std::min(end, f.offset + f.bytes);
      if (lo < hi)
        std::memcpy(f.tensor->bytes.data() + (lo - f.offset), chunk.data() + (lo - pos), size_t(hi - lo));
    }
    pos = end;
  }
  if (c != crc)
    r.fail("corrupt (checksum mismatch)");
  if (!headerError.empty())
    throw Error(headerError);
  for (const Fill &f : fills) // a splat's one element, repeated
    for (size_t i = f.bytes; f.splat && i < f.tensor->bytes.size(); i += f.bytes)
      std::memcpy(f.tensor->bytes.data() + i, f.tensor->bytes.data(), size_t(f.bytes));
  for (auto &[id, sh] : plan.sharded)
    if (sh.data) // a deferred one reads rank 0's part from the file
      copyShard(*sh.data, 0, *plan.constants[id]);
  for (auto &[id, one] : splats)
    plan.deferred[id].splat = std::move(one->bytes);
  if (!plan.deferred.empty() && !plan.source)
    plan.source = std::shared_ptr<std::istream>(&in, [](std::istream *) {}); // the caller's: outlives the plan
  plan.name = path;
  return plan;
}

void forEachChunk(const Plan &plan, int id,
                  const std::function<void(uint64_t offset, const uint8_t *data, size_t n)> &put) {
  const Plan::Deferred &d = plan.deferred.at(id);
  const PlanValue &pv = plan.values[size_t(id)];
  uint64_t total = uint64_t(numElements(pv.shape)) * dtypeSize(pv.dtype);
  uint64_t valid = std::min(total, d.valid); // a shard's bytes of the whole; zeros after
  constexpr uint64_t kChunk = uint64_t(64) << 20;
  std::vector<uint8_t> buf(size_t(std::min(total, kChunk)));
  auto zeros = [&] {
    if (valid == total)
      return;
    std::fill(buf.begin(), buf.end(), 0);
    for (uint64_t at = valid; at < total; at += buf.size())
      put(at, buf.data(), size_t(std::min<uint64_t>(buf.size(), total - at)));
  };
  if (!d.splat.empty()) {
    size_t es = d.splat.size(); // kChunk is a multiple of every element size
    for (size_t i = 0; i < buf.size(); i += es)
      std::memcpy(buf.data() + i, d.splat.data(), es);
    for (uint64_t at = 0; at < valid; at += buf.size())
      put(at, buf.data(), size_t(std::min<uint64_t>(buf.size(), valid - at)));
    return zeros();
  }
  if (!plan.source)
    throw Error(plan.name + ": constant '" + pv.name + "' is not loaded and the plan has no file to read it from");
  std::istream &in = *plan.source;
  in.clear();
  in.seekg(std::streamoff(plan.dataOffset + d.offset + d.from));
  for (uint64_t at = 0; at < valid; at += buf.size()) {
    size_t k = size_t(std::min<uint64_t>(buf.size(), valid - at));
    if (!in.read(reinterpret_cast<char *>(buf.data()), std::streamsize(k)))
      throw Error(plan.name + ": cannot read constant '" + pv.name + "' from the plan file (was it truncated?)");
    put(at, buf.data(), k);
  }
  zeros();
}

void materializeDeferred(Plan &plan) {
  for (auto &[id, d] : plan.deferred) {
    const PlanValue &pv = plan.values[size_t(id)];
    TensorPtr t;
    try {
      t = std::make_shared<Tensor>(pv.dtype, pv.shape);
    } catch (const std::bad_alloc &) {
      throw Error(plan.name + ": constant '" + pv.name + "' (" + std::to_string(constantBytes(plan, id)) +
                  " bytes) does not fit in this machine's memory");
    }
    forEachChunk(plan, id, [&](uint64_t at, const uint8_t *p, size_t n) { std::memcpy(t->bytes.data() + at, p, n); });
    plan.constants[id] = t;
  }
  plan.deferred.clear();
  plan.source.reset();
}

uint64_t constantBytes(const Plan &plan, int id) {
  const PlanValue &pv = plan.values[size_t(id)];
  return uint64_t(numElements(pv.shape)) * dtypeSize(pv.dtype);
}

void copyShard(const Tensor &whole, int64_t rank, Tensor &shard) {
  size_t part = shard.bytes.size();
  size_t from = std::min(whole.bytes.size(), size_t(rank) * part);
  size_t n = std::min(part, whole.bytes.size() - from);
  if (n)
    std::memcpy(shard.bytes.data(), whole.bytes.data() + from, n);
  std::memset(shard.bytes.data() + n, 0, part - n);
}

void selectShards(Plan &plan, int64_t rank) {
  for (auto &[id, sh] : plan.sharded) {
    if (rank < 0 || rank >= sh.shards)
      throw Error("plan constant '" + plan.values[size_t(id)].name + "' is sharded over " +
                  std::to_string(sh.shards) + " ranks; rank " + std::to_string(rank) + " has no shard");
    if (sh.data)
      copyShard(*sh.data, rank, *plan.constants[id]);
    sh.data.reset();
    if (auto d = plan.deferred.find(id); d != plan.deferred.end()) { // read from the file, the part alone
      const PlanValue &pv = plan.values[size_t(id)];
      uint64_t es = dtypeSize(pv.dtype), part = uint64_t(numElements(pv.shape)) * es,
               whole = uint64_t(numElements(sh.whole)) * es;
      d->second.from = std::min(whole, uint64_t(rank) * part);
      d->second.valid = std::min(part, whole - d->second.from);
      if (!d->second.splat.empty()) // the element repeated; `from` is within it
        d->second.from = 0;
    }
  }
}

} // namespace octet::rt
