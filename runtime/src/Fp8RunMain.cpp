//===- Fp8RunMain.cpp - fp8-run: execute a plan on the CPU -----------------===//
#include "octet/runtime/Fp8RunMain.h"

#include "octet/runtime/Collective.h"
#include "octet/runtime/Executor.h"
#include "octet/runtime/Npz.h"
#include "octet/runtime/NumericsCheck.h"
#include "octet/runtime/OneLine.h"
#include "octet/runtime/Train.h"
#include "octet/runtime/Weights.h"

#include "Json.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <unistd.h>

#ifndef OCTET_VERSION
#define OCTET_VERSION "0.0.0"
#endif

namespace octet::rt {
namespace {

struct Options {
  std::string plan, inputs, outputs, dump, loadState, saveState, dumpGradients, device = "auto", initParams;
  std::string retiredLossPng; // --loss-png, refused with a pointer to python -m octet.plot
  int64_t iterations = 1, benchmark = 0, warmup = 3, nproc = 0, commTimeout = 50;
  int64_t nnodes = 0, nodeRank = -1, masterPort = 0; // fp8-run's launcher across machines
  std::string masterAddr;
  std::vector<std::string> selfArgs; // this command line without the launcher's flags (to start ranks)
  bool info = false, reportMemory = false, checkCpu = false, numericsCheck = false;
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
    size_t b = size_t(constantBytes(p, id));
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
  if (auto l = p.training.find("labels"); l != p.training.end()) {
    auto why = p.training.find("labels_reason");
    std::cout << "labels (--labels auto): " << l->second << " ("
              << (why == p.training.end() ? std::string("no reason recorded") : why->second) << ")\n";
  }
  for (auto &[type, n] : ops)
    std::cout << "  " << type << " x" << n << "\n";
}

/// Inputs for --benchmark and --check-against-cpu without --inputs: token
/// ids uniform in [0, 256) or below what they index when that is less (indexBound: a vocabulary of
/// 250), floats N(0, 1), from a fixed seed.
std::map<std::string, TensorPtr> syntheticInputs(const Plan &p, uint64_t seed) {
  std::map<std::string, TensorPtr> r;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&s] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  for (int id : p.inputs) {
    const PlanValue &v = p.values[size_t(id)];
    if (!v.hasShape)
      throw Error("input '" + v.name + "' has no static shape; pass --inputs");
    auto t = std::make_shared<Tensor>(v.dtype, v.shape);
    uint64_t ids = 256;
    if (v.dtype == DType::I64 || v.dtype == DType::I32) {
      int64_t bound = indexBound(p, id);
      if (bound > 0 && bound < 256)
        ids = uint64_t(bound);
    }
    for (int64_t i = 0; i < t->numel(); ++i) {
      switch (v.dtype) {
      case DType::I64: t->data<int64_t>()[i] = int64_t(next() % ids); break;
      case DType::I32: t->data<int32_t>()[i] = int32_t(next() % ids); break;
      case DType::Bool: t->data<uint8_t>()[i] = uint8_t(next() & 1); break;
      case DType::F32: {
        double u1 = (double(next() >> 11) + 0.5) / 9007199254740992.0, u2 = double(next() >> 11) / 9007199254740992.0;
        t->data<float>()[i] = float(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
        break;
      }
      default: throw Error("input '" + v.name + "' (" + dtypeName(v.dtype) + "): no synthetic data; pass --inputs");
      }
    }
    r[v.name] = t;
  }
  setFirstMicroBatch(p, r, true);
  return r;
}

std::map<std::string, TensorPtr> readInputs(const Plan &p, const std::string &path) {
  std::map<std::string, TensorPtr> inputs;
  for (auto &[name, t] : readNpz(path)) {
    int id = p.findValue(name);
    if (id >= 0)
      adoptFp8Codes(*t, p.values[size_t(id)].dtype);
    inputs[name] = t;
  }
  if (!inputs.count(kFirstMicroBatchInput))
    setFirstMicroBatch(p, inputs, true);
  return inputs;
}

/// --init-params normal:STD[:SEED]: N(0, STD) weight matrices, drawn where they live (NormalInit.h:
/// the stream of a tensor is keyed by the seed and its name; a rank's shard draws its part).
void initParams(Runner &ex, const std::string &spec) {
  double stdev = 0;
  uint64_t seed = 0;
  {
    char *end = nullptr;
    if (spec.rfind("normal:", 0) != 0)
      throw Error("--init-params: '" + spec + "' is not normal:STD[:SEED]");
    stdev = std::strtod(spec.c_str() + 7, &end);
    if (end == spec.c_str() + 7 || !(stdev > 0) || (*end && *end != ':'))
      throw Error("--init-params: '" + spec + "' is not normal:STD[:SEED] with STD > 0");
    if (*end == ':')
      seed = std::strtoull(end + 1, nullptr, 10);
  }
  const Plan &p = ex.plan();
  int64_t rank = communicator() ? communicator()->rank() : 0;
  for (auto &[id, kind] : p.constantKinds) {
    const PlanValue &v = p.values[size_t(id)];
    auto role = p.roles.find(id);
    bool weight = kind == ConstantKind::Param ||
                  (kind == ConstantKind::State && role != p.roles.end() && isWeightRole(role->second));
    auto sh = p.sharded.find(id);
    const Shape &shape = sh != p.sharded.end() ? sh->second.whole : v.shape;
    if (!weight || shape.size() < 2 || (v.dtype != DType::F32 && v.dtype != DType::F16 && v.dtype != DType::BF16))
      continue;
    // The key fp8-run has always used (std::hash of the name is libstdc++'s, fixed across builds).
    uint64_t key = (seed + 1) * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>()(v.name);
    int64_t first = sh != p.sharded.end() ? rank * numElements(v.shape) : 0;
    ex.drawNormal(v.name, key, stdev, numElements(shape), first);
  }
}

const DeviceBackend *backendFor(const Runner &ex) { return findDeviceBackend(ex.device()); }

/// Whether a launcher (torchrun, --nproc-per-node, srun, mpirun) started this process as one of its ranks.
bool launchedAsRank() { return !rankLauncher().empty(); }

/// The launcher's flags as what it starts: `nproc` ranks here.
LaunchSpec launchSpec(const Options &o, int nproc) {
  LaunchSpec s;
  s.nproc = nproc;
  s.nnodes = int(std::max<int64_t>(o.nnodes, 1));
  s.nodeRank = int(std::max<int64_t>(o.nodeRank, 0));
  s.masterAddr = o.masterAddr;
  s.masterPort = int(o.masterPort);
  return s;
}

/// --dump-gradients: d(loss)/d(param) of the last run by initializer name (data-parallel plans: the
/// average over ranks, as the optimizer saw it).
void writeGradients(const Runner &ex, const std::string &path) {
  NamedTensors grads;
  for (auto &[param, id] : ex.plan().gradients) {
    grads.emplace_back(param, ex.value(id));
    if (!grads.back().second)
      throw Error("--dump-gradients: the gradient of '" + param + "' is not kept by the " + ex.device() +
                  " backend; use --device cpu");
  }
  writeNpz(path, grads);
}

/// When fp8RunMain started: --benchmark reports the seconds to its first step (loading the plan,
/// placing and drawing the weights, compiling the launches).
std::chrono::steady_clock::time_point g_started;

/// The process's peak resident host memory (VmHWM), in bytes; 0 where /proc does not say.
uint64_t peakHostBytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      return uint64_t(std::strtoull(line.c_str() + 6, nullptr, 10)) * 1024;
  return 0;
}

int benchmark(Runner &ex, const Options &o) {
  double toFirstStep = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_started).count();
  auto inputs = o.inputs.empty() ? syntheticInputs(ex.plan(), o.train.seed) : readInputs(ex.plan(), o.inputs);
  int64_t tokens = 0;
  for (int id : ex.plan().inputs) {
    const PlanValue &v = ex.plan().values[size_t(id)];
    if ((v.dtype == DType::I64 || v.dtype == DType::I32) && v.shape.size() == 2) {
      tokens = v.shape[0] * v.shape[1];
      break;
    }
  }
  tokens *= ex.plan().gradAccumSteps; // a run is an optimizer step: every micro-batch of it
  // What fp8-opt --memory-budget predicts: every parameter and state tensor at its full size (the
  // graph's own constants left out: a splat an op copies is filled, never placed), and the memory
  // plan's arena.
  int64_t predicted = ex.plan().arenaBytes;
  for (auto &[id, kind] : ex.plan().constantKinds) {
    if (kind == ConstantKind::Const)
      continue;
    const PlanValue &v = ex.plan().values[size_t(id)];
    predicted += numElements(v.shape) * int64_t(dtypeSize(v.dtype));
  }
  for (int64_t i = 0; i < o.warmup; ++i)
    runOptimizerStep(ex, inputs);
  std::vector<double> ms;
  for (int64_t i = 0; i < o.benchmark; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    runOptimizerStep(ex, inputs); // returns when the step has finished on the device
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double med = sorted[sorted.size() / 2];
  const DeviceBackend *b = backendFor(ex);
  JsonOut j = {{"plan", o.plan},
               {"device", ex.device()},
               {"device_name", b && b->describe ? b->describe() : std::string("host CPU")},
               {"recipe", ex.plan().recipe.empty() ? "none" : ex.plan().recipe},
               {"runs", o.benchmark},
               {"warmup", o.warmup},
               {"median_ms", med},
               {"min_ms", sorted.front()},
               {"tokens_per_run", tokens},
               {"grad_accum_steps", ex.plan().gradAccumSteps},
               {"tokens_per_s", tokens ? double(tokens) / med * 1e3 : 0.0},
               {"device_bytes", b && b->bytes ? b->bytes(ex) : 0},
               {"predicted_device_bytes", predicted},
               {"seconds_to_first_step", toFirstStep},
               {"host_peak_bytes", peakHostBytes()},
               {"rank", communicator() ? communicator()->rank() : 0},
               {"world_size", worldSize()}};
  if (b && b->memory) {
    JsonOut &m = j["device_memory"] = JsonOut::object();
    for (auto &[what, n] : b->memory(ex))
      m[what] = n;
  }
  std::cout << dumpJson(j) << "\n";
  return 0;
}

int run(const Options &o) {
  if (o.checkCpu) {
    const DeviceBackend *b = findDeviceBackend(o.device == "auto" ? "cuda" : o.device);
    if (!b || !b->check)
      throw Error("--check-against-cpu: this build has no device backend (it was built without CUDA) to compare; "
                  "rebuild with nvcc, or use --device cpu to train on the CPU");
    std::string why;
    if (!b->available(&why))
      throw Error("--check-against-cpu: " + why);
    Plan p = loadPlan(o.plan);
    auto inputs = o.inputs.empty() ? syntheticInputs(p, o.train.seed) : readInputs(p, o.inputs);
    int bad = b->check(std::move(p), inputs, std::cout);
    std::cout << (bad ? std::to_string(bad) + " op(s) differ from the CPU reference\n"
                      : "every op matches the CPU reference\n");
    return bad ? 1 : 0;
  }
  Plan plan = loadPlan(o.plan, {kDeferBytes}); // weights and state: streamed to the device that runs them
  auto dp = plan.training.find("data_parallel");
  bool dataParallel = dp != plan.training.end() && dp->second == "true";
  bool isRank = launchedAsRank();
  const CollectiveSupport *cs = collectiveSupport();
  bool inspectOnly = o.info || (o.reportMemory && o.train.data.empty());
  if (!isRank && cs && !o.nproc && !inspectOnly) { // the processes of the plan's Accelerate config, or --nnodes alone
    auto training = [&](const char *key) {
      auto it = plan.training.find(key);
      return dataParallel && it != plan.training.end() ? it->second : std::string();
    };
    int n = std::atoi(training("num_processes").c_str()), machines = std::atoi(training("num_machines").c_str());
    LaunchSpec spec = launchSpec(o, 1);
    if (!o.nnodes && machines > 1)
      spec.nnodes = machines;
    if (spec.masterAddr.empty())
      spec.masterAddr = training("main_process_ip");
    if (!spec.masterPort)
      spec.masterPort = std::atoi(training("main_process_port").c_str());
    if (n > 1 || spec.nnodes > 1 || o.nodeRank > 0) { // a node rank past the nodes: launchRanks says so
      if (n % spec.nnodes)
        throw Error(o.plan + ": the plan asks for " + std::to_string(n) + " processes (num_processes), which " +
                    std::to_string(spec.nnodes) + " machines cannot share equally; give --nproc-per-node");
      if (spec.nnodes > 1 && o.nodeRank < 0)
        throw Error(o.plan + ": the plan runs on " + std::to_string(spec.nnodes) + " machines (num_machines); start " +
                    "fp8-run on each with --node-rank: 0 on " +
                    (spec.masterAddr.empty() ? std::string("the one at --master-addr") : spec.masterAddr) + ", 1.." +
                    std::to_string(spec.nnodes - 1) + " on the others");
      spec.nproc = std::max(1, n / spec.nnodes);
      if (n > 1)
        std::cerr << "fp8-run: the plan asks for " << n << " processes (num_processes"
                  << (spec.nnodes > 1 ? ", " + std::to_string(spec.nnodes) + " machines" : std::string()) << "); starting "
                  << (spec.nnodes > 1 ? std::to_string(spec.nproc) + " here" : std::string("them"))
                  << " (--nproc-per-node 1 runs one)\n";
      plan = Plan(); // each rank loads its own
      return cs->launch(spec, o.selfArgs);
    }
    if (o.nnodes || o.nodeRank >= 0 || !o.masterAddr.empty() || o.masterPort)
      throw Error("--nnodes, --node-rank, --master-addr and --master-port place ranks, and this run starts one "
                  "process; add --nproc-per-node N");
  }
  std::string device = o.device;
  if (o.numericsCheck) {
    if (device != "auto" && device != "cpu")
      throw Error("--numerics-check runs on the CPU reference (it reads every value of the step); drop --device " +
                  device);
    if (!o.train.data.empty() || o.benchmark || isRank)
      throw Error("--numerics-check runs one step of its own; drop --data, --benchmark and the launcher");
    device = "cpu";
  }
  if (isRank) {
    if (!cs)
      throw Error("WORLD_SIZE is set, but this program was built without Octet's collectives; run fp8-run");
    if (device == "auto") {
      const DeviceBackend *b = findDeviceBackend("cuda");
      device = b && b->available(nullptr) ? "cuda" : "cpu";
    }
    std::shared_ptr<Communicator> comm = cs->connect(device, std::chrono::milliseconds(o.commTimeout * 1000));
    if (comm && comm->size() > 1 && !dataParallel)
      throw Error(o.plan + ": this plan trains one process (its gradients are not averaged across ranks); "
                           "compile it with fp8-opt --data-parallel to run " + std::to_string(comm->size()) +
                  " ranks");
    setCommunicator(comm);
    if (comm)
      selectShards(plan, comm->rank()); // MS-AMP O3's sharded masters: this rank's part
  }
  std::unique_ptr<Runner> runner = makeRunner(std::move(plan), device);
  Runner &ex = *runner;
  if (!o.initParams.empty())
    initParams(ex, o.initParams);
  if (o.info) {
    printInfo(ex.plan());
    return 0;
  }
  if (o.reportMemory) {
    printMemoryReport(ex.plan(), std::cout);
    if (o.train.data.empty())
      return 0;
  }
  if (!o.train.saveWeights.empty())
    if (std::string why = weightsUnavailable(ex.plan()); !why.empty())
      throw Error("--save-weights: " + why);
  // A sharded optimizer's shapes fix the number of ranks (fp8-opt --shard-optimizer N).
  if (auto sh = ex.plan().training.find("shard_world_size"); sh != ex.plan().training.end()) {
    int n = std::atoi(sh->second.c_str());
    const Plan &p = ex.plan();
    bool params = std::any_of(p.roles.begin(), p.roles.end(), [](auto &r) { return r.second == "weight_shard"; });
    std::string what = params ? "parameters" : "optimizer", flag = params ? "--shard-parameters" : "--shard-optimizer";
    if (n != worldSize())
      throw Error(o.plan + ": the plan shards its " + what + " across " + sh->second + " ranks (fp8-opt " + flag +
                  ") and this run has " + std::to_string(worldSize()) + "; run it with --nproc-per-node " +
                  sh->second + " (or compile it " +
                  (worldSize() > 1 ? "with " + flag + " " + std::to_string(worldSize()) : "without " + flag) + ")");
  }
  if (o.benchmark)
    return benchmark(ex, o);
  if (!o.dumpGradients.empty() && ex.plan().gradients.empty()) // before running: fail fast
    throw Error("--dump-gradients: the plan has no gradients; compile it with fp8-opt --train (without "
                "--keep-gradients=false)");
  if (!o.train.data.empty()) { // --dump-gradients: those of the last step
    int rc = trainMain(ex, o.train);
    if (rc == 0 && !o.dumpGradients.empty() && (!communicator() || communicator()->rank() == 0))
      writeGradients(ex, o.dumpGradients);
    return rc;
  }
  std::map<std::string, TensorPtr> inputs;
  if (!o.inputs.empty())
    inputs = readInputs(ex.plan(), o.inputs);
  if (!o.loadState.empty()) // one tensor at a time
    forEachNpzEntry(o.loadState, [&](const std::string &name, TensorPtr t) {
      if (name == "octet.meta") // a training checkpoint's step and data position: the state is the rest
        return;
      int id = ex.plan().findValue(name);
      if (id >= 0)
        adoptFp8Codes(*t, ex.plan().values[size_t(id)].dtype);
      ex.setState(name, t);
    });
  if (o.numericsCheck) {
    if (inputs.empty())
      inputs = syntheticInputs(ex.plan(), o.train.seed);
    if (o.loadState.empty())
      ex.run(inputs); // without a state given, a first step: delayed scaling's scales from real amaxes
    ex.run(inputs, false); // the step measured
    return printNumerics(ex.plan(), gemmNumerics(ex), std::cout);
  }
  std::regex dumpRe;
  try {
    if (!o.dump.empty())
      dumpRe = std::regex(o.dump);
  } catch (const std::regex_error &e) {
    throw Error("--dump: '" + o.dump + "' is not a valid regular expression");
  }
  for (int64_t i = 0; i < o.iterations; ++i)
    runOptimizerStep(ex, inputs);
  if (communicator() && communicator()->rank() != 0)
    return 0; // the ranks computed the same results: rank 0 writes them
  NamedTensors outs;
  for (int id : ex.plan().outputs) {
    const std::string &name = ex.plan().values[size_t(id)].name;
    outs.emplace_back(name, ex.value(id));
    if (!outs.back().second)
      throw Error("output '" + name + "' was not computed");
    if (o.outputs.empty())
      std::cout << name << ": " << describe(*ex.value(id)) << "\n";
  }
  if (!o.dump.empty())
    for (size_t id = 0; id < ex.plan().values.size(); ++id) {
      const std::string &name = ex.plan().values[id].name;
      TensorPtr t = ex.value(int(id));
      bool isOutput = std::find(ex.plan().outputs.begin(), ex.plan().outputs.end(), int(id)) != ex.plan().outputs.end();
      if (!t && !isOutput && std::regex_search(name, dumpRe) && ex.device() != "cpu" && !ex.plan().values[id].isSequence)
        throw Error("--dump: '" + name + "' is not kept by the " + ex.device() +
                    " backend (its memory is reused); use --device cpu");
      if (t && !isOutput && std::regex_search(name, dumpRe))
        outs.emplace_back(name, t);
    }
  if (!o.outputs.empty())
    writeNpz(o.outputs, outs);
  if (!o.dumpGradients.empty())
    writeGradients(ex, o.dumpGradients);
  if (!o.saveState.empty()) { // each tensor taken off the runner as the writer reaches it
    std::vector<TensorSource> st;
    const Plan &p = ex.plan();
    for (auto &[id, kind] : p.constantKinds)
      if (kind == ConstantKind::State) {
        const PlanValue &v = p.values[size_t(id)];
        st.push_back({v.name, v.dtype, v.shape, [&ex, name = v.name] { return ex.stateTensor(name); }});
      }
    std::sort(st.begin(), st.end(), [](auto &a, auto &b) { return a.name < b.name; });
    writeNpzStreamed(o.saveState, st);
  }
  return 0;
}

/// fp8-run's command line, through CLI11: `--flag value`, `--flag=value`, `--no-flag` for switches,
/// and a one-line error for anything else.
void addOptions(CLI::App &app, Options &o, int64_t &seed, bool &gpuAvailable) {
  auto atLeast = [](int64_t lo) {
    return CLI::Validator(
        [lo](std::string &v) -> std::string {
          char *end = nullptr;
          errno = 0;
          long long n = std::strtoll(v.c_str(), &end, 10);
          if (v.empty() || *end || errno || n < lo)
            return "'" + v + "' is not a " + (lo ? "positive" : "non-negative") + " integer";
          return "";
        },
        "");
  };
  auto path = [&](const char *flag, std::string &dst, const char *what, const char *group) {
    app.add_option(flag, dst, what)->group(group)->type_name("FILE");
  };
  auto count = [&](const char *flag, int64_t &dst, int64_t lo, const char *what, const char *group) {
    app.add_option(flag, dst, what)->group(group)->check(atLeast(lo))->type_name(lo ? "N" : "N>=0");
  };
  const char *run = "Running", *train = "Training (plans from fp8-opt --train)",
             *dp = "Data parallelism (plans from fp8-opt --data-parallel)";
  app.add_option("plan", o.plan, "the plan fp8-opt --emit=plan wrote")->type_name("MODEL.plan");
  app.add_option("--device", o.device, "where to run: cuda, cpu or auto (the GPU when one is present)")
      ->group(run)->type_name("DEVICE");
  path("--inputs", o.inputs, "graph inputs by name (NumPy archive)", run);
  path("--outputs", o.outputs, "write the graph outputs (and --dump values) here (.npz)", run);
  app.add_option("--dump", o.dump, "also write every value whose name matches REGEX")->group(run)->type_name("REGEX");
  count("--iterations", o.iterations, 1, "run N times, carrying the FP8 state between runs (default 1)", run);
  path("--load-state", o.loadState, "start from this state (FP8 amax histories and scales, or a training checkpoint; .npz)", run);
  path("--save-state", o.saveState, "write the FP8 state after the last run (.npz)", run);
  path("--dump-gradients", o.dumpGradients,
       "training plans: run one step (with --data: the last), write d(loss)/d(param) by initializer name", run);
  app.add_flag("--info", o.info, "describe the plan and exit")->group(run);
  app.add_option("--init-params", o.initParams,
                 "replace every weight matrix by N(0, STD) draws before running (plans of fp8-opt --absent-weights)")
      ->group(run)->type_name("normal:STD[:SEED]");
  app.add_flag("--numerics-check", o.numericsCheck,
               "one step on the CPU reference from --load-state's state (else after a first step): each FP8 "
               "GEMM's SQNR against the same GEMM on its "
               "operands before their casts, and the share of each operand that underflows or saturates, by "
               "layer; names the worst (inputs: --inputs, else synthetic)")->group(run);
  app.add_flag("--check-against-cpu", o.checkCpu,
               "run every op on the device from the CPU reference's inputs and compare (FP8 and integers bit "
               "for bit; floats 1e-3 GEMMs, 1e-5 otherwise); exit 1 on a mismatch")->group(run);
  count("--benchmark", o.benchmark, 1,
        "time N runs on synthetic inputs (token ids in [0, 256) or the vocabulary, floats N(0, 1)); prints one JSON line: median "
        "ms, tokens/s, device bytes", run);
  count("--warmup", o.warmup, 0, "warm-up runs before --benchmark's (default 3)", run);
  app.add_flag("--gpu-available", gpuAvailable, "exit 0 when the CUDA backend can run here")->group(run);

  path("--data", o.train.data,
       "token ids: nanoGPT .bin (little-endian, --data-dtype) or 1-D .npy; without --eval-data its last 10% is "
       "held out for eval", train);
  app.add_option("--data-dtype", o.train.dataDtype, "the .bin's token type: uint16 (default) or uint32")
      ->group(train)->type_name("TYPE");
  count("--steps", o.train.steps, 1, "train N steps (the plan's inputs fix batch and sequence)", train);
  count("--batch", o.train.batch, 0, "check the plan's batch against this", train);
  count("--seq", o.train.seq, 0, "check the plan's sequence length against this", train);
  app.add_option("--labels", o.train.labels,
                 "auto (default: as the plan says, from how its graph reads the labels), shifted (the next tokens) "
                 "or same (the tokens: models that shift their labels, HF style)")
      ->group(train)->type_name("auto|shifted|same");
  count("--seed", seed, 0, "batch sampling seed (default 1234)", train);
  path("--eval-plan", o.train.evalPlan, "a forward plan sharing the parameters, for the eval loss", train);
  count("--eval-every", o.train.evalEvery, 1, "eval loss every N steps", train);
  path("--eval-data", o.train.evalData, "eval tokens (default: the last 10% of --data)", train);
  count("--eval-batches", o.train.evalBatches, 1, "batches per eval (default 4)", train);
  path("--log", o.train.log, "per-step loss, lr, grad norm, tokens/s (.jsonl adds sampled FP8 amax and scales, and "
       "what delayed scaling clipped since the last sample; or .csv)", train);
  count("--log-every", o.train.logEvery, 1, "progress and FP8 samples every N steps (default 10)", train);
  count("--numerics-every", o.train.numericsEvery, 1,
        "every N steps the JSONL log carries --numerics-check's per-layer figures of that step (CPU only)", train);
  path("--checkpoint", o.train.checkpoint, "atomic checkpoints here (and one at the end)", train);
  path("--save-weights", o.train.saveWeights,
       "the trained weights as .safetensors under their PyTorch names, float32, at each checkpoint and at the end "
       "(model.load_state_dict(safetensors.torch.load_file(F)))",
       train);
  count("--checkpoint-every", o.train.checkpointEvery, 1, "a checkpoint every N steps", train);
  app.add_option("--resume", o.train.resume,
                 "continue from a checkpoint (bit-exact on the CPU); auto: from --checkpoint's file where one "
                 "is there, else from step 1 (for torchrun --max-restarts)")
      ->group(train)->type_name("FILE|auto");
  // Retired: its own PNG drawing had no axes' numbers or legend; python -m octet.plot draws the log.
  app.add_option("--loss-png", o.retiredLossPng, "")->group("");
  app.add_flag("--report-memory", o.reportMemory,
               "bytes per parameter: weights, gradients, optimizer state, FP8 state")->group(train);
  app.add_flag("--quiet,!--no-quiet", o.train.quiet, "no progress output")->group(train);

  count("--nproc-per-node", o.nproc, 1,
        "start N ranks here (Gloo on the CPU, NCCL on cuda); `torchrun --nproc-per-node N fp8-run ...` works too",
        dp);
  count("--comm-timeout", o.commTimeout, 1, "a collective waiting S seconds for a peer fails the rank (default 50)",
        dp);
  count("--rank0-timeout", o.train.rank0Timeout, 1,
        "the other ranks wait S seconds for rank 0's evaluation and checkpoint writes (default 1800)", dp);
  count("--nnodes", o.nnodes, 1,
        "machines in the job: run fp8-run with the same flags on each, with its own --node-rank (torchrun's static "
        "rendezvous)",
        dp);
  count("--node-rank", o.nodeRank, 0, "this machine's place among --nnodes, 0 on the one that serves the rendezvous",
        dp);
  app.add_option("--master-addr", o.masterAddr, "the host of node 0, where the ranks meet (default 127.0.0.1)")
      ->group(dp)->type_name("HOST");
  app.add_option("--master-port", o.masterPort, "its port (default: a free one on one machine, 29500 on several)")
      ->group(dp)->check(CLI::Range(int64_t(1), int64_t(65535)).description(""))->type_name("PORT");
}

/// Every file fp8-run will write can be written, and is none of the files it reads: checked
/// before any work, so a long run never fails at its first checkpoint or overwrites its plan.
/// `--resume F --checkpoint F` (continue in place) is the one overlap allowed.
std::string checkPaths(const Options &o) {
  namespace fs = std::filesystem;
  const std::vector<std::pair<const char *, const std::string *>> reads = {
      {"the plan", &o.plan},          {"--inputs", &o.inputs},       {"--load-state", &o.loadState},
      {"--data", &o.train.data},      {"--eval-data", &o.train.evalData}, {"--eval-plan", &o.train.evalPlan},
      {"--resume", &o.train.resume}};
  const std::vector<std::pair<const char *, const std::string *>> writes = {
      {"--outputs", &o.outputs},        {"--save-state", &o.saveState}, {"--dump-gradients", &o.dumpGradients},
      {"--log", &o.train.log},          {"--checkpoint", &o.train.checkpoint},
      {"--save-weights", &o.train.saveWeights}};
  auto same = [](const std::string &a, const std::string &b) {
    std::error_code ec;
    return fs::equivalent(a, b, ec) || fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
  };
  for (size_t i = 0; i < writes.size(); ++i) {
    auto [flag, path] = writes[i];
    if (path->empty())
      continue;
    std::error_code ec;
    fs::path dir = fs::path(*path).parent_path();
    if (!dir.empty() && !fs::is_directory(dir, ec))
      return std::string(flag) + " '" + *path + "': the directory '" + dir.string() + "' does not exist; create it first";
    if (fs::is_directory(*path, ec))
      return std::string(flag) + " '" + *path + "' is a directory; name a file";
    if (::access(dir.empty() ? "." : dir.c_str(), W_OK) != 0)
      return std::string(flag) + " '" + *path + "': the directory is not writable";
    for (auto [rflag, rpath] : reads)
      if (!rpath->empty() && same(*path, *rpath) && !(flag == std::string("--checkpoint") && rpath == &o.train.resume))
        return std::string(flag) + " '" + *path + "' is also " + rflag + " (a file fp8-run reads); write it elsewhere";
    for (size_t j = 0; j < i; ++j)
      if (!writes[j].second->empty() && same(*path, *writes[j].second))
        return std::string(flag) + " and " + writes[j].first + " both write '" + *path + "'; give them different files";
  }
  return "";
}

} // namespace

