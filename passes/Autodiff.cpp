//===- Autodiff.cpp - Reverse-mode automatic differentiation -------------===//
//
// octet-autodiff: walks the function backwards from its loss and asks each
// op's GradientOpInterface rule for the gradients of its operands.
//
//===----------------------------------------------------------------------===//
#include "octet/Passes/Passes.h"

#include "GradientBuilder.h"
#include "StateUtils.h"
#include "octet/Conversion/ONNXImport.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/NN/IR/NN.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Interfaces/GradientOpInterface.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

namespace octet {
#define GEN_PASS_DEF_AUTODIFF
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

LogicalResult octet::emitNoGradientRule(Operation *op) {
  StringRef type = ox::ONNXDialect::getOnnxOpType(op);
  if (auto n = dyn_cast<ox::GenericNodeOp>(op))
    type = n.getOpType();
  std::string node = ox::getNodeName(op);
  return op->emitError() << "octet-autodiff: no gradient rule for "
                         << (type.empty() ? op->getName().getStringRef() : type)
                         << (node.empty() ? std::string(" node") : " node '" + node + "'")
                         << " on the path from the parameters to the loss; freeze the parameters that "
                            "reach it (--freeze) or add a rule in passes/GradientRules.cpp";
}

/// torch.export lifts the tensors a model's code creates (`torch.tensor(0.0)` in a mask, say) into
/// initializers named `lifted_tensor_N` (`c_lifted_tensor_N`; `_tensor_constantN` from FX
/// tracing), under the module's path. They are constants, not parameters: PyTorch never trains
/// them, so neither does autodiff (a gradient that is rounding noise would move them).
static bool isLiftedConstant(StringRef name) {
  StringRef last = name.substr(name.rfind('.') + 1); // npos + 1 == 0: the whole name
  last.consume_front("c_");
  auto digitsAfter = [&](StringRef prefix) {
    StringRef rest = last;
    return rest.consume_front(prefix) && !rest.empty() && rest.find_first_not_of("0123456789") == StringRef::npos;
  };
  return digitsAfter("lifted_tensor_") || digitsAfter("_tensor_constant");
}

/// What a torch.export graph signature (the `pkg.torch.export.ExportedProgram.graph_signature`
/// graph metadata torch.onnx.export's dynamo path records) says each of the program's inputs is,
/// by target (the state-dict name the initializer carries): PARAMETER, BUFFER, CONSTANT_TENSOR...
/// Its lines read `p_name: PARAMETER target='model.layer.weight'`, under `# inputs`.
static llvm::StringMap<std::string> torchInputKinds(StringRef signature) {
  llvm::StringMap<std::string> kinds;
  bool inputs = false;
  SmallVector<StringRef> lines;
  signature.split(lines, '\n');
  for (StringRef line : lines) {
    line = line.trim();
    if (line.startswith("#")) {
      inputs = line == "# inputs";
      continue;
    }
    size_t colon = line.find(": "), target = line.find(" target='");
    if (!inputs || colon == StringRef::npos || target == StringRef::npos || target < colon)
      continue;
    StringRef kind = line.slice(colon + 2, target).trim();
    StringRef rest = line.substr(target + 9);
    size_t end = rest.find('\'');
    if (end != StringRef::npos)
      kinds[rest.take_front(end)] = kind.str();
  }
  return kinds;
}

namespace {

bool isFloatTensor(Type t) {
  auto s = t.dyn_cast<ShapedType>();
  return s && s.getElementType().isa<FloatType>();
}

/// When every contribution in `parts` is Pad(piece, constant pads) with zeros, padding along one
/// axis only and the pieces' ranges on it disjoint, their sum as one Concat of the pieces and zero
/// constants for the gaps; `parts` is then emptied (the Pads go). Else null, `parts` untouched.
Value joinPaddedPieces(octet::OnnxBuilder &ox, Value v, SmallVectorImpl<Value> &parts) {
  auto vt = v.getType().dyn_cast<RankedTensorType>();
  if (parts.size() < 2 || !vt || !vt.hasStaticShape())
    return {};
  int64_t rank = vt.getRank(), axis = -1;
  SmallVector<std::pair<int64_t, Value>> pieces; // (start on the axis, piece)
  for (Value g : parts) {
    Operation *pad = g.getDefiningOp();
    auto node = dyn_cast_or_null<ox::GenericNodeOp>(pad);
    if (!node || node.getOpType() != "Pad" || node.getInputs().size() != 2 || !g.use_empty() ||
        (node.getAttrs() && node.getAttrs().get("mode") &&
         node.getAttrs().getAs<StringAttr>("mode").getValue() != "constant"))
      return {};
    auto pads = ox::getConstantInts(node.getInputs()[1]);
    if (!pads || int64_t(pads->size()) != 2 * rank || g.getType() != vt)
      return {};
    for (int64_t a = 0; a < rank; ++a)
      if ((*pads)[size_t(a)] || (*pads)[size_t(a + rank)]) {
        if (axis >= 0 && axis != a)
          return {};
        axis = a;
      }
    if (axis < 0 || (*pads)[size_t(axis)] < 0 || (*pads)[size_t(axis + rank)] < 0)
      return {};
    pieces.push_back({(*pads)[size_t(axis)], node.getInputs()[0]});
  }
  llvm::sort(pieces, [](auto &a, auto &b) { return a.first < b.first; });
  SmallVector<Value> cat;
  int64_t at = 0;
  auto zeros = [&](int64_t n) {
    SmallVector<int64_t> shape(vt.getShape());
    shape[size_t(axis)] = n;
    auto zt = RankedTensorType::get(shape, vt.getElementType());
    return ox.constant(DenseElementsAttr::get(zt, ArrayRef<Attribute>{FloatAttr::get(vt.getElementType(), 0.0)}));
  };
  for (auto &[start, piece] : pieces) {
    if (start < at)
      return {}; // overlapping: a sum
    if (start > at)
      cat.push_back(zeros(start - at));
    cat.push_back(piece);
    at = start + piece.getType().cast<RankedTensorType>().getDimSize(axis);
  }
  if (at < vt.getDimSize(axis))
    cat.push_back(zeros(vt.getDimSize(axis) - at));
  Value joined = ox.op("Concat", vt, cat, {ox.si64("axis", axis)});
  for (Value g : parts)
    g.getDefiningOp()->erase();
  parts.clear();
  return joined;
}

/// SequenceAt(SplitToSequence(x, split, axis), constant position) -> Slice of x
/// (the form torch.onnx.export gives tensor.split): slices have gradient rules.
void sliceSequences(func::FuncOp func) {
  SmallVector<ox::GenericNodeOp> ats;
  func.walk([&](ox::GenericNodeOp n) {
    if (n.getOpType() == "SequenceAt")
      ats.push_back(n);
  });
  for (ox::GenericNodeOp at : ats) {
    auto split = at.getInputs()[0].getDefiningOp<ox::GenericNodeOp>();
    if (!split || split.getOpType() != "SplitToSequence" || split.getInputs().empty())
      continue;
    Value x = split.getInputs()[0];
    auto xt = x.getType().dyn_cast<RankedTensorType>();
    auto pos = ox::getConstantInts(at.getInputs()[1]);
    if (!xt || !xt.hasStaticShape() || !pos || pos->size() != 1)
      continue;
    int64_t axis = 0, keepdims = 1;
    if (auto a = split.getAttrs().getAs<IntegerAttr>("axis"))
      axis = a.getInt();
    if (auto k = split.getAttrs().getAs<IntegerAttr>("keepdims"))
      keepdims = k.getInt();
    if (axis < 0)
      axis += xt.getRank();
    int64_t dim = xt.getDimSize(axis);
    SmallVector<int64_t> sizes;
    if (split.getInputs().size() > 1 && !split.getInputs()[1].getType().isa<NoneType>()) {
      auto s = ox::getConstantInts(split.getInputs()[1]);
      if (!s)
        continue;
      auto st = split.getInputs()[1].getType().cast<ShapedType>();
      if (st.getRank() == 0) // equal chunks of this size, the last may be smaller
        for (int64_t off = 0; off < dim; off += (*s)[0])
          sizes.push_back(std::min((*s)[0], dim - off));
      else
        sizes = *s;
      keepdims = 1;
    } else {
      sizes.assign(dim, 1);
    }
    int64_t p = (*pos)[0] < 0 ? (*pos)[0] + int64_t(sizes.size()) : (*pos)[0];
    if (p < 0 || p >= int64_t(sizes.size()))
      continue;
    int64_t start = 0;
    for (int64_t i = 0; i < p; ++i)
      start += sizes[i];
    OpBuilder b(at);
    octet::OnnxBuilder ox(b, at.getLoc());
    SmallVector<int64_t> shape(xt.getShape().begin(), xt.getShape().end());
    shape[axis] = sizes[p];
    Value r = ox.op("Slice", RankedTensorType::get(shape, xt.getElementType()),
                    {x, ox.i64s({start}), ox.i64s({start + sizes[p]}), ox.i64s({axis}), ox.none()});
    if (!keepdims) {
      shape.erase(shape.begin() + axis);
      r = ox.reshape(r, shape);
    }
    at.getOutputs()[0].replaceAllUsesWith(r);
    at->erase();
    if (split->use_empty())
      split->erase();
  }
}

/// fused-grads: an Add of a LayerNormalizationGrad's (RMSNormalizationGrad's) dX (its only reader)
/// and another gradient of the same input (the residual stream's, which the walk reached first)
/// becomes the node's fourth operand, dX_in, which the node adds to dX as the Add did: one pass
/// over the row fewer.
void foldGradientSums(func::FuncOp func) {
  SmallVector<ox::AddOp> adds;
  func.walk([&](ox::AddOp a) { adds.push_back(a); });
  for (ox::AddOp add : adds) {
    for (unsigned i = 0; i < 2; ++i) {
      auto node = add->getOperand(i).getDefiningOp<ox::GenericNodeOp>();
      Value other = add->getOperand(1 - i);
      if (!node || node.getDomain() != "octet" ||
          (node.getOpType() != "LayerNormalizationGrad" &&
           node.getOpType() != "RMSNormalizationGrad") ||
          node.getNumOperands() != 3 || add->getOperand(i) != node->getResult(0) ||
          !node->getResult(0).hasOneUse() || other.getType() != add.getType() ||
          add->getOperand(i).getType() != add.getType())
        continue;
      // dX_in must be there before the node: an argument, or an op earlier in the block.
      Operation *def = other.getDefiningOp();
      if (def && (def->getBlock() != node->getBlock() || !def->isBeforeInBlock(node)))
        continue;
      OpBuilder b(node);
      OperationState st(node.getLoc(), "onnx.node");
      st.addOperands(node->getOperands());
      st.addOperands(other);
      st.addTypes(node->getResultTypes());
      st.addAttributes(node->getAttrs());
      Operation *fused = b.create(st);
      add.getResult().replaceAllUsesWith(fused->getResult(0));
      add->erase();
      for (unsigned r = 1; r < node->getNumResults(); ++r)
        node->getResult(r).replaceAllUsesWith(fused->getResult(r));
      node->erase();
      break;
    }
  }
}

struct AutodiffPass : octet::impl::AutodiffBase<AutodiffPass>, octet::GradientContext {
  using AutodiffBase::AutodiffBase;

