//===- FusePointwise.cpp - Fuse chains of elementwise ops into one node ----===//
//
// octet-fuse-pointwise: float32 elementwise onnx ops whose results have one
// shape and feed only each other become one `onnx.node "Pointwise"` (domain
// "octet"): its operands are the chain's outside inputs (any shape that
// broadcasts to the result), `ops` lists the member op types in program order
// and `args` gives three operand slots per member (k < #inputs: input k;
// otherwise member k - #inputs; -1: none). The root's result is the node's
// only result. Runtimes run the program per element, so a chain that used to
// stream every intermediate through memory reads its inputs and writes its
// result once, and the intermediates need no buffers. A multi-reader op whose
// operands come from outside any chain is first copied into each reader
// (duplicate-producers), as a fusing compiler recomputes cheap producers.
// An Expand whose readers are all such ops of its result's shape is dropped
// first, its readers taking its input (broadcast-expands): a program
// broadcasts its operands, so the expanded tensor (a ReduceMean's gradient,
// [B, S, 1] to [B, S, d]) is never written.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"
#include "octet/runtime/Pointwise.h"

#include "OnnxBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace octet {
#define GEN_PASS_DEF_FUSEPOINTWISE
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

using octet::staticTensor;

/// The operand count of an op type a Pointwise program may hold (the runtime's table), else 0.
int arityOf(StringRef t) {
  const octet::rt::PwOpInfo *info = octet::rt::lookupPointwiseOp(std::string_view(t.data(), t.size()));
  return info ? info->arity : 0;
}

/// Whether `op` can join a program: a listed type with its arity, a static float32
/// result, float32 operands (Where: a boolean condition) of at most the result's rank.
bool fusible(Operation &op) {
  if (!isa<ox::ONNXDialect>(op.getDialect()) || op.getNumResults() != 1 || op.getNumRegions())
    return false;
  StringRef type = ox::ONNXDialect::getOnnxOpType(&op);
  if (isa<ox::GenericNodeOp>(op) || arityOf(type) == 0 || int(op.getNumOperands()) != arityOf(type))
    return false;
  auto rt = staticTensor(op.getResult(0).getType());
  if (!rt || !rt.getElementType().isF32())
    return false;
  for (auto [i, v] : llvm::enumerate(op.getOperands())) {
    auto t = staticTensor(v.getType());
    bool cond = type == "Where" && i == 0;
    if (!t || t.getRank() > rt.getRank() || !(cond ? t.getElementType().isInteger(1) : t.getElementType().isF32()))
      return false;
  }
  return true;
}

struct FusePointwise : octet::impl::FusePointwiseBase<FusePointwise> {
  using FusePointwiseBase::FusePointwiseBase;

  /// The distinct values `ops` read from outside themselves, in order of first use.
  static llvm::SetVector<Value> inputsOf(ArrayRef<Operation *> ops) {
    llvm::SmallPtrSet<Operation *, 16> inside(ops.begin(), ops.end());
    llvm::SetVector<Value> in;
    for (Operation *o : ops)
      for (Value v : o->getOperands())
        if (!inside.contains(v.getDefiningOp()))
          in.insert(v);
    return in;
  }

  /// Whether `user` could join a program with `producer`: fusible, of the producer's shape.
  static bool joinable(Operation *user, Operation *producer) {
    return fusible(*user) && user->getResult(0).getType() == producer->getResult(0).getType();
  }

  /// duplicate-producers: an op with several readers, all joinable, whose operands are not
  /// results of ops it could join (so no chain loses a member), gets one copy per reader.
  static void copyProducers(Block &body) {
    SmallVector<Operation *> candidates;
    for (Operation &op : body.without_terminator()) {
      if (!fusible(op) || op.getResult(0).hasOneUse() || op.getResult(0).use_empty())
        continue;
      bool leaves = llvm::none_of(op.getOperands(), [&](Value v) { // no chain to split
        Operation *d = v.getDefiningOp();
        return d && fusible(*d) && d->getResult(0).getType() == op.getResult(0).getType();
      });
      if (leaves && llvm::all_of(op.getResult(0).getUsers(), [&](Operation *u) { return joinable(u, &op); }))
        candidates.push_back(&op);
    }
    for (Operation *op : candidates) {
      llvm::SetVector<Operation *> users(op->getResult(0).getUsers().begin(), op->getResult(0).getUsers().end());
      for (Operation *u : users.getArrayRef().drop_front()) {
        OpBuilder b(u);
        Operation *copy = b.clone(*op);
        u->replaceUsesOfWith(op->getResult(0), copy->getResult(0));
      }
    }
  }

