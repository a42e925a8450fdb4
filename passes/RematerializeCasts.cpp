//===- RematerializeCasts.cpp - Recompute casts instead of keeping them ----===//
//
// Two passes that trade a little recomputation for memory across the step, sharing the grouping
// of a value's readers into clusters (readerClusters): octet-rematerialize-casts (below) and
// octet-rematerialize-fp8-casts (RematerializeFp8Casts: the FP8 codes a backward GEMM reads,
// cast again before it from what the backward keeps anyway; see Passes.td).
//
// octet-rematerialize-casts: an onnx.Cast of an initializer (a parameter or a state tensor,
// available all step) is cheap to recompute but costly to keep: MS-AMP O2's FP16 weights
// cast to FP32 are read by the forward's FP8 casts and again by the optimizer at the end of
// the step, so one FP32 copy of every weight stays alive across the whole step. The pass
// groups a Cast's readers into clusters (consecutive readers at most `distance` ops apart),
// moves the Cast before its first cluster and gives every later cluster its own copy, placed
// before that cluster's first reader. fp8-opt runs it when writing a plan (after CSE, which
// would merge the copies back).
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

namespace octet {
#define GEN_PASS_DEF_REMATERIALIZECASTS
#define GEN_PASS_DEF_REMATERIALIZEFP8CASTS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace fp8 = octet::fp8;
namespace ox = octet::onnx_dialect;

namespace {

/// Both passes' `distance` must be at least 1 (an error on `f` otherwise).
LogicalResult checkDistance(func::FuncOp f, StringRef pass, int64_t distance) {
  if (distance >= 1)
    return success();
  return f.emitError() << pass << ": distance=" << distance << " must be at least 1";
}

/// Position of every top-level op of `body`.
llvm::DenseMap<Operation *, int64_t> blockIndex(Block &body) {
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : body)
    index[&op] = n++;
  return index;
}

/// The readers of `values` in block order (a reader in a nested region counts at its top-level
/// ancestor), split into clusters: a reader more than `distance` ops after the previous one
/// starts a new cluster.
using Use = std::pair<int64_t, OpOperand *>;
SmallVector<SmallVector<Use>> readerClusters(Block &body, const llvm::DenseMap<Operation *, int64_t> &index,
                                             ValueRange values, int64_t distance) {
  SmallVector<Use> uses;
  for (Value v : values)
    for (OpOperand &u : v.getUses())
      if (Operation *top = body.findAncestorOpInBlock(*u.getOwner()))
        uses.push_back({index.lookup(top), &u});
  llvm::sort(uses, [](const Use &a, const Use &b) { return a.first < b.first; });
  SmallVector<SmallVector<Use>> clusters;
  for (size_t i = 0; i < uses.size(); ++i) {
    if (i == 0 || uses[i].first - uses[i - 1].first > distance)
      clusters.emplace_back();
    clusters.back().push_back(uses[i]);
  }
  return clusters;
}

struct RematerializeCasts : octet::impl::RematerializeCastsBase<RematerializeCasts> {
  using RematerializeCastsBase::RematerializeCastsBase;

  void runOnFunction(func::FuncOp f) {
    Block &body = f.getBody().front();
    llvm::DenseMap<Operation *, int64_t> index = blockIndex(body);
    SmallVector<ox::CastOp> casts;
    for (auto c : body.getOps<ox::CastOp>())
      if (c.getInput().getDefiningOp<ox::InitializerOp>())
        casts.push_back(c);
    for (ox::CastOp c : casts) {
      auto clusters = readerClusters(body, index, c->getResults(), distance);
      if (clusters.empty())
        continue;
      c->moveBefore(body.findAncestorOpInBlock(*clusters.front().front().second->getOwner()));
      for (auto &cluster : llvm::drop_begin(clusters)) {
        OpBuilder b(body.findAncestorOpInBlock(*cluster.front().second->getOwner()));
        Value copy = b.clone(*c)->getResult(0);
        for (auto &[pos, use] : cluster)
          use->set(copy);
      }
    }
  }

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (failed(checkDistance(f, "octet-rematerialize-casts", distance)))
        return signalPassFailure();
      if (!f.getBody().empty())
        runOnFunction(f);
    });
  }
};

