//===- ONNXDialect.cpp - onnx dialect registration, types and verifiers ---===//
#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace octet::onnx_dialect;

#include "octet/Dialect/ONNX/IR/ONNXOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "octet/Dialect/ONNX/IR/ONNXOpsTypes.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "octet/Dialect/ONNX/IR/ONNXOps.cpp.inc"
      >();
  registerTypes();
}

void ONNXDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "octet/Dialect/ONNX/IR/ONNXOpsTypes.cpp.inc"
      >();
}

StringRef ONNXDialect::getOnnxOpType(Operation *op) {
  if (auto node = dyn_cast<GenericNodeOp>(op))
    return node.getOpType();
  if (!isa_and_nonnull<ONNXDialect>(op->getDialect()) ||
      isa<InitializerOp, NoneOp, YieldOp>(op))
    return "";
  // Typed ops are named after their ONNX op_type.
  return op->getName().stripDialect();
}

std::string octet::onnx_dialect::getNodeName(Operation *op) {
  Location loc = op->getLoc();
  if (auto n = loc.dyn_cast<NameLoc>())
    return n.getName().str();
  if (auto f = loc.dyn_cast<FusedLoc>())
    for (Location l : f.getLocations())
      if (auto n = l.dyn_cast<NameLoc>())
        return n.getName().str();
  return "";
}

LogicalResult octet::onnx_dialect::getRawTensorBytes(ElementsAttr attr, std::string &out) {
  auto type = attr.getType().cast<ShapedType>();
  int64_t n = type.getNumElements();
  if (auto res = attr.dyn_cast<DenseResourceElementsAttr>()) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob)
      return failure();
    ArrayRef<char> data = blob->getData();
    out.assign(data.data(), data.size());
    return success();
  }
  auto dense = attr.dyn_cast<DenseElementsAttr>();
  if (!dense || type.getElementType().isa<StringType>())
    return failure();
  if (type.getElementType().isInteger(1)) {
    out.assign(n, '\0');
    int64_t i = 0;
    for (bool b : dense.getValues<bool>())
      out[i++] = b ? 1 : 0;
    return success();
  }
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat() && n != 1) {
    out.clear();
    out.reserve(raw.size() * n);
    for (int64_t i = 0; i < n; ++i)
      out.append(raw.data(), raw.size());
  } else {
    out.assign(raw.data(), raw.size());
  }
  return success();
}

int64_t octet::onnx_dialect::getOpsetVersion(Operation *op, StringRef domain) {
  for (Operation *cur = op; cur; cur = cur->getParentOp()) {
    auto dict = cur->getAttrOfType<DictionaryAttr>(kOpsetImportAttr);
    if (!dict)
      continue;
    StringRef key = domain.empty() ? "ai.onnx" : domain;
    if (auto v = dict.getAs<IntegerAttr>(key))
      return v.getInt();
    return 0;
  }
  return 0;
}

std::string octet::onnx_dialect::getModulePath(Operation *op) {
  auto raw = op->getAttrOfType<StringAttr>(kNameScopesAttr);
  if (!raw)
    return "";
  // A Python list of quoted strings: ['', 'model', 'model.layers.0', ..., 'linear']. The last is
  // the node's FX name, the one before it the innermost module.
  SmallVector<std::string> items;
  StringRef s = raw.getValue();
  for (size_t i = 0; i < s.size(); ++i) {
    char q = s[i];
    if (q != '\'' && q != '"')
      continue;
    std::string item;
    for (++i; i < s.size() && s[i] != q; ++i) {
      if (s[i] == '\\' && i + 1 < s.size())
        ++i;
      item += s[i];
    }
    items.push_back(std::move(item));
  }
  return items.size() >= 2 ? items[items.size() - 2] : std::string();
}

