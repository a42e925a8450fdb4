//===- OnnxBuilder.h - Small helpers to build onnx-dialect ops ---*- C++ -*-===//
#ifndef OCTET_PASSES_ONNXBUILDER_H
#define OCTET_PASSES_ONNXBUILDER_H

#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SetVector.h"

#include <string>

namespace octet {

/// Creates onnx-dialect ops by ONNX op type with the builder's location.
class OnnxBuilder {
public:
  OnnxBuilder(mlir::OpBuilder &b, mlir::Location loc) : b(b), loc(loc) {}

  /// A typed onnx op, or an onnx.node for ONNX ops the dialect has no typed op for.
  mlir::Operation *create(llvm::StringRef opType, mlir::TypeRange results, mlir::ValueRange operands,
                          llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    std::string name = ("onnx." + opType).str();
    if (!mlir::RegisteredOperationName::lookup(name, b.getContext())) {
      mlir::OperationState st(loc, "onnx.node");
      st.addOperands(operands);
      st.addTypes(results);
      st.addAttribute("op_type", b.getStringAttr(opType));
      st.addAttribute("attrs", b.getDictionaryAttr(attrs));
      return b.create(st);
    }
    mlir::OperationState st(loc, name);
    st.addOperands(operands);
    st.addTypes(results);
    st.addAttributes(attrs);
    return b.create(st);
  }
  mlir::Value op(llvm::StringRef opType, mlir::Type result, mlir::ValueRange operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    return create(opType, result, operands, attrs)->getResult(0);
  }
  mlir::Value none() { return op("none", b.getNoneType(), {}); }
  mlir::Value constant(mlir::DenseElementsAttr value) {
    return op("Constant", value.getType(), {}, {b.getNamedAttr("value", value)});
  }
  mlir::Value f32(float v) {
    return constant(mlir::DenseElementsAttr::get(mlir::RankedTensorType::get({}, b.getF32Type()), v));
  }
  mlir::Value i64s(llvm::ArrayRef<int64_t> v) {
    return constant(mlir::DenseElementsAttr::get(
        mlir::RankedTensorType::get({int64_t(v.size())}, b.getIntegerType(64)), v));
  }
  /// A zero of an element type, as a 0-d tensor (QuantizeLinear's zero point).
  mlir::Value zeroOf(mlir::Type elt) {
    auto t = mlir::RankedTensorType::get({}, elt);
    return constant(mlir::DenseElementsAttr::get(t, llvm::APFloat::getZero(elt.cast<mlir::FloatType>().getFloatSemantics())));
  }
  mlir::NamedAttribute si64(llvm::StringRef name, int64_t v) {
    return b.getNamedAttr(name, b.getIntegerAttr(b.getIntegerType(64, /*isSigned=*/true), v));
  }
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape) {
    auto t = x.getType().cast<mlir::ShapedType>();
    return op("Reshape", mlir::RankedTensorType::get(shape, t.getElementType()), {x, i64s(shape)});
  }

  /// FP8 codes `q` as 2-D [rows, cols] (the leading dims flattened) transposed: fp8.cast_amax's
  /// third result, of type `t` ([cols, rows]).
  mlir::Value transposedCodes(mlir::Value q, mlir::RankedTensorType t) {
    mlir::Value flat = q.getType().cast<mlir::RankedTensorType>().getRank() == 2
                           ? q
                           : reshape(q, {t.getDimSize(1), t.getDimSize(0)});
    return op("Transpose", t, {flat}, {b.getNamedAttr("perm", b.getDenseI64ArrayAttr({1, 0}))});
  }

  mlir::OpBuilder &b;
  mlir::Location loc;
};

/// `t` as a ranked tensor type of static shape, or null.
inline mlir::RankedTensorType staticTensor(mlir::Type t) {
  auto r = t.dyn_cast<mlir::RankedTensorType>();
  return r && r.hasStaticShape() ? r : mlir::RankedTensorType();
}

/// `v`'s type when it is a float32 tensor of static shape, or null.
inline mlir::RankedTensorType staticF32(mlir::Value v) {
  auto t = staticTensor(v.getType());
  return t && t.getElementType().isF32() ? t : mlir::RankedTensorType();
}

/// Erases `roots` in order (each before what it reads), then whatever they read that nothing reads
/// any more, transitively: ONNX ops only; initializers (parameters) and generic nodes stay.
inline void eraseWithUnread(llvm::ArrayRef<mlir::Operation *> roots) {
  llvm::SetVector<mlir::Operation *> unread;
  auto erase = [&](mlir::Operation *o) {
    unread.remove(o);
    for (mlir::Value x : o->getOperands())
      if (mlir::Operation *d = x.getDefiningOp())
        unread.insert(d);
    o->erase();
  };
  for (mlir::Operation *o : roots)
    erase(o);
  while (!unread.empty()) {
    mlir::Operation *o = unread.pop_back_val();
    if (o->use_empty() && llvm::isa<onnx_dialect::ONNXDialect>(o->getDialect()) &&
        !llvm::isa<onnx_dialect::InitializerOp, onnx_dialect::GenericNodeOp>(o))
      erase(o);
  }
}

/// `v` through Identity copies.
inline mlir::Value throughCopies(mlir::Value v) {
  while (auto id = v.getDefiningOp<onnx_dialect::IdentityOp>())
    v = id.getX();
  return v;
}

/// Names an op's results in plans and exported models (`octet.result_names`).
inline void setResultNames(mlir::Operation *op, llvm::ArrayRef<std::string> names) {
  llvm::SmallVector<mlir::Attribute> a;
  for (const std::string &n : names)
    a.push_back(mlir::StringAttr::get(op->getContext(), n));
  op->setAttr(kResultNamesAttr, mlir::ArrayAttr::get(op->getContext(), a));
}

} // namespace octet

#endif