  func::FuncOp func;
  SmallVector<std::pair<std::string, Value>> updates;

  Value stateTensor(StringRef name, DenseElementsAttr init) override {
    return octet::getOrCreateState(func, func.getLoc(), name, init);
  }
  void updateState(Value state, Value next) override { updates.push_back({octet::stateName(state), next}); }

  LogicalResult findLoss(unsigned &index) {
    if (loss.empty()) // a TrainingInfoProto names the loss (Gradient's y)
      if (auto spec = func->getParentOfType<ModuleOp>()->getAttrOfType<DictionaryAttr>(octet::kOnnxTrainingAttr))
        if (auto y = spec.getAs<StringAttr>("loss"))
          loss = y.str();
    SmallVector<unsigned> scalars;
    std::string names;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, ox::kNameAttr);
      std::string n = name ? name.str() : "#" + std::to_string(i);
      if (!loss.empty() && n == loss) {
        if (!isFloatTensor(func.getResultTypes()[i]))
          return func.emitError() << "octet-autodiff: the loss output '" << n << "' is not a float tensor";
        index = i;
        return success();
      }
      auto t = func.getResultTypes()[i].dyn_cast<RankedTensorType>();
      if (t && t.getNumElements() == 1 && t.getElementType().isa<FloatType>()) {
        scalars.push_back(i);
        names += (names.empty() ? "" : ", ") + n;
      }
    }
    if (!loss.empty()) {
      std::string all;
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        if (auto name = func.getResultAttrOfType<StringAttr>(i, ox::kNameAttr))
          all += (all.empty() ? "" : ", ") + name.str();
      return func.emitError() << "octet-autodiff: no output named '" << loss << "' (--loss); outputs: " << all;
    }
    if (scalars.size() != 1)
      return func.emitError() << "octet-autodiff: " << (scalars.empty() ? "no" : std::to_string(scalars.size()))
                              << " scalar float outputs" << (names.empty() ? "" : " (" + names + ")")
                              << "; name the loss with --loss NAME";
    index = scalars[0];
    return success();
  }

