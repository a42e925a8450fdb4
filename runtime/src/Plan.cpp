//===- Plan.cpp - Reading plan files --------------------------------------===//
#include "octet/runtime/Plan.h"
#include "octet/runtime/InPlace.h"

#include <yaml-cpp/yaml.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace octet::rt {

int Plan::findValue(const std::string &name) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == name)
      return int(i);
  return -1;
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

Attr parseAttr(const YAML::Node &n, const Reader &r, const std::string &where) {
  Attr a;
  if (!n.IsMap() || n.size() != 1)
    r.fail("attribute " + where + " is not a one-key map");
  std::string k = n.begin()->first.as<std::string>();
  YAML::Node v = n.begin()->second; // a handle of its own: the iterator's proxy dies with this line
  if (k == "i") {
    a.kind = Attr::Int;
    a.i = v.as<int64_t>();
  } else if (k == "f") {
    a.kind = Attr::Float;
    std::string s = v.as<std::string>();
    a.f = s == "nan" ? NAN : s == "inf" ? INFINITY : s == "-inf" ? -INFINITY : std::strtod(s.c_str(), nullptr);
  } else if (k == "s") {
    a.kind = Attr::String;
    a.s = v.as<std::string>();
  } else if (k == "ints") {
    a.kind = Attr::Ints;
    a.ints = v.as<std::vector<int64_t>>();
  } else if (k == "floats") {
    a.kind = Attr::Floats;
    a.floats = v.as<std::vector<double>>();
  } else if (k == "strings") {
    a.kind = Attr::Strings;
    a.strings = v.as<std::vector<std::string>>();
  } else if (k == "tensor") {
    a.kind = Attr::Tensor_;
    DType t = dtypeFromName(v["dtype"].as<std::string>());
    if (t == DType::Invalid)
      r.fail("attribute " + where + " has an unknown dtype");
    auto tensor = std::make_shared<Tensor>(t, v["shape"].as<std::vector<int64_t>>());
    std::vector<double> data = v["data"].as<std::vector<double>>();
    if (int64_t(data.size()) != tensor->numel())
      r.fail("attribute " + where + " has the wrong number of elements");
    Tensor f(DType::F64, tensor->shape);
    std::memcpy(f.bytes.data(), data.data(), data.size() * 8);
    *tensor = f.castTo(t);
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
  return {std::move(first), std::move(last)};
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
  std::vector<int> from(first), to(plan.values.size());
  for (size_t id = 0; id < to.size(); ++id)
    to[id] = std::max(last[id], first[id]);
  for (size_t id = 0; id < root.size(); ++id) { // views follow their operands in the ops' order
    size_t g = size_t(root[id]);
    from[g] = std::min(from[g], first[id]);
    to[g] = std::max(to[g], std::max(last[id], first[id]));
  }
  std::sort(bs.begin(), bs.end(), [](auto &a, auto &b) { return a.offset < b.offset; });
  for (size_t i = 0; i < bs.size(); ++i)
    for (size_t j = i + 1; j < bs.size() && bs[j].offset < bs[i].offset + bs[i].bytes; ++j) {
      size_t a = size_t(root[size_t(bs[i].value)]), b = size_t(root[size_t(bs[j].value)]);
      if (a != b && from[a] <= to[b] && from[b] <= to[a])
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

Plan loadPlan(const std::string &path) {
  Reader r{path};
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(path + ": cannot open the plan file (does it exist?)");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const uint8_t *p = reinterpret_cast<const uint8_t *>(bytes.data());
  if (bytes.size() < kPlanHeaderBytes || std::memcmp(p, kPlanMagic, 8) != 0)
    r.fail("not an Octet plan (bad magic)");
  Plan plan;
  plan.version = readLE<uint32_t>(p + 8);
  if (plan.version != kPlanVersion)
    throw Error(path + ": plan version " + std::to_string(plan.version) + " is not supported (this runtime reads " +
                std::to_string(kPlanVersion) + "); re-create it with this release's fp8-opt");
  uint64_t headerSize = readLE<uint64_t>(p + 16), dataOffset = readLE<uint64_t>(p + 24),
           dataSize = readLE<uint64_t>(p + 32);
  uint32_t crc = readLE<uint32_t>(p + 40);
  if (kPlanHeaderBytes + headerSize > bytes.size() || dataOffset < kPlanHeaderBytes + headerSize ||
      dataOffset + dataSize != bytes.size())
    r.fail("truncated or malformed (sizes do not match the file)");
  uLong c = crc32(0L, Z_NULL, 0);
  c = crc32(c, p + kPlanHeaderBytes, uInt(headerSize));
  c = crc32(c, p + dataOffset, uInt(dataSize));
  if (uint32_t(c) != crc)
    r.fail("corrupt (checksum mismatch)");

  YAML::Node root;
  try {
    root = YAML::Load(bytes.substr(kPlanHeaderBytes, headerSize));
  } catch (const YAML::Exception &e) {
    r.fail(std::string("header is not valid JSON: ") + e.what());
  }
  try {
    if (root["format"].as<std::string>() != "octet-plan")
      r.fail("header format is not 'octet-plan'");
    plan.producer = root["producer"] ? root["producer"].as<std::string>() : "";
    plan.recipe = root["recipe"] ? root["recipe"].as<std::string>() : "";
    for (const YAML::Node &v : root["values"]) {
      PlanValue pv;
      pv.name = v["name"].as<std::string>();
      pv.dtype = dtypeFromName(v["dtype"].as<std::string>());
      if (pv.dtype == DType::Invalid)
        r.fail("value '" + pv.name + "' has unknown dtype '" + v["dtype"].as<std::string>() + "'");
      pv.isSequence = v["sequence"] && v["sequence"].as<bool>();
      if (v["shape"]) {
        pv.hasShape = true;
        pv.shape = v["shape"].as<std::vector<int64_t>>();
      }
      plan.values.push_back(pv);
    }
    int nValues = int(plan.values.size());
    auto checkId = [&](int id, const std::string &where) {
      if (id < -1 || id >= nValues)
        r.fail(where + " refers to value " + std::to_string(id) + ", which does not exist");
      return id;
    };
    for (const YAML::Node &v : root["inputs"])
      plan.inputs.push_back(checkId(v.as<int>(), "inputs"));
    for (const YAML::Node &v : root["outputs"])
      plan.outputs.push_back(checkId(v.as<int>(), "outputs"));
    for (const YAML::Node &c : root["constants"]) {
      int id = checkId(c["value"].as<int>(), "constants");
      uint64_t off = c["offset"].as<uint64_t>(), size = c["bytes"].as<uint64_t>();
      const PlanValue &pv = plan.values[size_t(id)];
      if (!pv.hasShape)
        r.fail("constant '" + pv.name + "' has no shape");
      auto t = std::make_shared<Tensor>(pv.dtype, pv.shape);
      bool splat = c["splat"] && c["splat"].as<bool>(); // one element, repeated
      size_t es = dtypeSize(pv.dtype);
      if (off + size > dataSize || size != (splat ? es : t->bytes.size()))
        r.fail("constant '" + pv.name + "' lies outside the data blob or has the wrong size");
      if (splat)
        for (size_t i = 0; i < t->bytes.size(); i += es)
          std::memcpy(t->bytes.data() + i, p + dataOffset + off, es);
      else if (size) // an empty tensor's bytes may have no storage to copy into
        std::memcpy(t->bytes.data(), p + dataOffset + off, size);
      plan.constants[id] = t;
      std::string kind = c["kind"] ? c["kind"].as<std::string>() : "const";
      plan.constantKinds[id] = kind == "param" ? ConstantKind::Param
                               : kind == "state" ? ConstantKind::State
                                                 : ConstantKind::Const;
      if (c["role"])
        plan.roles[id] = c["role"].as<std::string>();
    }
    for (const YAML::Node &g : root["gradients"]) {
      plan.gradients.emplace_back(g["param"].as<std::string>(), checkId(g["value"].as<int>(), "gradients"));
      if (g["storage"]) {
        DType d = dtypeFromName(g["storage"].as<std::string>());
        if (d == DType::Invalid)
          r.fail("gradient of '" + plan.gradients.back().first + "' has unknown storage dtype");
        plan.gradStorage[plan.gradients.back().first] = d;
      }
    }
    if (root["training"])
      for (const auto &kv : root["training"])
        plan.training[kv.first.as<std::string>()] = kv.second.as<std::string>();
    for (const YAML::Node &s : root["state_updates"]) {
      plan.stateUpdates.emplace_back(checkId(s["state"].as<int>(), "state_updates"),
                                     checkId(s["value"].as<int>(), "state_updates"));
      if (s["in_place"] && s["in_place"].as<bool>())
        plan.inPlace.insert(plan.stateUpdates.back().second);
    }
    if (root["memory"]) {
      const YAML::Node &m = root["memory"];
      plan.arenaBytes = m["arena_bytes"].as<int64_t>();
      plan.arenaAlignment = m["alignment"].as<int64_t>();
      for (const YAML::Node &b : m["buffers"])
        plan.buffers.push_back({checkId(b[0].as<int>(), "memory"), b[1].as<int64_t>(), b[2].as<int64_t>()});
      if (m["views"])
        for (const YAML::Node &v : m["views"])
          plan.views.emplace_back(checkId(v[0].as<int>(), "memory views"), checkId(v[1].as<int>(), "memory views"));
      if (m["in_place"])
        for (const YAML::Node &v : m["in_place"])
          plan.inPlaceResults.emplace_back(checkId(v[0].as<int>(), "memory in_place"),
                                           checkId(v[1].as<int>(), "memory in_place"));
    }
    for (const YAML::Node &o : root["ops"]) {
      PlanOp op;
      op.type = o["type"].as<std::string>();
      op.name = o["name"] ? o["name"].as<std::string>() : "";
      for (const YAML::Node &v : o["in"])
        op.inputs.push_back(checkId(v.as<int>(), "op '" + op.name + "'"));
      for (const YAML::Node &v : o["out"])
        op.outputs.push_back(checkId(v.as<int>(), "op '" + op.name + "'"));
      if (o["attrs"])
        for (const auto &kv : o["attrs"]) {
          std::string an = kv.first.as<std::string>();
          op.attrs[an] = parseAttr(kv.second, r, "'" + an + "' of op '" + op.name + "'");
        }
      plan.ops.push_back(std::move(op));
    }
  } catch (const YAML::Exception &e) {
    r.fail(std::string("header is missing a field or has a wrong type: ") + e.what());
  }
  checkMemoryPlan(plan, r);
  checkInPlace(plan, r);
  return plan;
}

} // namespace octet::rt
