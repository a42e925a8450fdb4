//===- Executor.cpp - Plan interpreter -------------------------------------===//
#include "octet/runtime/Executor.h"
#include "octet/runtime/NormalInit.h"

#include <algorithm>
#include <fstream>
#include <atomic>
#include <thread>
#include <mutex>

#include <dlfcn.h>
#include <unistd.h>

namespace octet::rt {

const Value &KernelContext::inputValue(size_t i) const {
  if (!hasInput(i))
    fail("input " + std::to_string(i) + " is missing");
  return *inputs_[i];
}

const Tensor &KernelContext::input(size_t i) const {
  const Value &v = inputValue(i);
  if (v.isSequence || !v.tensor)
    fail("input " + std::to_string(i) + " is a sequence, expected a tensor");
  return *v.tensor;
}

DType KernelContext::outputDType(size_t i) const {
  if (!wantsOutput(i))
    return DType::F32;
  return plan_.values[size_t(op_.outputs[i])].dtype;
}

const Attr *KernelContext::attr(const std::string &name) const {
  auto it = op_.attrs.find(name);
  return it == op_.attrs.end() ? nullptr : &it->second;
}

int64_t KernelContext::attrInt(const std::string &name, int64_t dflt) const {
  const Attr *a = attr(name);
  if (!a)
    return dflt;
  if (a->kind == Attr::Float)
    return int64_t(a->f);
  if (a->kind != Attr::Int)
    fail("attribute '" + name + "' is not an integer");
  return a->i;
}

float KernelContext::attrFloat(const std::string &name, float dflt) const {
  const Attr *a = attr(name);
  if (!a)
    return dflt;
  if (a->kind == Attr::Int)
    return float(a->i);
  if (a->kind != Attr::Float)
    fail("attribute '" + name + "' is not a float");
  return float(a->f);
}

std::string KernelContext::attrString(const std::string &name, const std::string &dflt) const {
  const Attr *a = attr(name);
  if (!a)
    return dflt;
  if (a->kind != Attr::String)
    fail("attribute '" + name + "' is not a string");
  return a->s;
}

std::vector<int64_t> KernelContext::attrInts(const std::string &name) const {
  const Attr *a = attr(name);
  if (!a)
    return {};
  if (a->kind == Attr::Int)
    return {a->i};
  if (a->kind != Attr::Ints)
    fail("attribute '" + name + "' is not a list of integers");
  return a->ints;
}

void KernelContext::fail(const std::string &msg) const {
  throw Error("node '" + op_.name + "' (" + op_.type + "): " + msg);
}

namespace {
/// The host memory the kernel would give this process now (MemAvailable), or 0 if unknown.
uint64_t hostMemoryAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:")
      return kb * 1024;
  return 0;
}
} // namespace

Executor::Executor(Plan plan) : plan_(std::move(plan)), values_(plan_.values.size()) {
  // The weights and state still in the plan file, and the activations of a step: refused before
  // any is read where the host does not have them (the OOM killer would end the process unheard).
  uint64_t need = uint64_t(std::max<int64_t>(plan_.arenaBytes, 0));
  for (auto &[id, d] : plan_.deferred)
    need += constantBytes(plan_, id);
  if (uint64_t avail = hostMemoryAvailable(); need > (uint64_t(1) << 30) && avail && need > avail)
    throw Error(plan_.name + ": the CPU backend needs " + std::to_string(need) + " bytes of host memory for this "
                "plan's weights, state and activations, and " + std::to_string(avail) + " bytes are available; "
                "run it on a GPU (--device cuda) or compile a smaller model or batch");
  materializeDeferred(plan_);
  for (const PlanOp &op : plan_.ops) {
    const Kernel *k = lookupKernel(op.type);
    if (!k)
      throw Error("node '" + op.name + "': op type '" + op.type +
                  "' is not supported by the CPU runtime; file an issue with the model attached");
    kernels_.push_back(k);
  }
  for (auto &[id, t] : plan_.constants)
    values_[size_t(id)].tensor = t;
}

void Executor::checkInputs(const Plan &plan, const std::map<std::string, TensorPtr> &inputs) {
  for (auto &[name, t] : inputs)
    if (plan.findValue(name) < 0 ||
        std::find(plan.inputs.begin(), plan.inputs.end(), plan.findValue(name)) == plan.inputs.end())
      throw Error("input '" + name + "' is not an input of the plan");
  for (int id : plan.inputs) {
    const PlanValue &pv = plan.values[size_t(id)];
    auto it = inputs.find(pv.name);
    if (it == inputs.end())
      throw Error("input '" + pv.name + "' is missing (expected " + dtypeName(pv.dtype) +
                  (pv.hasShape ? " " + shapeString(pv.shape) : "") + ")");
    if (it->second->dtype != pv.dtype)
      throw Error("input '" + pv.name + "' is " + dtypeName(it->second->dtype) + ", expected " + dtypeName(pv.dtype));
    if (pv.hasShape && it->second->shape != pv.shape)
      throw Error("input '" + pv.name + "' has shape " + shapeString(it->second->shape) + ", expected " +
                  shapeString(pv.shape));
  }
}

