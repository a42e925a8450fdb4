//===- ONNXImportTensors.cpp - ONNX types, tensors and attributes -> MLIR -===//
//
// The importer's conversions of what nodes and graphs carry: element and tensor types (symbolic
// dims as --input-shape specializes them), initializers and Constant values (inline or as
// dense_resource blobs, external data read through ONNXExternalData), and node attributes.
//
//===----------------------------------------------------------------------===//
#include "ONNXImporter.h"

#include "ONNXExternalData.h"
#include "ONNXInputShapes.h"

#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cctype>
#include <cstring>
#include <memory>

namespace octet::detail {

Type Importer::elementType(int32_t code, Location loc, llvm::StringRef what) {
  if (code == onnx::TensorProto::STRING)
    return ox::StringType::get(ctx);
  Type t = ox::getElementTypeForOnnxCode(ctx, code);
  if (!t)
    emitError(loc) << "unsupported element type " << ox::getOnnxTypeName(code) << " (" << code
                   << ") in " << what;
  return t;
}

Type Importer::convertType(const onnx::TypeProto &type, Location loc,
                           SmallVectorImpl<Attribute> *dimParams) {
  switch (type.value_case()) {
  case onnx::TypeProto::kTensorType: {
    const auto &tt = type.tensor_type();
    Type elt = tt.elem_type() == 0 ? Type(ox::UnknownType::get(ctx))
                                   : elementType(tt.elem_type(), loc, "a value type");
    if (!elt)
      return {};
    if (!tt.has_shape())
      return UnrankedTensorType::get(elt);
    SmallVector<int64_t> dims;
    int64_t bytes = 8; // the widest element: a count whose bytes overflow is refused, not wrapped
    for (const auto &d : tt.shape().dim()) {
      if (d.has_dim_value() && d.dim_value() < 0) {
        emitError(loc) << "a value's type has the negative dimension " << d.dim_value()
                       << "; dimensions are >= 0 or symbolic (dim_param)";
        return {};
      }
      if (d.has_dim_value() && __builtin_mul_overflow(bytes, d.dim_value(), &bytes)) {
        emitError(loc) << "a value's type has more elements than fit in 64 bits; fix its dimensions";
        return {};
      }
      std::optional<int64_t> bound = d.has_dim_param() ? octet::detail::evaluateDim(d.dim_param(), symbols) : std::nullopt;
      dims.push_back(d.has_dim_value() ? d.dim_value() : bound ? *bound : ShapedType::kDynamic);
      if (dimParams)
        dimParams->push_back(StringAttr::get(ctx, d.has_dim_param() ? d.dim_param() : ""));
    }
    return RankedTensorType::get(dims, elt);
  }
  case onnx::TypeProto::kSequenceType: {
    Type e = convertType(type.sequence_type().elem_type(), loc, nullptr);
    return e ? ox::SeqType::get(ctx, e) : Type();
  }
  case onnx::TypeProto::kOptionalType: {
    Type e = convertType(type.optional_type().elem_type(), loc, nullptr);
    return e ? ox::OptType::get(ctx, e) : Type();
  }
  case onnx::TypeProto::VALUE_NOT_SET:
    return UnrankedTensorType::get(ox::UnknownType::get(ctx));
  default:
    emitError(loc) << "unsupported value type (map or sparse tensor); only tensors, sequences "
                      "and optionals are supported";
    return {};
  }
}

/// A resource blob's key from a tensor's name (letters, digits, '_' and '.'; not starting with a digit).
static std::string resourceKey(const std::string &name) {
  std::string key;
  for (char c : name)
    key.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ? c : '_');
  if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0])))
    key = "t_" + key;
  return key;
}