  /// The numpy broadcast of `shapes`, or nothing where they do not broadcast.
  static std::optional<SmallVector<int64_t>> broadcastOf(ArrayRef<ArrayRef<int64_t>> shapes) {
    SmallVector<int64_t> r;
    for (ArrayRef<int64_t> s : shapes) {
      if (s.size() > r.size())
        r.insert(r.begin(), s.size() - r.size(), 1);
      for (size_t i = 0; i < s.size(); ++i) {
        int64_t &d = r[r.size() - s.size() + i];
        if (s[i] != d && s[i] != 1 && d != 1)
          return std::nullopt;
        d = s[i] == 1 ? d : s[i];
      }
    }
    return r;
  }

  /// broadcast-expands: an Expand of a float32 tensor whose readers are all fusible ops of its
  /// result's type, each still of that shape when it reads the Expand's input instead, goes.
  static void dropExpands(Block &body) {
    SmallVector<Operation *> dead;
    for (Operation &op : body.without_terminator()) {
      auto ex = dyn_cast<ox::ExpandOp>(op);
      if (!ex || ex.getOutput().use_empty())
        continue;
      auto in = staticTensor(ex.getInput().getType()), out = staticTensor(ex.getOutput().getType());
      if (!in || !out || !in.getElementType().isF32() || in.getRank() > out.getRank())
        continue;
      bool all = llvm::all_of(ex.getOutput().getUsers(), [&](Operation *u) {
        if (!fusible(*u) || u->getResult(0).getType() != out)
          return false;
        SmallVector<ArrayRef<int64_t>> shapes;
        for (Value v : u->getOperands())
          shapes.push_back(v == ex.getOutput() ? in.getShape() : v.getType().cast<RankedTensorType>().getShape());
        std::optional<SmallVector<int64_t>> b = broadcastOf(shapes);
        return b && ArrayRef<int64_t>(*b) == out.getShape();
      });
      if (!all)
        continue;
      ex.getOutput().replaceAllUsesWith(ex.getInput());
      dead.push_back(ex);
    }
    for (Operation *op : dead)
      op->erase();
  }

  /// A program of `shape` whose result only members of `joined` read, more than one of them (a
  /// value the formula reads several times: the GELU gradient's tanh), joins `joined` (its group
  /// number into `merge`), as long as the limits allow; again, until none does.
  void joinReadOnlyInside(SmallVector<Operation *> &joined, llvm::SetVector<int> &merge,
                          const llvm::DenseMap<Operation *, int> &groupOf,
                          const std::vector<SmallVector<Operation *>> &groups, ArrayRef<int64_t> shape) {
    for (bool grew = true; grew;) {
      grew = false;
      llvm::SmallPtrSet<Operation *, 32> inside(joined.begin(), joined.end());
      for (Operation *o : joined) {
        for (Value v : o->getOperands()) {
          Operation *p = v.getDefiningOp();
          auto it = p ? groupOf.find(p) : groupOf.end();
          if (it == groupOf.end() || merge.contains(it->second) || groups[size_t(it->second)].empty() ||
              groups[size_t(it->second)].back() != p || v.getType().cast<RankedTensorType>().getShape() != shape ||
              !llvm::all_of(v.getUsers(), [&](Operation *u) { return inside.contains(u); }))
            continue;
          SmallVector<Operation *> tried = joined;
          tried.append(groups[size_t(it->second)]);
          if (int64_t(tried.size()) > maxOps || int64_t(inputsOf(tried).size()) > maxInputs)
            continue;
          joined = std::move(tried);
          merge.insert(it->second);
          grew = true;
          break;
        }
        if (grew)
          break;
      }
    }
  }

