//===- AssignPrecision.cpp - Activations stored in BF16 (the compiler's autocast) ---===//
//
// octet-assign-precision: a training or forward plan keeps every activation in float32
// unless this pass gives it a narrower storage type. With `activations=bf16` a float32
// value is stored in bfloat16 when
//   - it is the result of an op that computes in float32 and rounds what it writes (an
//     FP8 GEMM's D, fused attention's Y and its gradients, the LayerNorm gradient's dX,
//     the loss gradient's dLogits, a Cast that widens a BF16 value: "origins"), or of an elementwise op or GELU whose operands are themselves stored in
//     BF16 (ONNX's typed ops keep one element type for their operands and result, so a
//     residual Add with a float32 operand stays float32, as under PyTorch's autocast), or
//     of a fused Pointwise program whose activation operands (rank >= 2) are all BF16
//     (its scalars and broadcast vectors stay float32: each operand has its own type), or of
//     a rotary embedding whose X is (its cos and sin tables stay float32), or of a Slice,
//     Split or Concat (copies: exact in any type) whose data operands are (a fused QKV
//     projection's result split for attention, the three gradients concatenated back);
//   - every op that reads it (through Reshape-like views, which share its bytes and so
//     its type) reads BF16 at that operand: FP8 casts and amaxes, the LayerNorm gradient,
//     attention, GELU, elementwise ops, Pointwise programs, the rotary embedding (X), the loss
//     and its gradient (logits), ReduceSum (a bias gradient, itself float32), Cast, and Slice,
//     Split and Concat where all their data operands and results are BF16 (one element type);
//   - it has rank >= 2 and is not a result of the function (outputs, gradients, state).
// Parameters, optimizer state, scales, amaxes and parameter gradients (read by the
// gradient norm's ReduceSumSquare) stay float32. A Cast left with a BF16 input and result
// (a kept layer's widened result, the narrowed loss gradient it reads) goes. The conditions are solved together (a
// greatest fixed point: a value leaves the set when a reader or its producer's operands
// do, until nothing changes). Each op still computes in float32 from its widened
// operands and rounds its BF16 results to nearest even, so the CPU reference and a GPU
// kernel agree on what is computed. An FP8 GEMM that writes BF16 takes its bias as BF16
// (an onnx.Cast of the float32 parameter), as cuBLASLt's epilogue reads it.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"
#include "octet/runtime/InPlace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_ASSIGNPRECISION
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

enum class Kind { None, Origin, SameType, Follows, FollowsFirst, Moves };

// The ops below are those both backends run with BF16 operands and results natively (the CPU
// reference widens and rounds around every kernel; the CUDA executor's kernels load and store BF16:
// cuBLASLt's FP8 GEMMs with their bias in the epilogue, cuDNN's attention, the FP8 cast kernels,
// the LayerNorm and RMSNorm gradients, broadcasting elementwise ops, reductions, and Pointwise
// programs, whose generated kernels load and store each operand in its own type, the loss and its
// gradient, which read BF16 logits and compute in float32). An op joins these tables when the CUDA
// executor can run it so; until then its operands and results stay float32 (the LayerNorm and
// RMSNorm forward).

