//===- CheckpointBlocks.cpp - Activation checkpointing of whole blocks ----===//
//
// octet-checkpoint-blocks (Passes.td): the backward of a checkpointed block reads a copy of the
// block's forward, made from what enters the block, instead of the activations the forward kept.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"

namespace octet {
#define GEN_PASS_DEF_CHECKPOINTBLOCKS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

/// `<prefix>.<N>.<rest>`: the prefix and N of the first all-digit component that has a name
/// before it and one after it.
std::optional<std::pair<std::string, int64_t>> blockOfName(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    int64_t n;
    if (!parts[i].empty() && parts[i].find_first_not_of("0123456789") == StringRef::npos &&
        !parts[i].getAsInteger(10, n))
      return std::make_pair(llvm::join(ArrayRef<StringRef>(parts).take_front(i), "."), n);
  }
  return std::nullopt;
}

/// Ops whose copy would not compute the same values.
bool notRepeatable(Operation *op) {
  if (op->getNumRegions())
    return true;
  StringRef type = ox::ONNXDialect::getOnnxOpType(op);
  if (auto n = dyn_cast<ox::GenericNodeOp>(op))
    type = n.getOpType();
  return type == "Dropout" || type.startswith("Random") || type == "Bernoulli" || type == "Multinomial";
}

struct Analysis {
  Block &body;
  llvm::DenseMap<Operation *, int64_t> pos;
  llvm::DenseSet<Operation *> forward; // the ops the loss depends on
  int64_t boundary = -1;               // position of the forward's last op
  llvm::DenseMap<Operation *, bool> weightOnly;
  llvm::DenseMap<Operation *, SmallVector<int64_t, 2>> indices;
  std::string prefix;
  SmallVector<int64_t> starts;      // position of each block's first op
  SmallVector<int64_t> blockNumber; // its N
  std::string why;                  // no blocks: the reason

  explicit Analysis(Block &b) : body(b) {}

  Operation *top(Operation *op) const { return body.findAncestorOpInBlock(*op); }

  /// Whether `op` reads parameters, state and constants only (through such ops).
  bool isWeightOnly(Operation *op) {
    if (auto it = weightOnly.find(op); it != weightOnly.end())
      return it->second;
    bool w = true;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || (!isa<ox::InitializerOp, ox::ConstantOp, ox::NoneOp>(def) && !isWeightOnly(def))) {
        w = false;
        break;
      }
    }
    return weightOnly[op] = w;
  }

  /// The block numbers of the named tensors `op` reads (through weight-only ops), under `prefix`.
  void blocksRead(Operation *op, llvm::SmallSetVector<int64_t, 2> &out, int depth = 0) {
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def)
        continue;
      if (auto init = dyn_cast<ox::InitializerOp>(def)) {
        if (auto b = blockOfName(init.getName()); b && b->first == prefix)
          out.insert(b->second);
      } else if (depth < 8 && !isa<ox::ConstantOp>(def) && isWeightOnly(def)) {
        blocksRead(def, out, depth + 1);
      }
    }
  }

  /// Finds the forward and its blocks; false (with `why`) where there are none.
  bool run(func::FuncOp f) {
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss;
    for (unsigned r = 0; r < f.getNumResults(); ++r)
      if (f.getResultAttr(r, octet::kLossAttr))
        loss = ret.getOperand(r);
    if (!loss) {
      why = "not a training step (no loss result)";
      return false;
    }
    int64_t n = 0;
    for (Operation &op : body.without_terminator())
      pos[&op] = n++;
    SmallVector<Operation *> work;
    auto visit = [&](Value v) {
      if (Operation *def = v.getDefiningOp())
        if (Operation *t = top(def); t && forward.insert(t).second)
          work.push_back(t);
    };
    visit(loss);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      op->walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          visit(v);
      });
    }
    for (Operation *op : forward)
      boundary = std::max(boundary, pos.lookup(op));

    // The prefix: the one most named tensors carry.
    llvm::StringMap<int64_t> prefixCount;
    for (auto init : body.getOps<ox::InitializerOp>())
      if (auto b = blockOfName(init.getName()))
        ++prefixCount[b->first];
    int64_t best = 0;
    for (auto &e : prefixCount)
      if (e.second > best || (e.second == best && e.first() < prefix))
        best = e.second, prefix = e.first().str();
    if (prefix.empty()) {
      why = "no parameters named <prefix>.<N>.<name>";
      return false;
    }
    for (Operation &op : body.without_terminator()) {
      if (!forward.contains(&op) || isa<ox::InitializerOp, ox::ConstantOp, ox::NoneOp>(op) || isWeightOnly(&op))
        continue;
      llvm::SmallSetVector<int64_t, 2> read;
      blocksRead(&op, read);
      if (read.empty())
        continue;
      std::string node = ox::getNodeName(&op);
      std::string what = node.empty() ? op.getName().getStringRef().str() : "node '" + node + "'";
      if (read.size() > 1) {
        why = what + " reads tensors of " + prefix + "." + std::to_string(read[0]) + " and " + prefix + "." +
              std::to_string(read[1]);
        return false;
      }
      int64_t b = read[0];
      if (!blockNumber.empty() && b == blockNumber.back())
        continue;
      if (!blockNumber.empty() && b < blockNumber.back()) {
        why = what + " reads tensors of " + prefix + "." + std::to_string(b) + " after " + prefix + "." +
              std::to_string(blockNumber.back()) + " began";
        return false;
      }
      blockNumber.push_back(b);
      starts.push_back(pos.lookup(&op));
    }
    if (blockNumber.size() < 2) {
      why = "fewer than two blocks named " + prefix + ".<N>";
      return false;
    }
    return true;
  }
};