int fp8RunMain(int argc, char **argv) {
  g_started = std::chrono::steady_clock::now();
  Options o;
  int64_t seed = int64_t(o.train.seed);
  bool gpuAvailable = false;
  auto fail = [](const std::string &msg) {
    // One write: the ranks of a launcher share its stderr, and pieces of their lines would interleave.
    std::cerr << "fp8-run: error: " + oneLine(msg) + "\n";
    return 1;
  };
  CLI::App app("Runs a plan written by `fp8-opt --emit=plan` on the GPU (CUDA backend) or the CPU reference "
               "backend.",
               "fp8-run");
  app.set_version_flag("--version", std::string("Octet fp8-run ") + OCTET_VERSION);
  app.get_formatter()->column_width(34);
  addOptions(app, o, seed, gpuAvailable);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForVersion &e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError &e) {
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    return fail(msg + "; see --help");
  }
  if (gpuAvailable) { // for test configs
    const DeviceBackend *b = findDeviceBackend("cuda");
    std::string why = "this build has no CUDA backend";
    bool ok = b && b->available(&why);
    std::cout << (ok ? "cuda: available" : "cuda: " + why) << "\n";
    return ok ? 0 : 1;
  }
  if (!o.retiredLossPng.empty())
    return fail("--loss-png was retired: log with --log RUN.jsonl and draw it with python -m octet.plot "
                "RUN.jsonl [OTHER.jsonl] -o DIR (titled, axes, legend, runs compared)");
  if (o.train.resume == "auto") { // a restarted job continues where its checkpoint left it
    if (o.train.checkpoint.empty())
      return fail("--resume auto continues from --checkpoint's file; give --checkpoint FILE");
    std::error_code ec;
    bool there = std::filesystem::exists(o.train.checkpoint, ec);
    if (!there && !o.train.quiet && rankLauncher().empty())
      std::cerr << "--resume auto: no checkpoint at " << o.train.checkpoint << " yet; starting at step 1\n";
    o.train.resume = there ? o.train.checkpoint : "";
  }
  if (!o.plan.empty())
    if (std::string why = checkPaths(o); !why.empty())
      return fail(why);
  o.selfArgs.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) { // the ranks' command line: the launcher's flags stay with it
    std::string a = argv[i];
    bool launcherFlag = false;
    for (const char *f : {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port"}) {
      if (a == f)
        launcherFlag = true, ++i; // and its value
      else if (a.rfind(std::string(f) + "=", 0) == 0)
        launcherFlag = true;
    }
    if (!launcherFlag)
      o.selfArgs.push_back(a);
  }
  if (o.plan.empty())
    return fail("no plan file given; usage: fp8-run MODEL.plan [--inputs in.npz] [--outputs out.npz]");
  o.train.seed = uint64_t(seed);
  bool launcherFlags = o.nproc || o.nnodes || o.nodeRank >= 0 || !o.masterAddr.empty() || o.masterPort;
  if (launcherFlags && launchedAsRank())
    return fail("--nproc-per-node, --nnodes, --node-rank, --master-addr and --master-port start ranks; this process "
                "already is one (" + rankLauncher() + " started it): drop them, or run fp8-run outside the launcher");
  if (o.nnodes > 1 && o.nodeRank < 0)
    return fail("--nnodes " + std::to_string(o.nnodes) + " needs --node-rank: 0 on the machine at --master-addr, 1.." +
                std::to_string(o.nnodes - 1) + " on the others");
  if (o.nproc) { // without it, run() starts the plan's num_processes (over --nnodes), or one process
    const CollectiveSupport *cs = collectiveSupport();
    if (!cs)
      return fail("--nproc-per-node: this program was built without Octet's collectives; run fp8-run");
    try {
      return cs->launch(launchSpec(o, int(o.nproc)), o.selfArgs);
    } catch (const std::exception &e) {
      return fail(e.what());
    }
  }
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
    return fail("--device: '" + o.device + "' is not a device; use cuda, cpu or auto");
  if (!o.train.data.empty() && o.train.steps < 1)
    return fail("--data needs --steps N");
  if (o.train.data.empty() && (o.train.steps || !o.train.resume.empty() || !o.train.checkpoint.empty() ||
                               !o.train.log.empty() || o.train.evalEvery || !o.train.saveWeights.empty()))
    return fail("--steps, --resume, --checkpoint, --save-weights, --log and --eval-every need --data FILE");
  try {
    return run(o);
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}

} // namespace octet::rt