FailureOr<ElementsAttr> Importer::convertTensor(const onnx::TensorProto &t, Location loc,
                                                bool allowResource) {
  std::string what = "tensor '" + t.name() + "'";
  Type elt = elementType(t.data_type(), loc, what);
  if (!elt)
    return failure();
  SmallVector<int64_t> dims;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return emitError(loc) << what << " has a negative dimension " << d, failure();
    dims.push_back(d);
    if (__builtin_mul_overflow(n, d, &n))
      return emitError(loc) << what << " declares more elements than fit in 64 bits; fix its dims", failure();
  }
  auto type = RankedTensorType::get(dims, elt);

  if (t.data_type() == onnx::TensorProto::STRING) {
    if (t.string_data_size() != n)
      return emitError(loc) << what << " has " << t.string_data_size() << " strings for " << n
                            << " elements",
             failure();
    SmallVector<StringRef> strs;
    for (const auto &s : t.string_data())
      strs.push_back(s);
    return ElementsAttr(DenseElementsAttr::get(type, strs));
  }

  // Storage bytes per element (bool and float8 use one byte).
  int64_t width = elt.isInteger(1) ? 1
                  : elt.isa<ComplexType>()
                      ? 2 * (elt.cast<ComplexType>().getElementType().getIntOrFloatBitWidth() / 8)
                      : elt.getIntOrFloatBitWidth() / 8;
  int64_t bytes;
  if (__builtin_mul_overflow(n, width, &bytes))
    return emitError(loc) << what << " declares more bytes than fit in 64 bits; fix its dims", failure();
  std::string raw;
  if (t.data_location() == onnx::TensorProto::EXTERNAL && opts.absentWeightsAsZeros &&
      elt.isIntOrFloat() && !elt.isInteger(1)) {
    std::string location;
    for (const auto &kv : t.external_data())
      if (kv.key() == "location")
        location = kv.value();
    llvm::SmallString<256> path(opts.baseDir);
    llvm::sys::path::append(path, location);
    if (!location.empty() && !llvm::sys::fs::exists(path)) // a splat: no bytes
      return ElementsAttr(elt.isa<FloatType>()
                              ? DenseElementsAttr::get(type, APFloat::getZero(elt.cast<FloatType>().getFloatSemantics()))
                              : DenseElementsAttr::get(type, APInt::getZero(elt.getIntOrFloatBitWidth())));
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL && allowResource && n > 64 && elt.isIntOrFloat() &&
      !elt.isInteger(1)) {
    // A weight past the model's 2 GB: a resource blob over the file's mapped bytes, not a copy.
    auto ext = mapExternalData(t, opts, loc);
    if (failed(ext))
      return failure();
    if (static_cast<int64_t>(ext->bytes.size()) != bytes)
      return emitError(loc) << what << " holds " << ext->bytes.size() << " bytes of data, but its shape and "
                            << ox::getOnnxTypeName(t.data_type()) << " need " << bytes,
             failure();
    const char *data = ext->bytes.data();
    size_t align = 1;
    while (align < alignof(uint64_t) && reinterpret_cast<uintptr_t>(data) % (2 * align) == 0)
      align *= 2;
    // The mapping lives as long as the blob (a move-only deleter: no std::shared_ptr in this
    // -fno-rtti code, whose control-block vtable without RTTI UBSan's vptr check then meets in
    // yaml-cpp's shared_ptrs).
    AsmResourceBlob blob(
        ArrayRef<char>(data, ext->bytes.size()), align,
        [keep = std::move(ext->file)](void *, size_t, size_t) mutable { keep.reset(); }, /*dataIsMutable=*/false);
    auto &manager = DenseResourceElementsHandle::getManagerInterface(ctx);
    return ElementsAttr(DenseResourceElementsAttr::get(type, manager.insert(resourceKey(t.name()), std::move(blob))));
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto ext = readExternalData(t, opts, loc);
    if (failed(ext))
      return failure();
    raw = std::move(*ext);
  } else if (t.has_raw_data()) {
    raw = t.raw_data();
  } else {
    // The values the typed field holds, checked against the shape before anything is allocated
    // (a tensor declared [2^20, 2^20] with no data is an error, not an allocation).
    int32_t code = t.data_type();
    int64_t got = code == onnx::TensorProto::FLOAT || code == onnx::TensorProto::COMPLEX64 ? t.float_data_size()
                  : code == onnx::TensorProto::DOUBLE || code == onnx::TensorProto::COMPLEX128
                      ? t.double_data_size()
                  : code == onnx::TensorProto::INT64 ? t.int64_data_size()
                  : code == onnx::TensorProto::UINT32 || code == onnx::TensorProto::UINT64 ? t.uint64_data_size()
                                                                                           : t.int32_data_size();
    if (got != n * (elt.isa<ComplexType>() ? 2 : 1))
      return emitError(loc) << what << " has " << got << " values in its typed data field for " << n
                            << " elements (" << ox::getOnnxTypeName(code) << ")",
             failure();
    raw.resize(size_t(bytes));
    char *out = raw.data();
    auto put = [&](int64_t i, const void *src, size_t w) { std::memcpy(out + i * w, src, w); };
    switch (bytes ? code : int32_t(onnx::TensorProto::UNDEFINED)) { // empty: memcpy never sees a null field
    case onnx::TensorProto::UNDEFINED:
      break;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::COMPLEX64:
      std::memcpy(out, t.float_data().data(), raw.size());
      break;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::COMPLEX128:
      std::memcpy(out, t.double_data().data(), raw.size());
      break;
    case onnx::TensorProto::INT64:
      std::memcpy(out, t.int64_data().data(), raw.size());
      break;
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v = t.uint64_data(i);
        if (width == 4) {
          uint32_t v32 = static_cast<uint32_t>(v);
          put(i, &v32, 4);
        } else {
          put(i, &v, 8);
        }
      }
      break;
    default: // INT32 and every narrower type are stored in int32_data
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = t.int32_data(i);
        if (width == 4)
          put(i, &v, 4);
        else if (width == 2) {
          uint16_t v16 = static_cast<uint16_t>(v);
          put(i, &v16, 2);
        } else {
          uint8_t v8 = static_cast<uint8_t>(v);
          put(i, &v8, 1);
        }
      }
      break;
    }
  }
  if (static_cast<int64_t>(raw.size()) != bytes)
    return emitError(loc) << what << " holds " << raw.size() << " bytes of data, but its shape and "
                          << ox::getOnnxTypeName(t.data_type()) << " need " << bytes,
           failure();

  if (elt.isInteger(1)) {
    SmallVector<bool> bits(n);
    for (int64_t i = 0; i < n; ++i)
      bits[i] = raw[i] != 0;
    return ElementsAttr(DenseElementsAttr::get(type, bits));
  }
  // Large tensors live in the context's resource blobs, not uniqued attributes.
  if (allowResource && n > 64 && !elt.isa<ComplexType>()) {
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(ArrayRef<char>(raw.data(), raw.size()),
                                                           alignof(uint64_t));
    auto &manager = DenseResourceElementsHandle::getManagerInterface(ctx);
    DenseResourceElementsHandle handle = manager.insert(resourceKey(t.name()), std::move(blob));
    return ElementsAttr(DenseResourceElementsAttr::get(type, handle));
  }
  bool splat = false;
  if (!DenseElementsAttr::isValidRawBuffer(type, ArrayRef<char>(raw.data(), raw.size()), splat))
    return emitError(loc) << what << ": data does not match its type", failure();
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(raw.data(), raw.size())));
}