/// Recomputes an FP8 cast's input before `at` (the first reader of a far cluster): the value
/// itself where it is a parameter, state or argument or is still read at or after `at`; else a
/// clone of the Reshape, Cast, Gelu or LayerNormalization that made it from such values (up to
/// `depth` ops deep).
struct Recompute {
  Block &body;
  const llvm::DenseMap<Operation *, int64_t> &index;
  int64_t at;

  bool liveAt(Value v) const {
    if (v.isa<BlockArgument>() || v.getDefiningOp<ox::InitializerOp>() || v.getDefiningOp<ox::ConstantOp>())
      return true;
    // A scalar (a scale) kept until `at` costs nothing: the copy reads it rather than recomputing it.
    if (auto t = v.getType().dyn_cast<RankedTensorType>(); t && t.hasStaticShape() && t.getNumElements() == 1)
      return true;
    for (OpOperand &u : v.getUses())
      if (Operation *top = body.findAncestorOpInBlock(*u.getOwner()))
        if (auto it = index.find(top); it != index.end() && it->second >= at)
          return true;
    return false;
  }

  /// The op that makes `v` again before `at`, if one is needed and allowed (null: none needed):
  /// a Reshape, Cast or Gelu, or a LayerNormalization (RMSNormalization) whose only result read is
  /// `v` (its mean and inverse standard deviation unread, so the copy's are dead too).
  FailureOr<Operation *> maker(Value v) const {
    if (liveAt(v))
      return nullptr;
    Operation *def = v.getDefiningOp();
    if (!def || def->getNumRegions())
      return failure();
    if (def->getNumResults() == 1 && isa<ox::ReshapeOp, ox::CastOp, ox::GeluOp>(def))
      return def;
    // MS-AMP O3's weight: its float32 master cast to FP8 and dequantized at the step's start, which
    // the forward's FP8 Linear casts again: the chain runs again from the master (a state).
    if (isa<fp8::DequantizeOp, fp8::CastOp>(def))
      return def;
    if (octet::rowNorm(def) && v.cast<OpResult>().getResultNumber() == 0 &&
        llvm::all_of(def->getResults().drop_front(), [](Value r) { return r.use_empty(); }))
      return def;
    return failure();
  }

  bool possible(Value v, int depth) const {
    FailureOr<Operation *> def = maker(v);
    if (failed(def) || !*def)
      return succeeded(def);
    return depth > 0 && llvm::all_of((*def)->getOperands(), [&](Value in) { return possible(in, depth - 1); });
  }

  /// What a copy of a cast of `v` costs, as `sources=` names it: "layernorm" or "gelu" where it
  /// runs that op again (possible() said it can), else "weight" where `v` is a parameter or
  /// state (views and Casts aside), else "activation" (a tensor still live: only the cast reruns).
  StringRef kind(Value v) const {
    for (;;) {
      FailureOr<Operation *> def = maker(v);
      if (succeeded(def) && *def && octet::rowNorm(*def))
        return "layernorm";
      if (succeeded(def) && *def && isa<ox::GeluOp>(*def))
        return "gelu";
      Operation *op = v.getDefiningOp();
      if (!op || isa<ox::InitializerOp, ox::ConstantOp>(op))
        return "weight";
      if (!isa<ox::ReshapeOp, ox::CastOp, fp8::DequantizeOp, fp8::CastOp>(op))
        return "activation";
      v = op->getOperand(0);
    }
  }

  /// `v` before `at`, cloning its makers at `b` (possible() said it can).
  Value make(Value v, OpBuilder &b) const {
    Operation *def = *maker(v);
    if (!def)
      return v;
    IRMapping map;
    for (Value in : def->getOperands())
      map.map(in, make(in, b));
    Operation *copy = b.clone(*def, map);
    copy->removeAttr(octet::kResultNamesAttr);
    return copy->getResult(v.cast<OpResult>().getResultNumber());
  }
};

