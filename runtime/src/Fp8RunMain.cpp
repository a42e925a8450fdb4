//===- Fp8RunMain.cpp - fp8-run: execute a plan on the CPU -----------------===//
#include "octet/runtime/Fp8RunMain.h"

#include "octet/runtime/Collective.h"
#include "octet/runtime/Executor.h"
#include "octet/runtime/Npz.h"
#include "octet/runtime/Train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <regex>
#include <thread>

#ifndef OCTET_VERSION
#define OCTET_VERSION "0.0.0"
#endif

namespace octet::rt {
namespace {

const char *kUsage =
    "usage: fp8-run MODEL.plan [options]\n"
    "Runs a plan written by `fp8-opt --emit=plan` on the GPU (CUDA backend) or the CPU reference backend.\n\n"
    "  --device cuda|cpu|auto  where to run (default auto: the GPU when one is present, else the CPU)\n"
    "  --inputs FILE.npz       graph inputs by name (NumPy archive)\n"
    "  --outputs FILE.npz      write the graph outputs (and --dump values) here\n"
    "  --dump REGEX            also write every value whose name matches REGEX\n"
    "  --iterations N          run N times, carrying the FP8 state between runs (default 1)\n"
    "  --load-state FILE.npz   start from this FP8 state (amax histories, scales)\n"
    "  --save-state FILE.npz   write the FP8 state after the last run\n"
    "  --dump-gradients F.npz  training plans: run one step (with --data: the last step), write d(loss)/d(param)\n"
    "                          by initializer name\n"
    "  --info                  describe the plan and exit\n"
    "  --init-params normal:STD[:SEED]  replace every weight matrix (parameters and trained weights of rank >= 2)\n"
    "                          by N(0, STD) draws before running (graphs compiled with fp8-opt --absent-weights)\n"
    "  --check-against-cpu     run every op on the device from the CPU reference's inputs and compare (FP8,\n"
    "                          integers bit for bit; floats 1e-3 GEMMs, 1e-5 otherwise); exit 1 on a mismatch\n"
    "  --benchmark N [--warmup W]  time N runs after W (default 3) warm-up runs on synthetic inputs (token ids\n"
    "                          in [0, 256), floats N(0, 1)); prints one JSON line: median ms, tokens/s, device bytes\n"
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
    "\nData parallelism (plans from fp8-opt --data-parallel):\n"
    "  --nproc-per-node N      start N ranks on this host (Gloo on --device cpu, NCCL on cuda); each reads its\n"
    "                          own rows of the combined batch and rank 0 logs and checkpoints. torchrun works\n"
    "                          too: `torchrun --nproc-per-node N fp8-run ...` (RANK, WORLD_SIZE, MASTER_ADDR, ...)\n"
    "  --comm-timeout S        a collective waiting S seconds for a peer fails the rank (default 50)\n"
    "  --gpu-available         exit 0 when the CUDA backend can run here\n"
    "  --version, --help\n";

struct Options {
  std::string plan, inputs, outputs, dump, loadState, saveState, dumpGradients, device = "auto", initParams;
  int64_t iterations = 1, benchmark = 0, warmup = 3, nproc = 0, commTimeout = 50;
  std::vector<std::string> selfArgs; // this command line without the launcher's flags (to start ranks)
  bool info = false, reportMemory = false, checkCpu = false;
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

/// Inputs for --benchmark and --check-against-cpu without --inputs: token
/// ids uniform in [0, 256), floats N(0, 1), from a fixed seed.
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
    for (int64_t i = 0; i < t->numel(); ++i) {
      switch (v.dtype) {
      case DType::I64: t->data<int64_t>()[i] = int64_t(next() % 256); break;
      case DType::I32: t->data<int32_t>()[i] = int32_t(next() % 256); break;
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
  return r;
}

std::map<std::string, TensorPtr> readInputs(const Plan &p, const std::string &path) {
  std::map<std::string, TensorPtr> inputs;
  for (auto &[name, t] : readNpz(path)) {
    int id = p.findValue(name);
    // FP8 inputs arrive as uint8 codes.
    if (id >= 0 && t->dtype == DType::U8 && isFp8(p.values[size_t(id)].dtype))
      t->dtype = p.values[size_t(id)].dtype;
    inputs[name] = t;
  }
  return inputs;
}

/// --init-params normal:STD[:SEED]: N(0, STD) weight matrices, one thread per tensor.
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
  std::vector<std::pair<std::string, TensorPtr>> todo;
  for (auto &[id, kind] : p.constantKinds) {
    const PlanValue &v = p.values[size_t(id)];
    auto role = p.roles.find(id);
    bool weight = kind == ConstantKind::Param ||
                  (kind == ConstantKind::State && role != p.roles.end() &&
                   (role->second == "weight" || role->second == "master_weight"));
    if (weight && v.shape.size() >= 2 && (v.dtype == DType::F32 || v.dtype == DType::F16 || v.dtype == DType::BF16))
      todo.emplace_back(v.name, std::make_shared<Tensor>(v.dtype, v.shape));
  }
  std::vector<std::thread> threads;
  for (size_t k = 0; k < todo.size(); ++k)
    threads.emplace_back([&, k] {
      Tensor &t = *todo[k].second;
      uint64_t s = (seed + 1) * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>()(todo[k].first);
      auto next = [&s] {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
      };
      Tensor f(DType::F32, t.shape);
      for (int64_t i = 0; i < f.numel(); i += 2) {
        double u1 = (double(next() >> 11) + 0.5) / 9007199254740992.0, u2 = double(next() >> 11) / 9007199254740992.0;
        double r = std::sqrt(-2 * std::log(u1)) * stdev;
        f.data<float>()[i] = float(r * std::cos(6.283185307179586 * u2));
        if (i + 1 < f.numel())
          f.data<float>()[i + 1] = float(r * std::sin(6.283185307179586 * u2));
      }
      t = t.dtype == DType::F32 ? std::move(f) : f.castTo(t.dtype);
    });
  for (std::thread &th : threads)
    th.join();
  for (auto &[name, t] : todo)
    ex.setState(name, t);
}

const DeviceBackend *backendFor(const Runner &ex) { return findDeviceBackend(ex.device()); }

/// Whether a launcher (torchrun, --nproc-per-node) started this process as one of its ranks.
bool launchedAsRank() {
  const char *ws = std::getenv("WORLD_SIZE");
  return ws && *ws;
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

int benchmark(Runner &ex, const Options &o) {
  auto inputs = o.inputs.empty() ? syntheticInputs(ex.plan(), o.train.seed) : readInputs(ex.plan(), o.inputs);
  int64_t tokens = 0;
  for (int id : ex.plan().inputs) {
    const PlanValue &v = ex.plan().values[size_t(id)];
    if ((v.dtype == DType::I64 || v.dtype == DType::I32) && v.shape.size() == 2) {
      tokens = v.shape[0] * v.shape[1];
      break;
    }
  }
  for (int64_t i = 0; i < o.warmup; ++i)
    ex.run(inputs);
  std::vector<double> ms;
  for (int64_t i = 0; i < o.benchmark; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    ex.run(inputs); // returns when the step has finished on the device
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double med = sorted[sorted.size() / 2];
  const DeviceBackend *b = backendFor(ex);
  std::cout << "{\"plan\": \"" << o.plan << "\", \"device\": \"" << ex.device() << "\", \"device_name\": \""
            << (b && b->describe ? b->describe() : std::string("host CPU")) << "\", \"recipe\": \""
            << (ex.plan().recipe.empty() ? "none" : ex.plan().recipe) << "\", \"runs\": " << o.benchmark
            << ", \"warmup\": " << o.warmup << ", \"median_ms\": " << med << ", \"min_ms\": " << sorted.front()
            << ", \"tokens_per_run\": " << tokens << ", \"tokens_per_s\": " << (tokens ? double(tokens) / med * 1e3 : 0)
            << ", \"device_bytes\": " << (b && b->bytes ? b->bytes(ex) : 0) << ", \"rank\": "
            << (communicator() ? communicator()->rank() : 0) << ", \"world_size\": " << worldSize() << "}\n";
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
  Plan plan = loadPlan(o.plan);
  auto dp = plan.training.find("data_parallel");
  bool dataParallel = dp != plan.training.end() && dp->second == "true";
  bool isRank = launchedAsRank();
  const CollectiveSupport *cs = collectiveSupport();
  if (!isRank && dataParallel && cs) { // an Accelerate config's num_processes, written by fp8-opt
    auto np = plan.training.find("num_processes");
    int n = np == plan.training.end() ? 0 : std::atoi(np->second.c_str());
    if (n > 1) {
      std::cerr << "fp8-run: the plan asks for " << n << " processes (num_processes); starting them "
                << "(--nproc-per-node 1 runs one)\n";
      plan = Plan(); // each rank loads its own
      return cs->launch(n, o.selfArgs);
    }
  }
  std::string device = o.device;
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
      {"--loss-png", &o.train.lossPng}, {"--labels", &o.train.labels}, {"--device", &o.device},
      {"--init-params", &o.initParams}};
  std::map<std::string, int64_t *> ints = {
      {"--iterations", &o.iterations}, {"--steps", &o.train.steps}, {"--batch", &o.train.batch},
      {"--seq", &o.train.seq}, {"--eval-every", &o.train.evalEvery}, {"--eval-batches", &o.train.evalBatches},
      {"--checkpoint-every", &o.train.checkpointEvery}, {"--log-every", &o.train.logEvery}, {"--seed", &seed},
      {"--benchmark", &o.benchmark}, {"--warmup", &o.warmup}, {"--nproc-per-node", &o.nproc},
      {"--comm-timeout", &o.commTimeout}};
  auto fail = [](const std::string &msg) {
    std::cerr << "fp8-run: error: " << msg << "\n";
    return 1;
  };
  o.selfArgs.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) { // the ranks' command line: the launcher's flag stays with it
    std::string a = argv[i];
    if (a == "--nproc-per-node")
      ++i; // and its value
    else if (a.rfind("--nproc-per-node=", 0) != 0)
      o.selfArgs.push_back(a);
  }
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
    } else if (flag == "--gpu-available") { // exit 0 when the CUDA backend can run here (for test configs)
      const DeviceBackend *b = findDeviceBackend("cuda");
      std::string why = "this build has no CUDA backend";
      bool ok = b && b->available(&why);
      std::cout << (ok ? "cuda: available" : "cuda: " + why) << "\n";
      return ok ? 0 : 1;
    } else if (flag == "--check-against-cpu") {
      o.checkCpu = true;
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
        bool zeroOk = flag == "--seed" || flag == "--batch" || flag == "--seq" || flag == "--warmup";
        if (v.empty() || *end || n < (zeroOk ? 0 : 1))
          return fail(flag + ": '" + v + "' is not a " + (zeroOk ? "non-negative" : "positive") +
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
  if (o.nproc && !launchedAsRank()) {
    const CollectiveSupport *cs = collectiveSupport();
    if (!cs)
      return fail("--nproc-per-node: this program was built without Octet's collectives; run fp8-run");
    try {
      return cs->launch(int(o.nproc), o.selfArgs);
    } catch (const std::exception &e) {
      return fail(e.what());
    }
  }
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
    return fail("--device: '" + o.device + "' is not a device; use cuda, cpu or auto");
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