struct CheckpointBlocks : octet::impl::CheckpointBlocksBase<CheckpointBlocks> {
  using CheckpointBlocksBase::CheckpointBlocksBase;

  /// Checkpoints block `k` of `a`; false where it cannot be (nothing changed).
  static bool checkpoint(Analysis &a, size_t k, ArrayRef<Operation *> ops) {
    int64_t begin = a.starts[k], end = a.starts[k + 1];
    auto inBlock = [&](Operation *op) {
      int64_t p = a.pos.lookup(op);
      return op && a.forward.contains(op) && p >= begin && p < end &&
             !isa<ox::InitializerOp, ox::ConstantOp, ox::NoneOp>(op) && !a.isWeightOnly(op);
    };
    // The block's values the backward reads, those a later block's forward reads aside.
    SmallVector<Value> saved;
    Operation *first = nullptr; // the first backward op that reads one
    for (int64_t p = begin; p < end; ++p) {
      Operation *op = ops[p];
      if (!inBlock(op))
        continue;
      for (Value r : op->getResults()) {
        bool later = false, backward = false;
        for (OpOperand &u : r.getUses()) {
          Operation *t = a.top(u.getOwner());
          if (!t)
            continue;
          int64_t q = a.pos.lookup(t);
          later |= a.forward.contains(t) && q >= end;
          if (q > a.boundary) {
            backward = true;
            if (!first || q < a.pos.lookup(first))
              first = t;
          }
        }
        if (backward && !later)
          saved.push_back(r);
      }
    }
    if (saved.empty())
      return false;
    // What computes them from the block's inputs.
    llvm::DenseSet<Operation *> need;
    SmallVector<Operation *> work;
    for (Value v : saved)
      if (need.insert(v.getDefiningOp()).second)
        work.push_back(v.getDefiningOp());
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (notRepeatable(op))
        return false;
      for (Value in : op->getOperands()) {
        Operation *def = in.getDefiningOp();
        if (def && inBlock(def) && need.insert(def).second)
          work.push_back(def);
      }
    }
    // The copies, in the forward's order, before the first backward reader.
    OpBuilder b(first);
    IRMapping map;
    Builder attrs(first->getContext());
    for (int64_t p = begin; p < end; ++p) {
      Operation *op = ops[p];
      if (!need.contains(op))
        continue;
      Operation *copy = b.clone(*op, map);
      copy->setAttr("octet.recompute_block", attrs.getI64IntegerAttr(a.blockNumber[k]));
      if (auto names = op->getAttrOfType<ArrayAttr>(octet::kResultNamesAttr)) {
        SmallVector<Attribute> renamed;
        for (Attribute n : names) {
          auto s = n.dyn_cast<StringAttr>();
          renamed.push_back(attrs.getStringAttr(s && !s.getValue().empty() ? (s.getValue() + ".recomputed").str() : ""));
        }
        copy->setAttr(octet::kResultNamesAttr, attrs.getArrayAttr(renamed));
      }
    }
    for (Value v : saved) {
      Value copy = map.lookup(v);
      for (OpOperand &u : llvm::make_early_inc_range(v.getUses()))
        if (Operation *t = a.top(u.getOwner()); t && t != copy.getDefiningOp() && a.pos.count(t) &&
                                                a.pos.lookup(t) > a.boundary)
          u.set(copy);
    }
    return true;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t done = 0, of = 0, first = -1, last = -1;
    std::string prefix, why;
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.getBody().empty())
        continue;
      Block &body = f.getBody().front();
      Analysis a(body);
      if (!a.run(f)) {
        why = a.why;
        continue;
      }
      SmallVector<Operation *> ops;
      for (Operation &op : body.without_terminator())
        ops.push_back(&op);
      prefix = a.prefix;
      of = int64_t(a.starts.size()) - 1;
      int64_t want = blocks < 0 ? of : std::min<int64_t>(blocks, of);
      // Copies go before later positions only; the positions of the ops before them still hold.
      for (size_t k = 0; k + 1 < a.starts.size() && done < want; ++k)
        if (checkpoint(a, k, ops)) {
          ++done;
          first = first < 0 ? a.blockNumber[k] : first;
          last = a.blockNumber[k];
        }
    }
    Builder b(module.getContext());
    SmallVector<NamedAttribute> fields = {b.getNamedAttr("blocks", b.getI64IntegerAttr(done)),
                                          b.getNamedAttr("of", b.getI64IntegerAttr(of)),
                                          b.getNamedAttr("prefix", b.getStringAttr(prefix)),
                                          b.getNamedAttr("first", b.getI64IntegerAttr(first)),
                                          b.getNamedAttr("last", b.getI64IntegerAttr(last))};
    if (!why.empty())
      fields.push_back(b.getNamedAttr("why", b.getStringAttr(why)));
    module->setAttr("octet.checkpointed_blocks", b.getDictionaryAttr(fields));
  }
};

} // namespace
