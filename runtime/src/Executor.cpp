//===- Executor.cpp - Plan interpreter -------------------------------------===//
#include "octet/runtime/Executor.h"

#include <algorithm>

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

Executor::Executor(Plan plan) : plan_(std::move(plan)), values_(plan_.values.size()) {
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

void Executor::run(const std::map<std::string, TensorPtr> &inputs, bool updateState) {
  for (auto &[name, t] : inputs)
    if (plan_.findValue(name) < 0 || std::find(plan_.inputs.begin(), plan_.inputs.end(), plan_.findValue(name)) ==
                                         plan_.inputs.end())
      throw Error("input '" + name + "' is not an input of the plan");
  for (int id : plan_.inputs) {
    const PlanValue &pv = plan_.values[size_t(id)];
    auto it = inputs.find(pv.name);
    if (it == inputs.end())
      throw Error("input '" + pv.name + "' is missing (expected " + dtypeName(pv.dtype) +
                  (pv.hasShape ? " " + shapeString(pv.shape) : "") + ")");
    if (it->second->dtype != pv.dtype)
      throw Error("input '" + pv.name + "' is " + dtypeName(it->second->dtype) + ", expected " + dtypeName(pv.dtype));
    if (pv.hasShape && it->second->shape != pv.shape)
      throw Error("input '" + pv.name + "' has shape " + shapeString(it->second->shape) + ", expected " +
                  shapeString(pv.shape));
    values_[size_t(id)].tensor = it->second;
  }
  for (size_t k = 0; k < plan_.ops.size(); ++k) {
    const PlanOp &op = plan_.ops[k];
    std::vector<const Value *> ins;
    for (int id : op.inputs)
      ins.push_back(id < 0 ? nullptr : &values_[size_t(id)]);
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
      if (out.tensor && out.tensor->dtype != pv.dtype)
        ctx.fail(std::string("produced ") + dtypeName(out.tensor->dtype) + " where the plan declares " +
                 dtypeName(pv.dtype));
      if (out.tensor && pv.hasShape && out.tensor->shape != pv.shape)
        ctx.fail("produced shape " + shapeString(out.tensor->shape) + " where the plan declares " +
                 shapeString(pv.shape));
      values_[size_t(id)] = std::move(out);
    }
  }
  if (updateState)
    for (auto &[stateId, valueId] : plan_.stateUpdates)
      values_[size_t(stateId)].tensor = values_[size_t(valueId)].tensor;
}

TensorPtr Executor::value(int id) const {
  if (id < 0 || size_t(id) >= values_.size())
    return nullptr;
  return values_[size_t(id)].tensor;
}

TensorPtr Executor::value(const std::string &name) const { return value(plan_.findValue(name)); }

std::map<std::string, TensorPtr> Executor::state() const {
  std::map<std::string, TensorPtr> r;
  for (auto &[id, kind] : plan_.constantKinds)
    if (kind == ConstantKind::State)
      r[plan_.values[size_t(id)].name] = values_[size_t(id)].tensor;
  return r;
}

void Executor::setState(const std::string &name, TensorPtr t) {
  int id = plan_.findValue(name);
  auto it = plan_.constantKinds.find(id);
  if (id < 0 || it == plan_.constantKinds.end() || it->second == ConstantKind::Const)
    throw Error("'" + name + "' is not a state tensor or parameter of the plan");
  const PlanValue &pv = plan_.values[size_t(id)];
  if (t->dtype != pv.dtype || t->shape != pv.shape)
    throw Error("state '" + name + "' must be " + dtypeName(pv.dtype) + " " + shapeString(pv.shape));
  values_[size_t(id)].tensor = std::move(t);
}

} // namespace octet::rt