Type octet::onnx_dialect::getElementTypeForOnnxCode(MLIRContext *ctx, int64_t code) {
  Builder b(ctx);
  switch (code) {
  case 1: return b.getF32Type();
  case 2: return b.getIntegerType(8, false);
  case 3: return b.getIntegerType(8);
  case 4: return b.getIntegerType(16, false);
  case 5: return b.getIntegerType(16);
  case 6: return b.getI32Type();
  case 7: return b.getI64Type();
  case 9: return b.getI1Type();
  case 10: return b.getF16Type();
  case 11: return b.getF64Type();
  case 12: return b.getIntegerType(32, false);
  case 13: return b.getIntegerType(64, false);
  case 14: return ComplexType::get(b.getF32Type());
  case 15: return ComplexType::get(b.getF64Type());
  case 16: return b.getBF16Type();
  case 17: return b.getFloat8E4M3FNType();
  case 19: return b.getFloat8E5M2Type();
  default: return {}; // STRING (8) is handled by callers; FNUZ float8 and int4 have no type here
  }
}

int64_t octet::onnx_dialect::getOnnxCodeForElementType(Type t) {
  if (t.isF32()) return 1;
  if (t.isUnsignedInteger(8)) return 2;
  if (t.isSignlessInteger(8) || t.isSignedInteger(8)) return 3;
  if (t.isUnsignedInteger(16)) return 4;
  if (t.isSignlessInteger(16) || t.isSignedInteger(16)) return 5;
  if (t.isSignlessInteger(32) || t.isSignedInteger(32)) return 6;
  if (t.isSignlessInteger(64) || t.isSignedInteger(64)) return 7;
  if (t.isa<StringType>()) return 8;
  if (t.isInteger(1)) return 9;
  if (t.isF16()) return 10;
  if (t.isF64()) return 11;
  if (t.isUnsignedInteger(32)) return 12;
  if (t.isUnsignedInteger(64)) return 13;
  if (auto c = t.dyn_cast<ComplexType>())
    return c.getElementType().isF32() ? 14 : c.getElementType().isF64() ? 15 : 0;
  if (t.isBF16()) return 16;
  if (t.isFloat8E4M3FN()) return 17;
  if (t.isFloat8E5M2()) return 19;
  return 0;
}

StringRef octet::onnx_dialect::getOnnxTypeName(int64_t code) {
  static const char *names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16",
                                "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
                                "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
                                "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                                "FLOAT8E5M2FNUZ", "UINT4", "INT4"};
  if (code < 0 || code >= static_cast<int64_t>(std::size(names)))
    return "UNKNOWN";
  return names[code];
}

//===----------------------------------------------------------------------===//
// Verifier helpers
//===----------------------------------------------------------------------===//

