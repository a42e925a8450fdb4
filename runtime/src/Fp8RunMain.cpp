//===- Fp8RunMain.cpp - fp8-run: execute a plan on the CPU -----------------===//
#include "octet/runtime/Fp8RunMain.h"

#include "octet/runtime/Executor.h"
#include "octet/runtime/Npz.h"
#include "octet/runtime/Train.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <regex>

#ifndef OCTET_VERSION
#define OCTET_VERSION "0.0.0"
#endif

namespace octet::rt {
namespace {

const char *kUsage =
    "usage: fp8-run MODEL.plan [options]\n"
    "Runs a plan written by `fp8-opt --emit=plan` on the CPU reference backend.\n\n"
    "  --inputs FILE.npz       graph inputs by name (NumPy archive)\n"
    "  --outputs FILE.npz      write the graph outputs (and --dump values) here\n"
    "  --dump REGEX            also write every value whose name matches REGEX\n"
    "  --iterations N          run N times, carrying the FP8 state between runs (default 1)\n"
    "  --load-state FILE.npz   start from this FP8 state (amax histories, scales)\n"
    "  --save-state FILE.npz   write the FP8 state after the last run\n"
    "  --dump-gradients F.npz  training plans: run one step, write d(loss)/d(param) by initializer name\n"
    "  --info                  describe the plan and exit\n"
    "\nTraining (plans from fp8-opt --train):\n"
    "  --data FILE             token ids: nanoGPT .bin (little-endian, --data-dtype uint16|uint32) or 1-D .npy;\n"
    "                          without --eval-data its last 10% is held out for eval\n"
    "  --steps N               train N steps (the plan's inputs fix batch and sequence)\n"
    "  --batch B --seq T       check the plan's [batch, seq] against these\n"
    "  --labels shifted|same   labels are the next tokens (default) or the inputs (models that shift, HF style)\n"
    "  --seed S                batch sampling seed (default 1234)\n"
    "  --eval-plan F --eval-every K [--eval-data F] [--eval-batches N]\n"
    "                          eval loss every K steps on a forward plan sharing the parameters (default data:\n"
    "                          the last 10% of --data)\n"
    "  --log FILE.jsonl|.csv   per-step loss, lr, grad norm, tokens/s (JSONL adds sampled FP8 amax and scales)\n"
    "  --log-every K           progress and FP8 samples every K steps (default 10)\n"
    "  --checkpoint F [--checkpoint-every K]   atomic checkpoints (and one at the end)\n"
    "  --resume F              continue from a checkpoint (bit-exact on the CPU)\n"
    "  --loss-png F            write the loss curve as a PNG\n"
    "  --report-memory         bytes per parameter: weights, gradients, optimizer state, FP8 state\n"
    "  --quiet                 no progress output\n"
    "  --version, --help\n";

struct Options {
  std::string plan, inputs, outputs, dump, loadState, saveState, dumpGradients;
  int64_t iterations = 1;
  bool info = false, reportMemory = false;
  TrainOptions train;
};

std::string describe(const Tensor &t) {
  char buf[160];
  std::string s = std::string(dtypeName(t.dtype)) + " " + shapeString(t.shape);
  if (t.numel() == 1) {
    std::snprintf(buf, sizeof buf, " = %.9g", t.getDouble(0));
    return s + buf;
  }
  double sum = 0, amax = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.getDouble(i);
    sum += v;
    amax = std::max(amax, std::fabs(v));
  }
  std::snprintf(buf, sizeof buf, " mean %.6g absmax %.6g", sum / double(t.numel()), amax);
  return s + buf;
}

void printInfo(const Plan &p) {
  size_t params = 0, paramBytes = 0, state = 0, stateBytes = 0;
  for (auto &[id, kind] : p.constantKinds) {
    size_t b = p.constants.at(id)->bytes.size();
    if (kind == ConstantKind::Param) {
      ++params;
      paramBytes += b;
    } else if (kind == ConstantKind::State) {
      ++state;
      stateBytes += b;
    }
  }
  std::map<std::string, int> ops;
  for (const PlanOp &op : p.ops)
    ++ops[op.type];
  std::cout << "plan version " << p.version << ", producer '" << p.producer << "', recipe '"
            << (p.recipe.empty() ? "none" : p.recipe) << "'\n"
            << p.values.size() << " values, " << p.ops.size() << " ops, " << params << " parameters (" << paramBytes
            << " bytes), " << state << " state tensors (" << stateBytes << " bytes)\n"
            << "activation arena: " << p.arenaBytes << " bytes for " << p.buffers.size()
            << " buffers (memory plan checked at load)\n";
  for (int id : p.inputs)
    std::cout << "input  " << p.values[size_t(id)].name << ": " << dtypeName(p.values[size_t(id)].dtype) << " "
              << shapeString(p.values[size_t(id)].shape) << "\n";
  for (int id : p.outputs)
    std::cout << "output " << p.values[size_t(id)].name << ": " << dtypeName(p.values[size_t(id)].dtype) << "\n";
  for (auto &[type, n] : ops)
    std::cout << "  " << type << " x" << n << "\n";
}

int run(const Options &o) {
  Executor ex(loadPlan(o.plan));
  if (o.info) {
    printInfo(ex.plan());
    return 0;
  }
  if (o.reportMemory) {
    printMemoryReport(ex.plan(), std::cout);
    if (o.train.data.empty())
      return 0;
  }
  if (!o.train.data.empty())
    return trainMain(ex, o.train);
  std::map<std::string, TensorPtr> inputs;
  if (!o.inputs.empty())
    for (auto &[name, t] : readNpz(o.inputs)) {
      int id = ex.plan().findValue(name);
      // FP8 inputs arrive as uint8 codes.
      if (id >= 0 && t->dtype == DType::U8 && isFp8(ex.plan().values[size_t(id)].dtype))
        t->dtype = ex.plan().values[size_t(id)].dtype;
      inputs[name] = t;
    }
  if (!o.loadState.empty())
    for (auto &[name, t] : readNpz(o.loadState))
      ex.setState(name, t);
  std::regex dumpRe;
  try {
    if (!o.dump.empty())
      dumpRe = std::regex(o.dump);
  } catch (const std::regex_error &e) {
    throw Error("--dump: '" + o.dump + "' is not a valid regular expression");
  }
  for (int64_t i = 0; i < o.iterations; ++i)
    ex.run(inputs);
  NamedTensors outs;
  for (int id : ex.plan().outputs) {
    const std::string &name = ex.plan().values[size_t(id)].name;
    outs.emplace_back(name, ex.value(id));
    if (o.outputs.empty())
      std::cout << name << ": " << describe(*ex.value(id)) << "\n";
  }
  if (!o.dump.empty())
    for (size_t id = 0; id < ex.plan().values.size(); ++id) {
      const std::string &name = ex.plan().values[id].name;
      TensorPtr t = ex.value(int(id));
      bool isOutput = std::find(ex.plan().outputs.begin(), ex.plan().outputs.end(), int(id)) != ex.plan().outputs.end();
      if (t && !isOutput && std::regex_search(name, dumpRe))
        outs.emplace_back(name, t);
    }
  if (!o.outputs.empty())
    writeNpz(o.outputs, outs);
  if (!o.dumpGradients.empty()) {
    if (ex.plan().gradients.empty())
      throw Error("--dump-gradients: the plan has no gradients; compile it with fp8-opt --train");
    NamedTensors grads;
    for (auto &[param, id] : ex.plan().gradients)
      grads.emplace_back(param, ex.value(id));
    writeNpz(o.dumpGradients, grads);
  }
  if (!o.saveState.empty()) {
    NamedTensors st;
    for (auto &[name, t] : ex.state())
      st.emplace_back(name, t);
    writeNpz(o.saveState, st);
  }
  return 0;
}

} // namespace

