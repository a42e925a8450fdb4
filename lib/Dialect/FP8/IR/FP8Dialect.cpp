//===- FP8Dialect.cpp - fp8 dialect registration and verifiers ------------===//
#include "octet/Dialect/FP8/IR/FP8.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace octet::fp8;

#include "octet/Dialect/FP8/IR/FP8OpsDialect.cpp.inc"
#include "octet/Dialect/FP8/IR/FP8OpsEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "octet/Dialect/FP8/IR/FP8OpsAttributes.cpp.inc"

void FP8Dialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "octet/Dialect/FP8/IR/FP8Ops.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "octet/Dialect/FP8/IR/FP8OpsAttributes.cpp.inc"
      >();
}

double octet::fp8::getFormatMax(Type t) {
  if (t.isFloat8E4M3FN())
    return 448.0;
  if (t.isFloat8E5M2())
    return 57344.0;
  return 0.0;
}

namespace {
/// A scale is per tensor (0-d or one element) or one per row of `data`:
/// the same shape as data with the last dim 1.
LogicalResult verifyScaleShape(Operation *op, Value scale, Value data, StringRef what) {
  auto s = scale.getType().dyn_cast<RankedTensorType>();
  auto d = data.getType().dyn_cast<RankedTensorType>();
  if (!s || !d || s.getRank() == 0 || (s.getRank() == 1 && s.getDimSize(0) == 1))
    return success();
  if (s.getRank() == d.getRank() && s.getShape().back() == 1) {
    for (int64_t i = 0; i + 1 < d.getRank(); ++i)
      if (!s.isDynamicDim(i) && !d.isDynamicDim(i) && s.getDimSize(i) != d.getDimSize(i))
        return op->emitOpError() << what << " shape " << s << " is not per-row for " << d;
    return success();
  }
  return op->emitOpError() << what << " must be per-tensor (0-d) or per-row ([..., 1]), got " << s;
}

LogicalResult verifySameShape(Operation *op, Value a, Value b) {
  if (failed(verifyCompatibleShape(a.getType(), b.getType())))
    return op->emitOpError() << "input and result shapes differ: " << a.getType() << " vs "
                             << b.getType();
  return success();
}

bool isScalarLike(Type t) {
  auto r = t.dyn_cast<RankedTensorType>();
  return !r || r.getRank() == 0 || (r.getRank() == 1 && r.getDimSize(0) == 1);
}
} // namespace

LogicalResult CastOp::verify() {
  if (failed(verifySameShape(*this, getInput(), getOutput())))
    return failure();
  return verifyScaleShape(*this, getScaleInv(), getInput(), "scale_inv");
}

LogicalResult DequantizeOp::verify() {
  if (failed(verifySameShape(*this, getInput(), getOutput())))
    return failure();
  return verifyScaleShape(*this, getScaleInv(), getInput(), "scale_inv");
}

LogicalResult CastAmaxOp::verify() {
  if (failed(verifySameShape(*this, getInput(), getOutput())))
    return failure();
  if (!isScalarLike(getAmax().getType()))
    return emitOpError() << "amax must be 0-d (per tensor), got " << getAmax().getType();
  if (Value t = getTransposed()) {
    auto in = getInput().getType().dyn_cast<RankedTensorType>();
    auto tt = t.getType().dyn_cast<RankedTensorType>();
    if (tt && tt.getElementType() != getOutput().getType().cast<ShapedType>().getElementType())
      return emitOpError() << "transposed must have the output's element type, got " << tt;
    if (in && in.hasStaticShape() && tt) {
      if (in.getRank() < 1)
        return emitOpError("a transposed copy needs an input of rank 1 or more");
      int64_t cols = in.getShape().back(), rows = in.getNumElements() / std::max<int64_t>(cols, 1);
      if (tt.getRank() != 2 || (tt.hasStaticShape() && (tt.getDimSize(0) != cols || tt.getDimSize(1) != rows)))
        return emitOpError() << "transposed must be [" << cols << ", " << rows
                             << "] (the input as 2-D, transposed), got " << tt;
    }
  }
  return verifyScaleShape(*this, getScaleInv(), getInput(), "scale_inv");
}