  LogicalResult differentiate(llvm::Regex *frozen) {
    // Prepare: layers become their bodies; tensor.split becomes Slice.
    SmallVector<Operation *> layers;
    func.walk([&](Operation *op) {
      if (isa<octet::nn::NNDialect>(op->getDialect()) && op->getNumRegions() == 1)
        layers.push_back(op);
    });
    for (Operation *l : layers)
      octet::nn::inlineLayer(l);
    sliceSequences(func);

    unsigned lossIndex;
    if (failed(findLoss(lossIndex)))
      return failure();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value lossValue = ret.getOperand(lossIndex);
    func.setResultAttr(lossIndex, octet::kLossAttr, UnitAttr::get(func.getContext()));

    SmallVector<ox::InitializerOp> params;
    llvm::DenseSet<Value> active;
    // A model with a TrainingInfoProto names its parameters (Gradient's xs).
    std::optional<llvm::StringSet<>> named;
    if (auto spec = func->getParentOfType<ModuleOp>()->getAttrOfType<DictionaryAttr>(octet::kOnnxTrainingAttr))
      if (auto xs = spec.getAs<ArrayAttr>("params")) {
        named.emplace();
        for (Attribute x : xs)
          named->insert(x.cast<StringAttr>().getValue());
      }
    if (named)
      for (auto &x : *named)
        if (llvm::none_of(body.getOps<ox::InitializerOp>(),
                          [&](ox::InitializerOp i) { return i.getName() == x.getKey() && isFloatTensor(i.getType()); }))
          return func.emitError() << "octet-autodiff: the Gradient node's xs names '" << x.getKey()
                                  << "', which is not a float initializer";
    // A dynamo export's graph signature says which initializers are the module's parameters:
    // buffers (rotary inv_freq, position ids, BatchNorm statistics) and constants are not trained.
    std::optional<llvm::StringMap<std::string>> torchKinds;
    if (auto md = func->getParentOfType<ModuleOp>()->getAttrOfType<DictionaryAttr>(ox::kGraphMetadataAttr))
      if (auto sig = md.getAs<StringAttr>("pkg.torch.export.ExportedProgram.graph_signature"))
        if (auto kinds = torchInputKinds(sig.getValue()); !kinds.empty())
          torchKinds = std::move(kinds);
    for (auto init : body.getOps<ox::InitializerOp>()) {
      if (!isFloatTensor(init.getType()) || init->hasAttr(octet::kFp8StateAttr))
        continue;
      if ((frozen && frozen->match(init.getName())) || (named && !named->count(init.getName())))
        continue;
      if (!named && isLiftedConstant(init.getName()))
        continue;
      if (!named && torchKinds) {
        auto kind = torchKinds->find(init.getName());
        auto rank = init.getType().cast<ShapedType>().getRank();
        if (kind == torchKinds->end() && rank == 0)
          continue; // a scalar the exporter made (a scale, an epsilon): a constant, not a parameter
        if (kind == torchKinds->end())
          return init.emitError() << "octet-autodiff: initializer '" << init.getName()
                                  << "' is none of the exported program's inputs (its graph signature): "
                                     "the exporter folded or merged parameters into it; export with "
                                     "torch.onnx.export(..., dynamo=True, optimize=False)";
        if (kind->second != "PARAMETER")
          continue; // a buffer or a constant tensor: PyTorch does not train it
      }
      // Without a graph signature (the TorchScript exporter), what that exporter does to parameters
      // would train wrong: equal parameters merged into one initializer that Identity nodes hand to
      // each layer (a fresh model's LayerNorm weights), and tensors constant-folded from parameters
      // (a tied lm_head's transposed weight), named onnx::OP_N.
      if (!named && !torchKinds) {
        // One tensor reaching layers both directly and through an Identity (or through two) is
        // several parameters merged; an Identity as its only reader is just a copy.
        int64_t copies = llvm::count_if(init->getUsers(), [](Operation *u) { return isa<ox::IdentityOp>(u); });
        int64_t readers = std::distance(init->getUsers().begin(), init->getUsers().end());
        if (copies > 0 && readers > 1)
          return init.emitError() << "octet-autodiff: initializer '" << init.getName() << "' reaches the graph through "
                                  << copies << " Identity node(s): the exporter merged equal parameters into it, "
                                     "which would train them as one; export with torch.onnx.export(..., dynamo=True, "
                                     "optimize=False)";
        if (init.getName().startswith("onnx::") && init.getType().cast<ShapedType>().getRank() > 0)
          return init.emitError() << "octet-autodiff: initializer '" << init.getName()
                                  << "' is a tensor the exporter computed from parameters (constant folding), which "
                                     "would train apart from them; export with torch.onnx.export(..., dynamo=True, "
                                     "optimize=False)";
      }
      params.push_back(init);
      active.insert(init.getResult());
    }
    if (params.empty())
      return func.emitError() << "octet-autodiff: no trainable parameters (float initializers)"
                              << (frozen ? " left after --freeze" : "");
    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator()) {
      forward.push_back(&op);
      if (llvm::any_of(op.getOperands(), [&](Value v) { return active.contains(v); }))
        for (Value r : op.getResults())
          if (isFloatTensor(r.getType()))
            active.insert(r);
    }
    if (!active.contains(lossValue))
      return func.emitError() << "octet-autodiff: the loss does not depend on any trainable parameter";