void Executor::run(const std::map<std::string, TensorPtr> &inputs, bool updateState, bool lastMicroBatch) {
  checkInputs(plan_, inputs);
  for (int id : plan_.inputs)
    values_[size_t(id)].tensor = inputs.at(plan_.values[size_t(id)].name);
  bool first = !keptValid_; // the firstMicroBatch ops' results are kept in values_ between runs
  keptValid_ = false;       // until the run has finished
  for (size_t k = 0; k < plan_.ops.size(); ++k) {
    const PlanOp &op = plan_.ops[k];
    if ((op.lastMicroBatch && !lastMicroBatch) || (op.firstMicroBatch && !first))
      continue;
    // BF16 storage (fp8-opt --activation-precision=bf16): every kernel computes in float32 from the
    // widened operands (exact), and a float32 result the plan stores in BF16 is rounded to nearest
    // even below, which is what a GPU kernel loading and storing BF16 computes.
    std::vector<Value> widened(op.inputs.size());
    std::vector<const Value *> ins;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      int id = op.inputs[i];
      const Value *v = id < 0 ? nullptr : &values_[size_t(id)];
      if (v && v->tensor && v->tensor->dtype == DType::BF16) {
        widened[i].tensor = std::make_shared<Tensor>(v->tensor->castTo(DType::F32));
        v = &widened[i];
      }
      ins.push_back(v);
    }
    KernelContext ctx(plan_, op, std::move(ins));
    (*kernels_[k])(ctx);
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      int id = op.outputs[i];
      if (id < 0)
        continue;
      Value &out = ctx.outputs()[i];
      const PlanValue &pv = plan_.values[size_t(id)];
      if (out.empty())
        ctx.fail("output " + std::to_string(i) + " was not produced");
      if (out.tensor && out.tensor->dtype == DType::F32 && pv.dtype == DType::BF16)
        out.tensor = std::make_shared<Tensor>(out.tensor->castTo(DType::BF16));
      if (out.tensor && out.tensor->dtype != pv.dtype)
        ctx.fail(std::string("produced ") + dtypeName(out.tensor->dtype) + " where the plan declares " +
                 dtypeName(pv.dtype));
      if (out.tensor && pv.hasShape && out.tensor->shape != pv.shape)
        ctx.fail("produced shape " + shapeString(out.tensor->shape) + " where the plan declares " +
                 shapeString(pv.shape));
      values_[size_t(id)] = std::move(out);
    }
  }
  keptValid_ = true;
  if (updateState)
    for (size_t i = 0; i < plan_.stateUpdates.size(); ++i)
      if (lastMicroBatch || !plan_.updateInLastOnly(i)) {
        values_[size_t(plan_.stateUpdates[i].first)].tensor = values_[size_t(plan_.stateUpdates[i].second)].tensor;
        keptValid_ &= !plan_.updateInLastOnly(i); // the parameters (and what is cast from them) change
      }
}

TensorPtr Executor::value(int id) const {
  if (id < 0 || size_t(id) >= values_.size())
    return nullptr;
  return values_[size_t(id)].tensor;
}


std::map<std::string, TensorPtr> Executor::state() const {
  std::map<std::string, TensorPtr> r;
  for (auto &[id, kind] : plan_.constantKinds)
    if (kind == ConstantKind::State)
      r[plan_.values[size_t(id)].name] = values_[size_t(id)].tensor;
  return r;
}

int Executor::checkState(const Plan &plan, const std::string &name, const Tensor &t) {
  int id = plan.findValue(name);
  auto it = plan.constantKinds.find(id);
  if (id < 0 || it == plan.constantKinds.end() || it->second == ConstantKind::Const)
    throw Error("'" + name + "' is not a state tensor or parameter of the plan");
  const PlanValue &pv = plan.values[size_t(id)];
  if (t.dtype != pv.dtype || t.shape != pv.shape)
    throw Error("state '" + name + "' must be " + dtypeName(pv.dtype) + " " + shapeString(pv.shape));
  return id;
}

void Executor::setState(const std::string &name, TensorPtr t) {
  values_[size_t(checkState(plan_, name, *t))].tensor = std::move(t);
  keptValid_ = false;
}