FailureOr<Attribute> Importer::convertAttribute(const onnx::AttributeProto &a, Location loc) {
  switch (a.type()) {
  case onnx::AttributeProto::FLOAT:
    return Attribute(builder.getF32FloatAttr(a.f()));
  case onnx::AttributeProto::INT:
    return Attribute(builder.getIntegerAttr(builder.getIntegerType(64, /*isSigned=*/true), a.i()));
  case onnx::AttributeProto::STRING:
    return Attribute(builder.getStringAttr(a.s()));
  case onnx::AttributeProto::FLOATS:
    return Attribute(builder.getDenseF32ArrayAttr(SmallVector<float>(a.floats().begin(), a.floats().end())));
  case onnx::AttributeProto::INTS:
    return Attribute(builder.getDenseI64ArrayAttr(SmallVector<int64_t>(a.ints().begin(), a.ints().end())));
  case onnx::AttributeProto::STRINGS: {
    SmallVector<Attribute> v;
    for (const auto &s : a.strings())
      v.push_back(builder.getStringAttr(s));
    return Attribute(builder.getArrayAttr(v));
  }
  case onnx::AttributeProto::TENSOR: {
    auto t = convertTensor(a.t(), loc, /*allowResource=*/false);
    if (failed(t))
      return failure();
    return Attribute(*t);
  }
  case onnx::AttributeProto::TENSORS: {
    SmallVector<Attribute> v;
    for (const auto &t : a.tensors()) {
      auto e = convertTensor(t, loc, false);
      if (failed(e))
        return failure();
      v.push_back(*e);
    }
    return Attribute(builder.getArrayAttr(v));
  }
  case onnx::AttributeProto::SPARSE_TENSOR:
  case onnx::AttributeProto::SPARSE_TENSORS: {
    auto one = [&](const onnx::SparseTensorProto &sp) -> FailureOr<Attribute> {
      auto values = convertTensor(sp.values(), loc, false);
      auto indices = convertTensor(sp.indices(), loc, false);
      if (failed(values) || failed(indices))
        return failure();
      SmallVector<int64_t> dims(sp.dims().begin(), sp.dims().end());
      auto type = RankedTensorType::get(dims, values->getElementType());
      auto idx = indices->dyn_cast<DenseIntElementsAttr>();
      auto val = values->dyn_cast<DenseElementsAttr>();
      if (!idx || !val)
        return emitError(loc) << "attribute '" << a.name() << "': malformed sparse tensor", failure();
      return Attribute(SparseElementsAttr::get(type, idx, val));
    };
    if (a.type() == onnx::AttributeProto::SPARSE_TENSOR)
      return one(a.sparse_tensor());
    SmallVector<Attribute> v;
    for (const auto &sp : a.sparse_tensors()) {
      auto e = one(sp);
      if (failed(e))
        return failure();
      v.push_back(*e);
    }
    return Attribute(builder.getArrayAttr(v));
  }
  case onnx::AttributeProto::TYPE_PROTO: {
    Type t = convertType(a.tp(), loc, nullptr);
    if (!t)
      return failure();
    return Attribute(TypeAttr::get(t));
  }
  case onnx::AttributeProto::TYPE_PROTOS: {
    SmallVector<Attribute> v;
    for (const auto &tp : a.type_protos()) {
      Type t = convertType(tp, loc, nullptr);
      if (!t)
        return failure();
      v.push_back(TypeAttr::get(t));
    }
    return Attribute(builder.getArrayAttr(v));
  }
  default:
    return emitError(loc) << "attribute '" << a.name() << "' has no type (UNDEFINED)", failure();
  }
}

} // namespace octet::detail