    OpBuilder b(ret);
    octet::OnnxBuilder ox(b, func.getLoc());
    llvm::DenseMap<Value, Value> grads;
    // A value's gradient contributions, summed where the value's gradient is first read. Those that
    // are zero-padded pieces of it along one axis, in ranges that do not overlap (the gradients of
    // the slices a split makes: q, k and v of one projection), are joined by one Concat rather than
    // added as whole-size tensors.
    llvm::MapVector<Value, SmallVector<Value, 2>> pending;
    auto accumulate = [&](Value v, Value g) { pending[v].push_back(g); };
    auto settle = [&](Value v) {
      auto it = pending.find(v);
      if (it == pending.end())
        return;
      SmallVector<Value, 2> parts = std::move(it->second);
      pending.erase(it);
      Value sum = joinPaddedPieces(ox, v, parts);
      for (Value g : parts)
        if (!sum)
          sum = g;
        else if (sum != g)
          sum = ox.op("Add", g.getType(), {sum, g});
      if (auto old = grads.find(v); old != grads.end())
        sum = ox.op("Add", sum.getType(), {old->second, sum});
      grads[v] = sum;
    };
    auto lt = lossValue.getType().cast<RankedTensorType>();
    grads[lossValue] =
        ox.constant(DenseElementsAttr::get(lt, ArrayRef<Attribute>{FloatAttr::get(lt.getElementType(), 1.0)}));