namespace {
/// Rank of a value's type, or -1 when unranked / not a tensor.
int64_t rankOf(Value v) {
  if (auto t = v.getType().dyn_cast<RankedTensorType>())
    return t.getRank();
  return -1;
}

bool isNone(Value v) { return v.getType().isa<NoneType>(); }

/// Checks that an axis attribute lies in [-rank, rank).
LogicalResult verifyAxis(Operation *op, std::optional<int64_t> axis, int64_t rank,
                         StringRef what = "axis", int64_t extra = 0) {
  if (!axis || rank < 0)
    return success();
  int64_t r = rank + extra;
  if (*axis < -r || *axis >= r)
    return op->emitOpError() << what << " " << *axis << " is out of range for rank "
                             << rank << " (expected [" << -r << ", " << r << "))";
  return success();
}

/// Numpy-style broadcasting of all operand shapes; checks the result too.
LogicalResult verifyBroadcast(Operation *op, ValueRange operands, Value result) {
  SmallVector<int64_t> shape;
  bool first = true;
  for (Value v : operands) {
    auto t = v.getType().dyn_cast<RankedTensorType>();
    if (!t)
      return success(); // unranked: nothing to check
    if (first) {
      shape.assign(t.getShape().begin(), t.getShape().end());
      first = false;
      continue;
    }
    SmallVector<int64_t> out;
    if (!OpTrait::util::getBroadcastedShape(shape, t.getShape(), out))
      return op->emitOpError() << "operand shapes are not broadcast-compatible";
    shape = out;
  }
  auto rt = result.getType().dyn_cast<RankedTensorType>();
  if (!rt || first)
    return success();
  if (rt.getRank() != static_cast<int64_t>(shape.size()) ||
      failed(verifyCompatibleShape(rt.getShape(), shape)))
    return op->emitOpError() << "result shape does not match the broadcast of the operand shapes";
  return success();
}

LogicalResult verifySameElementType(Operation *op, ValueRange values, StringRef what) {
  Type elt;
  for (Value v : values) {
    if (isNone(v))
      continue;
    Type e = getElementTypeOrSelf(v.getType());
    if (elt && e != elt)
      return op->emitOpError() << what << " must have the same element type, got " << elt
                               << " and " << e;
    elt = e;
  }
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// Structural ops
//===----------------------------------------------------------------------===//

LogicalResult InitializerOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty name");
  auto type = getValue().getType().dyn_cast<ShapedType>();
  if (!type || type != getOutput().getType())
    return emitOpError() << "value type " << getValue().getType()
                         << " does not match result type " << getOutput().getType();
  return success();
}

LogicalResult GenericNodeOp::verify() {
  if (getOpType().empty())
    return emitOpError("needs a non-empty op_type");
  if (getSubgraphAttrs().size() != getSubgraphs().size())
    return emitOpError() << "has " << getSubgraphs().size() << " subgraph regions but "
                         << getSubgraphAttrs().size() << " subgraph_attrs names";
  for (Region &r : getSubgraphs())
    if (r.empty() || !isa<YieldOp>(r.front().back()))
      return emitOpError("subgraph regions must end in onnx.yield");
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define OCTET_BINARY_VERIFIER(OP, SAME_ELT)                                    \
  LogicalResult OP::verify() {                                                 \
    if (SAME_ELT && failed(verifySameElementType(*this, {getA(), getB()},      \
                                                 "operands")))                 \
      return failure();                                                        \
    return verifyBroadcast(*this, {getA(), getB()}, getC());                   \
  }
OCTET_BINARY_VERIFIER(AddOp, true)
OCTET_BINARY_VERIFIER(SubOp, true)
OCTET_BINARY_VERIFIER(MulOp, true)
OCTET_BINARY_VERIFIER(DivOp, true)
OCTET_BINARY_VERIFIER(PowOp, false) // the exponent may have another type
OCTET_BINARY_VERIFIER(EqualOp, true)
OCTET_BINARY_VERIFIER(LessOp, true)
OCTET_BINARY_VERIFIER(LessOrEqualOp, true)
OCTET_BINARY_VERIFIER(GreaterOp, true)
OCTET_BINARY_VERIFIER(GreaterOrEqualOp, true)
OCTET_BINARY_VERIFIER(AndOp, true)
OCTET_BINARY_VERIFIER(OrOp, true)
#undef OCTET_BINARY_VERIFIER

/// Max and Min: one or more inputs of one element type, broadcast together.
static LogicalResult verifyVariadicBroadcast(Operation *op, ValueRange inputs, Value result) {
  if (inputs.empty())
    return op->emitOpError("needs at least one input");
  if (failed(verifySameElementType(op, inputs, "inputs")))
    return failure();
  return verifyBroadcast(op, inputs, result);
}
LogicalResult MaxOp::verify() { return verifyVariadicBroadcast(*this, getData_0(), getMax()); }
LogicalResult MinOp::verify() { return verifyVariadicBroadcast(*this, getData_0(), getMin()); }

LogicalResult WhereOp::verify() {
  if (failed(verifySameElementType(*this, {getX(), getY(), getOutput()}, "X, Y and the result")))
    return failure();
  return verifyBroadcast(*this, {getCondition(), getX(), getY()}, getOutput());
}

LogicalResult ClipOp::verify() {
  return verifySameElementType(*this, {getInput(), getMin(), getMax(), getOutput()},
                               "input, min, max and the result");
}

LogicalResult GeluOp::verify() {
  if (auto a = getApproximate(); a && *a != "none" && *a != "tanh")
    return emitOpError() << "approximate must be 'none' or 'tanh', got '" << *a << "'";
  return success();
}

LogicalResult CastOp::verify() {
  Type expected = getElementTypeForOnnxCode(getContext(), getTo());
  if (!expected) {
    // STRING, complex and the FNUZ float8 types have no builtin element type here.
    if (getTo() < 1 || getTo() > 21)
      return emitOpError() << "'to' = " << getTo() << " is not an ONNX element type";
    return success();
  }
  Type got = getElementTypeOrSelf(getOutput().getType());
  if (got != expected)
    return emitOpError() << "result element type " << got << " does not match 'to' = " << getTo()
                         << " (" << expected << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalization
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::verify() {
  if (failed(verifySameElementType(*this, {getA(), getB()}, "operands")))
    return failure();
  auto a = getA().getType().dyn_cast<RankedTensorType>();
  auto b = getB().getType().dyn_cast<RankedTensorType>();
  if (!a || !b)
    return success();
  if (a.getRank() == 0 || b.getRank() == 0)
    return emitOpError("operands must have rank >= 1");
  int64_t k1 = a.getShape().back();
  int64_t k2 = b.getRank() == 1 ? b.getShape()[0] : b.getShape()[b.getRank() - 2];
  if (!ShapedType::isDynamic(k1) && !ShapedType::isDynamic(k2) && k1 != k2)
    return emitOpError() << "contraction dimensions differ: A has K=" << k1 << ", B has K=" << k2;
  return success();
}

LogicalResult GemmOp::verify() {
  auto a = getA().getType().dyn_cast<RankedTensorType>();
  auto b = getB().getType().dyn_cast<RankedTensorType>();
  if ((a && a.getRank() != 2) || (b && b.getRank() != 2))
    return emitOpError("A and B must be 2-D");
  if (!a || !b)
    return success();
  int64_t ka = getTransA().value_or(0) ? a.getDimSize(0) : a.getDimSize(1);
  int64_t kb = getTransB().value_or(0) ? b.getDimSize(1) : b.getDimSize(0);
  if (!ShapedType::isDynamic(ka) && !ShapedType::isDynamic(kb) && ka != kb)
    return emitOpError() << "contraction dimensions differ: op(A) has K=" << ka
                         << ", op(B) has K=" << kb;
  return success();
}

/// A normalization's checks: X and Y share an element type, and Scale broadcasts to the
/// normalized shape (X's dims from axis on).
static LogicalResult verifyRowNorm(Operation *op, Value x, Value scale, Value y,
                                   std::optional<int64_t> axisAttr) {
  int64_t rank = rankOf(x);
  if (failed(verifyAxis(op, axisAttr, rank)))
    return failure();
  if (failed(verifySameElementType(op, {x, y}, "X and Y")))
    return failure();
  auto xt = x.getType().dyn_cast<RankedTensorType>();
  auto s = scale.getType().dyn_cast<RankedTensorType>();
  if (xt && s) {
    int64_t axis = axisAttr.value_or(-1);
    if (axis < 0)
      axis += xt.getRank();
    ArrayRef<int64_t> normShape = xt.getShape().drop_front(axis);
    if (s.getRank() > static_cast<int64_t>(normShape.size()))
      return op->emitOpError() << "Scale has rank " << s.getRank()
                               << ", more than the normalized dims (" << normShape.size() << ")";
    ArrayRef<int64_t> tail = normShape.take_back(s.getRank());
    for (auto [sd, xd] : llvm::zip(s.getShape(), tail))
      if (!ShapedType::isDynamic(sd) && !ShapedType::isDynamic(xd) && sd != 1 && sd != xd)
        return op->emitOpError() << "Scale shape does not broadcast to the normalized shape";
  }
  return success();
}

LogicalResult LayerNormalizationOp::verify() {
  return verifyRowNorm(*this, getX(), getScale(), getY(), getAxis());
}

LogicalResult RMSNormalizationOp::verify() {
  return verifyRowNorm(*this, getX(), getScale(), getY(), getAxis());
}

LogicalResult SoftmaxOp::verify() { return verifyAxis(*this, getAxis(), rankOf(getInput())); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxis(*this, getAxis(), rankOf(getInput())); }

LogicalResult SoftmaxCrossEntropyLossOp::verify() {
  if (auto r = getReduction(); r && *r != "none" && *r != "sum" && *r != "mean")
    return emitOpError() << "reduction must be 'none', 'sum' or 'mean', got '" << *r << "'";
  int64_t rs = rankOf(getScores()), rl = rankOf(getLabels());
  if (rs >= 0 && rs < 2)
    return emitOpError("scores must have rank >= 2 ([N, C, ...])");
  if (rs >= 0 && rl >= 0 && rl != rs - 1)
    return emitOpError() << "labels must have rank " << rs - 1 << " for scores of rank " << rs
                         << ", got " << rl;
  return success();
}

template <typename ReduceOp>
static LogicalResult verifyReduce(ReduceOp op) {
  if (auto axes = op.getAxes().getType().template dyn_cast<RankedTensorType>())
    if (axes.getRank() != 1)
      return op.emitOpError("axes must be a 1-D tensor");
  return success();
}
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

static LogicalResult verify1D(Operation *op, Value v, StringRef what) {
  if (auto t = v.getType().dyn_cast<RankedTensorType>())
    if (t.getRank() != 1)
      return op->emitOpError() << what << " must be a 1-D tensor, got rank " << t.getRank();
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (failed(verify1D(*this, getShape(), "shape")))
    return failure();
  auto in = getData().getType().dyn_cast<RankedTensorType>();
  auto out = getReshaped().getType().dyn_cast<RankedTensorType>();
  if (in && out && in.hasStaticShape() && out.hasStaticShape() && in.getNumElements() != out.getNumElements())
    return emitOpError() << "reshapes " << in.getNumElements() << " values (" << in << ") to "
                         << out.getNumElements() << " (" << out << "); the target shape must keep the count";
  return success();
}
LogicalResult ExpandOp::verify() { return verify1D(*this, getShape(), "shape"); }
LogicalResult UnsqueezeOp::verify() { return verify1D(*this, getAxes(), "axes"); }
LogicalResult SqueezeOp::verify() {
  return isNone(getAxes()) ? success() : verify1D(*this, getAxes(), "axes");
}

LogicalResult TransposeOp::verify() {
  auto perm = getPerm();
  if (!perm)
    return success();
  int64_t rank = rankOf(getData());
  if (rank >= 0 && static_cast<int64_t>(perm->size()) != rank)
    return emitOpError() << "perm has " << perm->size() << " entries for an input of rank " << rank;
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t p : *perm)
    if (p < 0 || p >= static_cast<int64_t>(perm->size()) || !seen.insert(p).second)
      return emitOpError("perm must be a permutation of [0, rank)");
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (failed(verifySameElementType(*this, getInputs(), "inputs")))
    return failure();
  int64_t rank = -1;
  for (Value v : getInputs()) {
    int64_t r = rankOf(v);
    if (r < 0)
      continue;
    if (rank >= 0 && r != rank)
      return emitOpError() << "inputs must have the same rank, got " << rank << " and " << r;
    rank = r;
  }
  if (failed(verifyAxis(*this, getAxis(), rank)))
    return failure();
  // Every dimension but the axis the same in every input.
  int64_t axis = getAxis() < 0 ? getAxis() + rank : getAxis();
  RankedTensorType first;
  for (Value v : getInputs()) {
    auto t = v.getType().dyn_cast<RankedTensorType>();
    if (!t)
      continue;
    if (!first) {
      first = t;
      continue;
    }
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && !t.isDynamicDim(d) && !first.isDynamicDim(d) && t.getDimSize(d) != first.getDimSize(d))
        return emitOpError() << "inputs " << first << " and " << t << " differ in dimension " << d
                             << ", not only along axis " << axis;
  }
  return success();
}

LogicalResult SplitOp::verify() {
  if (failed(verifyAxis(*this, getAxis(), rankOf(getInput()))))
    return failure();
  if (auto n = getNumOutputs(); n && *n != static_cast<int64_t>(getOutputs().size()))
    return emitOpError() << "num_outputs = " << *n << " but the op has " << getOutputs().size()
                         << " results";
  if (auto s = getSplit().getType().dyn_cast<RankedTensorType>()) {
    if (s.getRank() != 1)
      return emitOpError("split must be a 1-D tensor");
    if (!s.isDynamicDim(0) && s.getDimSize(0) != static_cast<int64_t>(getOutputs().size()))
      return emitOpError() << "split has " << s.getDimSize(0) << " sizes but the op has "
                           << getOutputs().size() << " results";
  }
  // The parts cover the input along the axis exactly.
  auto in = getInput().getType().dyn_cast<RankedTensorType>();
  if (!in)
    return success();
  int64_t axis = getAxis().value_or(0), sum = 0;
  if (axis < 0)
    axis += in.getRank();
  for (Value o : getOutputs()) {
    auto t = o.getType().dyn_cast<RankedTensorType>();
    if (!t || t.getRank() != in.getRank() || t.isDynamicDim(axis))
      return success();
    sum += t.getDimSize(axis);
  }
  if (!in.isDynamicDim(axis) && sum != in.getDimSize(axis))
    return emitOpError() << "parts of " << sum << " along axis " << axis << " do not cover the input's "
                         << in.getDimSize(axis);
  return success();
}

LogicalResult SliceOp::verify() {
  for (Value v : std::initializer_list<Value>{getStarts(), getEnds(), getAxes(), getSteps()})
    if (!isNone(v) && failed(verify1D(*this, v, "starts/ends/axes/steps")))
      return failure();
  return success();
}

LogicalResult GatherOp::verify() { return verifyAxis(*this, getAxis(), rankOf(getData())); }

LogicalResult GatherElementsOp::verify() {
  int64_t rd = rankOf(getData()), ri = rankOf(getIndices());
  if (rd >= 0 && ri >= 0 && rd != ri)
    return emitOpError() << "data and indices must have the same rank, got " << rd << " and " << ri;
  return verifyAxis(*this, getAxis(), rd);
}

LogicalResult ShapeOp::verify() { return verify1D(*this, getShape(), "result"); }

LogicalResult ConstantOp::verify() {
  int count = (getValue() ? 1 : 0) + (getValueFloat() ? 1 : 0) + (getValueFloats() ? 1 : 0) +
              (getValueInt() ? 1 : 0) + (getValueInts() ? 1 : 0) + (getValueString() ? 1 : 0) +
              (getValueStrings() ? 1 : 0);
  if (count != 1)
    return emitOpError() << "needs exactly one value attribute, got " << count;
  if (auto v = getValue())
    if (v->getType() != getOutput().getType())
      return emitOpError() << "value type " << v->getType() << " does not match result type "
                           << getOutput().getType();
  return success();
}

LogicalResult ConstantOfShapeOp::verify() {
  if (failed(verify1D(*this, getInput(), "input")))
    return failure();
  if (auto v = getValue()) {
    auto t = v->getType().cast<ShapedType>();
    if (t.getNumElements() != 1)
      return emitOpError("value must hold exactly one element");
    if (t.getElementType() != getElementTypeOrSelf(getOutput().getType()))
      return emitOpError("value and result element types differ");
  }
  return success();
}

LogicalResult RangeOp::verify() {
  for (Value v : std::initializer_list<Value>{getStart(), getLimit(), getDelta()})
    if (int64_t r = rankOf(v); r > 0)
      return emitOpError("start, limit and delta must be scalars");
  if (auto c = getDelta().getDefiningOp<ConstantOp>()) // a step of 0 never reaches the limit
    if (auto v = c.getValue(); v && v->getNumElements() == 1) {
      auto dense = v->dyn_cast<DenseElementsAttr>();
      bool zero = dense && (dense.getElementType().isa<FloatType>() ? (*dense.value_begin<APFloat>()).isZero()
                                                                     : (*dense.value_begin<APInt>()).isZero());
      if (zero)
        return emitOpError("delta is 0: the range never reaches its limit");
    }
  return verifySameElementType(*this, {getStart(), getLimit(), getDelta(), getOutput()},
                               "start, limit, delta and the result");
}

LogicalResult TriluOp::verify() {
  if (int64_t r = rankOf(getInput()); r >= 0 && r < 2)
    return emitOpError("input must have rank >= 2");
  return success();
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

LogicalResult QuantizeLinearOp::verify() {
  if (isNone(getYZeroPoint()))
    return success(); // output defaults to uint8 (or output_dtype)
  Type zp = getElementTypeOrSelf(getYZeroPoint().getType());
  Type out = getElementTypeOrSelf(getY().getType());
  if (zp != out)
    return emitOpError() << "output element type " << out
                         << " must match the zero point's element type " << zp;
  return success();
}

LogicalResult DequantizeLinearOp::verify() {
  if (isNone(getXZeroPoint()))
    return success();
  if (getElementTypeOrSelf(getXZeroPoint().getType()) != getElementTypeOrSelf(getX().getType()))
    return emitOpError("x and x_zero_point must have the same element type");
  return success();
}

DenseElementsAttr octet::onnx_dialect::getConstantValue(Value v) {
  Operation *def = v ? v.getDefiningOp() : nullptr;
  if (auto init = dyn_cast_or_null<InitializerOp>(def))
    return init.getValue().dyn_cast<DenseElementsAttr>();
  auto c = dyn_cast_or_null<ConstantOp>(def);
  if (!c)
    return {};
  Builder b(v.getContext());
  if (auto a = c.getValueAttr())
    return a.dyn_cast<DenseElementsAttr>();
  if (auto f = c.getValueFloatAttr())
    return DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()), f.getValue());
  if (auto i = c.getValueIntAttr())
    return DenseElementsAttr::get(RankedTensorType::get({}, b.getIntegerType(64)), i.getValue().getSExtValue());
  if (auto fs = c.getValueFloatsAttr())
    return DenseElementsAttr::get(RankedTensorType::get({int64_t(fs.size())}, b.getF32Type()), fs.asArrayRef());
  if (auto is = c.getValueIntsAttr())
    return DenseElementsAttr::get(RankedTensorType::get({int64_t(is.size())}, b.getIntegerType(64)), is.asArrayRef());
  return {};
}

