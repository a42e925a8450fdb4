//===- Executor.h - Runs a plan on the CPU reference backend ----*- C++ -*-===//
#ifndef OCTET_RUNTIME_EXECUTOR_H
#define OCTET_RUNTIME_EXECUTOR_H

#include "octet/runtime/Plan.h"

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>

namespace octet::rt {

/// What a kernel sees: its op, its inputs, and room for its outputs.
class KernelContext {
public:
  KernelContext(const Plan &plan, const PlanOp &op, std::vector<const Value *> inputs)
      : plan_(plan), op_(op), inputs_(std::move(inputs)), outputs_(op.outputs.size()) {}

  const PlanOp &op() const { return op_; }
  size_t numInputs() const { return inputs_.size(); }
  size_t numOutputs() const { return outputs_.size(); }
  bool hasInput(size_t i) const { return i < inputs_.size() && inputs_[i] && !inputs_[i]->empty(); }
  bool wantsOutput(size_t i) const { return i < op_.outputs.size() && op_.outputs[i] >= 0; }
  const Tensor &input(size_t i) const;
  const Value &inputValue(size_t i) const;
  /// The element type the plan declares for output i.
  DType outputDType(size_t i) const;

  bool hasAttr(const std::string &name) const { return op_.attrs.count(name) != 0; }
  int64_t attrInt(const std::string &name, int64_t dflt) const;
  float attrFloat(const std::string &name, float dflt) const;
  std::string attrString(const std::string &name, const std::string &dflt) const;
  std::vector<int64_t> attrInts(const std::string &name) const;
  const Attr *attr(const std::string &name) const;