    for (Operation *op : llvm::reverse(forward)) {
      SmallVector<Value> dy;
      bool any = false;
      b.setInsertionPoint(ret);
      for (Value r : op->getResults())
        settle(r);
      for (Value r : op->getResults()) {
        auto it = grads.find(r);
        dy.push_back(it == grads.end() ? Value() : it->second);
        any |= bool(dy.back());
      }
      if (!any)
        continue;
      wanted.clear();
      wanted.resize(op->getNumOperands());
      for (auto [i, v] : llvm::enumerate(op->getOperands()))
        if (active.contains(v))
          wanted.set(i);
      if (wanted.none())
        continue;
      auto rule = dyn_cast<octet::GradientOpInterface>(op);
      if (!rule)
        return octet::emitNoGradientRule(op);
      SmallVector<Value> dx;
      b.setInsertionPoint(ret);
      if (failed(rule.buildGradient(b, dy, *this, dx)))
        return failure();
      if (dx.size() != op->getNumOperands())
        return op->emitError() << "octet-autodiff: the gradient rule returned " << dx.size() << " gradients for "
                               << op->getNumOperands() << " operands";
      for (auto [i, g] : llvm::enumerate(dx))
        if (g && wanted.test(i))
          accumulate(op->getOperand(i), g);
    }

