//===- FreeEarly.cpp - Read a large value as soon as it is made ------------===//
//
// octet-free-early (Passes.td): when every reader of a large value could run right after the op
// that makes it, and together they make fewer bytes than they let go, they move there: the
// value's buffer is freed at once instead of living to its last reader. MS-AMP's weight
// gradients are the case it was written for: each float32 gradient was cast to FP8 (and
// dequantized for the gradient norm) at the step's end, so every one of them was alive there.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_FREEEARLY
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

/// Bytes of a statically shaped tensor; -1 otherwise.
int64_t bytesOf(Value v) {
  auto t = v.getType().dyn_cast<RankedTensorType>();
  if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return -1;
  return t.getNumElements() * int64_t((t.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

/// Ops that compute their results from their operands alone, so that they may run anywhere after
/// them: no random op, no subgraph, no state update or collective, and no copy another pass placed
/// on purpose (a checkpointed block's forward, a recomputed FP8 cast).
bool movable(Operation *op) {
  if (op->getNumRegions() || op->hasTrait<OpTrait::IsTerminator>() || op->hasAttr("octet.recompute_block"))
    return false;
  if (auto names = op->getAttrOfType<ArrayAttr>(octet::kResultNamesAttr))
    for (Attribute n : names)
      if (auto s = n.dyn_cast<StringAttr>(); s && s.getValue().endswith(".recomputed"))
        return false;
  if (isa<fp8::AmaxOp, fp8::CastOp, fp8::CastAmaxOp, fp8::DynamicScaleOp, fp8::DequantizeOp>(op))
    return true;
  if (isa<ox::ConstantOp>(op))
    return true;
  auto n = dyn_cast<ox::GenericNodeOp>(op);
  if (!n)
    return false;
  StringRef type = n.getOpType();
  return type != "Dropout" && !type.startswith("Random") && type != "Bernoulli" && type != "Multinomial";
}

/// What one op's results may add at the new place without counting against the bytes freed: a
/// few scalars (an amax, a scale).
constexpr int64_t kScalarBytes = 64;

struct FreeEarly : octet::impl::FreeEarlyBase<FreeEarly> {
  using FreeEarlyBase::FreeEarlyBase;

  Block *body = nullptr;
  llvm::DenseMap<Operation *, int64_t> pos;

  void number() {
    pos.clear();
    int64_t i = 0;
    for (Operation &op : *body)
      pos[&op] = i++;
  }
  bool before(Operation *a, Operation *b) { return pos.lookup(a) < pos.lookup(b); }

  /// Adds to `moves` (producers first) what must move for `op` to run right after `anchor`: `op`
  /// and, where its operands are made later, their producers, when those make only scalars.
  bool collect(Operation *op, Operation *anchor, llvm::SetVector<Operation *> &moves, int depth) {
    if (moves.contains(op) || !before(anchor, op))
      return true;
    if (depth > 8 || !movable(op))
      return false;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != body || def == anchor || before(def, anchor) || moves.contains(def))
        continue;
      int64_t small = 0;
      for (Value r : def->getResults()) {
        int64_t b = bytesOf(r);
        small = b < 0 ? kScalarBytes + 1 : small + b;
      }
      if (small > kScalarBytes || !collect(def, anchor, moves, depth + 1))
        return false;
    }
    moves.insert(op);
    return true;
  }

  /// Moves the readers of `value` (made by `anchor`) to right after `anchor` where that frees it
  /// sooner and adds fewer bytes than it frees. True when it moved them.
  bool tryValue(Value value, Operation *anchor) {
    int64_t freed = bytesOf(value);
    if (freed < minBytes)
      return false;
    SmallVector<Operation *> readers;
    for (Operation *u : value.getUsers()) {
      if (u->getBlock() != body || u->hasTrait<OpTrait::IsTerminator>())
        return false; // alive to the step's end anyway
      if (!llvm::is_contained(readers, u))
        readers.push_back(u);
    }
    if (readers.empty())
      return false;
    llvm::sort(readers, [&](Operation *a, Operation *b) { return before(a, b); });
    llvm::SetVector<Operation *> moves;
    for (Operation *r : readers)
      if (!collect(r, anchor, moves, 0))
        return false;
    // Already as early as it can be: the moves would fill the places right after the anchor.
    if (pos.lookup(readers.back()) - pos.lookup(anchor) <= int64_t(moves.size()))
      return false;
    int64_t added = 0;
    for (Operation *m : moves)
      for (Value r : m->getResults()) {
        int64_t b = bytesOf(r);
        if (b < 0)
          return false;
        added += b;
      }
    if (added - freed > 0)
      return false;
    Operation *after = anchor;
    for (Operation *m : moves) { // in dependence order: producers first
      m->moveAfter(after);
      after = m;
    }
    number();
    return true;
  }

  void runOnOperation() override {
    int64_t moved = 0;
    getOperation().walk([&](func::FuncOp f) {
      if (f.getBody().empty())
        return;
      body = &f.getBody().front();
      number();
      SmallVector<Operation *> ops;
      for (Operation &op : *body)
        ops.push_back(&op);
      for (Operation *op : ops) // in the original order: a value's readers move before theirs do
        for (Value r : op->getResults())
          moved += tryValue(r, op);
    });
    if (moved)
      getOperation()->setAttr("octet.freed_early", IntegerAttr::get(IntegerType::get(&getContext(), 64), moved));
  }
};

} // namespace