  /// recompute-programs: a program (a group of two ops or more) whose result several other
  /// programs read, computed from one tensor (scalars aside), is copied into each of them: SiLU's
  /// x * sigmoid(x), read by SwiGLU's product in the forward and by the up projection's gradient
  /// in the backward, is then recomputed from x there (which the SiLU gradient reads anyway), and
  /// the forward's product absorbs it: the SiLU output is never stored. Whether it applies
  /// depends on the programs the ops would form, so `groups` are those of a first grouping;
  /// returns whether anything was copied.
  static bool copyPrograms(ArrayRef<SmallVector<Operation *>> groups) {
    llvm::DenseMap<Operation *, size_t> groupOf;
    for (auto [i, ops] : llvm::enumerate(groups))
      for (Operation *o : ops)
        groupOf[o] = i;
    bool copied = false;
    for (auto [i, ops] : llvm::enumerate(groups)) {
      if (ops.size() < 2)
        continue;
      Operation *root = ops.back();
      Value r = root->getResult(0);
      if (r.hasOneUse() || r.use_empty())
        continue;
      auto tensors = llvm::count_if(inputsOf(ops), [](Value v) {
        auto t = staticTensor(v.getType());
        return !t || t.getNumElements() != 1;
      });
      bool readers = llvm::all_of(r.getUsers(), [&](Operation *u) {
        auto it = groupOf.find(u);
        return joinable(u, root) && it != groupOf.end() && it->second != i;
      });
      if (tensors > 1 || !readers)
        continue;
      llvm::SetVector<Operation *> users(r.getUsers().begin(), r.getUsers().end());
      for (Operation *u : users.getArrayRef().drop_front()) {
        OpBuilder b(u);
        IRMapping map;
        for (Operation *o : ops)
          b.clone(*o, map);
        u->replaceUsesOfWith(r, map.lookup(r));
      }
      copied = true;
    }
    return copied;
  }

  /// expand-gelus: a float32 Gelu whose readers could all join a program with it becomes its
  /// formula's ops, in the runtimes' order of operations (0.5 x (1 + tanh(k (x + 0.044715 x^3))) or
  /// 0.5 x (1 + erf(x / sqrt 2))), which the programs then take in (GeGLU's gelu(gate) x up, and the
  /// up projection's gradient recomputing it); a Gelu any other op reads (an FP8 cast) stays.
  static void expandGelus(Block &body) {
    SmallVector<ox::GeluOp> gelus;
    for (Operation &op : body.without_terminator())
      if (auto g = dyn_cast<ox::GeluOp>(op); g && staticTensor(g.getY().getType()) &&
                                             staticTensor(g.getY().getType()).getElementType().isF32() &&
                                             !g.getY().use_empty() &&
                                             llvm::all_of(g.getY().getUsers(), [&](Operation *u) { return joinable(u, g); }))
        gelus.push_back(g);
    for (ox::GeluOp g : gelus) {
      OpBuilder b(g);
      octet::OnnxBuilder ox(b, g.getLoc());
      Value x = g.getX();
      Type t = x.getType();
      auto mul = [&](Value a, Value c) { return ox.op("Mul", t, {a, c}); };
      auto add = [&](Value a, Value c) { return ox.op("Add", t, {a, c}); };
      Value inner;
      if (g.getApproximate().value_or("none") == "tanh")
        inner = ox.op("Tanh", t, {mul(ox.f32(0.7978845608028654f), add(x, mul(mul(mul(ox.f32(0.044715f), x), x), x)))});
      else
        inner = ox.op("Erf", t, {mul(x, ox.f32(0.7071067811865476f))});
      Value y = mul(mul(ox.f32(0.5f), x), add(ox.f32(1.0f), inner));
      g.getY().replaceAllUsesWith(y);
      g->erase();
    }
  }

  void runOnFunction(func::FuncOp func) {
    Block &body = func.getBody().front();
    if (expandGelus_)
      expandGelus(body);
    if (broadcastExpands)
      dropExpands(body);
    if (duplicateProducers)
      copyProducers(body);
    std::vector<SmallVector<Operation *>> groups = groupsOf(body);
    if (recomputePrograms && copyPrograms(groups))
      groups = groupsOf(body);
    for (SmallVector<Operation *> &ops : groups)
      if (ops.size() >= 2)
        rewrite(ops);
  }