    b.setInsertionPoint(ret);
    for (ox::InitializerOp p : params)
      settle(p.getResult());
    Builder attrs(func.getContext());
    for (ox::InitializerOp p : params) {
      Value g = grads.lookup(p.getResult());
      if (!g) { // the loss does not use it: a zero gradient
        auto t = p.getType().cast<RankedTensorType>();
        g = ox.constant(DenseElementsAttr::get(t, ArrayRef<Attribute>{FloatAttr::get(t.getElementType(), 0.0)}));
      }
      octet::appendResult(func, g, (p.getName() + ".grad").str(),
                          {attrs.getNamedAttr(octet::kGradOfAttr, p.getNameAttr())});
    }
    octet::appendStateUpdates(func, updates);
    return success();
  }

  void runOnOperation() override {
    std::string l = loss, f = freeze;
    octet::unquoteOption(l);
    octet::unquoteOption(f);
    loss = l;
    freeze = f;
    fusedGrads = fusedGradsOpt;
    std::optional<llvm::Regex> frozen;
    if (!freeze.empty()) {
      std::string err;
      frozen.emplace(freeze);
      if (!frozen->isValid(err)) {
        getOperation().emitError() << "octet-autodiff: freeze='" << freeze << "' is not a valid regular expression ("
                                   << err << ")";
        return signalPassFailure();
      }
    }
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      func = f;
      updates.clear();
      if (failed(differentiate(frozen ? &*frozen : nullptr)))
        return signalPassFailure();
      if (fusedGrads)
        foldGradientSums(f);
    }
  }
};

} // namespace