struct RematerializeFp8Casts : octet::impl::RematerializeFp8CastsBase<RematerializeFp8Casts> {
  using RematerializeFp8CastsBase::RematerializeFp8CastsBase;

  /// The names of the copy's results: the cast's, marked as recomputed.
  static ArrayAttr copyNames(Operation *cast, ArrayRef<int> results, Builder &b) {
    auto names = cast->getAttrOfType<ArrayAttr>(octet::kResultNamesAttr);
    SmallVector<Attribute> out;
    for (int r : results) {
      auto n = names && r < int(names.size()) ? names[r].dyn_cast<StringAttr>() : StringAttr();
      out.push_back(b.getStringAttr(n && !n.getValue().empty() ? (n.getValue() + ".recomputed").str() : ""));
    }
    return b.getArrayAttr(out);
  }

  void runOnFunction(func::FuncOp f) {
    Block &body = f.getBody().front();
    llvm::DenseMap<Operation *, int64_t> index = blockIndex(body);
    SmallVector<Operation *> casts;
    for (Operation &op : body)
      if (isa<fp8::CastOp, fp8::CastAmaxOp>(op))
        casts.push_back(&op);
    for (Operation *c : casts) {
      auto ca = dyn_cast<fp8::CastAmaxOp>(c);
      Value input = c->getOperand(0), scale = c->getOperand(1);
      Value codes = c->getResult(0), transposed = ca ? ca.getTransposed() : Value();
      SmallVector<Value, 2> read{codes};
      if (transposed)
        read.push_back(transposed);
      auto saturate = c->getAttrOfType<BoolAttr>("saturate");
      auto clusters = readerClusters(body, index, read, distance);
      for (auto &cluster : llvm::drop_begin(clusters)) {
        Operation *first = body.findAncestorOpInBlock(*cluster.front().second->getOwner());
        OpBuilder b(first);
        Recompute recompute{body, index, index.lookup(first)};
        if (!recompute.possible(input, 3) || (!sources.empty() && !llvm::is_contained(sources, recompute.kind(input))))
          continue;
        Value in = recompute.make(input, b);
        bool wantsTransposed = llvm::any_of(cluster, [&](const Use &u) { return u.second->get() == transposed; });
        Operation *copy;
        if (wantsTransposed) {
          copy = b.create<fp8::CastAmaxOp>(c->getLoc(), codes.getType(), ca.getAmax().getType(), transposed.getType(), in,
                                           scale, saturate ? saturate.getValue() : true);
          copy->setAttr(octet::kResultNamesAttr, copyNames(c, {0, 1, 2}, b));
        } else {
          copy = b.create<fp8::CastOp>(c->getLoc(), codes.getType(), in, scale, saturate ? saturate.getValue() : true);
          copy->setAttr(octet::kResultNamesAttr, copyNames(c, {0}, b));
        }
        for (auto &[pos, use] : cluster)
          use->set(use->get() == codes ? copy->getResult(0) : copy->getResult(2));
      }
    }
  }

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (failed(checkDistance(f, "octet-rematerialize-fp8-casts", distance)))
        return signalPassFailure();
      for (const std::string &k : sources)
        if (!llvm::is_contained(octet::rematerializeFp8Sources(), StringRef(k))) {
          f.emitError() << "octet-rematerialize-fp8-casts: sources='" << k << "' is not one of "
                        << llvm::join(octet::rematerializeFp8Sources(), ", ");
          return signalPassFailure();
        }
      if (!f.getBody().empty())
        runOnFunction(f);
    });
  }
};

} // namespace

llvm::ArrayRef<llvm::StringRef> octet::rematerializeFp8Sources() {
  static constexpr llvm::StringRef kinds[] = {"weight", "activation", "gelu", "layernorm"};
  return kinds;
}
