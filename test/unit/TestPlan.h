//===- TestPlan.h - A plan file written by hand, for the runtime tests -----===//
#ifndef OCTET_TEST_UNIT_TESTPLAN_H
#define OCTET_TEST_UNIT_TESTPLAN_H

#include "octet/runtime/Executor.h"
#include "octet/runtime/Npz.h"
#include "octet/runtime/Plan.h"

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace octet::rt {

/// A plan file of `header` (the JSON) and `data` (the blob) at `path`, with the fixed header and
/// checksum docs/PLAN.md gives; returns the file's bytes.
inline std::string writePlanFile(const std::string &path, const std::string &header, const std::string &data) {
  uint64_t dataOffset = (kPlanHeaderBytes + header.size() + kPlanDataAlign - 1) / kPlanDataAlign * kPlanDataAlign;
  std::string file(size_t(dataOffset), '\0');
  std::memcpy(file.data(), kPlanMagic, 8);
  auto put = [&](size_t at, uint64_t v, int n) { std::memcpy(file.data() + at, &v, size_t(n)); };
  put(8, kPlanVersion, 4);
  put(16, header.size(), 8);
  put(24, dataOffset, 8);
  put(32, data.size(), 8);
  uint32_t crc = crc32Of(crc32Of(0, header.data(), header.size()), data.data(), data.size());
  put(40, crc, 4);
  std::memcpy(file.data() + kPlanHeaderBytes, header.data(), header.size());
  file += data;
  std::ofstream(path, std::ios::binary) << file;
  return file;
}

// A plan file written by hand (docs/PLAN.md): a 3 MiB float32 parameter `w` [768, 1024], a 2 MiB
// zero splat state `m` [512, 1024], a small parameter `b` [4], and Identity ops returning w and b.
inline std::string writeTestPlan(const std::string &path, std::vector<float> &w) {
  w.resize(768 * 1024);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = float(i % 1000) * 0.25f - float(i / 1000);
  std::string data(w.size() * 4, '\0');
  std::memcpy(data.data(), w.data(), data.size());
  size_t bAt = data.size(), mAt = bAt + 16;
  float b[4] = {1, 2, 3, 4};
  data.append(reinterpret_cast<const char *>(b), 16);
  data.append(4, '\0'); // m's one element
  std::string header =
      R"({"format": "octet-plan", "version": 1, "producer": "test",)"
      R"( "values": [{"name": "w", "dtype": "float32", "shape": [768, 1024]},)"
      R"( {"name": "b", "dtype": "float32", "shape": [4]},)"
      R"( {"name": "m", "dtype": "float32", "shape": [512, 1024]},)"
      R"( {"name": "w_out", "dtype": "float32", "shape": [768, 1024]},)"
      R"( {"name": "b_out", "dtype": "float32", "shape": [4]}],)"
      R"( "outputs": [3, 4],)"
      R"( "constants": [{"value": 0, "offset": 0, "bytes": )" + std::to_string(bAt) + R"(, "kind": "param"},)"
      R"( {"value": 1, "offset": )" + std::to_string(bAt) + R"(, "bytes": 16, "kind": "param"},)"
      R"( {"value": 2, "offset": )" + std::to_string(mAt) + R"(, "bytes": 4, "kind": "state", "splat": true}],)"
      R"( "ops": [{"type": "Identity", "name": "id_w", "in": [0], "out": [3]},)"
      R"( {"type": "Identity", "name": "id_b", "in": [1], "out": [4]}]})";
  return writePlanFile(path, header, data);
}

/// Appends a float32 value of shape `s` to `plan`; returns its id.
inline int addValue(Plan &plan, const std::string &name, Shape s) {
  PlanValue v;
  v.name = name;
  v.hasShape = true;
  v.shape = std::move(s);
  plan.values.push_back(v);
  return int(plan.values.size() - 1);
}

/// Appends an op of `type` named `name` reading `in` and writing `out`; returns it (for attributes).
inline PlanOp &addOp(Plan &plan, const std::string &type, const std::string &name, std::vector<int> in, std::vector<int> out) {
  PlanOp op;
  op.type = type;
  op.name = name;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  plan.ops.push_back(std::move(op));
  return plan.ops.back();
}

/// Gradient accumulation's first-micro-batch ops (Plan::firstMicroBatch), a plan built in memory:
/// state s [4] = 1..4 that every micro-batch advances (s + 1), a parameter w [4] that only the last
/// one updates (w + 1), and c = 2 s marked firstMicroBatch (a plan loadPlan would refuse: c reads
/// a state that changes every micro-batch, which is what lets a test see whether c ran), y = c + x.
/// runFirstMicroBatchSequence drives a runner through steps and returns y[0] after each run.
inline Plan firstMicroBatchPlan() {
  Plan p;
  auto constant = [&](int id, std::vector<float> v, ConstantKind kind) {
    auto t = std::make_shared<Tensor>(DType::F32, p.values[size_t(id)].shape);
    for (size_t i = 0; i < v.size(); ++i)
      t->data<float>()[i] = v[i];
    p.constants[id] = t;
    p.constantKinds[id] = kind;
  };
  int s = addValue(p, "s", {4}), w = addValue(p, "w", {4}), x = addValue(p, "x", {4});
  int two = addValue(p, "two", {}), one = addValue(p, "one", {});
  int c = addValue(p, "c", {4}), y = addValue(p, "y", {4}), s2 = addValue(p, "s.next", {4});
  int w2 = addValue(p, "w.next", {4});
  constant(s, {1, 2, 3, 4}, ConstantKind::State);
  constant(w, {10, 20, 30, 40}, ConstantKind::Param);
  constant(two, {2}, ConstantKind::Const);
  constant(one, {1}, ConstantKind::Const);
  addOp(p, "Mul", "c", {s, two}, {c}).firstMicroBatch = true;
  addOp(p, "Add", "y", {c, x}, {y});
  addOp(p, "Add", "s.next", {s, one}, {s2});
  addOp(p, "Add", "w.next", {w, one}, {w2}).lastMicroBatch = true;
  p.inputs = {x};
  p.outputs = {y};
  p.stateUpdates = {{s, s2}, {w, w2}};
  p.stateUpdateLast = {0, 1};
  p.gradAccumSteps = 2;
  p.keptAcrossRuns = {c};
  return p;
}

/// y[0] after each of: two optimizer steps of 2 micro-batches; setState(w) and a first micro-batch;
/// a run that keeps the state; another micro-batch. s[0] is 1, 2, 3, ... before each updating run,
/// and c = 2 s[0] is made again only after the parameters changed.
template <typename R> std::vector<float> runFirstMicroBatchSequence(R &runner) {
  std::map<std::string, TensorPtr> in{{"x", std::make_shared<Tensor>(DType::F32, Shape{4})}};
  std::vector<float> y;
  auto run = [&](bool update, bool last) {
    runner.run(in, update, last);
    y.push_back(runner.value("y")->template data<float>()[0]);
  };
  for (int step = 0; step < 2; ++step) {
    run(true, false);
    run(true, true);
  }
  auto w = std::make_shared<Tensor>(DType::F32, Shape{4});
  runner.setState("w", w);
  run(true, false);
  run(false, true);
  run(true, false);
  return y;
}

} // namespace octet::rt

#endif
