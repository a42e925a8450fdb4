//===- NNDialect.cpp - nn dialect ------------------------------------------===//
#include "octet/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace octet::nn;

#include "octet/Dialect/NN/IR/NNOpsDialect.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "octet/Dialect/NN/IR/NNOps.cpp.inc"
      >();
}

namespace {
LogicalResult verifyLayer(Operation *op, size_t minInputs, size_t maxInputs) {
  Block &body = op->getRegion(0).front();
  size_t n = op->getNumOperands();
  if (n < minInputs || n > maxInputs)
    return op->emitOpError() << "takes " << minInputs << (minInputs == maxInputs ? "" : "-" + std::to_string(maxInputs))
                             << " inputs, got " << n;
  if (body.getNumArguments() != n)
    return op->emitOpError() << "body must have one argument per input (" << n << "), has "
                             << body.getNumArguments();
  for (auto [arg, in] : llvm::zip(body.getArguments(), op->getOperands()))
    if (arg.getType() != in.getType())
      return op->emitOpError() << "body argument type " << arg.getType() << " differs from input type "
                               << in.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return op->emitOpError("body must end with nn.yield");
  if (yield.getValues().size() != op->getNumResults() || op->getNumResults() == 0)
    return op->emitOpError() << "yields " << yield.getValues().size() << " values for " << op->getNumResults()
                             << " results";
  for (auto [v, r] : llvm::zip(yield.getValues(), op->getResults()))
    if (v.getType() != r.getType())
      return op->emitOpError() << "yields " << v.getType() << " for a result of type " << r.getType();
  if (op->getAttrOfType<StringAttr>("layer").getValue().empty())
    return op->emitOpError("layer name must not be empty");
  return success();
}
} // namespace

LogicalResult LinearOp::verify() {
  if (failed(verifyLayer(*this, 2, 3)))
    return failure();
  auto w = getWeight().getType().dyn_cast<RankedTensorType>();
  if (w && w.getRank() != 2)
    return emitOpError() << "weight must be 2-D, got " << w;
  return success();
}

std::pair<int64_t, int64_t> LinearOp::getKN() {
  auto w = getWeight().getType().dyn_cast<RankedTensorType>();
  if (!w || w.getRank() != 2)
    return {ShapedType::kDynamic, ShapedType::kDynamic};
  return getTransposeWeight() ? std::make_pair(w.getDimSize(1), w.getDimSize(0))
                              : std::make_pair(w.getDimSize(0), w.getDimSize(1));
}

LogicalResult LayerNormOp::verify() { return verifyLayer(*this, 2, 3); }
LogicalResult RMSNormOp::verify() { return verifyLayer(*this, 2, 2); }
LogicalResult GeluOp::verify() { return verifyLayer(*this, 1, 1); }
LogicalResult SiluOp::verify() { return verifyLayer(*this, 1, 1); }

void octet::nn::inlineLayer(Operation *layer) {
  Block &body = layer->getRegion(0).front();
  IRMapping map;
  for (auto [arg, in] : llvm::zip(body.getArguments(), layer->getOperands()))
    map.map(arg, in);
  OpBuilder b(layer);
  for (Operation &op : body.without_terminator())
    b.clone(op, map);
  auto yield = cast<YieldOp>(body.getTerminator());
  for (auto [r, v] : llvm::zip(layer->getResults(), yield.getValues()))
    r.replaceAllUsesWith(map.lookupOrDefault(v));
  layer->erase();
}

#define GET_OP_CLASSES
#include "octet/Dialect/NN/IR/NNOps.cpp.inc"