LogicalResult AmaxOp::verify() {
  auto in = getInput().getType().dyn_cast<RankedTensorType>();
  auto out = getAmax().getType().dyn_cast<RankedTensorType>();
  if (!getRowwise()) {
    if (!isScalarLike(getAmax().getType()))
      return emitOpError() << "a per-tensor amax must be 0-d, got " << getAmax().getType();
    return success();
  }
  if (in && in.getRank() == 0)
    return emitOpError("rowwise amax needs an input of rank >= 1");
  if (in && out) {
    if (out.getRank() != in.getRank() || out.getShape().back() != 1)
      return emitOpError() << "rowwise amax must have shape [..., 1] matching the input, got "
                           << out;
  }
  return success();
}

/// TypeAttrOf<AnyTypeOf<...>> does not check the element list: do it here.
static LogicalResult verifyFormat(Operation *op, Type format) {
  if (getFormatMax(format) == 0.0)
    return op->emitOpError() << "format must be f8E4M3FN or f8E5M2, got " << format;
  return success();
}

LogicalResult DelayedScaleOp::verify() {
  if (failed(verifyFormat(*this, getFormat())))
    return failure();
  auto h = getHistory().getType().dyn_cast<RankedTensorType>();
  if (h && (h.getRank() != 1 || h.getDimSize(0) == 0))
    return emitOpError() << "history must be a non-empty 1-D tensor, got " << h;
  if (getNewHistory().getType() != getHistory().getType())
    return emitOpError("new_history must have the history's type");
  for (Value v : std::initializer_list<Value>{getPrevScale(), getNewAmax(), getScale(), getScaleInv()})
    if (!isScalarLike(v.getType()))
      return emitOpError() << "scales and amax must be 0-d, got " << v.getType();
  if (getMargin() < 0)
    return emitOpError() << "margin must be >= 0, got " << getMargin();
  if (getInterval() < 1)
    return emitOpError() << "interval must be >= 1, got " << getInterval();
  return success();
}