  /// The programs the block's fusible ops form, in block order of their first op (members in
  /// program order; a group merged into a later one is left empty).
  std::vector<SmallVector<Operation *>> groupsOf(Block &body) {
    llvm::DenseMap<Operation *, int> groupOf;
    std::vector<SmallVector<Operation *>> groups;
    for (Operation &op : body.without_terminator()) {
      if (!fusible(op))
        continue;
      auto shape = op.getResult(0).getType().cast<RankedTensorType>().getShape();
      // Producers in a program whose only reader is `op`, with op's shape.
      llvm::SetVector<int> merge;
      for (Value v : op.getOperands()) {
        Operation *p = v.getDefiningOp();
        auto it = p ? groupOf.find(p) : groupOf.end();
        if (it == groupOf.end() || v.getType().cast<RankedTensorType>().getShape() != shape)
          continue;
        if (llvm::all_of(v.getUsers(), [&](Operation *u) { return u == &op; }))
          merge.insert(it->second);
      }
      SmallVector<Operation *> joined;
      for (int g : merge)
        joined.append(groups[size_t(g)]);
      joined.push_back(&op);
      if (!merge.empty() && int64_t(joined.size()) <= maxOps && int64_t(inputsOf(joined).size()) <= maxInputs)
        joinReadOnlyInside(joined, merge, groupOf, groups, shape);
      if (merge.empty() || int64_t(joined.size()) > maxOps || int64_t(inputsOf(joined).size()) > maxInputs) {
        groupOf[&op] = int(groups.size());
        groups.push_back({&op});
        continue;
      }
      llvm::sort(joined, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      int g = int(groups.size());
      for (int old : merge)
        groups[size_t(old)].clear();
      for (Operation *o : joined)
        groupOf[o] = g;
      groups.push_back(std::move(joined));
    }
    return groups;
  }

  void rewrite(ArrayRef<Operation *> ops) {
    Operation *root = ops.back();
    llvm::SetVector<Value> inputs = inputsOf(ops);
    llvm::DenseMap<Operation *, int64_t> slot;
    SmallVector<Attribute> types;
    SmallVector<int64_t> args;
    SmallVector<Location> locs{root->getLoc()};
    OpBuilder b(root);
    for (Operation *o : ops) {
      types.push_back(b.getStringAttr(ox::ONNXDialect::getOnnxOpType(o)));
      for (int j = 0; j < 3; ++j) {
        if (j >= int(o->getNumOperands())) {
          args.push_back(-1);
          continue;
        }
        Value v = o->getOperand(unsigned(j));
        auto it = slot.find(v.getDefiningOp());
        args.push_back(it != slot.end() ? int64_t(inputs.size()) + it->second
                                        : int64_t(llvm::find(inputs, v) - inputs.begin()));
      }
      slot[o] = int64_t(slot.size());
      if (o != root)
        locs.push_back(o->getLoc());
    }
    OperationState st(b.getFusedLoc(locs), "onnx.node");
    st.addOperands(inputs.getArrayRef());
    st.addTypes(root->getResultTypes());
    st.addAttribute("op_type", b.getStringAttr("Pointwise"));
    st.addAttribute("domain", b.getStringAttr("octet"));
    st.addAttribute("attrs", b.getDictionaryAttr({b.getNamedAttr("ops", b.getArrayAttr(types)),
                                                  b.getNamedAttr("args", b.getDenseI64ArrayAttr(args))}));
    for (NamedAttribute a : root->getAttrs()) // result names and the like
      if (a.getName().getValue().startswith("octet."))
        st.addAttribute(a.getName(), a.getValue());
    Operation *fused = b.create(st);
    root->getResult(0).replaceAllUsesWith(fused->getResult(0));
    for (Operation *o : llvm::reverse(ops))
      o->erase();
  }

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (maxOps < 2 || maxOps > octet::rt::kPointwiseMaxOps || maxInputs < 1 ||
          maxInputs > octet::rt::kPointwiseMaxInputs) {
        f.emitError() << "octet-fuse-pointwise: max-ops=" << int64_t(maxOps) << " max-inputs=" << int64_t(maxInputs)
                      << " is outside what runtimes run; use max-ops in [2, " << octet::rt::kPointwiseMaxOps
                      << "] and max-inputs in [1, " << octet::rt::kPointwiseMaxInputs << "]";
        return signalPassFailure();
      }
      if (!f.getBody().empty())
        runOnFunction(f);
    });
  }
};

} // namespace