int fp8RunMain(int argc, char **argv) {
  Options o;
  int64_t seed = int64_t(o.train.seed);
  std::map<std::string, std::string *> strings = {
      {"--inputs", &o.inputs}, {"--outputs", &o.outputs}, {"--dump", &o.dump}, {"--load-state", &o.loadState},
      {"--save-state", &o.saveState}, {"--dump-gradients", &o.dumpGradients}, {"--data", &o.train.data},
      {"--data-dtype", &o.train.dataDtype}, {"--eval-data", &o.train.evalData}, {"--eval-plan", &o.train.evalPlan},
      {"--log", &o.train.log}, {"--checkpoint", &o.train.checkpoint}, {"--resume", &o.train.resume},
      {"--loss-png", &o.train.lossPng}, {"--labels", &o.train.labels}};
  std::map<std::string, int64_t *> ints = {
      {"--iterations", &o.iterations}, {"--steps", &o.train.steps}, {"--batch", &o.train.batch},
      {"--seq", &o.train.seq}, {"--eval-every", &o.train.evalEvery}, {"--eval-batches", &o.train.evalBatches},
      {"--checkpoint-every", &o.train.checkpointEvery}, {"--log-every", &o.train.logEvery}, {"--seed", &seed}};
  auto fail = [](const std::string &msg) {
    std::cerr << "fp8-run: error: " << msg << "\n";
    return 1;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &dst) {
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        dst = a.substr(eq + 1);
        return true;
      }
      if (i + 1 >= argc)
        return false;
      dst = argv[++i];
      return true;
    };
    std::string flag = a.substr(0, a.find('='));
    std::string v;
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (flag == "--version") {
      std::cout << "Octet fp8-run " << OCTET_VERSION << "\n";
      return 0;
    } else if (flag == "--info") {
      o.info = true;
    } else if (flag == "--report-memory") {
      o.reportMemory = true;
    } else if (flag == "--quiet") {
      o.train.quiet = true;
    } else if (strings.count(flag) || ints.count(flag)) {
      if (!value(v))
        return fail(flag + " needs a value; see --help");
      if (strings.count(flag)) {
        *strings[flag] = v;
      } else {
        char *end = nullptr;
        long long n = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end || n < (flag == "--seed" || flag == "--batch" || flag == "--seq" ? 0 : 1))
          return fail(flag + ": '" + v + "' is not a " + (flag == "--seed" ? "non-negative" : "positive") +
                      " integer");
        *ints[flag] = n;
      }
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "'; see --help");
    } else if (o.plan.empty()) {
      o.plan = a;
    } else {
      return fail("unexpected argument '" + a + "' (one plan file only); see --help");
    }
  }
  if (o.plan.empty())
    return fail("no plan file given; usage: fp8-run MODEL.plan [--inputs in.npz] [--outputs out.npz]");
  o.train.seed = uint64_t(seed);
  if (!o.train.data.empty() && o.train.steps < 1)
    return fail("--data needs --steps N");
  if (o.train.data.empty() && (o.train.steps || !o.train.resume.empty() || !o.train.checkpoint.empty() ||
                               !o.train.log.empty() || o.train.evalEvery))
    return fail("--steps, --resume, --checkpoint, --log and --eval-every need --data FILE");
  try {
    return run(o);
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}

} // namespace octet::rt
