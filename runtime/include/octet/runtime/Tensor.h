//===- Tensor.h - Host tensors of the CPU reference runtime -----*- C++ -*-===//
#ifndef OCTET_RUNTIME_TENSOR_H
#define OCTET_RUNTIME_TENSOR_H

#include "octet/runtime/Fp8.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace octet::rt {

/// Element types. Names are the plan file's spellings (see docs/PLAN.md).
enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I16, I8, U8, Bool, F8E4M3FN, F8E5M2, Invalid };

const char *dtypeName(DType t);
DType dtypeFromName(const std::string &name); // Invalid when unknown
size_t dtypeSize(DType t);
bool isFp8(DType t);
Fp8Format fp8FormatOf(DType t);
/// ONNX TensorProto.DataType code <-> DType.
DType dtypeFromOnnx(int code);
int onnxCodeOf(DType t);

/// Any runtime failure: a one-line message naming what went wrong.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Shape = std::vector<int64_t>;
int64_t numElements(const Shape &s);
/// The bytes of a tensor of this shape with `elementBytes` per element; -1 when a dimension is
/// negative or the count overflows int64 (for shapes read from files, before any allocation).
int64_t checkedBytes(const Shape &s, size_t elementBytes);
std::string shapeString(const Shape &s);

/// A dense row-major tensor that owns its bytes.
struct Tensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;

  Tensor() = default;
  Tensor(DType t, Shape s) : dtype(t), shape(std::move(s)), bytes(size_t(numElements(shape)) * dtypeSize(t)) {}
  int64_t numel() const { return numElements(shape); }
  int64_t rank() const { return int64_t(shape.size()); }
  template <typename T> T *data() { return reinterpret_cast<T *>(bytes.data()); }
  template <typename T> const T *data() const { return reinterpret_cast<const T *>(bytes.data()); }
  /// Element i converted to double / int64 (any numeric dtype).
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  /// All elements as int64 (shape tensors, indices, axes).
  std::vector<int64_t> toInts() const;
  /// A copy converted to `t` (FP8 targets saturate).
  Tensor castTo(DType t, bool saturate = true) const;
};

using TensorPtr = std::shared_ptr<Tensor>;

/// A runtime value: a tensor or a sequence of tensors (ONNX seq).
struct Value {
  TensorPtr tensor;
  std::vector<TensorPtr> sequence;
  bool isSequence = false;
  bool empty() const { return !tensor && !isSequence; }
};

} // namespace octet::rt

#endif