  void setOutput(size_t i, Tensor t) { outputs_[i].tensor = std::make_shared<Tensor>(std::move(t)); }
  void setOutput(size_t i, TensorPtr t) { outputs_[i].tensor = std::move(t); }
  void setOutputSequence(size_t i, std::vector<TensorPtr> seq) {
    outputs_[i].isSequence = true;
    outputs_[i].sequence = std::move(seq);
  }
  std::vector<Value> &outputs() { return outputs_; }
  [[noreturn]] void fail(const std::string &msg) const;

private:
  const Plan &plan_;
  const PlanOp &op_;
  std::vector<const Value *> inputs_;
  std::vector<Value> outputs_;
};

using Kernel = std::function<void(KernelContext &)>;
/// The kernel for an op type, or nullptr.
const Kernel *lookupKernel(const std::string &type);
/// Every op type the CPU reference runs (the CUDA backend runs a subset, falling back to none):
/// what fp8-opt accepts from a model's untyped nodes.
std::vector<std::string> supportedOpTypes();

/// What runs a plan: the CPU reference Executor or a device backend (the
/// CUDA executor in liboctet_cuda). Constants and state live across runs;
/// each run() binds inputs, evaluates every op in order and (optionally)
/// advances the state with the plan's state updates.
class Runner {
public:
  virtual ~Runner() = default;
  virtual const Plan &plan() const = 0;
  /// Inputs by name. Throws Error for missing inputs or a dtype/shape mismatch. Under gradient
  /// accumulation (Plan::gradAccumSteps) every micro-batch but an optimizer step's last runs with
  /// `lastMicroBatch` false: the ops marked lastMicroBatch and their state updates are skipped.
  /// The ops marked firstMicroBatch run only where the parameters changed since they last ran
  /// (the runner keeps track): in an optimizer step's first micro-batch.
  virtual void run(const std::map<std::string, TensorPtr> &inputs, bool updateState = true,
                   bool lastMicroBatch = true) = 0;
  /// A value after run() by id, on the host (nullptr if not computed or no longer held).
  virtual TensorPtr value(int id) const = 0;
  TensorPtr value(const std::string &name) const { return value(plan().findValue(name)); }
  /// Current state tensors (FP8 scaling state, trained parameters, optimizer moments) by name.
  virtual std::map<std::string, TensorPtr> state() const = 0;
  /// One state tensor by name (nullptr: none), without copying the others off the device: what
  /// the training log samples (FP8 amax histories and scales) every --log-every steps.
  virtual TensorPtr stateTensor(const std::string &name) const {
    auto all = state();
    auto it = all.find(name);
    return it == all.end() ? nullptr : it->second;
  }
  /// Copies of stateTensor() of each name, in order, that the caller owns (the log formats them on
  /// its own thread while the next step updates the state): a GPU backend takes them off the device
  /// in one copy (the log's FP8 sample at every step would otherwise be hundreds of synchronous
  /// downloads).
  virtual std::vector<TensorPtr> stateTensors(const std::vector<std::string> &names) const {
    std::vector<TensorPtr> r;
    r.reserve(names.size());
    for (const std::string &n : names) {
      TensorPtr t = stateTensor(n);
      r.push_back(t ? std::make_shared<Tensor>(*t) : nullptr);
    }
    return r;
  }
  /// Replaces a state tensor or a parameter (same dtype and shape).
  virtual void setState(const std::string &name, TensorPtr t) = 0;
  /// Fills state tensor or parameter `name` (F32, F16 or BF16) with --init-params' N(0, stdev)
  /// draws of the stream `key` (NormalInit.h): elements [first, first + its size) of a tensor of
  /// `wholeNumel` elements (a rank's shard of a sharded one: its part, zeros past the end). This
  /// default draws on the host and calls setState; a device backend draws where the tensor lives.
  virtual void drawNormal(const std::string &name, uint64_t key, double stdev, int64_t wholeNumel, int64_t first);
  /// "cpu", "cuda".
  virtual std::string device() const = 0;
};

/// A backend other than the CPU: registered by the program that links it, or by its plugin
/// (liboctet_cuda beside liboctet_runtime, loaded by the first findDeviceBackend or makeRunner
/// other than "cpu"), found by name.
struct DeviceBackend {
  std::string name;
  /// Whether it can run here; `why` says what is missing otherwise.
  std::function<bool(std::string *why)> available;
  std::function<std::unique_ptr<Runner>(Plan)> create;
  /// Optional: kernel-by-kernel comparison with the CPU reference (returns
  /// the number of mismatching ops), device bytes a runner holds, device name.
  std::function<int(Plan, const std::map<std::string, TensorPtr> &, std::ostream &)> check;
  std::function<size_t(const Runner &)> bytes;
  /// Optional: those bytes by what holds them.
  std::function<std::map<std::string, size_t>(const Runner &)> memory;
  std::function<std::string()> describe;
};
void registerDeviceBackend(DeviceBackend b);
const DeviceBackend *findDeviceBackend(const std::string &name);
/// A runner for `device`: "cpu", a registered backend's name, or "auto" (the
/// first available registered backend, else the CPU). Throws Error naming
/// what is missing when an explicitly requested device cannot run.
std::unique_ptr<Runner> makeRunner(Plan plan, const std::string &device);

/// The CPU reference backend: interprets ops in order with host kernels.
class Executor : public Runner {
public:
  explicit Executor(Plan plan);
  const Plan &plan() const override { return plan_; }
  void run(const std::map<std::string, TensorPtr> &inputs, bool updateState = true,
           bool lastMicroBatch = true) override;
  TensorPtr value(int id) const override;
  using Runner::value;
  std::map<std::string, TensorPtr> state() const override;
  void setState(const std::string &name, TensorPtr t) override;
  std::string device() const override { return "cpu"; }
  /// Checks inputs against the plan (names, dtypes, shapes); shared by every backend.
  static void checkInputs(const Plan &plan, const std::map<std::string, TensorPtr> &inputs);
  /// The value id of state/parameter `name` if `t` may replace it (same dtype and shape); throws otherwise.
  static int checkState(const Plan &plan, const std::string &name, const Tensor &t);

private:
  Plan plan_;
  std::vector<Value> values_;
  std::vector<const Kernel *> kernels_;
  /// The results of the plan's firstMicroBatch ops are those of the current parameters: false
  /// until a run computes them, and again after the parameters change (a last micro-batch that
  /// updates the state, setState, drawNormal), so that the next run computes them.
  bool keptValid_ = false;
};

} // namespace octet::rt

#endif
