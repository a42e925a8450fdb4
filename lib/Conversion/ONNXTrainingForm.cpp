//===- ONNXTrainingForm.cpp - ONNX's training IR as Octet's training form --===//
#include "ONNXTypedOps.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace octet {
namespace {

constexpr const char *kTrainingDomain = "ai.onnx.preview.training";

const onnx::AttributeProto *findAttr(const onnx::NodeProto &n, llvm::StringRef name) {
  for (const auto &a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

} // namespace

// ONNX's training IR (TrainingInfoProto): the algorithm graph holds the
/// forward pass, the loss, an ai.onnx.preview.training Gradient node and an
/// optimizer node (Adam, Momentum, Adagrad). Octet differentiates and
/// optimizes itself, so the model becomes its training form: the main graph
/// plus the algorithm nodes the loss needs, with the loss as the first
/// output. What the nodes asked for (loss, parameters, optimizer and its
/// attributes) is returned for the module's `octet.onnx_training` attribute.
LogicalResult detail::trainingForm(const onnx::ModelProto &in, onnx::ModelProto &out, MLIRContext *ctx, Location loc,
                           DictionaryAttr &spec) {
  const onnx::GraphProto &alg = in.training_info(0).algorithm();
  const onnx::NodeProto *grad = nullptr, *opt = nullptr;
  for (const auto &n : alg.node()) {
    if (n.domain() != kTrainingDomain)
      continue;
    if (n.op_type() == "Gradient")
      grad = &n;
    else if (n.op_type() == "Adam" || n.op_type() == "Momentum" || n.op_type() == "Adagrad")
      opt = &n;
    else
      return emitError(loc) << "TrainingInfoProto: unsupported training op '" << n.op_type()
                            << "' (Octet reads Gradient, Adam, Momentum and Adagrad)";
  }
  const onnx::AttributeProto *y = grad ? findAttr(*grad, "y") : nullptr;
  const onnx::AttributeProto *xs = grad ? findAttr(*grad, "xs") : nullptr;
  if (!y || !xs)
    return emitError(loc) << "TrainingInfoProto: the algorithm graph has no Gradient node with 'y' and 'xs'; "
                             "export the forward graph with its loss instead";
  out = in;
  out.clear_training_info();
  onnx::GraphProto *g = out.mutable_graph();
  // The algorithm nodes the loss depends on (a backward slice).
  llvm::StringMap<const onnx::NodeProto *> producer;
  for (const auto &n : alg.node())
    for (const auto &o : n.output())
      producer[o] = &n;
  llvm::SmallPtrSet<const onnx::NodeProto *, 16> keep;
  std::vector<std::string> work{y->s()};
  llvm::StringSet<> used;
  while (!work.empty()) {
    std::string v = work.back();
    work.pop_back();
    if (!used.insert(v).second)
      continue;
    auto it = producer.find(v);
    if (it == producer.end() || !keep.insert(it->second).second)
      continue;
    if (it->second->domain() == kTrainingDomain)
      return emitError(loc) << "TrainingInfoProto: the loss '" << y->s() << "' depends on a training op";
    for (const auto &i : it->second->input())
      work.push_back(i);
  }
  for (const auto &n : alg.node())
    if (keep.count(&n))
      *g->add_node() = n;
  llvm::StringSet<> declared;
  for (const auto &i : g->input())
    declared.insert(i.name());
  for (const auto &i : alg.input())
    if (used.count(i.name()) && !declared.count(i.name()))
      *g->add_input() = i;
  for (const auto &t : alg.initializer())
    *g->add_initializer() = t;
  for (const auto &v : alg.value_info())
    *g->add_value_info() = v;
  onnx::ValueInfoProto loss;
  loss.set_name(y->s());
  for (const auto &o : alg.output())
    if (o.name() == y->s())
      loss = o;
  for (const auto &v : alg.value_info())
    if (v.name() == y->s())
      loss = v;
  auto *outs = g->mutable_output();
  outs->Add();
  for (int i = outs->size() - 1; i > 0; --i)
    outs->SwapElements(i, i - 1);
  *outs->Mutable(0) = loss;

  Builder b(ctx);
  SmallVector<NamedAttribute> attrs;
  attrs.push_back(b.getNamedAttr("loss", b.getStringAttr(y->s())));
  SmallVector<Attribute> params;
  for (const auto &x : xs->strings())
    params.push_back(b.getStringAttr(x));
  attrs.push_back(b.getNamedAttr("params", b.getArrayAttr(params)));
  if (opt) {
    attrs.push_back(b.getNamedAttr("optimizer", b.getStringAttr(opt->op_type())));
    for (const auto &a : opt->attribute()) {
      if (a.type() == onnx::AttributeProto::FLOAT)
        attrs.push_back(b.getNamedAttr(a.name(), b.getF64FloatAttr(a.f())));
      else if (a.type() == onnx::AttributeProto::STRING)
        attrs.push_back(b.getNamedAttr(a.name(), b.getStringAttr(a.s())));
    }
  }
  spec = b.getDictionaryAttr(attrs);
  return success();
}

} // namespace octet