/// Which results an op may write in BF16, and on what condition.
Kind producerKind(const std::string &t, unsigned result) {
  if ((t == "fp8.gemm" || t == "octet::Attention" || t == "octet::LayerNormalizationGrad" ||
       t == "octet::RMSNormalizationGrad" || t == "octet::SoftmaxCrossEntropyLossGrad") &&
      result == 0)
    return Kind::Origin;
  if (t == "octet::AttentionGrad" && result < 3)
    return Kind::Origin;
  if ((t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Gelu") && result == 0)
    return Kind::SameType; // every float operand of the result's type
  if (t == "octet::Pointwise" && result == 0)
    return Kind::Follows; // BF16 where its activation operands are (scalars and vectors aside)
  if (t == "octet::RotaryEmbedding" && result == 0)
    return Kind::FollowsFirst; // BF16 where X is (cos and sin, position tables, stay float32)
  if (t == "Slice" || t == "Split" || t == "Concat")
    return Kind::Moves; // copies: BF16 where every data operand and result is (starts, sizes: int64)
  return Kind::None;
}

/// producerKind of `op`'s result `r`, where a Cast that widens a BF16 value (a kept layer's BF16
/// GEMM result going back to float32) is an origin too: kept in BF16 it is its input, exactly.
Kind producerKind(Operation *op, const std::string &t, unsigned r) {
  if (t == "Cast" && op->getNumOperands() && getElementTypeOrSelf(op->getOperand(0).getType()).isBF16())
    return Kind::Origin;
  return producerKind(t, r);
}

/// Whether an op reads BF16 at operand `i`. SameType ops also need their result in BF16.
bool readsBf16(const std::string &t, unsigned i) {
  if (t == "Cast") // converts whatever it reads
    return i == 0;
  if (t == "fp8.cast" || t == "fp8.cast_amax" || t == "fp8.amax" || t == "ReduceSum" || t == "Gelu" ||
      t == "SoftmaxCrossEntropyLoss" || t == "octet::SoftmaxCrossEntropyLossGrad")
    return i == 0; // the loss reads BF16 logits and computes its softmax in float32
  if (t == "octet::LayerNormalizationGrad" || t == "octet::RMSNormalizationGrad")
    return i == 0 || i == 2 || i == 3; // X, dY, dX_in; not the scale
  if (t == "octet::Attention")
    return i < 3;
  if (t == "octet::AttentionGrad")
    return i != 4; // not the log-sum-exp
  if (t == "octet::RotaryEmbedding" || t == "Slice" || t == "Split")
    return i == 0;
  if (t == "Concat")
    return true;
  return t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "octet::Pointwise"; // each operand its type
}

bool isF32Activation(Value v) {
  auto t = v.getType().dyn_cast<RankedTensorType>();
  return t && t.getElementType().isF32() && t.getRank() >= 2;
}

struct AssignPrecision : octet::impl::AssignPrecisionBase<AssignPrecision> {
  using AssignPrecisionBase::AssignPrecisionBase;

  void runOnOperation() override {
    if (activations != "bf16" && activations != "f32") {
      getOperation().emitError() << "octet-assign-precision: activations='" << activations
                                 << "' is not bf16 or f32";
      return signalPassFailure();
    }
    if (activations == "f32")
      return;
    getOperation().walk([&](func::FuncOp f) {
      if (!f.getBody().empty())
        run(f);
    });
  }

  void run(func::FuncOp f) {
    Block &body = f.getBody().front();
    llvm::DenseSet<Value> results;
    for (Value v : body.getTerminator()->getOperands())
      results.insert(v);
    // Classes: a value and the views of it (they share its bytes, so its type).
    llvm::DenseMap<Value, Value> root;
    llvm::MapVector<Value, SmallVector<Value, 2>> members;
    llvm::DenseMap<Operation *, std::string> type;
    for (Operation &op : body) {
      std::string t = octet::planOpType(&op);
      type[&op] = t;
      for (OpResult r : op.getResults()) {
        if (!isF32Activation(r))
          continue;
        Value in = op.getNumOperands() ? op.getOperand(0) : Value();
        if (octet::rt::isView(t) && in && root.count(in)) {
          Value c = root.lookup(in); // a copy: root[r] may grow the map
          root[r] = c;
          members[c].push_back(r);
        } else if (producerKind(&op, t, r.getResultNumber()) != Kind::None) {
          root[r] = r;
          members[r].push_back(r);
        }
      }
    }
    llvm::SetVector<Value> bf16;
    for (auto &[c, vs] : members)
      bf16.insert(c);
    auto inSet = [&](Value v) {
      auto it = root.find(v);
      return it != root.end() && bf16.contains(it->second);
    };
    auto keeps = [&](Value c) {
      Operation *def = c.getDefiningOp();
      const std::string &t = type[def];
      Kind k = producerKind(def, t, c.cast<OpResult>().getResultNumber());
      if (k == Kind::SameType || k == Kind::Follows || k == Kind::Moves) {
        for (Value in : def->getOperands())
          if (!inSet(in) && (k == Kind::SameType || isF32Activation(in)))
            return false;
      }
      if (k == Kind::FollowsFirst && !inSet(def->getOperand(0)))
        return false;
      for (Value m : members[c]) {
        if (results.contains(m))
          return false;
        for (OpOperand &use : m.getUses()) {
          Operation *u = use.getOwner();
          if (u->getBlock() != &body)
            return false;
          const std::string &ut = type[u];
          if (octet::rt::isView(ut) && use.getOperandNumber() == 0 && u->getNumResults() == 1 &&
              inSet(u->getResult(0)))
            continue;
          if (!readsBf16(ut, use.getOperandNumber()))
            return false;
          Kind uk = producerKind(ut, 0);
          if (uk == Kind::Moves) { // a copy keeps one element type: its results and data operands follow
            for (Value r : u->getResults())
              if (!inSet(r))
                return false;
            for (Value in : u->getOperands())
              if (isF32Activation(in) && !inSet(in))
                return false;
          }
          if (uk == Kind::SameType) { // the reader's result and its other operands follow
            unsigned n = u->getNumOperands();
            if (!inSet(u->getResult(0)))
              return false;
            for (unsigned i = 0; i < n; ++i)
              if (!inSet(u->getOperand(i)))
                return false;
          }
        }
      }
      return true;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (Value c : SmallVector<Value>(bf16.begin(), bf16.end()))
        if (!keeps(c)) {
          bf16.remove(c);
          changed = true;
        }
    }
    Type bf = BFloat16Type::get(f.getContext());
    for (Value c : bf16)
      for (Value m : members[c])
        m.setType(m.getType().cast<RankedTensorType>().clone(bf));
    // A Cast whose input and result are now both BF16 (a kept layer's result widened, or the loss
    // gradient narrowed for a kept layer's GEMMs) is its input.
    for (auto c : llvm::make_early_inc_range(body.getOps<ox::CastOp>()))
      if (c.getInput().getType() == c.getResult().getType()) {
        c.getResult().replaceAllUsesWith(c.getInput());
        c->erase();
      }
    // An FP8 GEMM writing BF16 reads its bias in BF16.
    for (auto g : llvm::make_early_inc_range(body.getOps<fp8::GemmOp>())) {
      Value bias = g.getBias();
      auto bt = bias ? bias.getType().dyn_cast<RankedTensorType>() : RankedTensorType();
      if (!bt || !bt.getElementType().isF32() || !getElementTypeOrSelf(g.getD().getType()).isBF16())
        continue;
      OpBuilder b(g);
      auto cast = b.create<ox::CastOp>(g.getLoc(), bt.clone(bf), bias, b.getIntegerAttr(b.getIntegerType(64, true), 16),
                                       IntegerAttr());
      g.getBiasMutable().assign(cast.getResult());
    }
  }
};

} // namespace
