//===- Executor.h - Runs a plan on the CPU reference backend ----*- C++ -*-===//
#ifndef OCTET_RUNTIME_EXECUTOR_H
#define OCTET_RUNTIME_EXECUTOR_H

#include "octet/runtime/Plan.h"

#include <functional>
#include <map>
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

/// Executes a plan. Constants and FP8 state live across runs; each run()
/// binds inputs, evaluates every op in order and (optionally) advances the
/// FP8 state with the plan's state updates.
class Executor {
public:
  explicit Executor(Plan plan);
  const Plan &plan() const { return plan_; }
  /// Inputs by name. Throws Error for missing inputs or a dtype/shape mismatch.
  void run(const std::map<std::string, TensorPtr> &inputs, bool updateState = true);
  /// A value after run() by id (nullptr if not computed).
  TensorPtr value(int id) const;
  TensorPtr value(const std::string &name) const;
  /// Current state tensors (FP8 scaling state, trained parameters, optimizer moments) by name.
  std::map<std::string, TensorPtr> state() const;
  /// Replaces a state tensor or a parameter (same dtype and shape).
  void setState(const std::string &name, TensorPtr t);

private:
  Plan plan_;
  std::vector<Value> values_;
  std::vector<const Kernel *> kernels_;
};

} // namespace octet::rt

#endif