std::optional<llvm::SmallVector<int64_t>> octet::onnx_dialect::getConstantInts(Value v) {
  if (DenseElementsAttr d = getConstantValue(v)) {
    if (!d.getElementType().isa<IntegerType>())
      return std::nullopt;
    llvm::SmallVector<int64_t> r;
    for (const APInt &i : d.getValues<APInt>())
      r.push_back(i.getSExtValue());
    return r;
  }
  // Shape arithmetic the exporters spell out: ops that keep the elements of
  // an integer constant (in row-major order) and 1-D concatenation.
  Operation *def = v ? v.getDefiningOp() : nullptr;
  if (!def)
    return std::nullopt;
  if (isa<ReshapeOp, IdentityOp, SqueezeOp, UnsqueezeOp>(def))
    return getConstantInts(def->getOperand(0));
  if (auto c = dyn_cast<CastOp>(def)) {
    auto t = c.getOutput().getType().cast<ShapedType>().getElementType();
    return t.isa<IntegerType>() ? getConstantInts(c.getInput()) : std::nullopt;
  }
  if (auto cat = dyn_cast<ConcatOp>(def)) {
    llvm::SmallVector<int64_t> r;
    for (Value in : cat.getInputs()) {
      auto t = in.getType().dyn_cast<RankedTensorType>();
      auto part = getConstantInts(in);
      if (!part || (t && t.getRank() > 1))
        return std::nullopt;
      r.append(part->begin(), part->end());
    }
    return r;
  }
  return std::nullopt;
}

#define GET_OP_CLASSES
#include "octet/Dialect/ONNX/IR/ONNXOps.cpp.inc"