void Runner::drawNormal(const std::string &name, uint64_t key, double stdev, int64_t wholeNumel, int64_t first) {
  static const init::XorshiftJump jump;
  const Plan &p = plan();
  int id = p.findValue(name);
  if (id < 0 || !p.constantKinds.count(id))
    throw Error("'" + name + "' is not a state tensor or parameter of the plan");
  const PlanValue &pv = p.values[size_t(id)];
  Tensor f(DType::F32, pv.shape);
  float *d = f.data<float>();
  // Stretches of 2^20 elements on the machine's cores (each jumps to its own start).
  constexpr int64_t kStretch = int64_t(1) << 20;
  int64_t n = f.numel(), parts = (n + kStretch - 1) / kStretch;
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t k; (k = next++) < parts;) {
      int64_t lo = k * kStretch, m = std::min(kStretch, n - lo);
      init::drawRange(jump.cols, key, stdev, wholeNumel, first + lo, m, [d, lo](int64_t i, float v) { d[lo + i] = v; });
    }
  };
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < std::min<int64_t>(parts, std::thread::hardware_concurrency()); ++t)
    threads.emplace_back(work);
  work();
  for (std::thread &t : threads)
    t.join();
  setState(name, std::make_shared<Tensor>(pv.dtype == DType::F32 ? std::move(f) : f.castTo(pv.dtype)));
}

namespace {
std::vector<DeviceBackend> &backends() {
  static std::vector<DeviceBackend> b;
  return b;
}

/// A backend that cannot run here, saying why (its plugin or the driver it needs is missing).
DeviceBackend unavailableBackend(const std::string &name, const std::string &why) {
  DeviceBackend b;
  b.name = name;
  b.available = [why](std::string *w) {
    if (w)
      *w = why;
    return false;
  };
  b.create = [why](Plan) -> std::unique_ptr<Runner> { throw Error(why); };
  b.check = [why](Plan, const std::map<std::string, TensorPtr> &, std::ostream &) -> int { throw Error(why); };
  return b;
}

/// The CUDA backend is a plugin (liboctet_cuda beside this library), loaded the first time a
/// device is asked for: a CPU run never maps cuBLAS (about 0.1 s and 600 MB of mappings at every
/// start), and a CUDA build runs on the CPU of a machine without the CUDA libraries. Without the
/// NVIDIA driver's library there is no GPU to use, and the plugin is not loaded at all.
void loadPlugins() {
#ifdef OCTET_CUDA_PLUGIN
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info self{};
    if (!dladdr(reinterpret_cast<void *>(&registerDeviceBackend), &self) || !self.dli_fname)
      return;
    std::string dir = self.dli_fname, path;
    dir = dir.find('/') == std::string::npos ? "." : dir.substr(0, dir.rfind('/'));
    path = dir + "/" + OCTET_CUDA_PLUGIN;
    if (access(path.c_str(), F_OK) != 0)
      return; // installed without it: a CPU-only runtime
    if (!dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
      registerDeviceBackend(unavailableBackend(
          "cuda", "no CUDA device (the NVIDIA driver's libcuda.so.1 cannot be opened); use --device cpu"));
      return;
    }
    void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    void *reg = h ? dlsym(h, "octet_cuda_register_backend") : nullptr;
    if (!reg) {
      const char *e = dlerror();
      registerDeviceBackend(unavailableBackend("cuda", "the CUDA backend " + path + " cannot be loaded (" +
                                                           (e ? e : "no registration function") +
                                                           "); use --device cpu"));
      return;
    }
    reinterpret_cast<void (*)()>(reg)();
  });
#endif
}
} // namespace

void registerDeviceBackend(DeviceBackend b) {
  for (DeviceBackend &e : backends())
    if (e.name == b.name) {
      e = std::move(b);
      return;
    }
  backends().push_back(std::move(b));
}

const DeviceBackend *findDeviceBackend(const std::string &name) {
  loadPlugins();
  for (const DeviceBackend &e : backends())
    if (e.name == name)
      return &e;
  return nullptr;
}

std::unique_ptr<Runner> makeRunner(Plan plan, const std::string &device) {
  if (device == "cpu")
    return std::make_unique<Executor>(std::move(plan));
  loadPlugins();
  if (device == "auto") {
    for (const DeviceBackend &b : backends())
      if (b.available(nullptr))
        return b.create(std::move(plan));
    return std::make_unique<Executor>(std::move(plan));
  }
  const DeviceBackend *b = findDeviceBackend(device);
  if (!b) {
    std::string known = "cpu";
    for (const DeviceBackend &e : backends())
      known += ", " + e.name;
    throw Error("--device " + device + ": this build has no such backend (it has " + known + ")" +
                (device == "cuda" ? "; rebuild where nvcc is found (OCTET_ENABLE_CUDA=ON) or use --device cpu" : ""));
  }
  std::string why;
  if (!b->available(&why))
    throw Error("--device " + device + ": " + why);
  return b->create(std::move(plan));
}

} // namespace octet::rt