LogicalResult DynamicScaleOp::verify() {
  if (failed(verifyFormat(*this, getFormat())))
    return failure();
  if (getScale().getType() != getAmax().getType() || getScaleInv().getType() != getAmax().getType())
    return emitOpError("scale and scale_inv must have the amax's type");
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult GemmOp::verify() {
  Type ea = getElementTypeOrSelf(getA().getType());
  Type eb = getElementTypeOrSelf(getB().getType());
  if (ea.isFloat8E5M2() && eb.isFloat8E5M2())
    return emitOpError("E5M2 x E5M2 is not supported by FP8 tensor cores; one operand must be E4M3");
  auto a = getA().getType().dyn_cast<RankedTensorType>();
  auto b = getB().getType().dyn_cast<RankedTensorType>();
  if (b && b.getRank() != 2)
    return emitOpError() << "B must be 2-D, got " << b;
  if (a && a.getRank() < 2)
    return emitOpError() << "A must have rank >= 2, got " << a;
  if (a && b) {
    int64_t ka = getTransposeA() ? a.getDimSize(a.getRank() - 2) : a.getShape().back();
    int64_t kb = getTransposeB() ? b.getDimSize(1) : b.getDimSize(0);
    if (!ShapedType::isDynamic(ka) && !ShapedType::isDynamic(kb) && ka != kb)
      return emitOpError() << "contraction dimensions differ: K=" << ka << " vs K=" << kb;
  }
  Type ed = getElementTypeOrSelf(getD().getType());
  bool fp8Out = ed.isFloat8E4M3FN() || ed.isFloat8E5M2();
  if (fp8Out && !getDScale())
    return emitOpError("an FP8 output needs a d_scale operand");
  if (!fp8Out && getDScale())
    return emitOpError("d_scale is only meaningful for an FP8 output");
  if (getWithAmax() != (getDAmax().size() == 1))
    return emitOpError("with_amax requires exactly one d_amax result (and vice versa)");
  if (Value c = getAccumulate()) {
    if (c.getType() != getD().getType() || !ed.isF32())
      return emitOpError() << "accumulate must have the float32 result's type " << getD().getType() << ", got "
                           << c.getType();
    if (getWithAmax() || getDScale())
      return emitOpError("accumulate takes neither with_amax nor d_scale");
  }
  // Scales: per tensor, or rowwise ([M, 1] for a 2-D A; [N, 1] for B as [N, K]).
  auto perRow = [](Value s, RankedTensorType x) {
    auto st = s.getType().dyn_cast<RankedTensorType>();
    return st && x && x.getRank() == 2 && st.getRank() == 2 && st.getDimSize(1) == 1 &&
           st.getDimSize(0) == x.getDimSize(0);
  };
  if (!isScalarLike(getAScaleInv().getType()) && !(perRow(getAScaleInv(), a) && !getTransposeA()))
    return emitOpError() << "a_scale_inv must be per tensor (0-d) or per row of a 2-D A ([M, 1]), got "
                         << getAScaleInv().getType();
  if (!isScalarLike(getBScaleInv().getType()) && !(perRow(getBScaleInv(), b) && getTransposeB()))
    return emitOpError() << "b_scale_inv must be per tensor (0-d) or per row of B stored [N, K] ([N, 1], "
                            "transpose_b), got "
                         << getBScaleInv().getType();
  return success();
}

LogicalResult LinearOp::verify() {
  for (Type f : {getInputFormat(), getWeightFormat(), getGradFormat()})
    if (failed(verifyFormat(*this, f)))
      return failure();
  if (getInputFormat().isFloat8E5M2() && getWeightFormat().isFloat8E5M2())
    return emitOpError("input and weight cannot both be E5M2");
  auto w = getWeight().getType().dyn_cast<RankedTensorType>();
  if (w && w.getRank() != 2)
    return emitOpError() << "weight must be 2-D, got " << w;
  size_t n = getState().size();
  if (getScaling() == Scaling::delayed) {
    if (n != 6 && n != 7)
      return emitOpError() << "delayed scaling takes 6 state operands (input and weight: history, scale, "
                              "scale_inv) and an optional step, got "
                           << n;
    if (n == 7 && !getElementTypeOrSelf(getState()[6].getType()).isInteger(64))
      return emitOpError("the step counter must be an i64 tensor");
  } else if (n != 0) {
    return emitOpError("dynamic scaling takes no state operands");
  }
  if (getMargin() < 0 || getInterval() < 1)
    return emitOpError("margin must be >= 0 and interval >= 1");
  if (getRowwise() && getScaling() != Scaling::dynamic)
    return emitOpError("rowwise scales need dynamic scaling");
  return success();
}

/// A collective's start: its result is in flight, so only its done reads it.
static LogicalResult onlyDoneReads(Operation *op, Value inFlight) {
  for (Operation *u : inFlight.getUsers())
    if (!isa<AllReduceDoneOp>(u))
      return op->emitOpError("its result is in flight: only fp8.all_reduce_done may read it");
  return success();
}

/// The rules of fp8.all_reduce and fp8.all_reduce_start.
static LogicalResult verifyAllReduce(Operation *op, Value input, Value scaleInv, Reduction reduction, Type result) {
  if (input.getType() != result)
    return op->emitOpError("input and result types must match");
  bool fp8 = input.getType().cast<ShapedType>().getElementType().isa<Float8E4M3FNType, Float8E5M2Type>();
  if (fp8 && !scaleInv)
    return op->emitOpError("an FP8 input needs its scale_inv (the scale every rank cast with)");
  if (!fp8 && scaleInv)
    return op->emitOpError("a high-precision input takes no scale_inv");
  if (scaleInv && !isScalarLike(scaleInv.getType()))
    return op->emitOpError("scale_inv must be per-tensor (0-d)");
  if (fp8 && reduction == Reduction::avg)
    return op->emitOpError("an FP8 payload cannot be averaged by the collective: pre-divide it by fp8.world_size "
                           "before its cast and sum it");
  return success();
}

LogicalResult AllReduceOp::verify() {
  return verifyAllReduce(*this, getInput(), getScaleInv(), getReduction(), getOutput().getType());
}

LogicalResult AllReduceStartOp::verify() {
  if (failed(verifyAllReduce(*this, getInput(), getScaleInv(), getReduction(), getOutput().getType())))
    return failure();
  return onlyDoneReads(*this, getOutput());
}

/// The shapes of a sharding op: a 1-D `whole` of world_size times the 1-D `part`, one element type.
static LogicalResult verifyShards(Operation *op, Type whole, Type part, int64_t worldSize) {
  auto w = whole.cast<RankedTensorType>(), p = part.cast<RankedTensorType>();
  if (worldSize < 1)
    return op->emitOpError("world_size must be at least 1");
  if (w.getElementType() != p.getElementType())
    return op->emitOpError("input and result element types must match");
  if (w.getRank() != 1 || p.getRank() != 1 || w.isDynamicDim(0) || p.isDynamicDim(0))
    return op->emitOpError("shards are static 1-D tensors (flatten and pad the tensor first)");
  if (w.getDimSize(0) != worldSize * p.getDimSize(0))
    return op->emitOpError("the whole tensor has ") << w.getDimSize(0) << " elements, not world_size (" << worldSize
                                                      << ") times the shard's " << p.getDimSize(0);
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyShards(*this, getInput().getType(), getOutput().getType(), getWorldSize())))
    return failure();
  bool fp8 = getInput().getType().cast<ShapedType>().getElementType().isa<Float8E4M3FNType, Float8E5M2Type>();
  if (fp8 != bool(getScaleInv()))
    return emitOpError(fp8 ? "an FP8 input needs its scale_inv (the scale every rank cast with)"
                           : "a high-precision input takes no scale_inv");
  if (getScaleInv() && !isScalarLike(getScaleInv().getType()))
    return emitOpError("scale_inv must be per-tensor (0-d)");
  if (fp8 && getReduction() == Reduction::avg)
    return emitOpError("an FP8 payload cannot be averaged by the collective: pre-divide it by the world size before "
                       "its cast and sum it");
  return success();
}

LogicalResult ReduceScatterStartOp::verify() {
  auto t = getInput().getType().cast<RankedTensorType>();
  if (getOutput().getType() != t)
    return emitOpError("input and result types must match (the result is the whole buffer in flight)");
  if (getWorldSize() < 1 || t.getRank() != 1 || t.isDynamicDim(0) || t.getDimSize(0) % getWorldSize())
    return emitOpError("the input is a static 1-D tensor whose length world_size divides");
  if (failed(verifyAllReduce(*this, getInput(), getScaleInv(), getReduction(), getOutput().getType())))
    return failure();
  return onlyDoneReads(*this, getOutput());
}

LogicalResult AllGatherOp::verify() {
  return verifyShards(*this, getOutput().getType(), getInput().getType(), getWorldSize());
}

LogicalResult AllGatherStartOp::verify() {
  if (failed(verifyShards(*this, getOutput().getType(), getInput().getType(), getWorldSize())))
    return failure();
  return onlyDoneReads(*this, getOutput());
}

LogicalResult ShardOp::verify() {
  return verifyShards(*this, getInput().getType(), getOutput().getType(), getWorldSize());
}

LogicalResult AllReduceDoneOp::verify() {
  if (getInput().getType() != getOutput().getType())
    return emitOpError("input and result types must match");
  if (!getInput().getDefiningOp<AllReduceStartOp>() && !getInput().getDefiningOp<ReduceScatterStartOp>() &&
      !getInput().getDefiningOp<AllGatherStartOp>())
    return emitOpError("waits for a collective's start (fp8.all_reduce_start, reduce_scatter_start, "
                       "all_gather_start)");
  return success();
}

LogicalResult AdamStepOp::verify() {
  auto shape = getWeight().getType().cast<ShapedType>().getShape();
  for (Value t : {getGrad(), getExpAvg(), getExpAvgSq()})
    if (t.getType().cast<ShapedType>().getShape() != shape)
      return emitOpError() << "grad, exp_avg and exp_avg_sq must have the weight's shape " << getWeight().getType()
                           << ", got " << t.getType();
  if (getNewWeight().getType() != getWeight().getType() || getNewExpAvg().getType() != getExpAvg().getType() ||
      getNewExpAvgSq().getType() != getExpAvgSq().getType())
    return emitOpError("the new weight and moments must have the types of the old");
  if (getRoundingStep() && !getWeight().getType().cast<ShapedType>().getElementType().isF16())
    return emitOpError("a rounding step needs a float16 weight, got ") << getWeight().getType();
  if (bool(getRoundingStep()) != getRoundingSalt().has_value())
    return emitOpError("rounding_step and rounding_salt come together");
  return success();
}

LogicalResult StochasticRoundOp::verify() {
  if (getInput().getType().cast<ShapedType>().getShape() != getOutput().getType().cast<ShapedType>().getShape())
    return emitOpError("the result must have the input's shape ") << getInput().getType();
  return success();
}

#define GET_OP_CLASSES
#include "octet/Dialect/FP8/IR/FP8Ops.cpp.inc"
